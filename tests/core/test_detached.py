"""The idempotent-runs service on its own: keys, the `recorded` predicate, precheck, conflicts, patience, budget.

The protocol side (OXP's call_id over HTTP) is proven in tests/oxp; here a
plain async function stands in for the call pipeline, so each rule of the
service is visible without any front.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from gateway.detached import DetachedRuns, Retained
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import Call, CallContext, Outcome, Principal
from gateway.ownership import Shares
from gateway.runs import RunRegistry
from gateway.state import MemoryStore

DEADLINE_S = 10.0  # bound on every wait in this file


class Pipeline:
    """Counts runs per key; `fail` makes a call fail, `gate` holds calls until it is set."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, call: Call) -> Outcome:
        key = call.arguments["key"]
        self.runs[key] += 1
        await asyncio.wait_for(self.gate.wait(), DEADLINE_S)
        if call.arguments.get("fail"):
            failure = Failure(kind=ErrorKind.INVALID_ARGUMENTS, message="bad")
            return Outcome(call_id=call.context.call_id, spec=None, error=failure)
        return Outcome(call_id=call.context.call_id, spec=None, value={"key": key, "runs": self.runs[key]})


def service(
    pipeline: Pipeline, *, precheck: Failure | None = None, patience: float = DEADLINE_S, **bounds: int
) -> tuple[DetachedRuns, MemoryStore]:
    store = MemoryStore()
    runs = DetachedRuns(store, RunRegistry(pipeline), lambda _call: precheck, namespace="ns")
    runs.configure(
        retention=600,
        patience=patience,
        retry_after_ms=250,
        max_bytes=bounds.get("max_bytes", 1_000_000),
        max_entries=bounds.get("max_entries", 100),
        recorded=lambda outcome: outcome.error is None,
        identity="the same thing",
    )
    return runs, store


def call(call_id: str, key: str = "k", principal: str | None = None, **arguments: object) -> Call:
    context = CallContext(call_id=call_id, principal=Principal(principal) if principal else None)
    return Call("T_Tool", {"key": key, **arguments}, context)


async def test_records_are_keyed_by_namespace_quoted_principal_and_key() -> None:
    runs, store = service(Pipeline())
    assert runs.record_key("", "c") == "ns:~:call:c"
    assert runs.record_key("jwt:a:b", "c") != runs.record_key("jwt:a", "b:c")  # a ':' cannot shift the parts
    outcome = await runs.call("c-1", "fp", call("c-1", principal="jwt:ann"), lost_after=60)
    assert outcome.value == {"key": "k", "runs": 1}
    record = await store.get("ns:~jwt%3Aann:call:c-1")
    assert record is not None and record["status"] == "done" and record["fingerprint"] == "fp"


async def test_a_repeat_is_replayed_and_other_principals_run_their_own() -> None:
    pipeline = Pipeline()
    runs, _ = service(pipeline)
    first = await runs.call("r", "fp", call("r"), 60)
    again = await runs.call("r", "fp", call("r"), 60)
    other = await runs.call("r", "fp", call("r", principal="someone"), 60)
    assert (first.value, again.value) == ({"key": "k", "runs": 1}, {"key": "k", "runs": 1})
    assert other.value == {"key": "k", "runs": 2}
    assert pipeline.runs["k"] == 2


async def test_only_outcomes_the_predicate_accepts_are_kept() -> None:
    pipeline = Pipeline()
    runs, store = service(pipeline)
    failed = await runs.call("f", "fp", call("f", fail=True), 60)
    assert failed.error is not None and await store.get("ns:~:call:f") is None
    await runs.call("f", "fp", call("f", fail=True), 60)
    assert pipeline.runs["k"] == 2  # not replayed: it ran again


async def test_a_different_fingerprint_is_a_conflict_naming_the_identity() -> None:
    runs, _ = service(Pipeline())
    await runs.call("x", "fp-1", call("x"), 60)
    with pytest.raises(GatewayError) as info:
        await runs.call("x", "fp-2", call("x"), 60)
    failure = info.value.failure
    assert failure.kind is ErrorKind.MALFORMED
    assert failure.message == "call_id 'x' was already used for a different call"
    assert failure.developer_message == (
        "A call_id is an idempotency key: for 600 s it must name the same thing. Send a new call_id for a new call."
    )


