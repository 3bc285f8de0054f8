"""httpx on aiohttp's connection pool: the gateway's transport to upstream tool servers.

httpx's own pool (httpcore) costs client CPU that grows with concurrent calls (it scans
every waiting request against every connection); aiohttp's connector does not. httpx keeps
its API (requests, auth, redirects, content decoding); this module only moves bytes.

What it guarantees beyond moving bytes is the error mapping `Upstream` relies on to decide
whether a call may be sent again: a failure is a connect error (`ConnectError`,
`ConnectTimeout`, `PoolTimeout`) only when the request cannot have left this process.
Anything after that (the server closing or resetting the connection, a malformed or
truncated answer, a read timeout) is a read, write or protocol error: the call may have
arrived. aiohttp's own retry of idempotent requests on a reused connection is turned off,
so the gateway's retry policy is the only one.
"""

from __future__ import annotations

import asyncio
import inspect
import select
import ssl
import urllib.request
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import aiohttp
import httpx
from yarl import URL

__all__ = ["AiohttpTransport", "mapped", "send", "timeout_of"]

CHUNK_BYTES = 64 * 1024
# aiohttp adds these when a request lacks them (and a Content-Type for any body): httpx
# already sent exactly the headers it means to, so aiohttp adds none.
SKIP_AUTO_HEADERS = ("Accept", "Accept-Encoding", "Content-Type", "User-Agent")
# httpcore accepts a response head of up to 100 KiB; aiohttp's default is 8190 bytes a line.
MAX_HEAD_BYTES = 100 * 1024
MAX_HEADERS = 1024
# aiohttp rounds timeouts above this many seconds up to a whole second; httpx does not round.
NO_CEIL = float("inf")
WRITE_FAILED = "Can not write request body"  # aiohttp's message when sending the body failed
_HAS_MAX_HEADERS = "max_headers" in inspect.signature(aiohttp.ClientSession.__init__).parameters
_SSL_CONTEXTS: dict[bool, ssl.SSLContext] = {}  # httpx's default context, by trust_env: one per process


class _Attempt:
    """Where one request got to: whether a new connection was being opened (not waiting for the pool)."""

    __slots__ = ("connecting",)

    def __init__(self) -> None:
        self.connecting = False


_ATTEMPT: ContextVar[_Attempt | None] = ContextVar("toolplex_aiohttp_attempt", default=None)


class _Connector(aiohttp.TCPConnector):
    """aiohttp's TCP pool, with two things httpcore's pool does:

    - it notes when a request stops waiting for a slot and starts connecting: aiohttp raises
      the same ConnectionTimeoutError for both, httpx tells them apart (PoolTimeout, ConnectTimeout);
    - it never hands out an idle connection the server has already closed (its FIN waiting in
      the socket, not yet seen by the event loop): a request written there fails although the
      server never saw it, where httpcore would have opened a new connection.
    """

    async def connect(self, req: Any, *args: Any, **kwargs: Any) -> Any:
        attempt = _ATTEMPT.get()
        while True:
            if attempt is not None:
                attempt.connecting = False
            connection = await super().connect(req, *args, **kwargs)
            if attempt is None or attempt.connecting or not _readable(connection.transport):
                return connection
            connection.close()  # idle, yet readable: the server closed it (or broke protocol); never reused

    async def _create_connection(self, req: Any, traces: Any, timeout: Any) -> Any:
        attempt = _ATTEMPT.get()
        if attempt is not None:
            attempt.connecting = True
        return await super()._create_connection(req, traces, timeout)


