"""The core sections of the configuration, and the root model assembled from the installed adapters.

Each default lives once, here (core sections) or in an adapter's settings
module (`fronts.<name>`, backends of `kind: <name>`). The docstrings of the
models and the `description`s of their fields are user-facing: they become the
JSON Schema (`toolplex schema`) and the configuration reference.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, ValidationError, create_model, model_validator

from gateway.plugins import Adapter, installed_adapters
from gateway.settings import BackendSettings, PinMode, Section

NonEmpty = Annotated[str, Field(min_length=1)]


class ServerSettings(Section):
    """Where the gateway listens and how it treats connections."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    public_url: str | None = Field(
        default=None, description="Base URL clients reach the gateway at; used in documents fronts publish"
    )
    keepalive_timeout_s: float = Field(
        default=5, gt=0, description="An idle keep-alive connection is closed after this many seconds"
    )
    max_header_bytes: int = Field(
        default=65536,
        ge=1024,
        description="Request line plus headers larger than this get 431 and the connection is closed",
    )
    shutdown_grace_s: float = Field(
        default=30,
        ge=0,
        description=(
            "On SIGTERM/SIGINT, running calls get this long to finish; the rest are answered "
            "'the gateway is shutting down'"
        ),
    )
    drain_s: float = Field(
        default=0,
        ge=0,
        le=600,
        description=(
            "On SIGTERM, /readyz answers 503 (draining) while the gateway goes on serving this long, so load "
            "balancers move away before it stops accepting; then shutdown_grace_s. A second signal skips the rest"
        ),
    )
    allowed_hosts: list[NonEmpty] | None = Field(
        default=None,
        description=(
            "Host header values served (name: any port; name:port; *.suffix; * for any); others get 421. "
            "Default: localhost, 127.0.0.1 and [::1] when bound to a loopback address, any host otherwise"
        ),
    )
    loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="asyncio",
        description=(
            "The event loop: asyncio's own (the default), uvloop, or auto (uvloop when installed). uvloop accepts "
            "one connection per loop turn: under load, a burst of new connections waits up to hundreds of "
            "milliseconds for its first answer, for no throughput gained (docs/operations.md, Benchmarks)"
        ),
    )
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description=(
            "Processes serving the port. More than 1 needs a state store shared by processes; "
            "the in-memory store (state.store: memory) refuses it"
        ),
    )
    allowed_origins: list[NonEmpty] = Field(
        default=[],
        description=(
            "Origin header values (scheme://host[:port], or *) allowed to call; a request carrying any other "
            "Origin gets 403, except the gateway's own: http:// or https:// plus the Host header, once that Host "
            "passed the allowed_hosts list (the loopback default included). Requests without Origin are not affected"
        ),
    )


