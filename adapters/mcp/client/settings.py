"""Settings of `kind: mcp` backends: an MCP server over Streamable HTTP (`url:`) or stdio (`command:`).

Each default lives here and only here: the backend reads these attributes, and
`toolplex schema` generates the configuration schema from them. (The MCP front,
when it comes, puts its `McpFrontSettings` beside this class.)
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from gateway.settings import UpstreamBackendSettings

# Keys that only mean something for one of the two transports.
HTTP_ONLY = ("headers", "api_key", "forward_authorization", "oauth")
STDIO_ONLY = ("args", "env", "cwd")


class McpBackendSettings(UpstreamBackendSettings):
    """An MCP server upstream: Streamable HTTP (`url`) or a process spoken to over stdio (`command`)."""

    kind: Literal["mcp"]
    OAUTH_PER_CALL: ClassVar[bool] = True  # each request's token is decided per caller (`adapters.mcp.client.http`)
    url: str | None = Field(  # type: ignore[assignment]  # optional here: a stdio server has none
        default=None,
        pattern=r"^https?://",
        description="The server's Streamable HTTP endpoint, as its documentation gives it (e.g. http://host:8000/mcp)",
    )
    command: str | None = Field(
        default=None,
        min_length=1,
        description="Executable of a stdio server (e.g. node, npx, python); searched in PATH",
    )
    args: list[str] = Field(default_factory=list, description="Arguments of `command`")
    env: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Environment of the stdio server, on top of HOME, PATH, LANG and the few variables every process needs; "
            "values are usually ${VAR} and are treated as secrets (never logged)"
        ),
    )
    cwd: str | None = Field(default=None, description="Working directory of the stdio server (default: the gateway's)")
    era: Literal["auto", "legacy", "modern"] = Field(
        default="auto",
        description=(
            "auto: try the 2026-07-28 `server/discover` first, fall back to the `initialize` handshake; "
            "legacy: the handshake only; modern: 2026-07-28 without probing"
        ),
    )
    api_key: str | None = Field(
        default=None, description="Sent as Authorization: Bearer <key> (empty: none; HTTP only); use ${VAR}"
    )
    answer_timeout_s: float = Field(
        default=300.0,
        gt=0,
        le=3600,
        description=(
            "How long a call is held open for a 2026-07-28 caller's answer when a handshake-era server asks it "
            "something mid-call (elicitation, sampling, roots); then the call is cancelled"
        ),
    )
    max_held_calls: int = Field(
        default=256,
        ge=0,
        description="Most calls held open for their callers' answers at once (0: such questions are declined)",
    )
    max_pages: int = Field(
        default=100, ge=1, le=10_000, description="Most tools/list pages read in one discovery (cursor pagination)"
    )
    restarts_per_minute: int = Field(
        default=5,
        ge=0,
        description="stdio: at most this many restarts of a server process that died, in any 60 s; 0: never restart",
    )
    restart_backoff_s: float = Field(
        default=0.5,
        ge=0,
        description="stdio: pause before restarting a process that died; doubles with each quick death, up to 30 s",
    )
    stop_timeout_s: float = Field(
        default=2.0,
        gt=0,
        le=10,
        description="stdio: on close, how long the process group gets after SIGTERM before SIGKILL",
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpBackendSettings:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of url (a Streamable HTTP server) or command (a stdio server)")
        given = self.model_fields_set
        stray = [key for key in (STDIO_ONLY if self.url is not None else HTTP_ONLY) if key in given]
        if stray:
            verb = "applies" if len(stray) == 1 else "apply"
            where = (
                "a stdio server (command), not to url"
                if self.url is not None
                else "an HTTP server (url), not to command"
            )
            raise ValueError(f"{', '.join(stray)} {verb} only to {where}")
        return self

    @property
    def transport(self) -> Literal["http", "stdio"]:
        return "http" if self.url is not None else "stdio"
