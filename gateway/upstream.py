"""How the gateway talks to upstream tool servers: one pooled client per backend,
timeouts that follow the call's deadline, bounded answers, retries only where
safe, and a circuit breaker so a dead upstream fails fast instead of holding
every caller.

Protocol adapters build requests and read answers; this module moves bytes,
turns transport failures into canonical errors, and counts upstream faults:
transport errors, timeouts (the call's deadline passing included) and 5xx
answers here; answers malformed for a protocol where the adapter finds them
(`json_of`, `Upstream.protocol_fault`). A 2xx or 4xx answer is never a fault
because of its content type: downloads are answers.

Every upstream client keeps no cookies (`CookielessClient`): one pooled client serves every
caller, so a `Set-Cookie` one caller's request earned must not ride on the next caller's. A
request that carries its own `Cookie` header (a per-session one) sends it unchanged.

Most answers are read whole (`request`), bounded by `limits.max_upstream_response_bytes`. A
file is not held in memory: `open` hands the answer over with its body unread, to be passed on
as it arrives, bounded by a limit of the caller's (`StreamedBody`).

A call's request (`request`) goes on aiohttp directly, on the pool of the upstream's httpx client
(`AiohttpTransport.session`): its URL (and proxy, and trace address) is worked out once per path
and kept (`_Target`), its fixed headers once per upstream, and its answer comes back as a `Reply`
(status, headers, body), not as httpx's request and response models. What needs httpx's machinery
goes through the httpx client on the same pool: OAuth (a client `auth=`, or a request's own),
redirects, forms and files, streamed bodies, a base URL with credentials, `open` and `stream`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import dataclasses
import email.utils
import json
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from http.cookiejar import Cookie, CookieJar
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

import aiohttp
import httpx
import orjson
import structlog
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from gateway import tracing
from gateway.aiohttp_transport import CHUNK_BYTES, AiohttpTransport, mapped, send, timeout_of
from gateway.breaker import CircuitBreaker, Permit
from gateway.config.models import LimitsSettings
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import CallContext
from gateway.oauth.client import Caller, StateStoreLike, UpstreamAuth, UpstreamOAuth, caller_of
from gateway.settings import BreakerSettings, UpstreamBackendSettings, UpstreamTimeouts
from gateway.upstream_registry import UPSTREAMS

__all__ = [
    "UPSTREAMS",
    "CircuitBreaker",
    "CookielessClient",
    "Credentials",
    "NoCookies",
    "Reply",
    "Upstream",
    "UpstreamSettings",
    "error_text",
    "failure_for_status",
    "is_json",
    "json_of",
    "path_segment",
    "rest_failure",
    "retry_after_ms",
]

log = structlog.get_logger("toolplex.upstream")

# Failures that prove the request never reached the upstream: safe to send again.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# A cancellation this close to the call's deadline is the deadline passing (timers of the
# dispatcher and of the request fire in the same loop iteration, in either order).
DEADLINE_SLACK_S = 0.05
# 500 and 501 with a JSON body are protocol answers (a ToolServerNode or OpenTool tool failing,
# a method not implemented): the adapter judges them. Every other 5xx is the upstream in trouble.
PROTOCOL_5XX = (500, 501)
VERDICT_KEY = "toolplex.verdict"
MIN_RETRY_AFTER_MS = 1000  # what a caller refused by an open breaker is told to wait, at least
ANSWER_LIMIT = "limits.max_upstream_response_bytes"
Limit = tuple[int, str]  # a bound on an answer's bytes, and the setting that gives it (named in the error)


# The keyword arguments of `Upstream.request` its direct path sends itself (anything else goes through httpx).
DIRECT_KWARGS = frozenset({"json", "content", "headers", "params"})
MAX_TARGETS = 1024  # URLs kept per upstream (paths with arguments in them vary: past this many, built per call)

_TIMEOUTS = UpstreamTimeouts()  # the defaults live in the settings models, once
_BREAKER = BreakerSettings()
_UPSTREAM = UpstreamBackendSettings.model_fields


@dataclass
class UpstreamSettings:
    """One upstream client's settings (`from_config`); defaults for clients built in code come from the models."""

    url: str
    connect_timeout_s: float = _TIMEOUTS.connect
    read_timeout_s: float = _TIMEOUTS.read  # requests without a call deadline only (discovery, sessions)
    total_timeout_s: float = _TIMEOUTS.total  # likewise
    retries: int = _UPSTREAM["retries"].default
    backoff_s: float = _UPSTREAM["retry_backoff_s"].default
    breaker_failures: int = _BREAKER.failures
    breaker_cooldown_s: float = _BREAKER.cooldown_s
    max_connections: int = _UPSTREAM["max_connections"].default
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None  # caps the deadline of every call to this backend (Dispatcher.deadline_for)
    max_response_bytes: int = LimitsSettings().max_upstream_response_bytes

    @classmethod
    def from_config(cls, settings: UpstreamBackendSettings, max_response_bytes: int) -> UpstreamSettings:
        """The client settings of one upstream backend, with the gateway-wide bound on answers."""
        return cls(
            url=settings.url.rstrip("/"),
            connect_timeout_s=settings.timeouts_s.connect,
            read_timeout_s=settings.timeouts_s.read,
            total_timeout_s=settings.timeouts_s.total,
            retries=settings.retries,
            backoff_s=settings.retry_backoff_s,
            breaker_failures=settings.circuit_breaker.failures,
            breaker_cooldown_s=settings.circuit_breaker.cooldown_s,
            max_connections=settings.max_connections,
            headers=dict(settings.headers),
            timeout_s=settings.timeout_s,
            max_response_bytes=max_response_bytes,
        )