def _readable(transport: asyncio.Transport | None) -> bool:
    """Whether an idle connection's socket has something to read: EOF, a reset, or bytes nobody asked for."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([sock], [], [], 0)[0])
    poll = select.poll()  # not select.select: descriptors above 1023 are common in a busy gateway
    poll.register(sock.fileno(), select.POLLIN)
    return bool(poll.poll(0))


def mapped(exc: BaseException, request: httpx.Request | None, attempt: _Attempt | None) -> httpx.TransportError:
    """The httpx error an aiohttp failure stands for. Connect errors only when nothing was sent.

    `request` is None for a request `Upstream` sent on aiohttp directly (it builds no httpx request):
    the error's class is what its retry policy reads."""
    message = str(exc) or type(exc).__name__
    error: type[httpx.TransportError]
    if isinstance(exc, aiohttp.ConnectionTimeoutError):  # the pool wait and connecting share a clock
        error = httpx.ConnectTimeout if attempt is not None and attempt.connecting else httpx.PoolTimeout
    elif isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):  # sock_read: before the head or mid-body
        error = httpx.ReadTimeout
    elif isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, unreachable, TLS handshake, proxy
        error = httpx.ConnectError
    elif isinstance(exc, aiohttp.ClientHttpProxyError):  # the proxy refused the CONNECT
        error = httpx.ProxyError
    elif isinstance(exc, aiohttp.ClientResponseError | aiohttp.ClientPayloadError):
        error = httpx.RemoteProtocolError  # not HTTP, a malformed head, a body cut short or badly chunked
    elif isinstance(exc, aiohttp.ServerDisconnectedError):  # closed after the request, without an answer
        error = httpx.RemoteProtocolError
    elif isinstance(exc, aiohttp.ClientConnectionResetError) or WRITE_FAILED in message:
        error = httpx.WriteError
    elif isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        error = httpx.UnsupportedProtocol
    elif isinstance(exc, aiohttp.ClientConnectionError | OSError):  # reset after sending, and the like
        error = httpx.ReadError
    else:
        error = httpx.TransportError
    return error(message, request=request)


def timeout_of(pool: float | None, connect: float | None, read: float | None) -> aiohttp.ClientTimeout:
    """httpx's timeouts as aiohttp's: pool bounds the wait for a slot (and a connection opened after that
    wait), connect opening a connection, read each wait for data; the whole call is the caller's to bound."""
    return aiohttp.ClientTimeout(total=None, connect=pool, sock_connect=connect, sock_read=read, ceil_threshold=NO_CEIL)


async def send(
    session: aiohttp.ClientSession,
    method: str,
    url: URL,
    headers: Any,
    body: Any,
    timeout: aiohttp.ClientTimeout,
    proxy: URL | None,
    tls: ssl.SSLContext | bool,
    server_hostname: str | None = None,
    request: httpx.Request | None = None,
    auto_decompress: bool = False,
) -> aiohttp.ClientResponse:
    """One request on `session`, its answer's head read; aiohttp's failures as httpx's errors (`mapped`):
    a connect error only when the request cannot have left this process."""
    attempt = _Attempt()
    token = _ATTEMPT.set(attempt)
    try:
        return await session.request(
            method,
            url,
            headers=headers,
            data=body,
            allow_redirects=False,
            timeout=timeout,
            proxy=proxy,
            ssl=tls,
            server_hostname=server_hostname,
            auto_decompress=auto_decompress,
        )
    except (aiohttp.ClientError, OSError) as exc:
        raise mapped(exc, request, attempt) from exc
    except ValueError as exc:  # aiohttp refused to send it (a control character in a header, say), as h11 would
        raise httpx.LocalProtocolError(str(exc), request=request) from exc
    finally:
        _ATTEMPT.reset(token)


