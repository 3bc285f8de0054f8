"""Calls per minute and the last failed calls, for the console: what every replica saw in the last hour.

Each replica counts its own calls in memory (`TrafficRecorder.record`, called by the pipeline for every call:
a few dict updates) by principal, front, backend and tool, with a latency histogram, and keeps each principal's
last failed calls. Every few seconds it publishes what changed to the state store (`publish`), one entry per
replica and minute, so any replica reads the whole gateway's traffic (`read`). Principals are kept apart
everywhere: a caller sees its own rows only, and each principal has its own share of every bound (series per
minute, failures kept), so one caller's flood folds its own rows into "(other)" and never pushes out another's.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.errors import GatewayError
from gateway.model import Call, Outcome, labels_of, principal_name
from gateway.redaction import redact_text
from gateway.state import StateStore
from gateway.timestamps import utc_iso

log = structlog.get_logger("toolplex.console")

NAMESPACE = "console"
BOUNDS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000)  # then: above
BUCKETS = len(BOUNDS_MS) + 1
KEEP_MINUTES = 60
PUBLISH_EVERY_S = 5.0
SERIES_PER_PRINCIPAL = 200  # per replica and minute; beyond, a principal's new series count as its "(other)"
PRINCIPALS_PER_MINUTE = 64  # per replica and minute; beyond, new principals count as "(others)"
FAILURES_PER_PRINCIPAL = 20
FAILURE_PRINCIPALS = 64  # principals whose failures are kept (the least recently failing goes first)
MESSAGE_CHARS = 300
OTHER = "(other)"
OTHERS = "(others)"

Row = list[int]  # [calls, errors, *histogram]
SeriesKey = tuple[str, str, str]  # front, backend, tool


def bucket_of(duration_ms: float) -> int:
    return bisect_left(BOUNDS_MS, duration_ms)


def percentile(histogram: Iterable[int], q: float) -> float | None:
    """The q-th quantile (0..1) of a latency histogram, interpolated within its bucket; None without calls."""
    counts = list(histogram)
    total = sum(counts)
    if not total:
        return None
    wanted, seen = q * total, 0
    for index, count in enumerate(counts):
        if count and seen + count >= wanted:
            low = 0.0 if index == 0 else float(BOUNDS_MS[index - 1])
            high = float(BOUNDS_MS[index]) if index < len(BOUNDS_MS) else low
            return round(low + (high - low) * (wanted - seen) / count, 3)
        seen += count
    return float(BOUNDS_MS[-1])


def minute_now() -> int:
    return int(time.time() // 60)


@dataclass
class _Minute:
    rows: dict[str, dict[SeriesKey, Row]] = field(default_factory=dict)  # principal -> series -> row
    dirty: bool = True


class TrafficRecorder:
    """One replica's calls of the current and last minutes, and each principal's last failures."""

    def __init__(self) -> None:
        self.replica = ""  # set once the replica is known (`Gateway`): what its published entries are named by
        self._minutes: dict[int, _Minute] = {}
        self._failures: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self._failures_dirty = False

    # ---- recording (the pipeline, every call) ----

    def record(self, call: Call, outcome: Outcome) -> None:
        minute = int(time.time() // 60)
        held = self._minutes.get(minute)
        if held is None:
            for old in [m for m in self._minutes if m < minute - 2]:  # never published (a store down): gone
                del self._minutes[old]
            held = self._minutes[minute] = _Minute()
        held.dirty = True
        principal = principal_name(call.context.principal)
        backend, tool = labels_of(call, outcome)
        front = call.context.front
        rows = held.rows.get(principal)
        if rows is None:
            if len(held.rows) >= PRINCIPALS_PER_MINUTE:
                principal = OTHERS
                rows = held.rows.setdefault(OTHERS, {})
            else:
                rows = held.rows[principal] = {}
        key = (front, backend, tool)
        row = rows.get(key)
        if row is None:
            if len(rows) >= SERIES_PER_PRINCIPAL:
                key = (front, OTHER, OTHER)
                row = rows.get(key)
            if row is None:
                row = rows[key] = [0] * (2 + BUCKETS)
        row[0] += 1
        row[2 + bucket_of(outcome.duration_ms)] += 1
        if outcome.error is not None:
            row[1] += 1
            self._failed(principal, call, outcome, backend, tool)

    def _failed(self, principal: str, call: Call, outcome: Outcome, backend: str, tool: str) -> None:
        error = outcome.error
        assert error is not None
        ring = self._failures.get(principal)
        if ring is None:
            while len(self._failures) >= FAILURE_PRINCIPALS:
                self._failures.popitem(last=False)
            ring = self._failures[principal] = deque(maxlen=FAILURES_PER_PRINCIPAL)
        else:
            self._failures.move_to_end(principal)
        ring.appendleft(
            {
                "at": utc_iso(),
                "principal": principal,
                "front": call.context.front,
                "backend": backend,
                "tool": tool,
                "kind": error.kind.value,
                "message": redact_text(error.message[:MESSAGE_CHARS]),
                "trace_id": call.context.trace_id or outcome.call_id,  # what its log lines carry as trace_id
                "call_id": outcome.call_id,
                "replica": self.replica,
            }
        )
        self._failures_dirty = True

    # ---- the state store ----

    async def publish(self, store: StateStore) -> None:
        """Write the minutes and failures that changed since the last time; forget minutes written for good."""
        now = minute_now()
        for minute, held in sorted(self._minutes.items()):
            if held.dirty:
                rows = [
                    [principal, *key, *row] for principal, series in held.rows.items() for key, row in series.items()
                ]
                body = {"replica": self.replica, "minute": minute, "rows": rows}
                await store.set(f"{NAMESPACE}:traffic:{self.replica}:{minute}", body, (KEEP_MINUTES + 2) * 60)
                held.dirty = False
            if minute < now - 1:  # no call is counted in it any more
                del self._minutes[minute]
        if self._failures_dirty:
            failures = [failure for ring in self._failures.values() for failure in ring]
            body = {"replica": self.replica, "failures": failures}
            await store.set(f"{NAMESPACE}:failures:{self.replica}", body, KEEP_MINUTES * 60)
            self._failures_dirty = False


@dataclass
class _Series:
    calls: int = 0
    errors: int = 0
    histogram: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    minutes: dict[int, Row] = field(default_factory=dict)

    def add(self, minute: int, calls: int, errors: int, histogram: list[int]) -> None:
        self.calls += calls
        self.errors += errors
        point = self.minutes.get(minute)
        if point is None:
            point = self.minutes[minute] = [0] * (2 + BUCKETS)
        point[0] += calls
        point[1] += errors
        for index, count in enumerate(histogram):
            self.histogram[index] += count
            point[2 + index] += count

    def public(self, key: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {} if key is None else {"key": key}
        body.update(
            calls=self.calls,
            errors=self.errors,
            error_rate=round(self.errors / self.calls, 4) if self.calls else 0.0,
            p50_ms=percentile(self.histogram, 0.5),
            p99_ms=percentile(self.histogram, 0.99),
            points=[
                [minute, row[0], row[1], percentile(row[2:], 0.5), percentile(row[2:], 0.99)]
                for minute, row in sorted(self.minutes.items())
            ],
        )
        return body


async def entries(store: StateStore, kind: str) -> list[tuple[str, Any]]:
    """Every live `console:<kind>:...` entry: (key, value)."""
    prefix = f"{NAMESPACE}:{kind}:"
    keys = [key for key in await store.keys(NAMESPACE) if key.startswith(prefix)]
    values = await asyncio.gather(*(store.get(key) for key in keys))  # one round trip's wait, not one per key
    return [(key, value) for key, value in zip(keys, values, strict=True) if value is not None]


async def read_traffic(store: StateStore, principal: str | None, minutes: int = KEEP_MINUTES) -> dict[str, Any]:
    """The last `minutes` of every replica's calls, as series by front, backend and tool, and in total; only
    `principal`'s own calls unless it is None (an admin)."""
    now = minute_now()
    first = now - max(1, min(minutes, KEEP_MINUTES)) + 1
    total = _Series()
    by: dict[str, dict[str, _Series]] = {"front": {}, "backend": {}, "tool": {}}
    per_replica: dict[str, dict[str, _Series]] = {}  # replica -> backend -> its calls there
    for _key, body in await entries(store, "traffic"):
        minute = body.get("minute") if isinstance(body, dict) else None
        if not isinstance(minute, int) or minute < first or minute > now:
            continue
        replica = per_replica.setdefault(str(body.get("replica")), {})
        for row in body.get("rows", ()):
            owner, front, backend, tool, calls, errors, *histogram = row
            if principal is not None and owner != principal:
                continue
            total.add(minute, calls, errors, histogram)
            on_replica = replica.get(backend)
            if on_replica is None:
                on_replica = replica[backend] = _Series()
            on_replica.add(minute, calls, errors, histogram)
            for name, value in (("front", front), ("backend", backend), ("tool", tool)):
                series = by[name].get(value)
                if series is None:
                    series = by[name][value] = _Series()
                series.add(minute, calls, errors, histogram)
    span_s = (now - first + 1) * 60
    totals = total.public()
    totals["per_second"] = round(total.calls / span_s, 4)
    return {
        "now": now,
        "minutes": now - first + 1,
        "totals": totals,
        "series": {
            name: [s.public(key) for key, s in sorted(found.items(), key=lambda kv: -kv[1].calls)]
            for name, found in by.items()
        },
        "by_replica": {
            replica: {backend: _stats(series) for backend, series in backends.items()}
            for replica, backends in per_replica.items()
            if backends
        },
    }


def _stats(series: _Series) -> dict[str, Any]:
    """A series' figures without its points (what a table shows)."""
    return {k: v for k, v in series.public().items() if k != "points"}


async def read_failures(store: StateStore, principal: str | None, limit: int = 50) -> list[dict[str, Any]]:
    """The newest failed calls of every replica; only `principal`'s own unless it is None (an admin, who also
    sees whose they were)."""
    found: list[dict[str, Any]] = []
    for _key, body in await entries(store, "failures"):
        for failure in body.get("failures", ()) if isinstance(body, dict) else ():
            if principal is None:
                found.append(failure)
            elif failure.get("principal") == principal:
                found.append({k: v for k, v in failure.items() if k != "principal"})
    found.sort(key=lambda f: f.get("at") or "", reverse=True)
    return found[:limit]


async def publish_quietly(recorder: TrafficRecorder, store: StateStore) -> None:
    """`publish`, a store that does not answer only logged (the next tick tries again)."""
    try:
        await recorder.publish(store)
    except GatewayError as exc:
        log.warning("console_traffic_not_published", error=exc.failure.developer_message)
