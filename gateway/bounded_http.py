"""uvicorn's httptools protocol with a bound on the request head (request line plus headers).

httptools buffers a header until it is complete and has no size limit of its
own, so a client could make the server hold an arbitrarily large head. Here the
raw bytes received while a head is incomplete are counted (to within one read),
and the exact size is checked once the head is complete: over the bound, the
client gets 431 and the connection is closed. Imported only where httptools is
installed (uvicorn[standard]).
"""

from __future__ import annotations

import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = structlog.get_logger("toolplex.server")

HEADER_OVERHEAD = 4  # ": " and CRLF around each header


class HeadTooLarge(Exception):
    """Raised inside a parser callback to stop parsing a head that is over the bound."""


def bounded_httptools_protocol(max_header_bytes: int) -> type[HttpToolsProtocol]:
    """A protocol class refusing request heads larger than `max_header_bytes`."""

    class BoundedHttpToolsProtocol(HttpToolsProtocol):
        max_head = max_header_bytes

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            self.access_log = False  # the gateway's Edge writes the access line (gateway.access_log)
            self._in_head = True  # the first bytes of a connection are a head
            self._raw_head = 0  # bytes received while the head was incomplete
            self._head = 0  # exact size of the head's parts seen so far
            self._refused = False

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if self._in_head:
                self._raw_head += len(data)
            super().data_received(data)
            if self._in_head and not self._refused and self._raw_head > self.max_head:
                self._refuse()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head, self._head = True, 0

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + HEADER_OVERHEAD)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head, self._raw_head = False, 0
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._in_head = True  # whatever comes next starts the next head
            super().on_message_complete()

        def send_400_response(self, msg: str) -> None:
            if not self._refused:  # the parser error was ours: 431 is already sent
                super().send_400_response(msg)

        def _count(self, size: int) -> None:
            self._head += size
            if self._head > self.max_head:
                self._refuse()
                raise HeadTooLarge

        def _refuse(self) -> None:
            self._refused = True
            log.warning("request_head_too_large", limit=self.max_head, client=self.client and self.client[0])
            body = (
                f'{{"detail":"Request headers are larger than the limit of {self.max_head} bytes '
                f'(server.max_header_bytes)"}}'
            ).encode()
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                b"content-type: application/json\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\n"
                b"connection: close\r\n\r\n" + body
            )
            self.transport.close()

    return BoundedHttpToolsProtocol
