"""What an MCP upstream says to the client while it serves one of its requests, relayed to that client.

An MCP server may, while it serves a request, log (`notifications/message`), report progress, and ask
its client something (sampling, elicitation, roots): on the handshake era as requests of its own, on
2026-07-28 as an `InputRequiredResult` the client answers by sending the request again. Behind the
gateway "the client" is whoever called through the MCP front, so each of these goes to that caller.

The backend keeps one connection per upstream, shared by every caller. The `mcp` SDK runs each
message a server sends on a request's own stream in the context of the task that sent the request
(its memory streams carry the sender's `contextvars`), so the caller is found through `CALLER`, set
around each relayed request: a log line or a question reaches the caller whose request caused it,
never another. Over stdio the server's messages arrive on one pipe read by one task, so there is no
such context: there a log line or a question goes to the caller of the one request in flight on the
connection, and while two or more are in flight it reaches none (logged, or declined), as it cannot be
told whose it is. Progress names its request, so it always reaches its caller.

A handshake-era server's question to a 2026-07-28 caller cannot be put as a request: the call is held
open (`adapters.mcp.client.held`, the `Pending.hold`) and the question goes back as an `InputRequiredResult`.

Each request in flight is a `Pending`: it also records whether the server asked its caller anything
(the answer then depends on more than the arguments, so it is not cached) and which question was
declined (the call then failed for want of a client that can answer, not for a fault of the server).

`Caller` is what a front of this protocol hands the backend (as `CallContext.peer`); the front
implements it, the backend uses it, neither knows the other.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import mcp_types as types
import structlog
from mcp.client.session import ClientRequestContext

from adapters.mcp import sdk

log = structlog.get_logger("toolplex.mcp")

LOG_LEVEL_META_KEY: Final = "io.modelcontextprotocol/logLevel"
CLIENT_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"  # SEP-2663 (adapters.mcp.tasks relays it)
# A handshake-era server's call held open for a 2026-07-28 caller's answers (`adapters.mcp.client.held`):
HELD_PREFIX: Final = "toolplex-held."  # its `requestState` (an upstream's own never opens a hold)
HELD_METHODS: Final = ("tools/call", "resources/read", "prompts/get")  # the requests a hold is made for
INVALID_STATE: Final = "Invalid or expired requestState"  # the `mcp` SDK's refusal: wording, code and data


def is_held(state: str | None) -> bool:
    """A `requestState` of a held call (the gateway's own), not an upstream's."""
    return isinstance(state, str) and state.startswith(HELD_PREFIX)


def invalid_state() -> Any:
    """The SDK's own refusal of a `requestState` that names no call held for this caller."""
    from mcp.shared.exceptions import MCPError

    return MCPError(types.INVALID_PARAMS, INVALID_STATE, {"reason": "invalid_request_state"})


class Caller(Protocol):
    """The MCP client a relayed request came from, as its front offers it to the backend."""

    @property
    def modern(self) -> bool:
        """True for a 2026-07-28 client: questions go back as an `InputRequiredResult`, not as requests."""
        ...

    @property
    def capabilities(self) -> dict[str, Any]:
        """The client capabilities the caller declared (wire form): what the upstream may ask of it."""
        ...

    @property
    def log_level(self) -> str | None:
        """The least severe log level the caller wants relayed (None: no logs)."""
        ...

    @property
    def progress_token(self) -> str | int | None:
        """The caller's `progressToken` for this request (None: it wants no progress)."""
        ...

    @property
    def input_responses(self) -> dict[str, Any] | None:
        """A 2026-07-28 retry's answers to the questions of an `InputRequiredResult`."""
        ...

    @property
    def request_state(self) -> str | None:
        """A 2026-07-28 retry's `requestState`, echoed from the `InputRequiredResult` it answers."""
        ...

    async def notify(self, notification: types.ServerNotification) -> None:
        """Send a notification on the caller's request stream (a log line, progress)."""
        ...

    async def ask(self, request: types.ServerRequest, result_type: type[Any]) -> Any:
        """Ask the caller (handshake era); raises `mcp.shared.exceptions.MCPError` when it cannot answer."""
        ...


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("toolplex_mcp_caller", default=None)


class Server(Protocol):
    """A `kind: mcp` backend as the MCP front sees it: what it needs to pass its caller's resources, prompts,
    tasks and subscriptions on (the backend implements it; the front never imports the backend)."""

    name: str
    toolkit: str  # its tools' toolkit before routing (the backend's name)
    settings: Any  # its `McpBackendSettings`: `rename`, `routed_toolkit`, `renames_toolkit`, `max_pages`, ...

    @property
    def era(self) -> str | None:
        """ "modern" or "legacy": the era of its main connection, None while there is none."""
        ...

    @property
    def extensions(self) -> dict[str, Any]:
        """What the server advertised under `capabilities.extensions` (2026-07-28)."""
        ...

    @property
    def capabilities(self) -> Any:
        """The server's `ServerCapabilities` as it announced them (its main connection's), None before any."""
        ...

    @property
    def instructions(self) -> str | None:
        """The server's `instructions` for the model, as it announced them."""
        ...

    @property
    def tools_said(self) -> int:
        """How many times the server said its tools changed (a count: each front passes on each word once)."""
        ...

    @property
    def listing_hint(self) -> tuple[int, str] | None:
        """The freshness hint (`ttlMs`, `cacheScope`) of its last `tools/list` (2026-07-28), None without one."""
        ...

    def listen(self, listener: Callable[[Any], Awaitable[None]]) -> None:
        """Have `listener` hear what the server says of its resources and prompts."""
        ...


class Questions(Protocol):
    """Who answers a held call's questions (`adapters.mcp.client.held.Hold`): its 2026-07-28 caller, by retry."""

    @property
    def capabilities(self) -> dict[str, Any]:
        """What the caller of the current round declared it can answer."""
        ...

    async def ask(self, capability: str, request: types.ServerRequest, result_type: type[Any]) -> Any:
        """The caller's answer, once it sends the call again with it."""
        ...


class Pending:
    """One request in flight on a connection, as the server's messages about it see it."""

    __slots__ = ("asked", "caller", "declined", "hold")

    def __init__(self, caller: Caller | None) -> None:
        self.caller = caller  # None between the rounds of a held call
        self.asked = False  # the server put a question to the caller (the answer depends on its reply)
        self.declined: str | None = None  # the capability of a question no one could answer
        self.hold: Questions | None = None  # a handshake-era server's call held for a 2026-07-28 caller


PENDING: contextvars.ContextVar[Pending | None] = contextvars.ContextVar("toolplex_mcp_pending", default=None)
Sole = Callable[[], Pending | None]  # a connection's one request in flight (stdio), else None


def _no_sole() -> Pending | None:
    return None


def _pending(sole: Sole) -> Pending | None:
    """The request a server's message belongs to: the one in whose context it runs, else the sole one."""
    found = PENDING.get()
    return found if found is not None else sole()


def caller_of(peer: Any) -> Caller | None:
    """A `CallContext.peer` that is an MCP caller (another front's peer is none of this module's business)."""
    return peer if isinstance(peer, CallerBase) else None


class CallerBase:
    """The base a front's `Caller` derives from, so `caller_of` can tell it from other fronts' peers."""


# ---- the connection's callbacks: each finds the caller of the request the message belongs to ----


LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")  # RFC 5424


def wanted(caller: Caller, level: str) -> bool:
    """The caller hears log lines at or above the level it asked for (a 2026-07-28 caller that asked for
    none hears none), whatever the server sent: a handshake-era server sees no request's level."""
    asked = caller.log_level
    if asked is None:
        return False
    return level not in LEVELS or asked not in LEVELS or LEVELS.index(level) >= LEVELS.index(asked)


async def on_log(params: types.LoggingMessageNotificationParams, sole: Sole = _no_sole) -> None:
    pending = _pending(sole)
    caller = pending.caller if pending is not None else None
    if caller is None or not wanted(caller, params.level):
        log.debug("mcp_upstream_log", level=params.level, logger=params.logger)
        return
    await caller.notify(types.LoggingMessageNotification(params=params))


def _declined(what: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"The gateway's caller cannot answer {what} requests")


def _asker(
    capability: str, request_of: Callable[[Any], types.ServerRequest], result_type: type[Any]
) -> Callable[..., Any]:
    """A callback that puts the upstream's question to the caller, if the caller declared `capability`."""

    async def ask(context: ClientRequestContext, params: Any = None, sole: Sole = _no_sole) -> Any:
        pending = _pending(sole)
        caller = pending.caller if pending is not None else None
        hold = pending.hold if pending is not None else None
        declared = hold.capabilities if hold is not None else caller.capabilities if caller is not None else {}
        if capability not in declared:
            log.info("mcp_question_declined", capability=capability, caller=caller is not None)
            if pending is not None:
                pending.declined = capability
            return _declined(capability)
        assert pending is not None
        pending.asked = True
        try:
            if hold is not None:  # a 2026-07-28 caller: asked in an InputRequiredResult, answered by its retry
                return await hold.ask(capability, request_of(params), result_type)
            assert caller is not None
            return await caller.ask(request_of(params), result_type)
        except Exception as exc:  # the caller refused or went away: the upstream gets an error answer
            code = getattr(exc, "code", types.INTERNAL_ERROR)
            return types.ErrorData(code=code, message=str(getattr(exc, "message", exc)) or type(exc).__name__)

    return ask


on_sampling = _asker("sampling", lambda params: types.CreateMessageRequest(params=params), types.CreateMessageResult)
on_elicitation = _asker("elicitation", lambda params: types.ElicitRequest(params=params), types.ElicitResult)


_ask_roots = _asker("roots", lambda _params: types.ListRootsRequest(), types.ListRootsResult)


async def on_roots(context: ClientRequestContext, sole: Sole = _no_sole) -> Any:
    return await _ask_roots(context, None, sole)


def callbacks(sole: Sole) -> Mapping[str, Callable[..., Any]]:
    """The SDK client's callbacks for one connection; `sole` finds its one request in flight where the
    server's messages carry no request context (stdio), and is `_no_sole` where they do (HTTP)."""
    return {
        "logging_callback": lambda params: on_log(params, sole),
        "sampling_callback": lambda context, params: on_sampling(context, params, sole),
        "elicitation_callback": lambda context, params: on_elicitation(context, params, sole),
        "list_roots_callback": lambda context: on_roots(context, sole),
    }


def stamp_caller_capabilities(session: Any) -> None:
    """Make each 2026-07-28 request declare its caller's capabilities, not the connection's.

    The SDK stamps every request's `_meta` with the capabilities of the client object, which here
    declares all three kinds of question (it relays them) and the tasks extension (it reads a task).
    A server must not ask what the real client cannot answer, nor create a task it cannot poll, so the
    caller's own declaration replaces them (`declared`); a request with no caller (another front's, a
    discovery) declares none. The SDK has no public hook for it (`sdk.wrap_request_stamp`).
    """

    def restamp(data: dict[str, Any]) -> None:
        meta = (data.get("params") or {}).get("_meta")
        if isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:
            meta[CLIENT_CAPABILITIES_META_KEY] = declared(CALLER.get())

    sdk.wrap_request_stamp(session, restamp)


def declared(caller: Caller | None) -> dict[str, Any]:
    """The capabilities a relayed request declares upstream: its caller's, as the caller sent them, but
    the tasks extension only for a 2026-07-28 caller (a handshake-era one has no `tasks/get` to poll with)."""
    if caller is None:
        return {}
    capabilities = dict(caller.capabilities)
    if not caller.modern:
        without(capabilities, "extensions", TASKS_EXTENSION)
    return capabilities


def without(holder: dict[str, Any], member: str, key: str) -> None:
    """Drop `key` from the object `holder[member]` (replaced by a copy), and the member once it is empty."""
    inner = holder.get(member)
    if isinstance(inner, dict) and key in inner:
        kept = {k: v for k, v in inner.items() if k != key}
        if kept:
            holder[member] = kept
        else:
            del holder[member]


def request_meta(caller: Caller | None) -> dict[str, Any] | None:
    """The `_meta` a relayed request carries for its caller: the log level it opted in to."""
    if caller is None or caller.log_level is None:
        return None
    return {LOG_LEVEL_META_KEY: caller.log_level}


def relay_progress(pending: Pending) -> Callable[..., Any] | None:
    """A progress callback that reports the upstream's progress to the request's caller against the caller's
    token; None when the caller asked for none. A held call's caller changes with each round (and is None
    between them): each report goes to the caller of the moment."""
    if pending.caller is None or pending.caller.progress_token is None:
        return None

    async def progress(value: float, total: float | None, message: str | None) -> None:
        caller = pending.caller
        token = caller.progress_token if caller is not None else None
        if caller is None or token is None:
            return
        params = types.ProgressNotificationParams(progress_token=token, progress=value, total=total, message=message)
        await caller.notify(types.ProgressNotification(params=params))

    return progress
