"""Any REST API with an OpenAPI document (3.0, 3.1, or Swagger 2.0 converted) as tools, one per operation."""

from adapters.openapi.settings import OpenApiBackendSettings
from gateway.plugins import Adapter, BackendPlugin

ADAPTER = Adapter(
    name="openapi",
    description="A REST API described by an OpenAPI document: every operation is a tool",
    backend=BackendPlugin(settings=OpenApiBackendSettings, factory="adapters.openapi.backend:OpenApiBackend"),
)

__all__ = ["ADAPTER"]
