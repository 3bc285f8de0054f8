"""A circuit breaker that cannot stick open.

Closed until `threshold` consecutive upstream faults; then open for `cooldown`
seconds, during which calls fail fast; then half-open: one probe goes through,
and its verdict closes the breaker (success) or opens it again (failure). The
probe is a `Permit` its holder must hand back: a probe that ends without a
verdict (cancelled by its caller, or ended by an error that says nothing about
the upstream) frees the slot at once, and a permit never handed back (a leaked
stream) lapses after its lease, so a half-open breaker always lets a probe
through eventually.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

# Prometheus has no enum type: the gauge `toolplex_upstream_breaker_state` uses these numbers.
STATE_VALUES: dict[str, int] = {"closed": 0, "half-open": 1, "open": 2}
DEFAULT_PROBE_LEASE_S = 60.0


@dataclass(eq=False)
class Permit:
    """Leave to send one request; `probe` when it is the half-open breaker's single probe."""

    probe: bool
    expires: float = float("inf")


class CircuitBreaker:
    """Counts consecutive upstream faults; see the module docstring for the states."""

    def __init__(self, threshold: int, cooldown: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = max(1, threshold)
        self.cooldown = cooldown
        self.clock = clock  # injectable so tests drive time instead of sleeping
        self.failures = 0  # consecutive faults; reset by a success
        self.failures_total = 0  # every fault since start, for /metrics
        self.opened_total = 0  # closed -> open transitions, for /metrics
        self.opened_at: float | None = None
        self._probe: Permit | None = None
        self._generation = 0  # bumped by every verdict, so a success can be overruled only while it is the latest
        self._before_success: tuple[int, float | None] = (0, None)

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if self.clock() - self.opened_at >= self.cooldown else "open"

    @property
    def probing(self) -> bool:
        """A probe is out and has not lapsed."""
        return self._probe is not None and self.clock() < self._probe.expires

    def acquire(self, lease: float = DEFAULT_PROBE_LEASE_S) -> Permit | None:
        """A permit to send one request, or None while the breaker is open (or its probe is out).

        `lease`: how long a probe may stay out without a verdict before another is let through;
        callers pass their own time budget, so only a leaked permit ever lapses.
        """
        state = self.state
        if state == "closed":
            return Permit(probe=False)
        if state == "open" or self.probing:
            return None
        self._probe = Permit(probe=True, expires=self.clock() + max(0.0, lease))
        return self._probe

    def retry_after_s(self) -> float:
        """How long until the breaker lets a probe through (0 when it would now, or a probe is out)."""
        if self.opened_at is None:
            return 0.0
        return max(0.0, self.opened_at + self.cooldown - self.clock())

    def allow(self) -> bool:
        """`acquire()` for callers that do not hand the permit back (a probe then lapses after its lease)."""
        return self.acquire() is not None

    def release(self, permit: Permit | None) -> None:
        """The request holding `permit` ended; if it was the probe and gave no verdict, free the slot."""
        if permit is not None and permit is self._probe:
            self._probe = None

    def success(self) -> int:
        """The upstream answered; returns the verdict's generation, for `overrule`."""
        self._before_success = (self.failures, self.opened_at)
        self.failures = 0
        self.opened_at = None
        self._probe = None
        self._generation += 1
        return self._generation

    def overrule(self, generation: int) -> None:
        """The answer counted as success `generation` proved malformed: count it as a fault instead.

        While no other verdict came in between, the success is undone first, so an upstream
        answering nothing but malformed 200s still reaches the threshold.
        """
        if generation == self._generation:
            self.failures, self.opened_at = self._before_success
        self.failure()

    def failure(self) -> None:
        self._generation += 1
        self.failures += 1
        self.failures_total += 1
        self._probe = None
        if self.opened_at is None and self.failures < self.threshold:
            return
        if self.opened_at is None:
            self.opened_total += 1
        self.opened_at = self.clock()  # a failed probe (or a late failure) opens it for a full cool-down