@dataclass(eq=False)
class Verdict:
    """What the breaker made of one answer: a fault already, or the success generation to overrule."""

    upstream: int  # id() of the Upstream that judged it
    fault: bool
    generation: int = 0


# The verdict on the last answer the current task received: lets an adapter that finds an
# answer malformed (without holding the response) count it once, never twice.
_LAST_VERDICT: ContextVar[Verdict | None] = ContextVar("toolplex_upstream_verdict", default=None)


class _EmptyJar(CookieJar):
    """A cookie jar nothing enters (not an answer's cookie, not one set by hand), so it is always empty."""

    def set_cookie(self, cookie: Cookie) -> None:
        """Keep nothing."""


class NoCookies(httpx.Cookies):
    """A cookie store that keeps, and so sends, nothing.

    httpx hands every answer to `extract_cookies`; doing nothing there is the cheapest refusal
    (a refusing cookie policy would still parse each answer's headers). The jar stays empty
    whatever is set by hand, so httpx never adds a `Cookie` header of its own.
    """

    def __init__(self) -> None:
        super().__init__(_EmptyJar())

    def extract_cookies(self, response: httpx.Response) -> None:
        """Keep nothing from the answer's `Set-Cookie`: it belongs to the caller whose request earned it."""


class CookielessClient(httpx.AsyncClient):
    """An `httpx.AsyncClient` shared by many callers, so it keeps no cookies: its store is `NoCookies`
    for good (assigning an empty store changes nothing; assigning cookies is refused). A request's
    own `Cookie` header is sent as it is."""

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("cookies"):
            raise ValueError("a CookielessClient keeps no cookies; send a Cookie header per request")
        super().__init__(**kwargs)
        self._cookies = NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        if httpx.Cookies(cookies):
            raise ValueError("a CookielessClient keeps no cookies; send a Cookie header per request")


class Sent(NamedTuple):
    """What a `Reply` answers: its request's method and URL (`url.path`, as httpx's `request.url.path`)."""

    method: str
    url: URL


class ReplyHeaders(Mapping[str, str]):
    """An answer's headers as httpx's `Headers` reads them, over aiohttp's: names case-insensitive and
    lowercase when listed, a repeated header's values joined with ", " (`get_list` gives them apart)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: CIMultiDictProxy[str]) -> None:
        self._raw = raw

    def __getitem__(self, key: str) -> str:
        values = self._raw.getall(key)
        return values[0] if len(values) == 1 else ", ".join(values)

    def get(self, key: str, default: Any = None) -> Any:
        values = self._raw.getall(key, None)
        if values is None:
            return default
        return values[0] if len(values) == 1 else ", ".join(values)

    def get_list(self, key: str, split_commas: bool = False) -> list[str]:
        values = self._raw.getall(key, [])
        if not split_commas:
            return list(values)
        return [item.strip() for value in values for item in value.split(",")]

    def multi_items(self) -> list[tuple[str, str]]:
        return [(k.lower(), v) for k, v in self._raw.items()]

    def __contains__(self, key: object) -> bool:
        return key in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(k.lower() for k in self._raw))

    def __len__(self) -> int:
        return len(dict.fromkeys(k.lower() for k in self._raw))

    def __repr__(self) -> str:
        return f"ReplyHeaders({self.multi_items()!r})"


class Reply:
    """An upstream's answer to `Upstream.request`, read whole: what the adapters read of an answer
    (`status_code`, `headers`, `content`, `text`, `json()`, `reason_phrase`, `extensions`, `request`),
    with the meaning httpx's `Response` gives each."""

    __slots__ = ("content", "extensions", "headers", "num_bytes_downloaded", "reason_phrase", "request", "status_code")

    is_stream_consumed = True

    def __init__(self, status: int, headers: CIMultiDictProxy[str], reason: str, request: Sent) -> None:
        self.status_code = status
        self.headers = ReplyHeaders(headers)
        self.reason_phrase = reason
        self.request = request
        self.content = b""
        self.num_bytes_downloaded = 0
        self.extensions: dict[str, Any] = {}

    @property
    def encoding(self) -> str:
        """The charset of Content-Type when Python knows it, else UTF-8 (httpx's default)."""
        for param in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset":
                charset = value.strip().strip("'\"")
                try:
                    return codecs.lookup(charset).name
                except LookupError:
                    break
        return "utf-8"

    @property
    def text(self) -> str:
        return self.content.decode(self.encoding, errors="replace") if self.content else ""

    def json(self) -> Any:
        """The body as JSON, as httpx's `json()` reads it (`json.loads`; orjson first, for speed)."""
        try:
            return orjson.loads(self.content)
        except orjson.JSONDecodeError:  # UTF-16, NaN, integers past 64 bits: json.loads decides, as before
            return json.loads(self.content)

    async def aread(self) -> bytes:
        return self.content

    async def aclose(self) -> None:
        """Nothing to close: the body was read whole and the connection given back."""


