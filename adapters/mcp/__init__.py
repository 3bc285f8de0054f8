"""The Model Context Protocol, both eras: `kind: mcp` backends and the `/mcp` front, as two halves.

- `client/`: the backend (an MCP server upstream, over Streamable HTTP or stdio): its connections,
  discovery, calls and the pass-through of the front's other requests.
- `server/`: the front (MCP clients of the gateway): the endpoint, listings, sessions and their event
  logs, the direct path, the pass-through of resources, prompts and tasks.
- Shared below both: `codec` (MCP <-> canonical names, results, errors; no I/O), `relay` (the contract
  between the halves: the caller a backend talks back to, held-call tokens, the front's view of a
  backend), `tasks` (the tasks extension on the wire) and `sdk` (every private name of the `mcp` SDK).
Neither half imports the other.
"""

from adapters.mcp.client.settings import McpBackendSettings
from adapters.mcp.server.settings import McpFrontSettings
from gateway.plugins import Adapter, BackendPlugin, FrontPlugin

ADAPTER = Adapter(
    name="mcp",
    description="Model Context Protocol: MCP servers upstream, over Streamable HTTP or stdio, either protocol era",
    front=FrontPlugin(
        settings=McpFrontSettings,
        routes="adapters.mcp.server.endpoint:routes",
        presenter="adapters.mcp.presenter:PRESENTER",
    ),
    backend=BackendPlugin(settings=McpBackendSettings, factory="adapters.mcp.client.backend:McpBackend"),
)

__all__ = ["ADAPTER"]