class LoggingSettings(Section):
    """The gateway's structured logs (one event per call, on stderr)."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    calls: bool = Field(default=True, description="One `call` event per call (at info); false leaves them out")
    access: bool = Field(
        default=True,
        description="One `http_request` line per HTTP request (uvicorn's access log, as JSON); read at start",
    )


class BucketSettings(Section):
    """A token bucket: up to `burst` calls at once, refilled at `rate_per_s` calls per second."""

    rate_per_s: float = Field(gt=0, description="Calls per second allowed on average (0.5: one every 2 s)")
    burst: int | None = Field(
        default=None,
        ge=1,
        description="Calls allowed at once after a quiet spell; default rate_per_s rounded up (at least 1)",
    )


class RateLimitSettings(Section):
    """Token buckets kept in the state store (shared by replicas with state.store: redis); off unless set.

    A call over a rate is refused at once as rate_limited, saying when a token will be there.
    """

    per_principal: BucketSettings | None = Field(
        default=None,
        description="One bucket per API key name or JWT subject (with auth off, everyone shares one bucket)",
    )
    per_backend: BucketSettings | None = Field(
        default=None, description="One bucket per backend, taken by every call to a tool it serves"
    )
    backends: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")], BucketSettings] = Field(
        default={}, description="Backend name -> its own bucket, instead of per_backend's"
    )

    @property
    def enabled(self) -> bool:
        return self.per_principal is not None or self.per_backend is not None or bool(self.backends)


class LimitsSettings(Section):
    """Bounds on requests, calls and upstream answers, for the whole gateway."""

    max_body_bytes: int = Field(default=1048576, ge=1)
    default_timeout_s: float = Field(default=30, gt=0)
    max_timeout_s: float = Field(default=300, gt=0)
    max_upstream_response_bytes: int = Field(
        default=16777216,
        ge=1,
        description=(
            "Largest answer read from an upstream (and largest streamed event); reading stops there and the call "
            "fails as upstream_unavailable naming this limit"
        ),
    )
    max_concurrent_calls: int = Field(
        default=256,
        ge=1,
        description=(
            "Calls running at once in the whole gateway; more are refused at once with rate_limited (429 / -32003)"
        ),
    )
    max_concurrent_calls_per_principal: int = Field(
        default=64,
        ge=1,
        description=(
            "Calls running at once per API key name or JWT subject (with auth off, everyone is one principal)"
        ),
    )
    max_json_depth: int = Field(
        default=64,
        ge=1,
        le=1024,
        description="Deepest nesting of arrays and objects accepted in a JSON request body",
    )
    max_upload_bytes: int = Field(
        default=104857600,
        ge=1,
        description=("Largest file a front accepts as an upload (streamed to disk, never held in memory)"),
    )
    rate: RateLimitSettings = Field(
        default_factory=RateLimitSettings,
        description="Rate limits (token buckets) per principal and per backend; none by default",
    )
    principal_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description=(
            "The fraction of every bounded per-caller store (sessions, workspaces, event logs, held calls, result "
            "handles, call records, cached results) one principal may fill: beyond it that principal's own oldest "
            "entries go, and a store full of other principals' entries refuses a new one. With auth off every "
            "caller is one principal, which may fill the whole store"
        ),
    )


class ApiKeySettings(Section):
    """One API key clients send as `Authorization: Bearer <key>`."""

    name: str | None = None
    key: str = Field(min_length=8)
    tools: list[str] | None = Field(
        default=None, description="Globs on flat tool names this key may call; all when absent"
    )


class JwtAuthSettings(Section):
    """Bearer JWTs signed with HS256 (no other algorithm, never none); exp is required"""

    secret_env: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Name of the environment variable holding the shared secret (at least 32 bytes)",
    )
    audience: str | None = Field(default=None, description="When set, tokens must carry this aud claim")
    leeway_s: float = Field(default=0, ge=0, le=300, description="Clock skew tolerated on exp, in seconds")
    claim: NonEmpty = Field(
        default="scope",
        description=(
            "The claim grants are looked up by: a string of space-separated values (OAuth scope) "
            "or a list of strings (roles)"
        ),
    )
    grants: dict[NonEmpty, list[NonEmpty]] | None = Field(
        default=None,
        description=(
            "Claim value -> globs on flat tool names it allows; a caller may see and call the union over its "
            "values, and nothing when none matches. Absent: every JWT caller may call every tool"
        ),
    )
    principal_claim: NonEmpty = Field(
        default="sub",
        description=(
            "The claim naming the caller (its principal is jwt:<value>: its sessions, workspaces, limits); "
            "a token without it (or with an empty or non-string one) is refused with 401"
        ),
    )
    issuer: str | None = Field(
        default=None, description="When set, tokens must carry this iss claim; others are refused with 401"
    )


OAuthAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]


class OAuthIssuerSettings(Section):
    """One trusted authorization server: its tokens are verified by its published keys, or introspected"""

    issuer: NonEmpty = Field(description="The issuer identifier: tokens must carry exactly this iss")
    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Short name in principal names (oauth:<name>:<sub>); default: the issuer URL",
    )
    discovery_url: str | None = Field(
        default=None,
        description=(
            "Where its metadata is (OpenID discovery or RFC 8414); default: <issuer>/.well-known/openid-configuration, "
            "then the RFC 8414 form. Its issuer must equal `issuer`"
        ),
    )
    jwks_url: str | None = Field(default=None, description="Its signing keys (JWKS); default: the metadata's jwks_uri")
    algorithms: list[OAuthAlgorithm] = Field(
        default=["RS256", "ES256", "EdDSA"],
        min_length=1,
        description="Signature algorithms accepted from this issuer (never HS256 or none)",
    )
    introspection_url: str | None = Field(
        default=None,
        description=(
            "RFC 7662 introspection, for opaque (non-JWT) tokens; default: the metadata's introspection_endpoint "
            "when client_id is set"
        ),
    )
    client_id: str | None = Field(default=None, description="The gateway's client id at this issuer (introspection)")
    client_secret: str | None = Field(
        default=None, description="Its secret (write ${ENV_VAR}); sent with HTTP basic authentication"
    )


class OAuthResourceSettings(Section):
    """Toolplex as an OAuth 2.1 protected resource (RFC 9728): bearer tokens of trusted issuers, audience-bound"""

    resource: str | None = Field(
        default=None,
        description=(
            "The gateway's canonical URL (RFC 8707): tokens must name it in aud; default: server.public_url. "
            "Published in /.well-known/oauth-protected-resource"
        ),
    )
    audiences: list[NonEmpty] = Field(
        default=[], description="Other aud values accepted as this gateway (a migration's old URL)"
    )
    issuers: list[OAuthIssuerSettings] = Field(min_length=1, description="The trusted authorization servers")
    principal_claim: NonEmpty = Field(
        default="sub", description="The claim naming the caller: its principal is oauth:<issuer name>:<value>"
    )
    claim: NonEmpty = Field(
        default="scope", description="The claim grants are looked up by (space-separated string or list of strings)"
    )
    grants: dict[NonEmpty, list[NonEmpty]] | None = Field(
        default=None,
        description=(
            "Claim value (scope) -> globs on flat tool names it allows; the union over the token's values. "
            "Absent: every token may call every tool"
        ),
    )
    scopes_supported: list[NonEmpty] | None = Field(
        default=None, description="Scopes published in the metadata and in 401 challenges; default: the grants' keys"
    )
    leeway_s: float = Field(default=30, ge=0, le=300, description="Clock skew tolerated on exp and nbf, in seconds")
    keys_max_age_s: float = Field(default=3600, gt=0, description="Signing keys are fetched again when older than this")
    keys_refresh_min_s: float = Field(
        default=10,
        ge=0,
        description="Least seconds between two key fetches of one issuer for a token with an unknown kid",
    )
    introspection_cache_s: float = Field(
        default=300, ge=0, description="Longest an introspection answer is kept (never past the token's exp)"
    )
    max_cached_tokens: int = Field(
        default=10_000, ge=1, description="Introspection answers kept at once; the least recently used go first"
    )
    timeout_s: float = Field(default=5, gt=0, le=60, description="Timeout of each request to an authorization server")


class AuthSettings(Section):
    """Who may call: API keys, JWTs, OAuth bearer tokens, or none (then every caller is anonymous and may call
    every tool)."""

    api_keys: list[ApiKeySettings] = Field(default=[])
    jwt: JwtAuthSettings | None = None
    oauth: OAuthResourceSettings | None = None
    admins: list[NonEmpty] = Field(
        default=[],
        description=(
            "Globs on principal names (an API key's name, jwt:<sub>, oauth:<issuer name>:<sub>) of the admins: "
            "they also see quarantined tools in listings (pinning). Nobody is an admin with auth off"
        ),
    )
    admin_grants: list[NonEmpty] = Field(
        default=[],
        description=(
            "Values of a token's grant claim (auth.jwt.claim, or auth.oauth.claim: scope, roles, ...) that make its "
            "caller an admin, as auth.admins does by name: e.g. [toolplex:admin]"
        ),
    )


class ProviderSettings(Section):
    """Where a user grants a tool access for one provider id."""

    url: str = Field(
        description="Where the user authorizes; a template that may use {provider}, {tool}, {user_id}, {scopes}"
    )
    check_url: str | None = Field(
        default=None, description="Where a client polls the challenge's status; same placeholders"
    )


class AuthorizationSettings(Section):
    """User-authorization providers that tools name in their requirements"""

    providers: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")], ProviderSettings] = Field(default={})


class StateSettings(Section):
    """Where sessions, pending calls, idempotency records and rate-limit counters live.

    `memory` keeps them in this process; `redis` shares them between replicas and
    keeps what had finished across a restart.
    """

    store: Literal["memory", "redis"] = Field(
        default="memory",
        description="memory: this process only; redis: shared by every replica with the same url (and kept on restart)",
    )
    url: str | None = Field(
        default=None,
        pattern=r"^(redis|rediss|unix)://",
        description="The Redis server, e.g. redis://127.0.0.1:6379/0 (needed with store: redis)",
    )
    lease_s: float = Field(
        default=15,
        ge=1,
        le=600,
        description=(
            "A replica renews its registration this often / 3; one silent for this long is taken as lost, "
            "and the calls it was running are answered with an error"
        ),
    )
    key_prefix: str = Field(
        default="toolplex:",
        pattern=r"^[A-Za-z0-9_.:-]*$",
        description="Prefix of every Redis key, so several gateways can share one Redis database",
    )
    advertise_url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description=(
            "Where other replicas reach this one to forward a request for something it holds (a running call, "
            "a workspace); default: http://<server.host>:<port>, with this machine's host name for 0.0.0.0"
        ),
    )
    max_entries: int = Field(default=100000, ge=1, description="Most entries per kind (namespace) in the store")
    max_bytes: int = Field(
        default=67108864,
        ge=1024,
        description=(
            "Most bytes (as JSON) per kind (namespace) in the store; a principal's entries may fill its "
            "limits.principal_share of this and of max_entries"
        ),
    )

    @model_validator(mode="after")
    def _redis_needs_url(self) -> StateSettings:
        if self.store == "redis" and not self.url:
            raise ValueError("store: redis needs url (e.g. redis://127.0.0.1:6379/0)")
        return self


class WorkspacesSettings(Section):
    """Session workspaces: the files of /upload_file and friends and of the FileSystemEnv tools, one directory per client session"""  # noqa: E501

    root: str | None = Field(
        default=None,
        description=(
            "Directory holding the workspaces (Toolplex owns it: leftovers of earlier runs are removed); "
            "default: a per-process temporary directory removed at shutdown"
        ),
    )
    max_bytes_per_workspace: int = Field(
        default=268435456,
        ge=1,
        description="Bytes one workspace may hold; a write or upload past it is refused (413)",
    )
    max_workspaces: int = Field(
        default=256, ge=1, description="Workspaces kept at once; the least recently used one is removed first"
    )
    idle_s: float = Field(
        default=1800,
        gt=0,
        description="A workspace unused this long is removed (and so is one whose session is released)",
    )
    shared: bool = Field(
        default=False,
        description=(
            "The root is shared by every replica (a volume each mounts at `root`): a session adopted by another "
            "replica keeps its files. Nothing is swept at start or removed at shutdown; a workspace untouched "
            "for idle_s is removed by whichever replica looks next"
        ),
    )

    @model_validator(mode="after")
    def _shared_needs_root(self) -> WorkspacesSettings:
        if self.shared and self.root is None:
            raise ValueError("shared: true needs root (the directory every replica mounts)")
        return self


class MiddlewareEntry(Section):
    """One hook around every call: `Factory(**options)` imported from `use`."""

    use: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$",
        description="module:Factory; called as Factory(**options)",
    )
    options: dict[str, Any] = Field(default={}, description="Keyword arguments for the factory")


class DiscoverySettings(Section):
    """How often backends are asked again for their tools."""

    interval_s: float = Field(default=30, ge=0, description="Re-discover every backend this often; 0 turns it off")


class PinningSettings(Section):
    """Tool-definition pinning: each upstream tool's definition (description, schemas, annotations) is hashed
    and recorded in the state store at first discovery; a later change is logged and counted (warn) or
    quarantined until an administrator approves it (enforce). See docs/pinning.md"""

    mode: PinMode = Field(
        default="warn",
        description=(
            "off: nothing is recorded; warn: a changed definition is served, logged with a diff and counted; "
            "enforce: a changed tool is refused to callers and listed to admins only until approved. A backend's "
            "own pinning.mode overrides it"
        ),
    )
    file: str | None = Field(
        default=None,
        description=(
            "A pin file (YAML or JSON: tool -> approved hash and definition) read at start and on reload, relative "
            "to the configuration file: its definitions are approved, and a first discovery that differs from it "
            "is a change. `toolplex pins approve --write-file` writes it"
        ),
    )
    max_definition_bytes: int = Field(
        default=65536,
        ge=256,
        description=(
            "Largest definition (as JSON) kept with a pin for diffs; a larger one is pinned by its hash alone"
        ),
    )
    max_tools_per_backend: int = Field(
        default=10000,
        ge=1,
        description=(
            "Most tools pinned per backend; past it a backend's further tools are not recorded (enforce: "
            "quarantined, warn: served with a warning)"
        ),
    )


class TracingSettings(Section):
    """OpenTelemetry traces: a span per call, sent by OTLP over HTTP; needs `pip install 'toolplex[otel]'`; read at start"""  # noqa: E501

    enabled: bool = Field(default=False, description="Send a span per call; off costs nothing")
    endpoint: str = Field(
        default="http://127.0.0.1:4318",
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description="The OTLP/HTTP collector's base URL; spans are POSTed to it plus /v1/traces",
    )
    service_name: NonEmpty = Field(default="toolplex", description="The spans' service.name")
    sample_ratio: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Share of new traces recorded; a client's traceparent decides for its own trace",
    )
    headers: dict[str, str] = Field(
        default={}, description="Headers sent with every export (a vendor's API key: use ${VAR}); never logged"
    )

    @model_validator(mode="after")
    def _extra_installed(self) -> TracingSettings:
        if self.enabled:
            from gateway.tracing import missing_extra

            missing = missing_extra()
            if missing is not None:
                raise ValueError(
                    f"enabled: true needs OpenTelemetry, which is not installed ({missing} is missing): "
                    "pip install 'toolplex[otel]'"
                )
        return self


SECRETS_DESCRIPTION = "Server-side secrets handed to tools that declare them (values usually ${VAR})"
ROOT_DESCRIPTION = "The fronts to mount, the backends, auth, limits and the state store; every section may be left out"
BACKENDS_DESCRIPTION = "Where tools come from; the routing keys apply to every kind, the rest depend on `kind`"
MIDDLEWARE_DESCRIPTION = "Hooks around every call, in order (the call log always runs first); see gateway/middleware.py"


def _defaulted(model: type[BaseModel], description: str | None = None) -> Any:
    """A field holding `model`: absent means the model's defaults, unless the model has required keys."""
    try:
        model()
    except ValidationError:
        return Field(description=description)
    return Field(default_factory=model, description=description)


