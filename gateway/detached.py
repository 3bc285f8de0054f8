"""Detached runs: calls that outlive the request that started them, their outcome recorded and collected later.

Two fronts answer a client before its call is done: OXP (a call still running after the patience is
collected by sending the same `call_id` again: an idempotency key) and ToolServerNode (450 "call again",
collected with a handle). One service serves both. Each run is recorded in the `StateStore` under its
key and its principal (`owned_key`, so another principal's key is an unknown one): `running` while the
tool runs, then `done` with the outcome as JSON (and the upstream's own answer) for the retention time.
The live run sits in the `RunRegistry` under the record's key, so a repeat that arrives while it runs
waits for that very run; a run in another replica is followed through the shared record (polled) until
the patience, and reported lost once its replica's lease ran out (`gateway.homes`).

- `call(key, fingerprint, call, ...)`: the first call under a key runs; a repeat gets the same run's
  outcome (an idempotency key: `fingerprint` names what must be equal for a repeat to be the same call,
  a different one is a conflict; the repeat passes the precheck first).
- `collect(key, call, owner=...)`: the outcome of what runs under a key, without ever starting anything (a
  handle: None when there is no such record, or it is another owner's); `forget` drops a record once its
  outcome was handed out for good.

Only the outcomes the front's `recorded` predicate accepts are kept (typically: the tool ran); a failure
answered before the tool ran is dropped, so a retry after fixing it runs. The records this process wrote
are kept within a byte budget and a count (`Retained`), each principal within its share of them; a
principal's oldest go first.

The service outlives reloads (it belongs to the gateway, not to a front object); a front calls
`configure()` with its current settings each time its routes are built.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

from gateway.background import BackgroundTasks
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.homes import Homes
from gateway.model import Call, Outcome, UpstreamAnswer, principal_name
from gateway.ownership import OwnedEntries, Shares, owned_key
from gateway.runs import Run, RunRegistry
from gateway.state import StateStore

log = structlog.get_logger("toolplex.detached")

POLL_S = 0.05  # how often to look at a record whose run lives in another replica

Precheck = Callable[[Call], Failure | None]
Recorded = Callable[[Outcome], bool]


@dataclass(frozen=True)
class DetachedPolicy:
    """What a front configured: how long records live, how long a request waits, what is worth keeping."""

    retention: float  # seconds a finished outcome is kept and replayed
    patience: float  # seconds a request waits for its run before a pending answer
    retry_after_ms: int  # advised in the pending answer
    max_bytes: int  # budget of the kept outcomes' JSON in this process
    max_entries: int  # most finished records this process keeps
    recorded: Recorded  # which outcomes are kept (others: the record is dropped, a retry runs)
    identity: str = "the same call"  # what a key must keep naming, for the conflict's developer message
    subject: str = "the earlier call with this call_id"  # how the answers name a recorded call
    again: str = "send a new call_id to try again"  # what a caller does when its call was lost
    collect_hint: str = "call again with the same call_id to collect its result"  # in the pending answer


class Retained:
    """The finished records this process wrote, oldest first, within `max_bytes` and `max_entries`.

    `bytes` counts each record's outcome JSON as stored. The store's own TTL
    removes a record after the retention; this index forgets it then too, and
    when a new record would exceed a bound, names the oldest ones to delete.
    Each record belongs to its principal (`gateway.ownership`): a principal past
    its share loses its own oldest records, and a record that finds the budget
    full of other principals' is not kept (`admit` raises `StoreFull`).
    """

    def __init__(self, *, max_bytes: int, max_entries: int, retention: float, shares: Shares | None = None) -> None:
        self.retention = retention
        self._held: OwnedEntries[str, tuple[str, str]] = OwnedEntries(
            max_entries=max(1, max_entries), max_bytes=max_bytes, shares=shares, idle_s=retention, what="call records"
        )
        self.max_entries = max_entries

    @property
    def max_bytes(self) -> int:
        return self._held.max_bytes or 0

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self._held.max_bytes = value

    @property
    def bytes(self) -> int:
        return self._held.bytes

    def configure(self, *, max_bytes: int, max_entries: int, retention: float) -> None:
        self._held.max_bytes, self._held.max_entries = max_bytes, max(1, max_entries)
        self._held.idle_s = self.retention = retention
        self.max_entries = max_entries

    def __len__(self) -> int:
        self._held.expire()
        return len(self._held)

    def fits(self, size: int) -> bool:
        return size <= self._held.shares.of(self.max_bytes) and self.max_entries > 0 and self.retention > 0

    def admit(self, key: str, token: str, size: int, owner: str = "") -> list[tuple[str, str]]:
        """Count a record of `size` bytes under `key`, `owner`'s; returns (key, token) of the records to evict
        (the owner's own; expired ones are gone from the store already). Raises `StoreFull` when the budget
        is full of other owners' records."""
        self._held.expire()
        self._held.pop(owner, key)  # re-admitted: counted once, as the newest
        return self._held.put(owner, key, (key, token), size)

    def discard(self, key: str, owner: str = "") -> None:
        self._held.pop(owner, key)

    def holds(self, key: str, owner: str = "") -> bool:
        """Whether `owner`'s record under `key` is kept (finished, within the budget and the retention)."""
        self._held.expire()
        return (owner, key) in self._held


class DetachedRuns:
    """One run per (principal, key) in one namespace of the store; see the module docstring."""

    def __init__(
        self,
        store: StateStore,
        runs: RunRegistry,
        precheck: Precheck,
        *,
        namespace: str,
        shares: Shares | None = None,
        homes: Homes | None = None,
    ) -> None:
        self.store = store
        self.runs = runs
        self.homes = homes  # where runs are recorded to live, and whether that replica still does
        self.precheck = precheck
        self.namespace = namespace
        self._policy: DetachedPolicy | None = None
        # Bounds come from configure(); the index itself survives reconfiguring (reloads).
        self.retained = Retained(max_bytes=0, max_entries=0, retention=0.0, shares=shares)
        # Record key -> principal, for the runs answered "pending" whose outcome was not handed out yet
        # (`unclaimed`); pruned to the runs still live or recorded, so never more than those.
        self._awaited: dict[str, str] = {}
        self._background = BackgroundTasks()

    def configure(
        self,
        *,
        retention: float,
        patience: float,
        retry_after_ms: int,
        max_bytes: int,
        max_entries: int,
        recorded: Recorded,
        identity: str = "the same call",
        subject: str = "the earlier call with this call_id",
        again: str = "send a new call_id to try again",
        collect_hint: str = "call again with the same call_id to collect its result",
    ) -> None:
        """Set (or change, on a reload) the policy; calls already waiting keep the one they started with."""
        self._policy = DetachedPolicy(
            retention,
            patience,
            retry_after_ms,
            max_bytes,
            max_entries,
            recorded,
            identity,
            subject,
            again,
            collect_hint,
        )
        self.retained.configure(max_bytes=max_bytes, max_entries=max_entries, retention=retention)

    @property
    def unclaimed(self) -> int:
        """Runs answered "pending" that finished here and whose outcome nobody collected yet (a gauge)."""
        self._prune()
        count = 0
        for key, principal in self._awaited.items():
            run = self.runs.get(key)
            count += run.done if run is not None else self.retained.holds(key, principal)
        return count

    def _awaiting(self, key: str, principal: str) -> None:
        self._awaited[key] = principal
        if len(self._awaited) > len(self.retained) + self.runs.max_runs:
            self._prune()

    def _prune(self) -> None:
        """Forget the awaited runs that are neither live nor recorded any more (expired, evicted, lost)."""
        for key, principal in list(self._awaited.items()):
            if self.runs.get(key) is None and not self.retained.holds(key, principal):
                del self._awaited[key]

    @property
    def policy(self) -> DetachedPolicy:
        if self._policy is None:
            raise RuntimeError(f"DetachedRuns({self.namespace!r}) is used before configure()")
        return self._policy

    def record_key(self, principal: str, key: str) -> str:
        """The principal's own record of `key` (`owned_key`: the principal quoted, so that no ':' in it can
        shift the split, and each principal's records bounded apart in the store).

        JWT principals are `jwt:<sub>`: unquoted, subject `a:b` with key `c` and
        subject `a` with key `b:c` would share one record.
        """
        return owned_key(self.namespace, principal, f"call:{key}")

    async def call(
        self,
        key: str,
        fingerprint: str,
        call: Call,
        lost_after: float,
        *,
        owner: str | None = None,
        meta: dict[str, Any] | None = None,
        told: bool = True,
    ) -> Outcome:
        """The outcome of `call` under key `key`: fresh, collected, replayed or pending.

        The key is scoped to the call's principal. `fingerprint` names what must
        be equal for a repeat to be the same call; a different one under a key
        still recorded is a conflict (MALFORMED). `lost_after` (seconds) bounds
        how long a `running` record without a run anywhere is believed; after
        that the run is reported lost. A repeat of a call already recorded
        passes the precheck first, or gets its failure. `owner` names who may
        cancel the run (a session: `RunRegistry.cancel_owned_by`); `meta` is
        kept with the record for whoever collects it (`collect`).

        `told` says whether the caller knew `key` before this call (its own
        idempotency key). A key the gateway made up (a handle, a call_id the
        client did not send) is known to nobody until a pending answer names
        it, so that call is recorded only once its patience is over: a call
        answered in time writes nothing to the store (`_run_untold`).
        """
        if not told:
            return await self._run_untold(key, fingerprint, call, lost_after, owner=owner, meta=meta)
        policy = self.policy
        record_key = self.record_key(principal_name(call.context.principal), key)
        started = time.monotonic()
        deadline = started + policy.patience
        first = True
        checked = False
        while True:
            if not first and time.monotonic() >= deadline:
                return _pending(call, started, policy)
            first = False
            token = uuid.uuid4().hex
            fresh = self._running(fingerprint, token, time.time() + lost_after, owner, meta)
            if await self.store.add(record_key, fresh, max(policy.retention, lost_after)):
                run = await self._start(record_key, token, call, owner)
                return await self._collect(record_key, token, run, call, deadline, started, policy)
            record = await self.store.get(record_key)
            if record is None:  # settled away between add and get: claim it again
                continue
            if record["fingerprint"] != fingerprint:
                raise _conflict(call.context.call_id, policy)
            if not checked:  # the same checks as the first call, before anything of it is handed out
                failure = self.precheck(call)
                if failure is not None:
                    raise GatewayError(failure)
                checked = True
            followed = await self._follow(record_key, record, call, deadline, started, policy)
            if followed is not None:
                return followed

    async def _run_untold(
        self,
        key: str,
        fingerprint: str,
        call: Call,
        lost_after: float,
        *,
        owner: str | None,
        meta: dict[str, Any] | None,
    ) -> Outcome:
        """Run a call under a key nobody knows yet; record it (`running`, then its outcome) only when the
        patience runs out and the pending answer is about to name the key."""
        policy = self.policy
        principal = principal_name(call.context.principal)
        record_key = self.record_key(principal, key)
        started = time.monotonic()
        lost_at = time.time() + lost_after
        run = self.runs.start(record_key, call, owner=owner)
        try:
            outcome = await self.runs.wait(run, policy.patience)
        except asyncio.CancelledError:  # the request went away: the run goes on, and nobody can collect it
            run.task.add_done_callback(lambda _task: self.runs.forget(record_key))
            raise
        if outcome is not None:
            self.runs.forget(record_key)
            return outcome
        token = uuid.uuid4().hex
        running = self._running(fingerprint, token, lost_at, owner, meta)
        try:
            await self.store.set(record_key, running, max(policy.retention, lost_after))
        finally:  # settled when it ends (at once if it ended while the record was written)
            run.task.add_done_callback(lambda _task: self._background.spawn(self._settle(record_key, token, run)))
        self._awaiting(record_key, principal)
        return _pending(call, started, policy)

    def _running(
        self, fingerprint: str, token: str, lost_at: float, owner: str | None, meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The record of a run still going, in this replica (`token` names this very run)."""
        return {
            "status": "running",
            "fingerprint": fingerprint,
            "token": token,
            "lost_at": lost_at,
            "replica": self.homes.here if self.homes else None,
            "owner": owner,
            "meta": meta or {},
        }

    async def collect(self, key: str, call: Call, *, owner: str | None = None) -> tuple[Outcome, dict[str, Any]] | None:
        """The outcome of the run recorded under `key`, the caller's own, and the `meta` it was recorded with:
        replayed, collected (waiting up to the patience), pending, or lost. Never starts a run: None when
        there is no such record (never made, expired, forgotten, another principal's, or recorded for
        another `owner`: a session's handle is that session's alone)."""
        policy = self.policy
        record_key = self.record_key(principal_name(call.context.principal), key)
        started = time.monotonic()
        deadline = started + policy.patience
        while True:
            record = await self.store.get(record_key)
            if record is None or record.get("owner") != owner:
                return None
            outcome = await self._follow(record_key, record, call, deadline, started, policy)
            if outcome is not None:
                return outcome, record.get("meta") or {}
            # polled a record another replica runs: look again

    async def forget(self, key: str, principal: str) -> None:
        """Drop `principal`'s record of `key` and its run, once its outcome was handed out for good."""
        record_key = self.record_key(principal, key)
        self.runs.forget(record_key)
        self.retained.discard(record_key, principal)
        self._awaited.pop(record_key, None)
        await self.store.delete(record_key)

    async def _follow(
        self,
        record_key: str,
        record: dict[str, Any],
        call: Call,
        deadline: float,
        started: float,
        policy: DetachedPolicy,
    ) -> Outcome | None:
        """What a recorded run comes to for this request: its outcome (replayed or collected), pending, or lost;
        None after a poll of a run in another replica (the caller looks at the record again)."""
        if record["status"] == "done":
            log.debug("detached_replay", namespace=self.namespace, call_id=call.context.call_id)
            self._awaited.pop(record_key, None)
            return replay_outcome(call.context.call_id, record["outcome"])
        run = self.runs.get(record_key)
        if run is not None:
            return await self._collect(record_key, record["token"], run, call, deadline, started, policy)
        if time.time() > record["lost_at"]:
            return _lost(call, started, policy)
        if await self._owner_lost(record):
            return _lost(call, started, policy, replica=True)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _pending(call, started, policy)
        await asyncio.sleep(min(POLL_S, remaining))  # the run is elsewhere: poll the shared record
        return None

    async def _owner_lost(self, record: dict[str, Any]) -> bool:
        """The record is running in another replica whose lease ran out: that run will never finish."""
        if self.homes is None:
            return False
        return not await self.homes.alive(record.get("replica"))

    async def _start(self, key: str, token: str, call: Call, owner: str | None = None) -> Run:
        stale = self.runs.get(key)
        if stale is not None and stale.done:
            self.runs.forget(key)
        try:
            run = self.runs.start(key, call, owner=owner)
        except GatewayError:
            await self.store.delete(key)
            raise
        run.task.add_done_callback(lambda _task: self._background.spawn(self._settle(key, token, run)))
        return run

    async def _collect(
        self, key: str, token: str, run: Run, call: Call, deadline: float, started: float, policy: DetachedPolicy
    ) -> Outcome:
        outcome = await self.runs.wait(run, deadline - time.monotonic())
        if outcome is None:
            self._awaiting(key, principal_name(call.context.principal))
            return _pending(call, started, policy)
        await self._settle(key, token, run)  # so the next request sees the final record
        self._awaited.pop(key, None)
        return outcome

    async def _settle(self, key: str, token: str, run: Run) -> None:
        """Record a finished run's outcome, or drop the record when it is not to be kept; idempotent.

        The run leaves the registry once settled: from then on the record is the only copy.
        """
        try:
            outcome = await self.runs.wait(run, 0)
            if outcome is None:
                return
            record = await self.store.get(key)
            if record is not None and record.get("token") == token and record.get("status") != "done":
                await self._record(key, token, record, run, outcome)
        except Exception:
            log.exception("detached_settle_failed", namespace=self.namespace, call_id=run.call.context.call_id)
        finally:
            if run.done and self.runs.get(key) is run:
                self.runs.forget(key)

    async def _record(self, key: str, token: str, record: dict[str, Any], run: Run, outcome: Outcome) -> None:
        """Replace the `running` record by the outcome, within the budget; an outcome not to keep: delete."""
        policy = self.policy
        if not policy.recorded(outcome):
            await self.store.delete(key)
            return
        encoded = encode_outcome(outcome)
        size = len(orjson.dumps(encoded))
        if not self.retained.fits(size):
            log.warning(
                "detached_outcome_not_retained",
                namespace=self.namespace,
                call_id=run.call.context.call_id,
                bytes=size,
            )
            await self.store.delete(key)
            return
        try:
            evicted = self.retained.admit(key, token, size, principal_name(run.call.context.principal))
        except GatewayError:  # the budget is full of other callers' records: this one is not kept
            log.warning("detached_outcome_not_retained", namespace=self.namespace, bytes=size, full=True)
            await self.store.delete(key)
            return
        done = {
            "status": "done",
            "fingerprint": record["fingerprint"],
            "token": token,
            "outcome": encoded,
            "owner": record.get("owner"),
            "meta": record.get("meta") or {},
        }
        await self.store.set(key, done, policy.retention)
        for old_key, old_token in evicted:
            await self._evict(old_key, old_token)

    async def _evict(self, key: str, token: str) -> None:
        """Delete an old finished record to stay within the budget, unless the key holds a newer one now."""
        record = await self.store.get(key)
        if record is not None and record.get("token") == token and record.get("status") == "done":
            await self.store.delete(key)

    def __repr__(self) -> str:
        return f"DetachedRuns(namespace={self.namespace!r}, retained={len(self.retained)})"


def _pending(call: Call, started: float, policy: DetachedPolicy) -> Outcome:
    return Outcome(
        call_id=call.context.call_id,
        spec=None,
        error=Failure(
            kind=ErrorKind.PENDING,
            message=f"The tool is still running; {policy.collect_hint}",
            developer_message=f"Not finished within the patience of {policy.patience:g} s; the run goes on",
            can_retry=True,
            retry_after_ms=policy.retry_after_ms,
        ),
        duration_ms=(time.monotonic() - started) * 1000,
    )


def encode_outcome(outcome: Outcome) -> dict[str, Any]:
    """The outcome as plain JSON, so a shared store can hold it (and any replica replay it)."""
    return {
        "value": None if outcome.error else orjson.loads(orjson.dumps(outcome.value, option=orjson.OPT_NON_STR_KEYS)),
        "error": outcome.error.to_dict() if outcome.error else None,
        "duration_ms": outcome.duration_ms,
        "upstream": outcome.upstream.to_dict() if outcome.upstream is not None else None,
    }


def replay_outcome(call_id: str, recorded: dict[str, Any]) -> Outcome:
    """The outcome `encode_outcome` stored, for the call `call_id`."""
    error = recorded.get("error")
    upstream = recorded.get("upstream")
    return Outcome(
        call_id=call_id,
        spec=None,
        value=recorded.get("value"),
        error=Failure.from_dict(error) if error else None,
        duration_ms=float(recorded.get("duration_ms") or 0.0),
        upstream=UpstreamAnswer.from_dict(upstream) if isinstance(upstream, dict) else None,
    )


def _lost(call: Call, started: float, policy: DetachedPolicy, *, replica: bool = False) -> Outcome:
    if replica:
        message = (
            f"The gateway replica running {policy.subject} was lost before the call finished; "
            f"it was not run again: {policy.again}"
        )
        developer = "The owner's lease in the state store ran out while its record was still running"
    else:
        message = f"{policy.subject[0].upper()}{policy.subject[1:]} stopped before it finished; {policy.again}"
        developer = "A running record outlived its deadline with no run left to collect"
    return Outcome(
        call_id=call.context.call_id,
        spec=None,
        error=Failure(kind=ErrorKind.INTERNAL, message=message, developer_message=developer),
        duration_ms=(time.monotonic() - started) * 1000,
    )


def _conflict(call_id: str, policy: DetachedPolicy) -> GatewayError:
    return GatewayError.of(
        ErrorKind.MALFORMED,
        f"call_id {call_id!r} was already used for a different call",
        developer_message=(
            f"A call_id is an idempotency key: for {policy.retention:g} s it must name {policy.identity}. "
            "Send a new call_id for a new call."
        ),
    )