class _ResponseStream(httpx.AsyncByteStream):
    """An aiohttp response's body as httpx reads it; `aclose` gives the connection back
    to the pool when the body was read to its end, and closes it otherwise."""

    __slots__ = ("_request", "_response")

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_chunked(CHUNK_BYTES):
                yield chunk
        except (aiohttp.ClientError, OSError) as exc:
            self._response.close()
            raise mapped(exc, self._request, None) from exc
        except BaseException:  # cancelled, or the reader stopped early: the connection is in an unknown state
            self._response.close()
            raise

    async def aclose(self) -> None:
        response = self._response
        if response.content.at_eof():
            response.release()
        else:
            response.close()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport on one aiohttp session (created in the running loop on first use).

    `max_connections` bounds the pool (None: unbounded); idle connections close after
    `keepalive_expiry` seconds. With `trust_env`, proxies come from the environment
    (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) read once here, and certificates
    from SSL_CERT_FILE/SSL_CERT_DIR, as httpx's own transport does. `verify`: an SSL
    context, True (httpx's default context), or False (no verification).
    Timeouts come from each request (httpx's `timeout=`): connect bounds opening a
    connection, read each wait for data, pool the wait for a free connection (and a
    connection opened after that wait); write has no aiohttp counterpart.
    """

    def __init__(
        self,
        max_connections: int | None = 100,
        keepalive_expiry: float | None = 5.0,
        *,
        verify: ssl.SSLContext | bool = True,
        trust_env: bool = True,
    ) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self.verify = verify
        self.trust_env = trust_env
        self._tls: ssl.SSLContext | bool | None = None if verify is True else verify  # None: httpx's, once needed
        self._proxies = urllib.request.getproxies_environment() if trust_env else {}
        self._proxy_of: dict[tuple[bytes, bytes, int | None], URL | None] = {}
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def session(self) -> aiohttp.ClientSession:
        """The pool's session (opened in the running loop on first use): `Upstream` sends its calls on it directly."""
        return self._session or self._open()

    async def tls(self) -> ssl.SSLContext | bool:
        """What an https request is verified with (`verify`)."""
        return self._tls if self._tls is not None else await self._default_tls()

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("the transport is closed")
        connector = _Connector(
            limit=self.max_connections or 0,  # aiohttp: 0 is unbounded
            keepalive_timeout=self.keepalive_expiry,
            force_close=False,
            timeout_ceil_threshold=NO_CEIL,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # httpx keeps the cookies
            skip_auto_headers=SKIP_AUTO_HEADERS,
            auto_decompress=False,  # httpx decodes Content-Encoding; it gets the raw bytes
            timeout=aiohttp.ClientTimeout(total=None),
            trust_env=False,  # the environment is read once, in __init__ (aiohttp would read it per request)
            max_line_size=MAX_HEAD_BYTES,
            max_field_size=MAX_HEAD_BYTES,
            **({"max_headers": MAX_HEADERS} if _HAS_MAX_HEADERS else {}),
        )
        # aiohttp re-sends an idempotent request once when a reused connection fails;
        # whether anything is sent again is the gateway's decision (Upstream._attempts).
        session._retry_connection = False  # type: ignore[attr-defined]
        self._session = session
        return session

    async def _default_tls(self) -> ssl.SSLContext:
        """httpx's default context (certifi, or SSL_CERT_FILE and SSL_CERT_DIR with trust_env), built
        on first use, off the loop (loading the certificates takes ~50 ms), once per process."""
        context = _SSL_CONTEXTS.get(self.trust_env)
        if context is None:
            context = await asyncio.to_thread(httpx.create_ssl_context, True, None, self.trust_env)
            context = _SSL_CONTEXTS.setdefault(self.trust_env, context)
        self._tls = context
        return context

    def proxy_for(self, url: httpx.URL) -> URL | None:
        """The proxy a request to `url` goes through (the environment's, read once), or None."""
        if not self._proxies:
            return None
        key = (url.raw_scheme, url.raw_host, url.port)
        if key not in self._proxy_of:
            proxy = None
            host = url.host if url.port is None else f"{url.host}:{url.port}"
            if not urllib.request.proxy_bypass_environment(host, self._proxies):
                found = self._proxies.get(url.scheme) or self._proxies.get("all")
                if found:
                    proxy = URL(found if "://" in found else f"http://{found}")
            self._proxy_of[key] = proxy
        return self._proxy_of[key]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session or self._open()
        timeouts = request.extensions.get("timeout") or {}
        encoding = request.headers.encoding
        headers = [(k.decode(encoding), v.decode(encoding)) for k, v in request.headers.raw]
        body: Any
        try:
            body = request.content or None  # in memory (json=, content=bytes): sent with its Content-Length
        except httpx.RequestNotRead:
            body = request.stream  # an async iterable: aiohttp frames it (chunked unless a length is given)
            headers = [(k, v) for k, v in headers if k.lower() != "transfer-encoding"]
        # The caller's deadline (Upstream: asyncio.timeout) bounds the whole call.
        timeout = timeout_of(timeouts.get("pool"), timeouts.get("connect"), timeouts.get("read"))
        tls: ssl.SSLContext | bool = True  # aiohttp's default; unused without TLS
        if request.url.scheme == "https":
            tls = await self.tls()
        url = URL(str(request.url), encoded=True)  # httpx already encoded it: sent as is
        if request.url.userinfo:
            url = url.with_user(None)  # httpx made it an Authorization header; it is not sent in the URL
        response = await send(
            session,
            request.method,
            url,
            headers,
            body,
            timeout,
            self.proxy_for(request.url),
            tls,
            request.extensions.get("sni_hostname"),
            request,
        )
        version = b"HTTP/1.0" if response.version == aiohttp.HttpVersion10 else b"HTTP/1.1"
        return httpx.Response(
            response.status,
            headers=list(response.raw_headers),
            stream=_ResponseStream(response, request),
            extensions={"http_version": version, "reason_phrase": (response.reason or "").encode()},
        )

    async def aclose(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()
