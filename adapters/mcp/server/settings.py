"""Settings of the MCP front (`fronts.mcp`): Streamable HTTP for MCP clients, both protocol eras.

Each default lives here and only here: the front reads these attributes, and
`toolplex schema` generates the configuration schema from them.
"""

from __future__ import annotations

from pydantic import Field

from gateway.settings import FrontSettings, Section

PATH_PATTERN = r"^(/[A-Za-z0-9._~-]+)+$"


class McpVirtualServer(Section):
    """One `/mcp/<name>` endpoint serving only some tools of the catalog (the caller's permissions apply on top)."""

    include: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs on tool names (flat Toolkit_Name or Toolkit.Name) this server lists and calls",
    )
    exclude: list[str] = Field(default_factory=list, description="Globs on tool names left out even when included")


class McpFrontSettings(FrontSettings):
    """MCP over Streamable HTTP: `tools/list`, `tools/call`, `ping`; the era chosen per request."""

    path: str = Field(default="/mcp", pattern=PATH_PATTERN, description="The MCP endpoint (POST, GET and DELETE)")
    page_size: int = Field(default=100, ge=1, le=10_000, description="Tools per `tools/list` page (cursor pagination)")
    max_sessions: int = Field(
        default=1000,
        ge=1,
        description=(
            "Most handshake-era sessions open at once per endpoint, each principal at most its "
            "limits.principal_share of them; a new one beyond that gets 503"
        ),
    )
    session_idle_s: float = Field(
        default=1800,
        gt=0,
        description="A handshake-era session with no request for this long is closed; its id then gets 404",
    )
    max_events: int = Field(
        default=10_000,
        ge=1,
        description=(
            "SSE events kept per endpoint for `Last-Event-ID` resumption, each session's for itself only; a "
            "principal may fill its limits.principal_share, beyond which its own oldest go"
        ),
    )
    max_event_bytes: int = Field(
        default=67108864,
        ge=1024,
        description="Bytes of SSE events kept per endpoint for resumption (as JSON), shared out as max_events is",
    )
    retry_ms: int = Field(default=1000, ge=1, description="The SSE `retry` hint sent to clients, in milliseconds")
    progress_interval_s: float = Field(
        default=1.0,
        gt=0,
        description="While a call runs, a progress notification this often when the client sent a progressToken",
    )
    list_changed_poll_s: float = Field(
        default=1.0,
        gt=0,
        description=(
            "After a reload or rediscovery has been told (notifications/tools/list_changed to open sessions and "
            "listen streams, at once), how long the front waits before comparing the catalog once more (the "
            "changes of a burst within it are told together)"
        ),
    )
    servers: dict[str, McpVirtualServer] = Field(
        default_factory=dict,
        description="Virtual servers: <name> -> {include, exclude}; each is served at <path>/<name>",
    )
    search: bool = Field(
        default=False,
        description=(
            "List only two meta-tools, search_tools(query, top_k) and call_tool(name, arguments), "
            "over the tools the caller may see (for large catalogs)"
        ),
    )
    search_top_k: int = Field(default=5, ge=1, le=100, description="search_tools' top_k when the client gives none")
