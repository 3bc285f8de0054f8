"""Typed settings: every config section and every adapter's settings is a pydantic model.

Each default lives once, in its model. The root model is assembled from the
core sections below and from the installed adapters' models (`gateway.plugins`),
so `toolplex schema` prints a JSON Schema that always matches what is accepted.
This module holds the base classes adapters build on; the core sections and the
assembly live in `gateway.config.models`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from gateway.oauth.settings import UpstreamOAuthSettings

NAME_PATTERN = r"^[A-Za-z0-9_-]+$"
PART_PATTERN = r"^[A-Za-z0-9_]+$"
SEMVER_PATTERN = r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$"

PositiveSeconds = Annotated[float, Field(gt=0)]


class Section(BaseModel):
    """A mapping in the YAML file: unknown keys are errors, values are never coerced silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class FrontSettings(Section):
    """What every front accepts; an adapter's front settings subclass this."""

    enabled: bool = True
    # A front that shows every caller's data to everyone when auth is off (the console): then refused on an
    # address beyond loopback, where it would make whoever reaches it an admin.
    local_without_auth: ClassVar[bool] = False


class CacheSettings(Section):
    """Opt-in result caching for this backend's tools without side effects."""

    ttl_s: float | None = Field(
        default=None, gt=0, description="Cache every tool of the backend that declares no side effects for this long"
    )
    tools: dict[str, Annotated[float, Field(ge=0)]] | None = Field(
        default=None,
        description="Tool name or glob (Name or Toolkit.Name) -> TTL in seconds; 0 turns caching off for it",
    )
    max_entries: int = Field(
        default=1000, ge=1, description="Most results kept for this backend (least recently used go first)"
    )
    max_bytes: int = Field(
        default=16777216,
        ge=1024,
        description=(
            "Most bytes of results (as JSON) kept for this backend; each principal may fill its "
            "limits.principal_share of this and of max_entries"
        ),
    )

    @model_validator(mode="after")
    def _one_rule(self) -> CacheSettings:
        if self.ttl_s is None and self.tools is None:
            raise ValueError("the block is not valid under any of the given schemas: give ttl_s, tools, or both")
        return self


def _pin_mode(value: Any) -> Any:
    """YAML 1.1 reads a bare `off` as false: that is the mode off."""
    return "off" if value is False else value


PinMode = Annotated[Literal["off", "warn", "enforce"], BeforeValidator(_pin_mode)]


class BackendPinningSettings(Section):
    """This backend's own tool-definition pinning mode, instead of the gateway's `pinning.mode`"""

    mode: PinMode = Field(
        description=(
            "off: not pinned; warn: a changed definition is served, logged with a diff and counted; enforce: a "
            "changed tool is quarantined until approved. Set here, it pins an in-process backend too"
        )
    )


class BackendSettings(Section):
    """The keys of every backend: its name, kind and the routing rules applied to what it discovers.

    An adapter's backend settings subclass this (or `UpstreamBackendSettings`) and
    narrow `kind` to `Literal["<adapter name>"]`.
    """

    name: str = Field(pattern=NAME_PATTERN)
    kind: str
    description: str | None = None
    toolkit: str | None = Field(
        default=None, pattern=PART_PATTERN, description="Expose every tool under this toolkit name"
    )
    prefix: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_]*$", description="Prepend this to each tool's toolkit name"
    )
    include: list[str] | None = Field(default=None, description="Only the tools matching these globs")
    exclude: list[str] | None = Field(default=None, description="Not the tools matching these globs")
    rename: dict[str, Annotated[str, Field(pattern=PART_PATTERN)]] | None = Field(
        default=None, description="Tool name (or Toolkit.Name) -> new name"
    )
    hide: list[str] | None = Field(default=None, description="Callable but not listed")
    version: str | None = Field(default=None, pattern=SEMVER_PATTERN, description="Serve every tool as this version")
    timeouts: dict[str, PositiveSeconds] | None = Field(default=None, description="Tool name -> deadline in seconds")
    cache: CacheSettings | None = None
    pinning: BackendPinningSettings | None = Field(
        default=None,
        description=(
            "Tool-definition pinning for this backend; default: the gateway's pinning.mode for upstreams, off for "
            "tools that run in the gateway's own deployment (in-process backends)"
        ),
    )

    # Whether `include`/`exclude` are tool-name globs applied by routing (`gateway.routing`); a kind whose filters
    # mean more than names (an OpenAPI operation's tags, method) applies them itself at discovery instead.
    ROUTING_FILTERS: ClassVar[bool] = True

    def call_timeout_cap(self) -> float | None:
        """The cap this backend puts on every call's deadline (None: none of its own)."""
        return None

    @property
    def renames_toolkit(self) -> bool:
        return bool(self.toolkit or self.prefix)

    def routed_toolkit(self, own: str) -> str:
        """The toolkit a tool whose own toolkit is `own` is served under: `toolkit`, else `prefix` + `own`."""
        return self.toolkit or f"{self.prefix or ''}{own}"


