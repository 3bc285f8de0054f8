"""The MCP front's handshake-era sessions: each owned by the principal that opened it, with its own event log.

The `mcp` SDK's session manager keeps one event store for every session of an endpoint and replays, for
any `Last-Event-ID`, the stream that event belongs to, whichever session asks: one client could read
another's answers. Here every session gets a view of the endpoint's `EventLogs` that holds its events
only (`SessionEvents`), under ids of 128 random bits: an id from another session, guessed or leaked, is
unknown in this one. The logs belong to the session's principal (`gateway.ownership`): each principal
may fill its share of the endpoint's `max_events` and `max_event_bytes`, beyond which its own oldest
events go; when everyone's shares fill the endpoint, a new event is sent live but not kept for replay
(it is never made room for by dropping another principal's).

`SessionManager` is the SDK's manager with three changes at session admission: session ids of 128
random bits, each principal within its share of `max_sessions` (a new session beyond it gets the SDK's
503 "Too many open sessions"), and the session's own event log; a discarded session's log and per-session
state (`on_discard`) go with it.

A session whose home replica stopped, or cannot be reached, is adopted by the replica its next request
reaches (`SessionManager.adopt`): a session under the same id, opened again with the client's own
`initialize` (kept with the session's record in the state store), so its client goes on without a new
handshake. What lived only in the old home goes: its event log (a `Last-Event-ID` from before is unknown
there) and its open streams.
"""

from __future__ import annotations

import re
import secrets
from collections import Counter, OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import mcp_types as types
import orjson
import structlog
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventMessage,
    EventStore,
    StreamableHTTPServerTransport,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Message, Receive, Scope

from adapters.mcp import sdk
from gateway.errors import GatewayError
from gateway.ownership import OwnedEntries, Shares

log = structlog.get_logger("toolplex.mcp")

# How long a resumed request stream waits for the rest of its request's events (see `SessionEvents`).
RESUME_TAIL_S: Final = 60.0
EVENT_OVERHEAD: Final = 128  # bytes an event costs besides its message (ids, bookkeeping)
ID_BYTES: Final = 16  # 128 random bits per event id and session id

# The principal (its name) of the request being admitted: set by the front before the SDK sees the request.
OPENING: ContextVar[str] = ContextVar("mcp_opening_principal", default="")


@dataclass
class _Event:
    id: str
    stream: str
    message: types.JSONRPCMessage | None


@dataclass
class _Log:
    """One session's events in order (by a sequence number the client never sees)."""

    owner: str
    events: OrderedDict[int, _Event] = field(default_factory=OrderedDict)
    by_id: dict[str, int] = field(default_factory=dict)
    stored: anyio.Event = field(default_factory=anyio.Event)


class EventLogs:
    """Every session's events on one endpoint; each principal within its share of the counts and bytes."""

    def __init__(self, max_events: int, max_bytes: int, shares: Shares) -> None:
        self._held: OwnedEntries[tuple[str, int], tuple[str, int]] = OwnedEntries(
            max_entries=max_events, max_bytes=max_bytes, shares=shares, what="SSE events"
        )
        self._logs: dict[str, _Log] = {}  # session id -> its log
        self._next = 0

    def configure(self, max_events: int, max_bytes: int) -> None:
        self._held.max_entries, self._held.max_bytes = max_events, max_bytes

    @property
    def bytes(self) -> int:
        return self._held.bytes

    def __len__(self) -> int:
        return len(self._held)

    def store(self, owner: str, session: str, stream: str, message: types.JSONRPCMessage | None) -> str:
        """Keep one event of `session` and return its id; an event the owner's share cannot take is not kept."""
        event_id = secrets.token_urlsafe(ID_BYTES)
        log_ = self._logs.get(session)
        if log_ is None:
            log_ = self._logs[session] = _Log(owner)
        self._next += 1
        size = EVENT_OVERHEAD + (len(message.model_dump_json(by_alias=True)) if message is not None else 0)
        try:
            dropped = self._held.put(owner, (session, self._next), (session, self._next), size)
        except GatewayError:  # over the owner's share alone, or everyone's shares are full: sent, not kept
            log.info("mcp_event_not_kept", session=session[:12], bytes=size)
            self._wake(log_)
            return event_id
        log_.events[self._next] = _Event(event_id, stream, message)
        log_.by_id[event_id] = self._next
        for old_session, seq in dropped:
            self._drop(old_session, seq)
        self._wake(log_)
        return event_id

    @staticmethod
    def _wake(log_: _Log) -> None:
        log_.stored.set()
        log_.stored = anyio.Event()

    def _drop(self, session: str, seq: int) -> None:
        log_ = self._logs.get(session)
        event = log_.events.pop(seq, None) if log_ is not None else None
        if log_ is not None and event is not None:
            log_.by_id.pop(event.id, None)

    def knows(self, session: str, event_id: str) -> bool:
        """`session` stored the event `event_id` and still keeps it."""
        log_ = self._logs.get(session)
        return log_ is not None and event_id in log_.by_id

    def forget(self, session: str) -> None:
        """The session ended: its events go."""
        log_ = self._logs.pop(session, None)
        if log_ is None:
            return
        for seq in log_.events:
            self._held.pop(log_.owner, (session, seq))
        self._wake(log_)

    async def replay(self, session: str, after_id: str, send: EventCallback) -> str | None:
        """Resend what `session` stored after its event `after_id` on the same stream; then, for a request's
        stream, keep resending what the request goes on to produce until its response is stored: the SDK
        re-attaches the live stream only once replay returns, so an event stored in between would otherwise
        never be sent. None (nothing replayed) for an id this session never had."""
        log_ = self._logs.get(session)
        after = log_.by_id.get(after_id) if log_ is not None else None
        if log_ is None or after is None:
            return None
        stream = log_.events[after].stream
        with anyio.move_on_after(RESUME_TAIL_S):
            while True:
                stored = log_.stored
                for seq, event in list(log_.events.items()):
                    if seq <= after or event.stream != stream:
                        continue
                    after = seq
                    if event.message is None:
                        continue  # a priming event: nothing to resend
                    await send(EventMessage(event.message, event.id))
                    if isinstance(event.message, types.JSONRPCResponse | types.JSONRPCError):
                        return stream
                if stream == GET_STREAM_KEY or self._logs.get(session) is not log_:
                    return stream  # the standalone stream never ends (live delivery takes over); or the session did
                await stored.wait()
        return stream