@dataclass(frozen=True, slots=True)
class _Target:
    """Where the direct path sends a request for one path, worked out once (`Upstream._target`)."""

    url: URL  # absolute, encoded as httpx encodes it
    proxy: URL | None  # the environment's, for this scheme, host and port
    https: bool
    address: str  # scheme://host:port/path, for the trace (`tracing.upstream_address`)


@dataclass(slots=True)
class _Prepared:
    """One call's request for the direct path, prepared once for every attempt."""

    method: str
    target: _Target
    headers: CIMultiDict[str]
    body: bytes | None


def _json_body(value: Any) -> bytes:
    """`json=` as httpx writes it (compact, UTF-8); orjson first, json.dumps (as httpx) for what orjson refuses."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:  # an integer past 64 bits, a key that is no string, ...
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class Upstream:
    """One backend's connection pool, breaker, answer bound and retry policy."""

    def __init__(
        self,
        name: str,
        settings: UpstreamSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        auth: httpx.Auth | None = None,
    ) -> None:
        """`auth`: what requests that name no `auth=` of their own carry (`Credentials.auth(None)`: OAuth tokens)."""
        self.name = name
        self.settings = settings
        self.breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s)
        if transport is None:  # httpx on aiohttp's pool: httpcore's costs CPU per call that grows with concurrency
            transport = AiohttpTransport(
                max_connections=settings.max_connections,
                keepalive_expiry=httpx.Limits().keepalive_expiry,  # httpx's default: idle connections close after 5 s
            )
        # Calls go on that pool directly (`_direct`), unless every request carries OAuth tokens (httpx's auth
        # flow) or the transport is another one (a test's): then httpx carries them.
        self._pool = transport if isinstance(transport, AiohttpTransport) else None
        # One client for every caller: it keeps no cookies (one caller's upstream session is not the next one's).
        self.client: httpx.AsyncClient = CookielessClient(  # closing it closes the transport (httpx's aclose)
            base_url=settings.url,
            timeout=httpx.Timeout(
                settings.total_timeout_s, connect=settings.connect_timeout_s, read=settings.read_timeout_s
            ),
            headers=settings.headers,
            auth=auth,
            follow_redirects=False,
            transport=transport,
            event_hooks=tracing.upstream_hooks(),  # traceparent on calls' requests; none with tracing off
        )
        base = self.client.base_url
        self._direct = self._pool is not None and auth is None and not base.userinfo
        # What httpx sends on every request (Accept, Accept-Encoding, Connection, User-Agent, the backend's
        # `headers`), as it spells them; a request's own headers replace them name by name.
        self._fixed = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in self.client.headers.raw)
        self._targets: dict[str, _Target | None] = {}
        # Without a call deadline: httpx's client timeout (pool and connect bound by total and connect, reads by read).
        self._default_timeout = timeout_of(
            settings.total_timeout_s, settings.connect_timeout_s, settings.read_timeout_s
        )
        UPSTREAMS.add(self)

    def unavailable(self, message: str, **fields: Any) -> GatewayError:
        fields.setdefault("can_retry", True)
        return GatewayError.of(
            ErrorKind.UPSTREAM_UNAVAILABLE, f"Upstream {self.name!r} is unavailable: {message}", **fields
        )

    def protocol_fault(self, message: str, response: httpx.Response | None = None, **fields: Any) -> GatewayError:
        """Count an answer malformed for the adapter's protocol against the breaker; the error to raise.

        The answer is `response`, or else the last one this task received from this upstream; it
        counts once, however many times it is reported.
        """
        verdict = response.extensions.get(VERDICT_KEY) if response is not None else _LAST_VERDICT.get()
        mine = verdict if isinstance(verdict, Verdict) and verdict.upstream == id(self) else None
        self._fault(message, mine)
        return self.unavailable(message, **fields)

    def _fault(self, reason: str, verdict: Verdict | None = None) -> None:
        """Count one upstream fault; an answer already judged (`verdict`) counts at most once."""
        if verdict is not None:
            if verdict.fault:
                return
            verdict.fault = True
            self.breaker.overrule(verdict.generation)
        else:
            self.breaker.failure()
        log.info("upstream_fault", backend=self.name, reason=reason, breaker=self.breaker.state)

    def _admit(self, budget: float) -> Permit:
        permit = self.breaker.acquire(lease=budget + 1.0)
        if permit is None:
            wait_ms = max(MIN_RETRY_AFTER_MS, int(self.breaker.retry_after_s() * 1000))
            raise self.unavailable("circuit open after repeated failures", retry_after_ms=wait_ms)
        return permit

    def _timeout(self, remaining: float | None) -> httpx.Timeout:
        """The call's remaining deadline is the only clock for reads; connecting keeps its own bound."""
        if remaining is None:
            return self.client.timeout
        return httpx.Timeout(remaining, connect=min(self.settings.connect_timeout_s, remaining))

    def _deadline_error(self) -> GatewayError:
        return GatewayError.of(
            ErrorKind.DEADLINE, f"Upstream {self.name!r} did not answer before the deadline", can_retry=True
        )

    def _cancelled(self, deadline: float | None, verdict: Verdict | None = None) -> None:
        """Our caller cancelled us: at the deadline that is a timeout (a fault); else it says nothing."""
        if deadline is not None and time.monotonic() >= deadline - DEADLINE_SLACK_S:
            self._fault("no answer before the call's deadline", verdict)

    def _judge(self, response: httpx.Response | Reply) -> Verdict:
        """Count an answer's status: 5xx is a fault, except a protocol's own 500/501 with a JSON body."""
        status = response.status_code
        if status >= 500 and not (status in PROTOCOL_5XX and is_json(response)):
            self._fault(f"HTTP {status}")
            verdict = Verdict(id(self), fault=True)
        else:
            verdict = Verdict(id(self), fault=False, generation=self.breaker.success())
        response.extensions[VERDICT_KEY] = verdict
        _LAST_VERDICT.set(verdict)
        return verdict

    def _too_large(self, response: httpx.Response, limit: Limit | None = None) -> GatewayError:
        """The error for an answer past `limit` (default: `limits.max_upstream_response_bytes`)."""
        limit_bytes, setting = limit or (self.settings.max_response_bytes, ANSWER_LIMIT)
        return GatewayError.of(
            ErrorKind.UPSTREAM_UNAVAILABLE,
            f"Upstream {self.name!r} answered more than {limit_bytes} bytes ({setting})",
            developer_message=f"{response.request.method} {response.request.url.path} answered HTTP "
            f"{response.status_code}; reading stopped at the limit",
            details={"limit_bytes": limit_bytes, "bytes_read": response.num_bytes_downloaded},
        )

    def _refuse_declared(self, response: httpx.Response, limit: Limit | None = None) -> None:
        """An answer that says up front it is larger than `limit` is refused before a byte of it is read."""
        limit_bytes = limit[0] if limit is not None else self.settings.max_response_bytes
        declared = response.headers.get("content-length", "")
        if response.request.method != "HEAD" and declared.isdigit() and int(declared) > limit_bytes:
            raise self._too_large(response, limit)

    async def _read_bounded(self, response: httpx.Response) -> None:
        """Read the body as it arrives; stop at the limit instead of buffering more."""
        limit = self.settings.max_response_bytes
        self._refuse_declared(response)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise self._too_large(response)
            chunks.append(chunk)
        response._content = b"".join(chunks)  # what httpx's own aread() stores

    def _target(self, path: str) -> _Target | None:
        """The URL, proxy and trace address of requests to `path` (merged with the base URL as httpx merges
        it), kept per path; None where httpx must send it (credentials in the URL)."""
        try:
            return self._targets[path]
        except KeyError:
            pass
        url = httpx.URL(path)
        if url.is_relative_url:
            base = self.client.base_url
            url = base.copy_with(raw_path=base.raw_path + url.raw_path.lstrip(b"/"))
        target = None
        if not url.userinfo and url.scheme in ("http", "https"):
            assert self._pool is not None
            address = tracing.upstream_address(url)
            target = _Target(URL(str(url), encoded=True), self._pool.proxy_for(url), url.scheme == "https", address)
        if len(self._targets) < MAX_TARGETS:
            self._targets[path] = target
        return target

    def _prepare(self, method: str, path: str, kwargs: dict[str, Any]) -> _Prepared | None:
        """A call's request for the direct path: None when httpx must send it (see the module's doc)."""
        if not self._direct or not kwargs.keys() <= DIRECT_KWARGS:
            return None
        content, payload = kwargs.get("content"), kwargs.get("json")
        if not isinstance(content, bytes | str | None) or (content is not None and payload is not None):
            return None
        params = kwargs.get("params")
        if params:
            if "?" in path:
                return None  # httpx merges the two queries
            path = f"{path}?{httpx.QueryParams(params)}"
        target = self._target(path)
        if target is None:
            return None
        headers = self._fixed.copy()
        if payload is not None:
            body: bytes | None = _json_body(payload)
            headers["Content-Type"] = "application/json"
        else:
            body = content.encode() if isinstance(content, str) else content
        own = kwargs.get("headers")
        if own:
            headers.update(own)
        tracing.inject_upstream(method, target.address, headers)
        return _Prepared(method, target, headers, body)

    async def _fetch(self, prepared: _Prepared, remaining: float | None) -> Reply:
        """One request of the direct path, its answer read whole within the answer limit."""
        pool = self._pool
        assert pool is not None
        if remaining is None:
            timeout = self._default_timeout
        else:  # the call's remaining deadline is the only clock for reads; connecting keeps its own bound
            timeout = timeout_of(remaining, min(self.settings.connect_timeout_s, remaining), remaining)
        target = prepared.target
        response = await send(
            pool.session(),
            prepared.method,
            target.url,
            prepared.headers,
            prepared.body,
            timeout,
            target.proxy,
            await pool.tls() if target.https else True,
            auto_decompress=True,  # Accept-Encoding is httpx's (gzip, deflate): decoded as httpx decoded it
        )
        try:
            reply = Reply(response.status, response.headers, response.reason or "", Sent(prepared.method, target.url))
            await self._read_reply(response, reply)
        except BaseException:
            response.close()
            raise
        response.release()
        return reply

    async def _read_reply(self, response: aiohttp.ClientResponse, reply: Reply) -> None:
        """Read the body as it arrives; stop at the limit instead of buffering more (`_read_bounded`)."""
        limit = self.settings.max_response_bytes
        self._refuse_declared(reply)
        try:
            if reply.headers.get("content-length", "").isdigit() and "content-encoding" not in reply.headers:
                reply.content = await response.read()  # its declared size, within the limit
                reply.num_bytes_downloaded = len(reply.content)
                return
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                size += len(chunk)
                reply.num_bytes_downloaded = size
                if size > limit:
                    raise self._too_large(reply)
                chunks.append(chunk)
        except (aiohttp.ClientError, OSError) as exc:  # cut short, reset, stalled: the call may have arrived
            raise mapped(exc, None, None) from exc
        reply.content = b"".join(chunks)

    async def _exchange(
        self, method: str, path: str, timeout: httpx.Timeout, kwargs: dict[str, Any], limit: Limit | None
    ) -> httpx.Response:
        """One request; its answer read whole, or (with a `limit`: `open`) only its head, the body left unread."""
        send = {k: kwargs.pop(k) for k in ("auth", "follow_redirects") if k in kwargs}
        request = self.client.build_request(method, path, timeout=timeout, **kwargs)
        response = await self.client.send(request, stream=True, **send)
        try:
            if limit is None:
                await self._read_bounded(response)
            else:
                self._refuse_declared(response, limit)
        except BaseException:
            await response.aclose()
            raise
        if limit is None:
            await response.aclose()
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        deadline: float | None = None,
        idempotent: bool = False,
        expect_json: bool = True,
        **kwargs: Any,
    ) -> httpx.Response | Reply:
        """Send one request. `deadline` is an absolute time.monotonic(); it is the only clock for reading.

        Retries: any failure when `idempotent` (discovery), otherwise only failures that
        prove the request was never sent. An open breaker refuses calls, not discovery.
        A tool call that may have arrived is never re-sent.
        `expect_json` is kept for existing callers and no longer judges anything: whether a
        body is malformed is the protocol adapter's call (`json_of`, `protocol_fault`).
        The answer is a `Reply` when the request went on aiohttp directly (the module's doc says when),
        else httpx's `Response`; both read whole, both read alike.
        """
        del expect_json
        return await self._send(method, path, deadline, idempotent, kwargs, None)

    async def open(
        self, method: str, path: str, *, limit: Limit, deadline: float | None = None, **kwargs: Any
    ) -> httpx.Response:
        """Send one request as `request` does (deadline, breaker, retries only of what was never sent), but
        hand the answer back once its head arrived, its body unread: a file to pass on as it arrives.

        The body (`aiter_bytes`, `aiter_raw`) is a `StreamedBody`: at most `limit` (bytes, and the setting
        that says so, for the error) however large the answer-wide limit is (an answer that declares more is
        refused before reading), read by `deadline`, and a failure while reading it is an upstream fault.
        The caller must close the answer (`aclose`) however it ends; `read` reads it whole instead.
        """
        return await self._send(method, path, deadline, False, kwargs, limit)

    async def read(self, response: httpx.Response) -> None:
        """Read an answer of `open` whole (an error answer to look into), within the answer limit; closes it."""
        try:
            await self._read_bounded(response)
        finally:
            await response.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        deadline: float | None,
        idempotent: bool,
        kwargs: dict[str, Any],
        limit: Limit | None,
    ) -> httpx.Response:
        budget = self.settings.total_timeout_s if deadline is None else max(0.0, deadline - time.monotonic())
        # Discovery (idempotent, once an interval) is never held back by an open breaker: it is how a
        # recovered upstream is noticed, and its success closes the breaker for calls too.
        permit = None if idempotent else self._admit(budget)
        try:
            response: Any = await self._attempts(method, path, deadline, idempotent, kwargs, limit)
        except asyncio.CancelledError:
            self._cancelled(deadline)
            raise
        finally:
            self.breaker.release(permit)  # an open answer's verdict is in: its body needs no permit
        if limit is not None:
            response.stream = StreamedBody(self, response, limit, deadline)
        return response

    async def _attempts(
        self,
        method: str,
        path: str,
        deadline: float | None,
        idempotent: bool,
        kwargs: dict[str, Any],
        limit: Limit | None,
    ) -> httpx.Response | Reply:
        prepared = self._prepare(method, path, kwargs) if limit is None else None  # once for every attempt
        attempts = 1 + max(0, self.settings.retries)
        for attempt in range(attempts):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise GatewayError.of(ErrorKind.DEADLINE, f"Deadline passed before upstream {self.name!r} answered")
            last = attempt + 1 >= attempts
            try:
                response = await self._timed(method, path, remaining, kwargs, limit, prepared)
            except NOT_SENT as exc:
                self._fault(f"cannot connect ({type(exc).__name__})")
                if not last and self.breaker.state == "closed":
                    await self._backoff(attempt, deadline)
                    continue
                raise self.unavailable(f"cannot connect ({type(exc).__name__})") from None
            except (TimeoutError, httpx.TimeoutException):
                self._fault("no answer in time")
                if deadline is not None and time.monotonic() >= deadline - DEADLINE_SLACK_S:
                    raise self._deadline_error() from None
                if idempotent and not last and self.breaker.state == "closed":
                    await self._backoff(attempt, deadline)
                    continue
                raise self.unavailable("it did not answer in time") from None
            except httpx.HTTPError as exc:
                self._fault(f"the connection failed ({type(exc).__name__})")
                if idempotent and not last and self.breaker.state == "closed":
                    await self._backoff(attempt, deadline)
                    continue
                raise self.unavailable(f"the connection failed ({type(exc).__name__})") from None
            except GatewayError:
                self.breaker.success()  # too large: the upstream is alive and answering, just too much
                raise
            self._judge(response)
            return response
        raise self.unavailable("no attempt left")  # pragma: no cover - the loop always returns or raises

    async def _timed(
        self,
        method: str,
        path: str,
        remaining: float | None,
        kwargs: dict[str, Any],
        limit: Limit | None,
        prepared: _Prepared | None = None,
    ) -> httpx.Response | Reply:
        """One exchange within the time left; an answer opened just as the time ran out is closed, not leaked."""
        if prepared is not None:  # read whole before the time is up, or closed by `_fetch`
            async with asyncio.timeout(remaining if remaining is not None else self.settings.total_timeout_s):
                return await self._fetch(prepared, remaining)
        response: httpx.Response | None = None
        try:
            async with asyncio.timeout(remaining if remaining is not None else self.settings.total_timeout_s):
                response = await self._exchange(method, path, self._timeout(remaining), dict(kwargs), limit)
        except BaseException:
            if response is not None:
                await response.aclose()
            raise
        return response

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, path: str, *, deadline: float | None = None, **kwargs: Any
    ) -> AsyncIterator[httpx.Response]:
        """A response whose body is read as it arrives (Server-Sent Events); never retried.

        Each event of an event stream (the bytes between blank lines, so each line too) is
        bounded by the answer limit; any other body is bounded whole.
        """
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        permit = self._admit(self.settings.total_timeout_s if remaining is None else remaining)
        verdict: Verdict | None = None  # once the head arrived, a fault in the body overrules its success
        try:
            async with self.client.stream(method, path, timeout=self._timeout(remaining), **kwargs) as response:
                verdict = self._judge(response)
                events = response.headers.get("content-type", "").startswith("text/event-stream")
                response.stream = BoundedStream(
                    response.stream, self.settings.max_response_bytes, lambda: self._too_large(response), events
                )
                yield response
        except NOT_SENT as exc:
            self._fault(f"cannot connect ({type(exc).__name__})")
            raise self.unavailable(f"cannot connect ({type(exc).__name__})") from None
        except httpx.TimeoutException:
            self._fault("no answer in time", verdict)
            raise self._deadline_error() from None
        except httpx.HTTPError as exc:
            self._fault(f"the connection failed ({type(exc).__name__})", verdict)
            raise self.unavailable(f"the connection failed ({type(exc).__name__})") from None
        except asyncio.CancelledError:
            self._cancelled(deadline, verdict)
            raise
        finally:
            self.breaker.release(permit)

    async def _backoff(self, attempt: int, deadline: float | None) -> None:
        delay = self.settings.backoff_s * (2**attempt) * (0.5 + random.random())
        if deadline is not None:
            delay = min(delay, max(0.0, deadline - time.monotonic()))
        await asyncio.sleep(delay)

    async def close(self) -> None:
        UPSTREAMS.remove(self)
        await self.client.aclose()


