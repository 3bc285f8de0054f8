"""How many calls may run at once: in the whole gateway and per principal.

A call over either limit is refused at once with `rate_limited` (every front
renders it as its busy answer with Retry-After); it is never queued, so an
overloaded gateway answers quickly instead of piling up waiters. The counters
live in this process only: each replica enforces its own limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gateway.config.models import LimitsSettings
from gateway.errors import ErrorKind, GatewayError

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
        mine = self._by_principal.get(principal, 0)
        if self.running >= self.max_total:
            raise _busy(f"The gateway is running its limit of {self.max_total} concurrent calls; try again shortly")
        if mine >= self.max_per_principal:
            raise _busy(
                f"This caller is running its limit of {self.max_per_principal} concurrent calls; wait for one to finish"
            )
        self.running += 1
        self._by_principal[principal] = mine + 1
        try:
            yield
        finally:
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
