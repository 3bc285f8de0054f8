"""Plain REST endpoints declared in YAML, one per tool."""

from adapters.http.settings import HttpBackendSettings
from gateway.plugins import Adapter, BackendPlugin

ADAPTER = Adapter(
    name="http",
    description="Plain REST endpoints of an upstream, each declared in the configuration as one tool",
    backend=BackendPlugin(settings=HttpBackendSettings, factory="adapters.http.backend:HttpBackend"),
)

__all__ = ["ADAPTER"]
