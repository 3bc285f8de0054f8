"""Calls that outlive the request that started them.

OXP's patience and ToolServerNode's 450 "call again" both answer a client
before its call is done; the run goes on here and a later request collects
it. Both kinds of run are bounded: at most `max_runs` unfinished, and at most
`max_finished` finished-but-uncollected ones, each dropped `retention`
seconds after it finished (oldest first). Finished runs sit in one ordered
map, so expiry is a sweep of its old end, not a timer per run: a forgotten
run is released at once and nothing holds its call or outcome afterwards.

Each run belongs to its call's principal, who may have its share of each bound
(`gateway.ownership.Shares`): a principal over its share of unfinished runs is
refused (`rate_limited`), and one over its share of finished runs loses its own
oldest finished ones, never another principal's.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import Call, Outcome, principal_name
from gateway.ownership import WHOLE, Shares


@dataclass
class Run:
    key: str
    call: Call
    task: asyncio.Task[Outcome]
    owner: str | None = None  # e.g. the session that started it
    principal: str = ""  # whose call it is (its share of the bounds)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None  # time.monotonic() when its task ended

    @property
    def done(self) -> bool:
        return self.task.done()


class RunRegistry:
    def __init__(
        self,
        call: Callable[[Call], Awaitable[Outcome]],
        *,
        retention: float = 600.0,
        max_runs: int = 10_000,
        max_finished: int = 10_000,
        shares: Shares | None = None,
    ) -> None:
        self._call = call  # the gateway's pipeline (of the snapshot current when the run starts)
        self.retention = retention
        self.max_runs = max_runs
        self.max_finished = max_finished
        self.shares = shares if shares is not None else WHOLE
        self._runs: dict[str, Run] = {}
        self._finished: OrderedDict[str, Run] = OrderedDict()  # finish order: the oldest at the front
        self._running_by: dict[str, int] = {}  # principal -> its unfinished runs
        self._finished_by: dict[str, OrderedDict[str, None]] = {}  # principal -> its finished runs, oldest first

    @property
    def running(self) -> int:
        """Runs whose task has not ended yet."""
        return len(self._runs) - len(self._finished)

    @property
    def finished(self) -> int:
        """Finished runs kept for a later collect."""
        return len(self._finished)

    def get(self, key: str) -> Run | None:
        self._sweep()
        return self._runs.get(key)

    def start(self, key: str, call: Call, *, owner: str | None = None) -> Run:
        """Start `call` in the background under `key`, or return the run already there."""
        self._sweep()
        existing = self._runs.get(key)
        if existing is not None:
            return existing
        if self.running >= self.max_runs:
            raise GatewayError.of(
                ErrorKind.UPSTREAM_UNAVAILABLE,
                "Too many calls in progress; try again later",
                can_retry=True,
                retry_after_ms=1000,
            )
        principal = principal_name(call.context.principal)
        if self._running_by.get(principal, 0) >= self.shares.of(self.max_runs):
            raise GatewayError.of(
                ErrorKind.RATE_LIMITED,
                "This caller has its share of the calls the gateway runs in the background; collect or wait for one",
                can_retry=True,
                retry_after_ms=1000,
            )
        task = asyncio.get_running_loop().create_task(self._call(call), name=f"run:{key}")
        run = Run(key=key, call=call, task=task, owner=owner, principal=principal)
        self._runs[key] = run
        self._running_by[principal] = self._running_by.get(principal, 0) + 1
        task.add_done_callback(lambda _t: self._finish(run))
        return run

    def _finish(self, run: Run) -> None:
        """A run ended: keep it for collection (bounded), unless it was forgotten meanwhile."""
        run.finished = time.monotonic()
        self._count_down(run.principal)
        if self._runs.get(run.key) is not run:
            return
        self._finished[run.key] = run
        mine = self._finished_by.setdefault(run.principal, OrderedDict())
        mine[run.key] = None
        share = self.shares.of(self.max_finished)
        while len(mine) > share:  # the principal's own oldest finished runs, never another's
            self._drop(next(iter(mine)))
        self._sweep()

    def _count_down(self, principal: str) -> None:
        left = self._running_by.get(principal, 0) - 1
        if left > 0:
            self._running_by[principal] = left
        else:
            self._running_by.pop(principal, None)

    def _drop(self, key: str) -> None:
        """Forget a finished run (kept for collection no longer)."""
        run = self._finished.pop(key, None)
        if run is None:
            return
        mine = self._finished_by.get(run.principal)
        if mine is not None:
            mine.pop(key, None)
            if not mine:
                del self._finished_by[run.principal]
        if self._runs.get(key) is run:
            del self._runs[key]

    def _sweep(self) -> None:
        """Drop finished runs past their retention, then the oldest ones over the bound."""
        now = time.monotonic()
        while self._finished:
            key, run = next(iter(self._finished.items()))
            expired = run.finished is not None and now - run.finished >= self.retention
            if not expired and len(self._finished) <= self.max_finished:
                return
            self._drop(key)

    async def wait(self, run: Run, patience: float) -> Outcome | None:
        """The outcome if it arrives within `patience` seconds, else None (the run goes on)."""
        task = run.task
        if not task.done():
            if patience <= 0:
                return None
            # One future woken by the task or the timer: asyncio.wait's sets and per-call bookkeeping were
            # ~5 % of an OXP call's CPU.
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()

            def wake(_task: object = None) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            timer = loop.call_later(patience, wake)
            task.add_done_callback(wake)
            try:
                await waiter
            finally:
                timer.cancel()
                task.remove_done_callback(wake)
            if not task.done():
                return None
        if task.cancelled():
            return Outcome(
                call_id=run.call.context.call_id,
                spec=None,
                error=Failure(kind=ErrorKind.TOOL_FAILED, message="The call was cancelled before it finished"),
            )
        return task.result()

    def forget(self, key: str) -> None:
        """Drop a run (collected, or no longer wanted): nothing here references it afterwards."""
        if key in self._finished:
            self._drop(key)
        self._runs.pop(key, None)

    def cancel_owned_by(self, owner: str) -> int:
        """Cancel every unfinished run of one owner; returns how many."""
        cancelled = 0
        for run in list(self._runs.values()):
            if run.owner == owner and not run.done:
                run.task.cancel()
                cancelled += 1
        return cancelled

    async def close(self) -> None:
        tasks = [r.task for r in self._runs.values() if not r.done]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runs.clear()
        self._finished.clear()
        self._running_by.clear()
        self._finished_by.clear()
