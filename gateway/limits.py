"""Call limits: how many calls may run at once, and how often calls may come.

Concurrency (`CallLimiter`): calls running in the whole gateway and per
principal. Its counters live in this process only: each replica enforces its
own limits, since a running call holds its slot in the process running it.

Rate (`RateLimiter`): token buckets per principal and per backend, kept in the
state store, so replicas sharing a Redis store share the buckets.

A call over any limit is refused at once with `rate_limited` (every front
renders it as its busy answer with Retry-After); it is never queued, so an
overloaded gateway answers quickly instead of piling up waiters.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote

from gateway.config.models import BucketSettings, LimitsSettings
from gateway.errors import ErrorKind, GatewayError
from gateway.state import StateStore

DEFAULT_MAX_CONCURRENT_CALLS = LimitsSettings().max_concurrent_calls  # the defaults live in the model
DEFAULT_MAX_CONCURRENT_CALLS_PER_PRINCIPAL = LimitsSettings().max_concurrent_calls_per_principal
RETRY_AFTER_MS = 1000  # a busy gateway frees a slot when some call ends; come back in a second


class CallLimiter:
    """Counts running calls; `slot(principal)` admits one or raises `rate_limited`.

    Counters change only on the event loop thread, between awaits, so no lock is
    needed. The per-principal map holds only principals with a running call, so it
    never has more than `max_total` entries.
    """

    def __init__(
        self,
        max_total: int = DEFAULT_MAX_CONCURRENT_CALLS,
        max_per_principal: int = DEFAULT_MAX_CONCURRENT_CALLS_PER_PRINCIPAL,
    ) -> None:
        if max_total < 1 or max_per_principal < 1:
            raise ValueError("concurrency limits must be at least 1")
        self.max_total = max_total
        self.max_per_principal = max_per_principal
        self.running = 0
        self._by_principal: dict[str, int] = {}

    def running_for(self, principal: str) -> int:
        return self._by_principal.get(principal, 0)

    @contextmanager
    def slot(self, principal: str) -> Iterator[None]:
        """Hold one call slot for `principal` (its name; "" with auth off) while the block runs."""
        self.enter(principal)
        try:
            yield
        finally:
            self.leave(principal)

    def enter(self, principal: str) -> None:
        """Take a slot, or raise `rate_limited`; every `enter` that returned is paired with one `leave`.
        (The pipeline calls these two directly: a generator context manager per call costs more.)"""
        mine = self._by_principal.get(principal, 0)
        if self.running >= self.max_total:
            raise _busy(f"The gateway is running its limit of {self.max_total} concurrent calls; try again shortly")
        if mine >= self.max_per_principal:
            raise _busy(
                f"This caller is running its limit of {self.max_per_principal} concurrent calls; wait for one to finish"
            )
        self.running += 1
        self._by_principal[principal] = mine + 1

    def leave(self, principal: str) -> None:
        self.running -= 1
        left = self._by_principal[principal] - 1
        if left:
            self._by_principal[principal] = left
        else:
            del self._by_principal[principal]


def _busy(message: str) -> GatewayError:
    return GatewayError.of(
        ErrorKind.RATE_LIMITED,
        message,
        developer_message="limits.max_concurrent_calls and limits.max_concurrent_calls_per_principal",
        can_retry=True,
        retry_after_ms=RETRY_AFTER_MS,
    )


# ---- rate: token buckets in the state store ----

PRINCIPAL_KEY = "rate:principal:"  # + the principal's name, URL-quoted ("" with auth off)
BACKEND_KEY = "rate:backend:"  # + the backend's name (letters, digits, _ and - only)


@dataclass(frozen=True)
class Bucket:
    """One bucket's shape: `burst` tokens at most, `rate` more per second."""

    rate: float
    burst: float

    @classmethod
    def of(cls, settings: BucketSettings) -> Bucket:
        burst = settings.burst if settings.burst is not None else max(1, math.ceil(settings.rate_per_s))
        return cls(rate=float(settings.rate_per_s), burst=float(burst))

    def describe(self) -> str:
        return f"{self.rate:g} calls/s (burst {self.burst:g})"


class RateLimiter:
    """Takes a token per call from its principal's bucket, then from its backend's; refuses when either is empty.

    The buckets live in the state store (`StateStore.take` is atomic), so every
    replica sharing the store draws from the same ones. A call refused by its
    backend's bucket has already spent its principal's token: the principal's
    rate counts the calls it sends, the backend's the calls that reach it.
    """

    def __init__(
        self,
        store: StateStore,
        *,
        per_principal: Bucket | None = None,
        per_backend: Bucket | None = None,
        backends: Mapping[str, Bucket] | None = None,
    ) -> None:
        self.store = store
        self.per_principal = per_principal
        self.per_backend = per_backend
        self.backends = dict(backends or {})

    @classmethod
    def from_settings(cls, limits: LimitsSettings, store: StateStore) -> RateLimiter | None:
        """The limiter `limits.rate` describes, or None when it sets no bucket (then nothing is counted)."""
        rate = limits.rate
        if not rate.enabled:
            return None
        return cls(
            store,
            per_principal=Bucket.of(rate.per_principal) if rate.per_principal is not None else None,
            per_backend=Bucket.of(rate.per_backend) if rate.per_backend is not None else None,
            backends={name: Bucket.of(bucket) for name, bucket in rate.backends.items()},
        )

    def bucket_of(self, backend: str) -> Bucket | None:
        return self.backends.get(backend, self.per_backend)

    async def admit(self, principal: str, backend: str | None) -> None:
        """Take this call's tokens, or raise `rate_limited` with the wait until the empty bucket has one.

        A request the gateway answers itself (`backend` None: a result handle, its own workspace) takes
        its principal's token only."""
        if self.per_principal is not None:
            wait = await self.store.take(PRINCIPAL_KEY + quote(principal, safe=""), *_shape(self.per_principal))
            if wait > 0:
                who = f"Caller {principal!r}" if principal else "This caller"
                raise _over_rate(
                    f"{who} is over its rate limit of {self.per_principal.describe()}",
                    wait,
                    "limits.rate.per_principal",
                )
        bucket = self.bucket_of(backend) if backend is not None else None
        if backend is not None and bucket is not None:
            wait = await self.store.take(BACKEND_KEY + backend, *_shape(bucket))
            if wait > 0:
                setting = f"limits.rate.backends.{backend}" if backend in self.backends else "limits.rate.per_backend"
                raise _over_rate(f"Backend {backend!r} is over its rate limit of {bucket.describe()}", wait, setting)


def _shape(bucket: Bucket) -> tuple[float, float]:
    return bucket.rate, bucket.burst


def _over_rate(message: str, wait_s: float, setting: str) -> GatewayError:
    retry_after_ms = max(1, math.ceil(wait_s * 1000))
    return GatewayError.of(
        ErrorKind.RATE_LIMITED,
        f"{message}; retry in {retry_after_ms / 1000:g} s",
        developer_message=setting,
        can_retry=True,
        retry_after_ms=retry_after_ms,
    )
