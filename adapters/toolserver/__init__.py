"""XAgent ToolServerNode protocol: cookie sessions, tool listing and retrieval, 450 "call again"."""

from adapters.toolserver.settings import FRONT_DESCRIPTION, ToolServerBackendSettings, ToolServerFrontSettings
from gateway.plugins import Adapter, BackendPlugin, FrontPlugin

ADAPTER = Adapter(
    name="toolserver",
    description=FRONT_DESCRIPTION,
    front=FrontPlugin(
        settings=ToolServerFrontSettings,
        routes="adapters.toolserver.front:routes",
        presenter="adapters.toolserver.presenter:PRESENTER",
    ),
    backend=BackendPlugin(settings=ToolServerBackendSettings, factory="adapters.toolserver.backend:ToolServerBackend"),
)

__all__ = ["ADAPTER"]
