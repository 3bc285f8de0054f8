"""How the gateway talks to upstream tool servers: one pooled client per backend,
timeouts that never outlast the call's deadline, retries only where safe, and a
circuit breaker so a dead upstream fails fast instead of holding every caller.

Protocol adapters build requests and read answers; this module only moves bytes
and turns transport failures into canonical errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import structlog

from gateway.errors import ErrorKind, Failure, GatewayError

log = structlog.get_logger("toolplex.upstream")

# Failures that prove the request never reached the upstream: safe to send again.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass
class UpstreamSettings:
    url: str
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    total_timeout_s: float = 60.0
    retries: int = 2
    backoff_s: float = 0.2
    breaker_failures: int = 5
    breaker_cooldown_s: float = 30.0
    max_connections: int = 50
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, settings: Mapping[str, Any]) -> UpstreamSettings:
        timeouts = settings.get("timeouts_s") or {}
        breaker = settings.get("circuit_breaker") or {}
        return cls(
            url=settings["url"].rstrip("/"),
            connect_timeout_s=float(timeouts.get("connect", 5.0)),
            read_timeout_s=float(timeouts.get("read", 30.0)),
            total_timeout_s=float(timeouts.get("total", 60.0)),
            retries=int(settings.get("retries", 2)),
            backoff_s=float(settings.get("retry_backoff_s", 0.2)),
            breaker_failures=int(breaker.get("failures", 5)),
            breaker_cooldown_s=float(breaker.get("cooldown_s", 30.0)),
            max_connections=int(settings.get("max_connections", 50)),
            headers=dict(settings.get("headers") or {}),
        )


class CircuitBreaker:
    """Closed until `threshold` consecutive failures; then open for `cooldown` seconds;
    then one probe is let through (half-open): success closes it, failure opens it again."""

    def __init__(self, threshold: int, cooldown: float) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self.failures = 0
        self.opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if time.monotonic() - self.opened_at >= self.cooldown else "open"

    def allow(self) -> bool:
        state = self.state
        if state == "closed":
            return True
        if state == "half-open" and not self._probing:
            self._probing = True
            return True
        return False

    def success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self._probing = False

    def failure(self) -> None:
        self.failures += 1
        self._probing = False
        if self.failures >= self.threshold or self.opened_at is not None:
            self.opened_at = time.monotonic()


class Upstream:
    """One backend's connection pool, breaker and retry policy."""

    def __init__(self, name: str, settings: UpstreamSettings) -> None:
        self.name = name
        self.settings = settings
        self.breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s)
        self.client = httpx.AsyncClient(
            base_url=settings.url,
            timeout=httpx.Timeout(
                settings.total_timeout_s, connect=settings.connect_timeout_s, read=settings.read_timeout_s
            ),
            limits=httpx.Limits(max_connections=settings.max_connections),
            headers=settings.headers,
            follow_redirects=False,
        )

    def unavailable(self, message: str, **fields: Any) -> GatewayError:
        return GatewayError.of(
            ErrorKind.UPSTREAM_UNAVAILABLE,
            f"Upstream {self.name!r} is unavailable: {message}",
            can_retry=True,
            **fields,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        deadline: float | None = None,
        idempotent: bool = False,
        expect_json: bool = True,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send one request. `deadline` is an absolute time.monotonic(); it always wins over timeouts.

        Retries: any failure when `idempotent` (discovery), otherwise only failures that
        prove the request was never sent. A tool call that may have arrived is never re-sent.
        With `expect_json`, an answer that is not JSON counts against the circuit breaker.
        """
        if not self.breaker.allow():
            raise self.unavailable("circuit open after repeated failures", retry_after_ms=1000)
        attempts = 1 + max(0, self.settings.retries)
        for attempt in range(attempts):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise GatewayError.of(ErrorKind.DEADLINE, f"Deadline passed before upstream {self.name!r} answered")
            timeout = self.client.timeout
            if remaining is not None:
                cap = min(remaining, self.settings.total_timeout_s)
                timeout = httpx.Timeout(
                    cap,
                    connect=min(self.settings.connect_timeout_s, cap),
                    read=min(self.settings.read_timeout_s, cap),
                )
            try:
                async with asyncio.timeout(remaining if remaining is not None else self.settings.total_timeout_s):
                    response = await self.client.request(method, path, timeout=timeout, **kwargs)
                    await response.aread()
            except NOT_SENT as exc:
                self.breaker.failure()
                if attempt + 1 < attempts:
                    await self._backoff(attempt, deadline)
                    continue
                raise self.unavailable(f"cannot connect ({type(exc).__name__})") from None
            except (TimeoutError, httpx.TimeoutException):
                self.breaker.failure()
                if deadline is not None and time.monotonic() >= deadline - 0.001:
                    raise GatewayError.of(
                        ErrorKind.DEADLINE, f"Upstream {self.name!r} did not answer before the deadline", can_retry=True
                    ) from None
                if idempotent and attempt + 1 < attempts:
                    await self._backoff(attempt, deadline)
                    continue
                raise self.unavailable("it did not answer in time") from None
            except httpx.HTTPError as exc:
                self.breaker.failure()
                if idempotent and attempt + 1 < attempts:
                    await self._backoff(attempt, deadline)
                    continue
                raise self.unavailable(f"the connection failed ({type(exc).__name__})") from None
            if response.status_code in (502, 503, 504) or (expect_json and not is_json(response)):
                # The upstream (or a proxy before it) is in trouble; a 500 with JSON may be a tool failing.
                self.breaker.failure()
            else:
                self.breaker.success()
            return response
        raise self.unavailable("no attempt left")  # pragma: no cover - the loop always returns or raises

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, path: str, *, deadline: float | None = None, **kwargs: Any
    ) -> AsyncIterator[httpx.Response]:
        """A response whose body is read as it arrives (Server-Sent Events); never retried."""
        if not self.breaker.allow():
            raise self.unavailable("circuit open after repeated failures", retry_after_ms=1000)
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        timeout = self.client.timeout if remaining is None else httpx.Timeout(remaining)
        try:
            async with self.client.stream(method, path, timeout=timeout, **kwargs) as response:
                self.breaker.success()
                yield response
        except NOT_SENT as exc:
            self.breaker.failure()
            raise self.unavailable(f"cannot connect ({type(exc).__name__})") from None
        except httpx.TimeoutException:
            self.breaker.failure()
            raise GatewayError.of(
                ErrorKind.DEADLINE, f"Upstream {self.name!r} did not answer before the deadline", can_retry=True
            ) from None
        except httpx.HTTPError as exc:
            self.breaker.failure()
            raise self.unavailable(f"the connection failed ({type(exc).__name__})") from None

    async def _backoff(self, attempt: int, deadline: float | None) -> None:
        delay = self.settings.backoff_s * (2**attempt) * (0.5 + random.random())
        if deadline is not None:
            delay = min(delay, max(0.0, deadline - time.monotonic()))
        await asyncio.sleep(delay)

    async def close(self) -> None:
        await self.client.aclose()


def is_json(response: httpx.Response) -> bool:
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def json_of(upstream: Upstream, response: httpx.Response) -> Any:
    """The body as JSON, or an UPSTREAM_UNAVAILABLE error that says what came back instead."""
    try:
        return response.json()
    except ValueError:
        if is_json(response):  # otherwise `request` has counted it already
            upstream.breaker.failure()
        kind = response.headers.get("content-type", "no content type")
        snippet = response.text[:80].replace("\n", " ")
        raise upstream.unavailable(
            f"it answered HTTP {response.status_code} with {kind}, not JSON",
            developer_message=f"first bytes: {snippet!r}",
        ) from None


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
    upstream: str, status: int, message: Any, headers: Mapping[str, str] | None = None, **fields: Any
) -> Failure | None:
    """The canonical failure an upstream's error status stands for; None for a success (< 400).

    400/422 invalid arguments, 401 unauthenticated, 403 forbidden, 404 not found,
    429 rate limited (its Retry-After carried), any other 4xx malformed, 5xx upstream failed.
    `message` is what the upstream said (an object is given as JSON, never as a Python repr).
    """
    if status < 400:
        return None
    kind = STATUS_KINDS.get(status)
    if kind is None:
        kind = ErrorKind.UPSTREAM_UNAVAILABLE if status >= 500 else ErrorKind.MALFORMED
    if kind is ErrorKind.RATE_LIMITED:
        fields.setdefault("retry_after_ms", retry_after_ms(headers or {}))
        fields.setdefault("can_retry", True)
    if kind is ErrorKind.UPSTREAM_UNAVAILABLE:
        fields.setdefault("can_retry", True)
    text = message if isinstance(message, str) else orjson.dumps(message).decode()
    return Failure(kind=kind, message=f"Upstream {upstream!r} answered HTTP {status}: {text}", **fields)
