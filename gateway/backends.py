"""The backend contract: what the core may ask of a backend, and the optional features it declares.

A backend starts, discovers its tools, runs one, reports its health and closes.
Anything more is a feature it declares in `features`; the core and the fronts
check the declaration (never probe attributes) and then use the matching
protocol below. Backend kinds come from installed adapters (`gateway.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gateway.config.models import LimitsSettings
from gateway.model import CallContext, ToolSpec
from gateway.ownership import Shares
from gateway.upstream_registry import UPSTREAMS

if TYPE_CHECKING:
    from gateway.settings import BackendSettings
    from gateway.state import StateStore
    from gateway.workspaces import Workspaces


class Feature(StrEnum):
    """Optional abilities a backend declares in `Backend.features`."""

    STREAM = "stream"  # delivers partial results through `CallContext.stream` while a call runs
    SESSIONS = "sessions"  # keeps per-client upstream sessions: `SessionBackend.release_session`
    WORKSPACES = "workspaces"  # serves the session workspace itself: FILE requests (`OperationBackend.operate`)
    CHECKS_REQUIREMENTS = "checks_requirements"  # its upstream answers missing authorizations itself
    ENV_DESCRIPTIONS = "env_descriptions"  # describes its toolkits: `EnvDescriptions.env_descriptions`


@dataclass(frozen=True)
class Health:
    """A backend's own view of itself: `up` or `down`, and its circuit breaker when it has one."""

    state: str = "up"
    detail: str | None = None
    breaker: str | None = None  # closed | half-open | open, for backends behind a breaker
    # What discovery skipped or doubts while the backend is up (an OpenAPI operation it cannot use, and why):
    # `toolplex check` prints each.
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class BackendContext:
    """What the gateway hands every backend it builds besides its settings.

    Compared on reload: a backend is kept only when its settings and this are unchanged.
    """

    max_response_bytes: int = LimitsSettings().max_upstream_response_bytes
    workspaces: Workspaces | None = field(default=None, compare=False)
    # A backend whose server says its tools changed asks for its own rediscovery now (not at the next interval).
    rediscover: Callable[[str], None] | None = field(default=None, compare=False)
    # One principal's share of every per-caller bound a backend keeps (upstream sessions, held calls).
    shares: Shares = field(default_factory=Shares, compare=False)
    # The gateway's state store: what replicas share (an upstream's OAuth tokens, `gateway.oauth.client`).
    store: StateStore | None = field(default=None, compare=False)


@runtime_checkable
class Backend(Protocol):
    name: str
    features: frozenset[Feature]
    settings: BackendSettings

    async def start(self) -> None:
        """Acquire what the backend needs before discovery (processes, pools); called once."""
        ...

    async def discover(self) -> list[ToolSpec]:
        """Every tool this backend serves, before routing rules are applied."""
        ...

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        """Run one tool; return a JSON-able value or raise GatewayError/ToolError."""
        ...

    async def health(self) -> Health: ...

    async def close(self) -> None:
        """Release everything `start` and the calls acquired; called once, even after a failed start."""
        ...


class BaseBackend:
    """Defaults for the optional parts of the contract: nothing to start, always up, nothing to close."""

    name: str
    settings: BackendSettings
    features: frozenset[Feature] = frozenset()
    operations: frozenset[str] = frozenset()  # the request kinds besides tool calls it serves (`OperationBackend`)
    # The protocol its upstream server speaks, when it relays one (an OpenTool server, an MCP server): a front of
    # that protocol is then a transparent hop, where the upstream judges its own requests (its arguments too).
    relays: str | None = None

    async def start(self) -> None:
        return None

    async def health(self) -> Health:
        """Up; with the circuit breaker of its upstream clients when it has any (`gateway.upstream`)."""
        return Health(breaker=UPSTREAMS.breaker_state(self.name))

    async def close(self) -> None:
        return None


@runtime_checkable
class OperationBackend(Protocol):
    """A backend that serves requests of other kinds than tool calls (`gateway.model.RequestKind`), those
    named in `operations`. The pipeline alone calls `operate`, after its policy stages (the caller's
    principal, limits, middleware, metrics, call log), so the backend decides only what goes upstream.

    `operation` is the protocol's own method (`resources/read`), `params` its parameters as the caller sent
    them, `context` the caller (its principal, credentials, the peer to talk back to) and `payload` a body
    that is no JSON (a file). Returns the upstream's answer; raises GatewayError like `call`.
    """

    operations: frozenset[str]

    async def operate(
        self, kind: str, operation: str, params: dict[str, Any], context: CallContext, payload: Any = None
    ) -> Any: ...


@runtime_checkable
class SessionBackend(Protocol):
    """Feature.SESSIONS: per-client state upstream, released when the client's session ends."""

    async def release_session(self, owner: str, session_key: str) -> None:
        """`owner`'s (a principal's name) front session `session_key` ended."""
        ...


@runtime_checkable
class EnvDescriptions(Protocol):
    """Feature.ENV_DESCRIPTIONS: descriptions of toolkits, as the upstream gives them."""

    @property
    def env_descriptions(self) -> Mapping[str, str]: ...