class UpstreamTimeouts(Section):
    connect: PositiveSeconds = 5
    read: PositiveSeconds = 30
    total: PositiveSeconds = 60


class BreakerSettings(Section):
    failures: int = Field(default=5, ge=1)
    cooldown_s: float = Field(default=30, ge=0)


class UpstreamBackendSettings(BackendSettings):
    """Keys every upstream (remote) backend accepts."""

    url: str = Field(pattern=r"^https?://", description="Base URL of the upstream server")
    timeouts_s: UpstreamTimeouts = Field(
        default_factory=UpstreamTimeouts,
        description=(
            "Connecting is bounded by `connect` always; a call is read until its deadline, `read` and `total` "
            "bound requests made outside a call (discovery, sessions)"
        ),
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Cap on the deadline of every call to this backend (the client's or limits.default_timeout_s, and "
            "limits.max_timeout_s, apply as well); default: no cap of its own"
        ),
    )
    retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Retries of discovery requests, and of calls that provably never reached the upstream",
    )
    retry_backoff_s: float = Field(default=0.2, ge=0)
    circuit_breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    max_connections: int = Field(default=50, ge=1)
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra headers sent with every request (values usually ${VAR})"
    )
    forward_authorization: bool = Field(
        default=False, description="Forward the client's own Authorization header instead of the backend's credentials"
    )
    oauth: UpstreamOAuthSettings | None = Field(
        default=None,
        description=(
            "Bearer tokens from an OAuth 2.1 authorization server (client credentials, token exchange per caller), "
            "discovered from the upstream; instead of api_key"
        ),
    )

    # Whether the kind's calls can carry a per-caller token (`oauth.on_behalf_of: token_exchange`) and leave the
    # backend's own token off a forwarded call: kinds that hand each call's credentials to `gateway.upstream`.
    OAUTH_PER_CALL: ClassVar[bool] = False

    @model_validator(mode="after")
    def _one_credential(self) -> UpstreamBackendSettings:
        oauth = self.oauth
        if oauth is None:
            return self
        own = [key for key in ("api_key", "jwt") if getattr(self, key, None)]
        if own:
            raise ValueError(f"give {' or '.join(own)} or oauth, not both: both would be the backend's own credential")
        if oauth.on_behalf_of != "none" and self.forward_authorization:
            raise ValueError(
                "oauth.on_behalf_of and forward_authorization both decide what a caller's request carries: give one"
            )
        if not self.OAUTH_PER_CALL and (oauth.on_behalf_of != "none" or self.forward_authorization):
            what = "oauth.on_behalf_of" if oauth.on_behalf_of != "none" else "forward_authorization with oauth"
            raise ValueError(f"{what} is not supported by kind {self.kind} (kinds mcp and http support it)")
        return self

    def call_timeout_cap(self) -> float | None:
        return self.timeout_s


def plain(model: BaseModel) -> dict[str, Any]:
    """A settings model as the plain mapping it was written as, defaults filled in (for logs and hashing)."""
    return model.model_dump(mode="json", exclude_none=True, by_alias=True)
