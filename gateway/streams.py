"""Event streams that answer a GET (subscriptions), ended cleanly when the server stops.

A GET answered with `text/event-stream` (an MCP session's stream of server-sent notifications, its resumption,
such a stream forwarded from its session's home) runs no call and never ends by itself: its client keeps it
open. At the server's stop (`gateway.serving.GatewayServer.shutdown`) each one still open, and each one that
begins after, is ended as if its client had gone away (the app reads `http.disconnect`) and then completed with
its last chunk, so the client sees a whole answer and opens the stream again elsewhere. Every other answer,
streamed or not (a call's SSE answer, a `subscriptions/listen` POST), ends as its request does: the stop waits
for it within the grace.

This is the server's decision, not the SSE library's: sse_starlette would end every SSE answer of the process
as soon as uvicorn's exit begins (`GatewayServer` turns that off).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

DISCONNECT: Final[Message] = {"type": "http.disconnect"}
EVENT_STREAM: Final = b"text/event-stream"


def wants_events(scope: Scope) -> bool:
    """A GET that accepts an event stream (the only requests whose answer `EventStreams` may end)."""
    if scope["method"] != "GET":
        return False
    return any(name == b"accept" and EVENT_STREAM in value for name, value in scope["headers"])


def _is_event_stream(message: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.lower().startswith(EVENT_STREAM)
        for name, value in message.get("headers", ())
    )


class EventStreams:
    """The event streams answering GETs now open; `end()` ends them all, and every one that begins after."""

    def __init__(self) -> None:
        self._open: set[asyncio.Event] = set()
        self.ending = False

    def __len__(self) -> int:
        return len(self._open)

    def end(self) -> None:
        self.ending = True
        for ended in list(self._open):
            ended.set()

    async def serve(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """`app` for one GET (see `wants_events`): its answer, when an event stream, ends at `end()`."""
        ended = asyncio.Event()
        started = complete = False

        async def sending(message: Message) -> None:
            nonlocal started, complete
            if message["type"] == "http.response.start":
                if _is_event_stream(message):
                    self._open.add(ended)
                    if self.ending:
                        ended.set()
                await send(message)
                started = True
                return
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        async def receiving() -> Message:
            if ended.is_set():
                return DISCONNECT
            message: asyncio.Future[Any] = asyncio.ensure_future(receive())
            ending = asyncio.ensure_future(ended.wait())
            try:
                await asyncio.wait((message, ending), return_when=asyncio.FIRST_COMPLETED)
            finally:
                ending.cancel()
                if not message.done():
                    message.cancel()
            if message.done() and not message.cancelled():
                return message.result()  # type: ignore[no-any-return]
            return DISCONNECT

        try:
            await app(scope, receiving, sending)
        finally:
            self._open.discard(ended)
        if ended.is_set() and started and not complete:  # the app stopped streaming: the answer's last chunk
            await send({"type": "http.response.body", "body": b"", "more_body": False})