class BoundedStream(httpx.AsyncByteStream):
    """A streamed body that fails once it exceeds `limit` bytes; with `events`, once one
    Server-Sent Event (the bytes since the last blank line) does."""

    BOUNDARIES = (b"\r\n\r\n", b"\n\n", b"\r\r")

    def __init__(
        self, inner: httpx.AsyncByteStream, limit: int, too_large: Callable[[], Exception], events: bool
    ) -> None:
        self.inner = inner
        self.limit = limit
        self.too_large = too_large
        self.events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = 0  # bytes of the event (or body) being received
        tail = b""  # the last bytes seen, so a boundary split across chunks is still found
        async for chunk in self.inner:
            window = tail + chunk
            ends = [window.rfind(b) + len(b) for b in self.BOUNDARIES if b in window] if self.events else []
            pending = len(window) - max(ends) if ends else pending + len(chunk)
            if pending > self.limit:
                raise self.too_large()
            tail = window[-3:]
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class StreamedBody(httpx.AsyncByteStream):
    """The body of an answer of `Upstream.open`, read as the caller passes it on.

    It holds no more than a chunk at a time. It stops (an `upstream_unavailable` error) past `limit`
    bytes; each chunk must arrive by the call's deadline (else `deadline_exceeded`), so a trickling
    upstream cannot hold a caller past it. A failure while reading (a reset, a body cut short, the
    deadline) is an upstream fault that overrules the success its head was counted as; a reader that
    stops early (its client went away) says nothing about the upstream.
    """

    def __init__(self, upstream: Upstream, response: httpx.Response, limit: Limit, deadline: float | None) -> None:
        self.upstream = upstream
        self.response = response
        self.inner = response.stream
        self.limit = limit
        self.deadline = deadline

    def _verdict(self) -> Verdict | None:
        verdict = self.response.extensions.get(VERDICT_KEY)
        return verdict if isinstance(verdict, Verdict) else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        upstream = self.upstream
        chunks = aiter(self.inner)
        size = 0
        while True:
            remaining = upstream.settings.read_timeout_s if self.deadline is None else self.deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(0.0, remaining)):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except (TimeoutError, httpx.TimeoutException):
                upstream._fault("the answer's body stalled", self._verdict())
                raise upstream._deadline_error() from None
            except httpx.HTTPError as exc:
                upstream._fault(f"the answer's body failed ({type(exc).__name__})", self._verdict())
                raise upstream.unavailable(f"its answer was cut short ({type(exc).__name__})") from None
            size += len(chunk)
            if size > self.limit[0]:
                raise upstream._too_large(self.response, self.limit)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def is_json(response: httpx.Response) -> bool:
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def json_of(upstream: Upstream, response: httpx.Response) -> Any:
    """The body as JSON, or an UPSTREAM_UNAVAILABLE error that says what came back instead.

    The adapter calling this needs JSON, so a 2xx or 5xx answer that is not JSON is malformed
    for its protocol and counts against the breaker; a 4xx one (a proxy's error page) does not.
    """
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "no content type")
        snippet = response.text[:80].replace("\n", " ")
        message = f"it answered HTTP {response.status_code} with {kind}, not JSON"
        if 400 <= response.status_code < 500:
            raise upstream.unavailable(message, developer_message=f"first bytes: {snippet!r}") from None
        raise upstream.protocol_fault(message, response, developer_message=f"first bytes: {snippet!r}") from None


