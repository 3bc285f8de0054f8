"""Forwarding a client's request to the replica that holds what it asks for.

A running call, a session's workspace on disk and an upstream session live in
one process. When a request for one of them reaches another replica, that
replica passes the whole request on, as the client sent it (method, path,
query, headers, body streamed), to the owner's registered address, and
streams the owner's answer back. The owner authenticates and authorizes the
request itself, exactly as if the client had come to it directly.

A forwarded request carries `x-toolplex-forwarded-by`: the receiving replica
serves it itself and never forwards it again, so no request can loop. A
client that sends the header only makes the replica it reached serve it.

Only end-to-end headers cross, either way: the hop-by-hop ones (RFC 9110
section 7.6.1) describe one connection, and `Date` and `Server` of the owner's
answer are its server's own, which the forwarding replica's server adds again
(sent twice, a proxy in front warns of each).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.heap import settle_import
from gateway.http import PassedOnResponse
from gateway.replicas import Replicas
from gateway.wire import WireRequest

if TYPE_CHECKING:
    import httpx

HOP_HEADER = "x-toolplex-forwarded-by"
CONNECT_TIMEOUT_S = 2.0
MAX_CONNECTIONS = 100
# Not passed on: they describe one connection, not the request or the answer (RFC 9110 section 7.6.1),
# as do the headers `Connection` names. The proxy credentials are for a proxy in front of this replica.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-authenticate",
        "proxy-authorization",
    }
)
# Not passed back: the owner's server wrote them, and this replica's server writes its own.
SERVER_GENERATED = frozenset({"date", "server"})
Headers = list[tuple[bytes, bytes]]


def end_to_end(headers: Iterable[tuple[bytes, bytes]], *, dropped: Iterable[str] = ()) -> Headers:
    """The headers meant for the far end, names in lower case (as ASGI wants them): none of the hop-by-hop
    ones, those `Connection` names included, nor those in `dropped` (lower-case names)."""
    headers = list(headers)
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.decode("latin-1").split(",")
    }
    gone = HOP_BY_HOP | named | set(dropped)
    lowered = [(name.lower(), value) for name, value in headers]
    return [(name, value) for name, value in lowered if name.decode("latin-1") not in gone]


class HomeUnreachable(GatewayError):
    """The owner could not be connected to (nothing of the request left this replica): for state that can
    move, the owner is taken as lost (`gateway.homes`)."""


class Forwarder:
    """One pooled client for every replica this one forwards to."""

    def __init__(self, replicas: Replicas, *, timeout_s: float) -> None:
        self.replicas = replicas
        self.timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None

    @staticmethod
    def forwarded(request: Request | WireRequest) -> bool:
        """This request was already passed on by a replica: serve it here."""
        return HOP_HEADER in request.headers

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # The HTTP clients load when a first request is forwarded: a single gateway never forwards.
            import httpx

            from gateway.aiohttp_transport import AiohttpTransport
            from gateway.upstream import CookielessClient

            settle_import()  # they live as long as the process: out of the collector's way
            self._client = CookielessClient(  # one client for every caller: it keeps no cookies
                transport=AiohttpTransport(max_connections=MAX_CONNECTIONS, keepalive_expiry=5.0),
                timeout=httpx.Timeout(self.timeout_s, connect=CONNECT_TIMEOUT_S),
            )
        return self._client

    async def forward(self, request: Request, url: str, *, body: bytes | None = None) -> Response:
        """The owner's answer to this request; `body` when the request's body was already read here.

        Raises `GatewayError` (upstream_unavailable) when the owner cannot be reached.
        """
        import httpx

        dropped = {HOP_HEADER, "content-length"} if body is not None else {HOP_HEADER}
        headers = end_to_end(request.headers.raw, dropped=dropped)
        headers.append((HOP_HEADER.encode(), self.replicas.id.encode()))
        target = url + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        client = self._http()
        outgoing = client.build_request(
            request.method, target, headers=headers, content=body if body is not None else request.stream()
        )
        try:
            answer = await client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)  # the owner never saw it
            raise (HomeUnreachable if unsent else GatewayError)(
                Failure(
                    kind=ErrorKind.UPSTREAM_UNAVAILABLE,
                    message="The gateway replica holding this request's session or call cannot be reached now",
                    developer_message=f"Forwarding to {url} failed: {type(exc).__name__}",
                    can_retry=True,
                    retry_after_ms=1000,
                )
            ) from None
        return PassedOnResponse(
            answer.aiter_raw(),  # as the owner sent it: its Content-Encoding and Content-Length still hold
            status_code=answer.status_code,
            raw_headers=end_to_end(answer.headers.raw, dropped=SERVER_GENERATED),
            close=answer.aclose,
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