def _fronts_model(adapters: tuple[tuple[str, Adapter], ...]) -> type[Section]:
    fields: dict[str, Any] = {
        name: (adapter.front.settings, _defaulted(adapter.front.settings))
        for name, adapter in adapters
        if adapter.front is not None
    }
    return create_model(
        "FrontsSettings",
        __base__=Section,
        __doc__="The fronts (protocols clients speak) and their settings, by adapter name",
        **fields,
    )


def _backend_item(adapters: tuple[tuple[str, Adapter], ...]) -> Any:
    """One backend: the settings model of its `kind` (a discriminated union when several kinds exist)."""
    models = [adapter.backend.settings for _, adapter in adapters if adapter.backend is not None]
    if not models:
        raise RuntimeError("no backend kind is installed (entry points group toolplex.adapters)")
    if len(models) == 1:
        return models[0]
    return Annotated[Union[tuple(models)], Field(discriminator="kind")]  # noqa: UP007 - built at run time


class GatewaySettings(Section):
    """The core sections, typed statically; `root_model()` narrows `fronts` and `backends` to the installed adapters."""

    server: ServerSettings = Field(default_factory=ServerSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    authorization: AuthorizationSettings = Field(default_factory=AuthorizationSettings)
    secrets: dict[str, str] = Field(default={}, description=SECRETS_DESCRIPTION)
    state: StateSettings = Field(default_factory=StateSettings)
    workspaces: WorkspacesSettings = Field(default_factory=WorkspacesSettings)
    fronts: Any = None  # narrowed by root_model(): one field per installed front
    middleware: list[MiddlewareEntry] = Field(default=[], description=MIDDLEWARE_DESCRIPTION)
    backends: list[BackendSettings] = Field(default=[], description=BACKENDS_DESCRIPTION)
    discovery: DiscoverySettings = Field(default_factory=DiscoverySettings)
    pinning: PinningSettings = Field(default_factory=PinningSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)

    @model_validator(mode="after")
    def _rate_limits_name_backends(self) -> GatewaySettings:
        """A bucket for a backend that does not exist is a typo that would leave the real one unlimited."""
        names = {backend.name for backend in self.backends}
        unknown = sorted(set(self.limits.rate.backends) - names)
        if unknown:
            raise ValueError(
                f"limits.rate.backends names no configured backend: {', '.join(unknown)} "
                f"(backends: {', '.join(sorted(names)) or 'none'})"
            )
        return self


@cache
def _assemble(adapters: tuple[tuple[str, Adapter], ...]) -> type[GatewaySettings]:
    fronts = _fronts_model(adapters)
    return create_model(
        "GatewaySettings",
        __base__=GatewaySettings,
        __doc__=ROOT_DESCRIPTION,
        fronts=(fronts, _defaulted(fronts)),
        backends=(list[_backend_item(adapters)], Field(default=[], description=BACKENDS_DESCRIPTION)),  # type: ignore[misc]
    )


def root_model() -> type[GatewaySettings]:
    """The whole configuration's model, for the adapters installed in this environment."""
    return _assemble(tuple(sorted(installed_adapters().items())))


__all__ = [
    "ApiKeySettings",
    "AuthSettings",
    "AuthorizationSettings",
    "BucketSettings",
    "DiscoverySettings",
    "GatewaySettings",
    "JwtAuthSettings",
    "LimitsSettings",
    "LoggingSettings",
    "MiddlewareEntry",
    "PinningSettings",
    "ProviderSettings",
    "RateLimitSettings",
    "ServerSettings",
    "StateSettings",
    "WorkspacesSettings",
    "root_model",
]