def retry_after_ms(headers: Mapping[str, str]) -> int | None:
    """An upstream's `Retry-After` (seconds or an HTTP date) in milliseconds, or None."""
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    if value.isdigit():
        return int(value) * 1000
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0, int((when.timestamp() - time.time()) * 1000))


# What an upstream's HTTP status means for the caller, whatever protocol both sides speak.
STATUS_KINDS: dict[int, ErrorKind] = {
    400: ErrorKind.INVALID_ARGUMENTS,
    401: ErrorKind.UNAUTHENTICATED,
    403: ErrorKind.FORBIDDEN,
    404: ErrorKind.NOT_FOUND,
    422: ErrorKind.INVALID_ARGUMENTS,
    429: ErrorKind.RATE_LIMITED,
}


def failure_for_status(
    upstream: str,
    status: int,
    message: Any,
    headers: Mapping[str, str] | None = None,
    *,
    client_credentials: bool = False,
    **fields: Any,
) -> Failure | None:
    """The canonical failure an upstream's error status stands for; None for a success (< 400).

    400/422 invalid arguments, 401 unauthenticated, 403 forbidden, 404 not found,
    429 rate limited (its Retry-After carried), any other 4xx malformed, 5xx upstream failed.
    A 401 means "unauthenticated" only when the backend sends the client's own credentials
    (`client_credentials`: `forward_authorization: true`); otherwise the upstream refused the
    gateway's configured credentials, which no client can fix: upstream unavailable.
    `message` is what the upstream said (an object is given as JSON, never as a Python repr).
    """
    if status < 400:
        return None
    text = message if isinstance(message, str) else orjson.dumps(message).decode()
    if status == 401 and not client_credentials:
        return Failure(
            kind=ErrorKind.UPSTREAM_UNAVAILABLE,
            message=f"Upstream {upstream!r} answered HTTP 401 to the gateway's own credentials: {text}",
            **{
                "developer_message": "Check the backend's configured credentials (api_key, oauth, headers, jwt)",
                **fields,
            },
        )
    kind = STATUS_KINDS.get(status)
    if kind is None:
        kind = ErrorKind.UPSTREAM_UNAVAILABLE if status >= 500 else ErrorKind.MALFORMED
    if kind is ErrorKind.RATE_LIMITED:
        fields.setdefault("retry_after_ms", retry_after_ms(headers or {}))
        fields.setdefault("can_retry", True)
    if kind is ErrorKind.UPSTREAM_UNAVAILABLE:
        fields.setdefault("can_retry", True)
    return Failure(kind=kind, message=f"Upstream {upstream!r} answered HTTP {status}: {text}", **fields)