async def test_a_repeat_must_pass_the_precheck_before_it_gets_the_record() -> None:
    pipeline = Pipeline()
    runs, store = service(pipeline)
    await runs.call("p", "fp", call("p"), 60)
    denied = Failure(kind=ErrorKind.FORBIDDEN, message="no longer")
    runs.precheck = lambda _call: denied
    with pytest.raises(GatewayError) as info:
        await runs.call("p", "fp", call("p"), 60)
    assert info.value.failure is denied
    assert (await store.get("ns:~:call:p"))["status"] == "done"  # the record stays for whoever may have it


async def test_after_the_patience_the_answer_is_pending_and_the_same_key_collects_the_run() -> None:
    pipeline = Pipeline()
    pipeline.gate.clear()
    runs, _ = service(pipeline, patience=0.05)
    pending = await runs.call("slow", "fp", call("slow"), 60)
    assert pending.error is not None and pending.error.kind is ErrorKind.PENDING
    assert pending.error.can_retry and pending.error.retry_after_ms == 250
    assert "patience of 0.05 s" in (pending.error.developer_message or "")
    pipeline.gate.set()
    runs.configure(
        retention=600,
        patience=DEADLINE_S,
        retry_after_ms=250,
        max_bytes=1_000_000,
        max_entries=100,
        recorded=lambda outcome: outcome.error is None,
    )
    collected = await runs.call("slow", "fp", call("slow"), 60)
    assert collected.value == {"key": "k", "runs": 1} and pipeline.runs["k"] == 1


async def test_a_key_nobody_was_told_is_recorded_only_once_a_pending_answer_names_it() -> None:
    pipeline = Pipeline()
    runs, store = service(pipeline, patience=0.05)
    quick = await runs.call("made-up", "fp", call("made-up"), 60, told=False)
    assert quick.value == {"key": "k", "runs": 1}
    assert store.count("ns") == 0 and runs.runs.running == 0 and runs.runs.finished == 0  # nothing kept
    pipeline.gate.clear()
    before = time.time()
    pending = await runs.call("slow", "fp", call("slow", key="s"), 60, told=False)
    assert pending.error is not None and pending.error.kind is ErrorKind.PENDING
    record = await store.get("ns:~:call:slow")
    assert record is not None and record["status"] == "running" and record["fingerprint"] == "fp"
    assert before + 60 <= record["lost_at"] <= before + 60.04  # from the call's start, not from its pending answer
    pipeline.gate.set()
    collected = await runs.collect("slow", call("slow", key="s"))
    assert collected is not None and collected[0].value == {"key": "s", "runs": 1} and pipeline.runs["s"] == 1


async def test_an_untold_run_that_ends_while_its_record_is_written_is_still_recorded() -> None:
    pipeline = Pipeline()
    pipeline.gate.clear()
    runs, store = service(pipeline, patience=0.05)
    write = store.set

    async def set_while_the_run_ends(key: str, value: object, ttl: float) -> None:
        pipeline.gate.set()
        await asyncio.sleep(0.01)  # the run ends (and would settle) before the record is there
        await write(key, value, ttl)

    store.set = set_while_the_run_ends  # type: ignore[method-assign]
    pending = await runs.call("race", "fp", call("race"), 60, told=False)
    assert pending.error is not None and pending.error.kind is ErrorKind.PENDING
    store.set = write  # type: ignore[method-assign]
    deadline = time.monotonic() + DEADLINE_S
    while (record := await store.get("ns:~:call:race")) is not None and record["status"] != "done":
        assert time.monotonic() < deadline, record
        await asyncio.sleep(0.005)
    assert record is not None and record["outcome"]["value"] == {"key": "k", "runs": 1}


