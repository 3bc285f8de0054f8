"""The Model Context Protocol: `kind: mcp` backends (an MCP server's tools in the catalog), both protocol eras.

The backend speaks Streamable HTTP (`url:`) or stdio (`command:`) through the `mcp` SDK's
client; `codec` holds the MCP <-> canonical rules a front of this protocol shares.
"""

from adapters.mcp.front_settings import McpFrontSettings
from adapters.mcp.settings import McpBackendSettings
from gateway.plugins import Adapter, BackendPlugin, FrontPlugin

ADAPTER = Adapter(
    name="mcp",
    description="Model Context Protocol: MCP servers upstream, over Streamable HTTP or stdio, either protocol era",
    front=FrontPlugin(settings=McpFrontSettings, routes="adapters.mcp.front:routes"),
    backend=BackendPlugin(settings=McpBackendSettings, factory="adapters.mcp.backend:McpBackend"),
)

__all__ = ["ADAPTER"]