_DOT_SEGMENTS = frozenset({".", ".."})
_UNQUOTE_ROUNDS = 4  # a value encoded more often than this is refused rather than decoded further
MAX_ERROR_TEXT = 500  # characters of a REST upstream's error body carried in the message


def path_segment(name: str, value: Any) -> str:
    """One path parameter of a REST call as one path segment, never a step elsewhere.

    `/` is percent-encoded (quote with nothing safe), and a value that is, or decodes to,
    an empty segment or a dot segment (`.`, `..`, `%2e%2e`, `%252e%252e`, `a/../b`) is
    refused: an upstream or a proxy in between that decodes and normalises the path would
    otherwise walk out of the configured path.
    """
    text = str(value)
    decoded = text
    for _ in range(_UNQUOTE_ROUNDS):
        step = unquote(decoded)
        if step == decoded:
            break
        decoded = step
    else:
        if unquote(decoded) != decoded:
            raise _bad_segment(name, text, "it is percent-encoded too many times")
    parts = re.split(r"[/\\]", decoded)
    if not text:
        raise _bad_segment(name, text, "it is empty")
    if any(part in _DOT_SEGMENTS for part in parts):
        raise _bad_segment(name, text, "it would leave the configured path")
    return quote(text, safe="")


def _bad_segment(name: str, value: str, why: str) -> GatewayError:
    shown = value if len(value) <= 80 else value[:80] + "..."
    message = f"{name}: {shown!r} cannot be used as a path segment: {why}"
    return GatewayError.of(ErrorKind.INVALID_ARGUMENTS, message, parameter_errors={name: message})


