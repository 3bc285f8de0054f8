"""Call routes on raw ASGI: the request read straight from the scope, the answer sent as two messages.

A front's call routes are its hot path. Starlette's `Request` and `Response` each cost a
handful of objects and a header scan per lookup; a call route needs none of that: its
method, its headers by name, its body read once, and one encoded answer. `raw_route`
builds a route whose handler takes a `WireRequest` and returns an `Answer` (or, when it
must stream, any Starlette `Response`), and sends the answer with the same headers, in the
same order, as Starlette's `Response` would (`send_answer`), so nothing on the wire changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request, cookie_parser
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.errors import ErrorKind, GatewayError

JSON = "application/json"


class WireHeaders(dict[str, str]):
    """A request's headers by lower-case name: the first of a repeated header, as Starlette's `Headers.get`."""

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and dict.__contains__(self, key.lower())


class WireRequest:
    """What a call route reads of a request: method, path, headers, and the body, once."""

    __slots__ = ("headers", "method", "path", "receive", "scope")

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.scope = scope
        self.receive = receive
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        headers = WireHeaders()
        for name, value in scope["headers"]:  # ASGI gives names in lower case
            key = name.decode("latin-1")
            if key not in headers:
                dict.__setitem__(headers, key, value.decode("latin-1"))
        self.headers = headers

    @property
    def cookies(self) -> dict[str, str]:
        """The Cookie header's pairs, parsed as Starlette's `Request.cookies` parses them."""
        return cookie_parser(self.headers.get("cookie", ""))

    def starlette(self) -> Request:
        """A Starlette `Request` on the same scope, for what only it does (passing the request on to
        another replica); only while the body is unread."""
        return Request(self.scope, self.receive)

    async def read(self, limit: int) -> bytes:
        """The whole body, refusing more than `limit` bytes without reading them all (413)."""
        declared = self.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_large(limit)
        message = await self.receive()
        if message["type"] == "http.request" and not message.get("more_body", False):
            body: bytes = message.get("body", b"")  # the usual case: the whole body in one message
            if len(body) > limit:
                raise too_large(limit)
            return body
        chunks: list[bytes] = []
        size = 0
        while True:
            if message["type"] != "http.request":  # http.disconnect: the client went away
                raise ClientDisconnect()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
            message = await self.receive()


def too_large(limit: int) -> GatewayError:
    return GatewayError.of(ErrorKind.TOO_LARGE, f"Request body is larger than the limit of {limit} bytes")


class Answer:
    """An answer whose body is known whole: sent as Starlette's `Response(body, status, headers, media_type)`."""

    __slots__ = ("body", "headers", "media_type", "status")

    def __init__(
        self,
        body: bytes,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = JSON,
    ) -> None:
        self.body = body
        self.status = status
        self.headers = headers
        self.media_type = media_type

    async def __call__(self, _scope: Scope, _receive: Receive, send: Send) -> None:
        """An ASGI app, as a Starlette `Response` is: a route that is not raw may answer with one too."""
        await send_answer(send, self)


def json_answer(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Answer:
    """`data` encoded once (orjson; non-string keys allowed), as `gateway.http.json_response` encodes it."""
    return Answer(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS), status, headers)


def raw_headers(answer: Answer) -> list[tuple[bytes, bytes]]:
    """The answer's header list exactly as Starlette's `Response.init_headers` makes it (media types here
    are never `text/`, so no charset is added)."""
    given = answer.headers
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in given.items()] if given else []
    keys = {k for k, _ in raw}
    status = answer.status
    if b"content-length" not in keys and not (status < 200 or status in (204, 304)):
        raw.append((b"content-length", str(len(answer.body)).encode("latin-1")))
    if answer.media_type is not None and b"content-type" not in keys:
        raw.append((b"content-type", answer.media_type.encode("latin-1")))
    return raw


async def send_answer(send: Send, answer: Answer) -> None:
    await send({"type": "http.response.start", "status": answer.status, "headers": raw_headers(answer)})
    await send({"type": "http.response.body", "body": answer.body})


Handler = Callable[[WireRequest], Awaitable[Answer | Response]]


class RawEndpoint:
    """The ASGI app of a raw route (an object, not a function, so that Starlette's `Route` takes it as an
    app and `IndexedRouter.fast` calls it with nothing in between)."""

    __slots__ = ("handler",)

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = await self.handler(WireRequest(scope, receive))
        await answer(scope, receive, send)  # an `Answer`, or a streamed or passed-on `Response`


def raw_route(path: str, handler: Handler, methods: Sequence[str]) -> Route:
    """A route at a fixed `path` whose handler takes a `WireRequest` (see the module docstring)."""
    return Route(path, RawEndpoint(handler), methods=list(methods))
