"""OpenTool (seeds 000 and 001): description documents, the JSON-RPC `/call` front."""

from adapters.opentool.settings import OpenToolBackendSettings, OpenToolFrontSettings
from gateway.plugins import Adapter, BackendPlugin, FrontPlugin

ADAPTER = Adapter(
    name="opentool",
    description="OpenTool: /version, /call, /streamCall and /load; upstream OpenTool servers",
    front=FrontPlugin(
        settings=OpenToolFrontSettings,
        routes="adapters.opentool.front:routes",
        presenter="adapters.opentool.presenter:PRESENTER",
    ),
    backend=BackendPlugin(settings=OpenToolBackendSettings, factory="adapters.opentool.backend:OpenToolBackend"),
)

__all__ = ["ADAPTER"]