async def test_an_untold_call_whose_request_went_away_is_forgotten_when_it_ends() -> None:
    pipeline = Pipeline()
    pipeline.gate.clear()
    runs, store = service(pipeline)
    request = asyncio.ensure_future(runs.call("gone", "fp", call("gone"), 60, told=False))
    while not pipeline.runs["k"]:
        await asyncio.sleep(0)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    assert runs.runs.running == 1  # the tool goes on
    pipeline.gate.set()
    deadline = time.monotonic() + DEADLINE_S
    while runs.runs.running or runs.runs.finished:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.005)
    assert store.count("ns") == 0


async def test_a_running_record_with_no_run_past_lost_after_is_reported_lost() -> None:
    pipeline = Pipeline()
    runs, store = service(pipeline)
    await store.set("ns:~:call:gone", {"status": "running", "fingerprint": "fp", "token": "t", "lost_at": 0}, 600)
    lost = await runs.call("gone", "fp", call("gone"), 60)
    assert lost.error is not None and lost.error.kind is ErrorKind.INTERNAL
    assert lost.error.message.startswith("The earlier call with this call_id stopped before it finished")
    assert pipeline.runs == Counter()


async def test_reconfiguring_keeps_the_index_and_applies_the_new_bounds() -> None:
    runs, store = service(Pipeline(), max_entries=3)
    for index in range(3):
        await runs.call(f"b{index}", "fp", call(f"b{index}", key=f"k{index}"), 60)
    assert len(runs.retained) == 3
    runs.configure(
        retention=600,
        patience=DEADLINE_S,
        retry_after_ms=250,
        max_bytes=1_000_000,
        max_entries=1,
        recorded=lambda outcome: outcome.error is None,
    )
    await runs.call("b3", "fp", call("b3", key="k3"), 60)
    assert len(runs.retained) == 1
    assert [await store.get(f"ns:~:call:b{i}") is not None for i in range(4)] == [False, False, False, True]


async def test_calls_before_configure_are_refused() -> None:
    store = MemoryStore()
    runs = DetachedRuns(store, RunRegistry(Pipeline()), lambda _call: None, namespace="ns")
    with pytest.raises(RuntimeError, match="before configure"):
        await runs.call("a", "fp", call("a"), 60)


# ---- the budget index (moved from tests/oxp/test_retention.py) ----


def test_retained_evicts_the_oldest_first_within_bytes_and_count() -> None:
    retained = Retained(max_bytes=100, max_entries=3, retention=600)
    assert retained.admit("a", "t-a", 40) == []
    assert retained.admit("b", "t-b", 40) == []
    assert retained.admit("c", "t-c", 40) == [("a", "t-a")]  # 120 bytes > 100: the oldest goes
    assert (len(retained), retained.bytes) == (2, 80)
    assert retained.admit("d", "t-d", 10) == []
    assert retained.admit("e", "t-e", 10) == [("b", "t-b")]  # 4 entries > 3
    assert retained.admit("c", "t-c2", 50) == []  # re-admitted: counted once, as the newest
    assert (len(retained), retained.bytes) == (3, 70)
    assert retained.admit("f", "t-f", 40) == [("d", "t-d")]  # 110 > 100 without the oldest: 100 fits
    assert (len(retained), retained.bytes) == (3, 100)
    assert not retained.fits(101) and retained.fits(100)


def test_expired_entries_leave_the_index_without_an_eviction(monkeypatch: pytest.MonkeyPatch) -> None:
    retained = Retained(max_bytes=100, max_entries=1, retention=10)
    now = time.monotonic()
    assert retained.admit("a", "t", 10) == []
    monkeypatch.setattr(time, "monotonic", lambda: now + 11)  # "a" expired: the store's TTL removed it
    assert retained.admit("b", "t", 10) == []  # nothing to delete for it
    assert (len(retained), retained.bytes) == (1, 10)


def test_a_principal_over_its_share_of_records_loses_only_its_own() -> None:
    retained = Retained(max_bytes=1000, max_entries=8, retention=600, shares=Shares(0.25))
    assert retained.admit("a1", "t", 10, owner="alice") == []
    evicted = [e for i in range(6) for e in retained.admit(f"b{i}", "t", 10, owner="bob")]
    assert evicted == [("b0", "t"), ("b1", "t"), ("b2", "t"), ("b3", "t")]  # bob keeps his share of 2
    assert len(retained) == 3