def error_text(response: httpx.Response) -> str:
    """What a REST upstream's error answer says: an RFC 9457 problem's title and detail, else its
    `message`/`detail`/`error`, else the body; JSON, never a Python repr; at most MAX_ERROR_TEXT characters."""
    value: Any = response.text
    if "json" in response.headers.get("content-type", "") and response.content:
        try:
            value = response.json()
        except ValueError:
            value = response.text
    if isinstance(value, dict):
        problem = response.headers.get("content-type", "").startswith("application/problem+json")
        title, detail = value.get("title"), value.get("detail")
        if problem and isinstance(title, str) and isinstance(detail, str) and title != detail:
            value = f"{title}: {detail}"
        else:
            said = value.get("message") or value.get("detail") or value.get("error") or (title if problem else None)
            value = said if said else value
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= MAX_ERROR_TEXT else text[:MAX_ERROR_TEXT] + "..."


def rest_failure(upstream: str, response: httpx.Response, *, forwarded: bool, developer_message: str) -> Failure:
    """A REST endpoint's error answer as the canonical failure its status stands for (`failure_for_status`):
    400/422 invalid arguments, 401, 403, 404, 429 (Retry-After carried), 5xx upstream unavailable; any other
    4xx is the tool refusing (tool failed: our request was well-formed). An RFC 9457 problem object is kept
    whole in the failure's details (`problem`)."""
    status = response.status_code
    problem = error_body(response) if "problem+json" in response.headers.get("content-type", "") else None
    failure = failure_for_status(
        upstream,
        status,
        error_text(response),
        response.headers,
        client_credentials=forwarded,
        developer_message=developer_message,
        **({"details": {"problem": problem}} if isinstance(problem, dict) else {}),
    )
    assert failure is not None  # status >= 400
    if failure.kind is ErrorKind.MALFORMED:
        failure = dataclasses.replace(failure, kind=ErrorKind.TOOL_FAILED)
    return failure