class SessionEvents(EventStore):
    """One session's view of the endpoint's event logs: it stores and replays that session's events only."""

    def __init__(self, logs: EventLogs, owner: str, session: str) -> None:
        self.logs = logs
        self.owner = owner
        self.session = session

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        return self.logs.store(self.owner, self.session, stream_id, message)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        return await self.logs.replay(self.session, last_event_id, send_callback)


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, admitting sessions as the module docstring says.

    `_admit_session` and `_discard_session` are the SDK's own steps (mcp 2.x), replaced here whole, with the
    same transport arguments; tests/mcp/front/test_sessions_owned.py holds them to the SDK's behaviour.
    """

    def __init__(self, *, logs: EventLogs, shares: Shares, on_discard: Callable[[str], None], **options: Any) -> None:
        super().__init__(event_store=None, **options)
        self.logs = logs
        self.shares = shares
        self.on_discard = on_discard
        self.owners: dict[str, str] = {}  # session id -> its principal
        self.held: Counter[str] = Counter()  # principal -> its open sessions
        self._adopting = anyio.Lock()  # one adoption at a time (two requests of one session may race to adopt it)
        self.adopted: set[str] = set()  # sessions opened here by adoption (bounded by the open sessions)

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        return self._admit(OPENING.get(), secrets.token_hex(ID_BYTES), requestor)

    def _admit(self, owner: str, session_id: str, requestor: Any) -> StreamableHTTPServerTransport | None:
        if self.max_sessions is not None:
            if len(sdk.open_sessions(self)) >= self.max_sessions:
                return None
            share = self.shares.of(self.max_sessions)
            if self.held[owner] >= share:
                log.warning("mcp_sessions_share_full", principal=owner or None, sessions=share)
                return None
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=self.json_response,
            event_store=SessionEvents(self.logs, owner, session_id),
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )
        sdk.register_session(self, session_id, transport, requestor)
        self.owners[session_id] = owner
        self.held[owner] += 1
        return transport

    async def adopt(self, session_id: str, owner: str, opening: dict[str, Any], scope: Scope) -> bool:
        """Open `owner`'s session `session_id` here, with the client's `initialize` params `opening` answered
        and `notifications/initialized` sent as its client did; True once it is open (or already was)."""
        async with self._adopting:
            if session_id in sdk.open_sessions(self):
                return True
            transport = self._admit(owner, session_id, None)
            if transport is None:
                return False
            initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": opening}
            answered = _Answer()
            await sdk.serve_opening(self, transport, *_inner(scope, initialize, {}), answered)
            if session_id not in sdk.open_sessions(self):
                log.warning("mcp_session_not_adopted", session=session_id[:12], status=answered.status)
                return False
            version = answered.protocol_version() or str(opening.get("protocolVersion", ""))
            headers = {"mcp-session-id": session_id, "mcp-protocol-version": version}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await transport.handle_request(*_inner(scope, initialized, headers), _Answer())
            self.adopted.add(session_id)
            return True

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        owner = self.owners.pop(session_id, None)
        self.adopted.discard(session_id)
        if owner is not None:
            self.held[owner] -= 1
            if self.held[owner] <= 0:
                del self.held[owner]
            self.logs.forget(session_id)
            self.on_discard(session_id)
        await sdk.discard_session(self, session_id, transport)


def _inner(scope: Scope, message: dict[str, Any], headers: dict[str, str]) -> tuple[Scope, Receive]:
    """A POST of `message` to the endpoint of `scope`, as its client sends one (for a session's adoption)."""
    body = orjson.dumps(message)
    raw = [
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-length", str(len(body)).encode()),
        *((name.encode(), value.encode("latin-1")) for name, value in headers.items()),
        *((name, value) for name, value in scope["headers"] if name == b"host"),
    ]
    inner = {**scope, "method": "POST", "headers": raw, "query_string": b""}
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return inner, receive


class _Answer:
    """Takes an inner request's answer (no client reads it): its status and its first bytes."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.body = bytearray()

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body" and len(self.body) < 65536:
            self.body += message.get("body", b"")

    def protocol_version(self) -> str | None:
        """The version the server answered `initialize` with (its JSON, or the SSE event that carries it)."""
        found = re.search(rb'"protocolVersion"\s*:\s*"([^"]{1,40})"', bytes(self.body))
        return found.group(1).decode() if found else None
