"""The HTTP under the SDK's Streamable HTTP client: what each request met, per request.

The `mcp` SDK speaks Streamable HTTP on an `httpx2` client it is handed. Two of its
habits do not suit a gateway: a connection error while posting one request tears
the whole transport down (every other request in flight is cancelled), and an HTTP
error status reaches the caller only as "Server returned an error response", its
status lost. So the client gets `GuardedTransport`: a failure to connect or a reset
becomes a 502 answer to that one request (which the SDK turns into that request's
JSON-RPC error), a body that breaks off or outgrows the answer limit ends like a
malformed answer, and each request's real fate (status, Retry-After, the transport
error, whether it may have reached the server) is written into the `Exchange` the
caller put in `EXCHANGE` before asking. The SDK sends each request from the caller's
own context (its streams carry the sender's `contextvars`), so the record reaches
the transport that moves that request's bytes.

The caller's own credential headers, when the backend forwards them, ride the
same way: per request, in place of the backend's own, never on the client shared
by every caller. So does the caller a backend with `oauth.on_behalf_of` exchanges
tokens for: `McpAuth` puts each request's OAuth token on it (the backend's own, or
the caller's exchanged one) and answers the upstream's 401 and `insufficient_scope`
(`gateway.oauth.client`); why no token could be had lands in the `Exchange`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx2
import structlog

from gateway.errors import GatewayError
from gateway.oauth.client import Caller, UpstreamOAuth, as_it_is

log = structlog.get_logger("toolplex.mcp")

# Failures that prove the request never reached the server: safe to send again.
NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
SYNTHETIC_STATUS = 502
CREDENTIAL_HEADERS = ("authorization", "x-api-key")  # what forwarding replaces (gateway.auth.client_credentials)


@dataclass
class Exchange:
    """What the HTTP exchange of one MCP request showed; written by `GuardedTransport`, read by the caller."""

    # The caller's own credential headers, sent instead of the backend's (None: the backend's own are sent).
    credentials: dict[str, str] | None = None
    status: int | None = None
    retry_after: str | None = None
    error: str | None = None  # a transport failure, described for people
    sent: bool = True  # False when `error` proves the request never left
    too_large: bool = False
    session: bool = False  # the request carried an Mcp-Session-Id (a 404 then means the session is gone)
    # With `oauth.on_behalf_of`: the caller whose exchanged token the requests carry (None: the backend's own).
    caller: Caller | None = field(default=None, repr=False)
    auth_error: GatewayError | None = None  # why no OAuth token could be had (`McpAuth`)

    @property
    def faulted(self) -> bool:
        """The server did not give a usable answer: a transport failure, a 5xx, or an answer over the limit."""
        return self.error is not None or self.too_large or (self.status is not None and self.status >= 500)


EXCHANGE: ContextVar[Exchange | None] = ContextVar("toolplex_mcp_exchange", default=None)


class BrokenAnswer(httpx2.StreamError):
    """The answer's body broke off or grew over the limit: the SDK reads this as a malformed answer to that request."""


class GuardedStream(httpx2.AsyncByteStream):
    """A response body that fails as `BrokenAnswer`, counted against `limit` bytes (None: unbounded)."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int | None, exchange: Exchange | None) -> None:
        self.inner = inner
        self.limit = limit
        self.exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        try:
            async for chunk in self.inner:
                size += len(chunk)
                if self.limit is not None and size > self.limit:
                    if self.exchange is not None:
                        self.exchange.too_large = True
                    raise BrokenAnswer(f"the answer is larger than {self.limit} bytes")
                yield chunk
        except httpx2.TransportError as exc:
            if self.exchange is not None:
                self.exchange.error = f"the connection broke while the answer arrived ({type(exc).__name__})"
            raise BrokenAnswer(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        await self.inner.aclose()


class GuardedTransport(httpx2.AsyncBaseTransport):
    """See the module docstring; `max_body` bounds each JSON answer (a Server-Sent Event is bounded by the SDK)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_body: int) -> None:
        self.inner = inner
        self.max_body = max_body

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        exchange = EXCHANGE.get() if request.method == "POST" else None  # the GET stream and DELETE are the SDK's own
        if exchange is not None:
            exchange.session = "mcp-session-id" in request.headers
            if exchange.credentials is not None:  # forwarded: the caller's, and none of the backend's own
                for name in CREDENTIAL_HEADERS:
                    request.headers.pop(name, None)
                request.headers.update(exchange.credentials)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            if exchange is not None:
                exchange.error = (
                    f"cannot reach it ({type(exc).__name__})"
                    if isinstance(exc, NOT_SENT)
                    else (f"the connection failed ({type(exc).__name__})")
                )
                exchange.sent = not isinstance(exc, NOT_SENT)
            return httpx2.Response(
                SYNTHETIC_STATUS,
                headers={"content-type": "text/plain"},
                content=f"toolplex: {type(exc).__name__}".encode(),
                request=request,
            )
        if exchange is not None:
            exchange.status = response.status_code
            exchange.retry_after = response.headers.get("retry-after")
        events = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = GuardedStream(response.stream, None if events else self.max_body, exchange)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class McpAuth(httpx2.Auth):
    """The OAuth flow (`UpstreamOAuth.authorize`) on every request of the backend's client: the token of the
    request's `Exchange` caller, or the backend's own. A forwarded request carries the caller's headers and
    none of the backend's tokens. It never raises (the SDK would tear the whole connection down): why no token
    could be had is written into the request's `Exchange`, and the upstream's refusal is the answer."""

    def __init__(self, oauth: UpstreamOAuth) -> None:
        self.oauth = oauth

    def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """`authorize` is itself the flow httpx2 drives (and closes); a forwarded request goes as it is."""
        exchange = EXCHANGE.get()
        if exchange is not None and exchange.credentials is not None:
            return as_it_is(request)

        def noted(error: GatewayError) -> None:
            if exchange is not None:
                exchange.auth_error = error
            log.warning("mcp_oauth_failed", backend=self.oauth.backend, error=error.failure.message)

        return self.oauth.authorize(request, exchange.caller if exchange is not None else None, noted)


def http_client(
    *,
    headers: dict[str, str],
    connect_timeout_s: float,
    write_timeout_s: float,
    max_connections: int,
    max_body: int,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """The `httpx2` client of one backend: its static headers, no read timeout (each request's deadline is the
    clock: a call may run long, a notification stream stays open), and the guard above."""
    inner = httpx2.AsyncHTTPTransport(limits=httpx2.Limits(max_connections=max_connections), retries=0)
    return httpx2.AsyncClient(
        headers=headers,
        # One client serves every caller (and, with forward_authorization, their credentials): it keeps no
        # cookies, so none a server set for one caller's request rides on another's. The session is a header.
        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
        timeout=httpx2.Timeout(connect=connect_timeout_s, read=None, write=write_timeout_s, pool=connect_timeout_s),
        transport=GuardedTransport(inner, max_body),
        follow_redirects=False,
        auth=auth,
    )
