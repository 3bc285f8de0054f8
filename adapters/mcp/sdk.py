"""Every private name of the `mcp` SDK the adapter uses, here and nowhere else.

The SDK (2.3) offers no public hook for a few things a gateway must do: answer the common stateless
`tools/call` without its per-request machinery (`server/direct.py`), give each handshake-era session an
event log and an owner of its own (`server/sessions.py`), see which sessions are open, and make each
relayed request declare its caller's capabilities rather than the connection's (`client/link.py`). Each
of those reaches into the SDK through this module only, so an SDK release that reshapes them breaks here,
where `tests/mcp/test_sdk_shape.py` checks every name and signature below against the installed SDK; the
dependency is pinned to the minor version that test passes on (pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp.server._streamable_http_modern as _modern
from mcp.client._transport import TransportStreams
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.runner import _apply_middleware, _dump_result, _extract_meta
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = [
    "OpenTelemetryMiddleware",
    "TransportStreams",
    "apply_middleware",
    "discard_session",
    "dump_result",
    "extract_meta",
    "lifespan_state",
    "open_sessions",
    "register_session",
    "serve_opening",
    "server_info_stamp",
    "sse_event",
    "sse_headers",
    "sse_window",
    "wrap_request_stamp",
    "write_modern",
]

# ---- the server: the stateless era's answer, as its entry point writes it ----


def sse_window() -> float:
    """How long the stateless entry point answers a call as JSON before it commits to an SSE stream (and how
    often it pings that stream): read per request (tests shorten it)."""
    return float(_modern._SSE_PING_INTERVAL)


def sse_headers() -> Any:
    """The headers of the stateless entry point's SSE answer (ASGI form)."""
    return _modern._SSE_HEADERS


def sse_event(message: Any) -> bytes:
    """One JSON-RPC message as the SDK's stateless entry point writes an SSE event."""
    return _modern._sse_event(message)  # type: ignore[no-any-return]


async def write_modern(error: Any, scope: Any, receive: Any, send: Any) -> None:
    """A JSON-RPC error answered as the SDK's stateless entry point answers it (status and body)."""
    await _modern._write(error, scope, receive, send)


def dump_result(result: Any) -> Any:
    """A handler's result as the SDK's runner dumps it before serializing."""
    return _dump_result(result)


def extract_meta(params: Any) -> Any:
    """A request's `_meta` as the SDK's runner hands it to the request context (None when invalid)."""
    return _extract_meta(params)


def apply_middleware(middleware: Any, call: Callable[[Any], Awaitable[Any]], ctx: Any) -> Awaitable[Any]:
    """One of the server's middleware around `call`, as the runner applies it."""
    return _apply_middleware(middleware, call, ctx)  # type: ignore[no-any-return]


def server_info_stamp(server: Any) -> Any:
    """The server's `serverInfo` stamp for result `_meta`, as its runner stamps it (made once per server)."""
    return server._server_info_stamp_source


# ---- the server: the session manager's own bookkeeping ----


def lifespan_state(manager: StreamableHTTPSessionManager) -> Any:
    """What the manager's lifespan yielded, which request contexts carry."""
    return manager._lifespan_state


def open_sessions(manager: StreamableHTTPSessionManager) -> dict[str, StreamableHTTPServerTransport]:
    """The handshake-era sessions open now, by id (the SDK offers no other view of them)."""
    return manager._server_instances


def register_session(
    manager: StreamableHTTPSessionManager, session_id: str, transport: StreamableHTTPServerTransport, requestor: Any
) -> None:
    """Admit a session as the manager's own `_admit_session` does once it made the transport."""
    if requestor is not None:
        manager._session_owners[session_id] = requestor
    manager._server_instances[session_id] = transport


async def discard_session(
    manager: StreamableHTTPSessionManager, session_id: str, transport: StreamableHTTPServerTransport
) -> None:
    """The manager's own discarding of a session (forgotten at once, its transport terminated)."""
    await StreamableHTTPSessionManager._discard_session(manager, session_id, transport)


async def serve_opening(
    manager: StreamableHTTPSessionManager, transport: StreamableHTTPServerTransport, scope: Any, receive: Any, send: Any
) -> None:
    """Start an admitted session's server task and let it answer its opening request, as the manager does for
    a new session (a refused opening discards the session again)."""
    await manager._serve_opening_request(transport, scope, receive, send)


# The manager's steps a subclass replaces (by these names): admit one session, discard one.
ADMIT_STEP = "_admit_session"
DISCARD_STEP = "_discard_session"


# ---- the client: what each request declares ----


def wrap_request_stamp(session: Any, after: Callable[[dict[str, Any]], None]) -> None:
    """Run `after(request)` once the client session stamped a request's `_meta` (its private `_stamp`)."""
    original = session._stamp

    def stamp(data: dict[str, Any], opts: Any) -> None:
        original(data, opts)
        after(data)

    session._stamp = stamp
