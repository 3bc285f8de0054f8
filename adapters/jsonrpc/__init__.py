"""JSON-RPC 2.0 (seed 002): the cross-language `tool.execute` front and its wire codec."""

from adapters.jsonrpc.settings import JsonRpcBackendSettings, JsonRpcFrontSettings
from gateway.plugins import Adapter, BackendPlugin, FrontPlugin

ADAPTER = Adapter(
    name="jsonrpc",
    description="JSON-RPC 2.0: tool.execute and tool.list at one path; upstream seed-002 servers",
    front=FrontPlugin(
        settings=JsonRpcFrontSettings,
        routes="adapters.jsonrpc.front:routes",
        presenter="adapters.jsonrpc.presenter:PRESENTER",
    ),
    backend=BackendPlugin(settings=JsonRpcBackendSettings, factory="adapters.jsonrpc.backend:JsonRpcBackend"),
)

__all__ = ["ADAPTER"]