def error_body(response: httpx.Response) -> Any:
    """The JSON body of an error answer, or None when it has none (not JSON, or broken JSON)."""
    if not is_json(response):
        return None
    try:
        return response.json()
    except ValueError:
        return None


def plain_message(response: httpx.Response) -> str:
    """What an error answer without a JSON body says: its text (never an HTML page), else the reason phrase."""
    if response.text and not response.headers.get("content-type", "").startswith("text/html"):
        return response.text[:200]
    return response.reason_phrase or "no message"


@dataclass(frozen=True)
class Credentials:
    """What a backend sends upstream: its own bearer key, OAuth tokens (its own, or one exchanged for each
    caller), or the client's own credential headers (`forward_authorization`). The one place that decides it,
    for every backend and every caller: headers (`own`, `for_call`) and the OAuth hook of each request (`auth`)."""

    api_key: str | None = None
    forward_authorization: bool = False
    oauth: UpstreamOAuth | None = None

    @classmethod
    def of(
        cls, api_key: str | None, settings: UpstreamBackendSettings, store: StateStoreLike | None = None
    ) -> Credentials:
        """A backend's credentials: its `api_key` (empty: none), its `oauth` (tokens shared through `store`)
        and its `forward_authorization`."""
        oauth = None
        if settings.oauth is not None and settings.url:
            oauth = UpstreamOAuth(settings.name, settings.oauth, settings.url, store=store)
        return cls(api_key or None, settings.forward_authorization, oauth)

    @property
    def on_behalf(self) -> bool:
        """Each authenticated caller's requests carry a token exchanged for it (`oauth.on_behalf_of`)."""
        return self.oauth is not None and self.oauth.settings.on_behalf_of == "token_exchange"

    def own(self) -> dict[str, str]:
        """Headers of requests made for the gateway itself (discovery); OAuth tokens ride on `auth` instead."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def for_call(self, context: CallContext | None) -> dict[str, str]:
        """Headers of a caller's request: with `forward_authorization`, the client's own credential headers
        (Authorization, X-API-Key, as it sent them) and none of the backend's, so a client that sent none
        sends none (the gateway's key never stands in for a caller); else the backend's own key, and
        nothing of the client's."""
        if self.forward_authorization and context is not None:
            return dict(context.client_credentials)
        return self.own()

    def caller(self, context: CallContext | None) -> Caller | None:
        """Whom a request's token is exchanged for: None for the backend's own requests (no caller, or no
        `on_behalf_of`); an authenticated caller's principal and bearer token; an unauthenticated caller
        of a backend that acts on behalf of its callers is refused (never served with the backend's token)."""
        if context is None or not self.on_behalf:
            return None
        found = caller_of(context.principal.name if context.principal else None, context.client_credentials)
        if found is None:
            raise GatewayError.of(
                ErrorKind.UNAUTHENTICATED,
                f"Upstream {self.oauth.backend if self.oauth else ''!r} acts on behalf of its callers "
                "(oauth.on_behalf_of: token_exchange): the call needs an authenticated caller with a bearer token",
            )
        return found

    def auth(self, context: CallContext | None) -> httpx.Auth | None:
        """The httpx hook of a request for `context` (None: the gateway's own); None without `oauth`.

        A forwarded call carries the caller's own headers and no token of the backend's (a no-op hook, which
        also keeps the client's default off it)."""
        if self.oauth is None:
            return None
        if context is not None and self.forward_authorization:
            return httpx.Auth()
        return UpstreamAuth(self.oauth, self.caller(context))

    async def close(self) -> None:
        if self.oauth is not None:
            await self.oauth.close()
