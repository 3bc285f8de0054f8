"""Finished OXP calls are kept within a byte budget and a count, and runs are released once settled (issue 10.4).

5,000 calls with distinct call_ids go through a real (in-process) gateway
with a small budget; the idempotent runs' index, the state store and the run
registry must stay within their bounds, and no settled run may stay alive.
The budget index on its own is tested in tests/core/test_detached.py.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from gateway.catalog import Catalog
from gateway.detached import DetachedRuns
from gateway.dispatch import Dispatcher
from gateway.model import Call
from gateway.runs import RunRegistry
from tests.oxp.helpers import oxp_config
from tests.support import asgi_client, track_runs

CALLS = 5_000
CONCURRENCY = 50
MAX_BYTES = 20_000
MAX_ENTRIES = 300


def idempotent_runs_of(app: Any) -> DetachedRuns:
    """The OXP front's idempotent runs: the gateway's service for the "oxp" namespace, as the front configured it."""
    runs: DetachedRuns = app.state.gateway.services.detached("oxp")
    return runs


def add(call_id: str, a: int) -> dict[str, Any]:
    return {"call_id": call_id, "tool_id": "Calculator.Add@1.0.0", "input": {"a": a, "b": 1}}


async def test_5000_distinct_call_ids_stay_within_the_budget() -> None:
    fronts = f"retention_max_bytes: {MAX_BYTES}\nretention_max_entries: {MAX_ENTRIES}"
    async with asgi_client(oxp_config(fronts=fronts)) as client:
        app = client.app  # type: ignore[attr-defined]
        gateway, idempotent = app.state.gateway, idempotent_runs_of(app)
        alive = track_runs(gateway)
        peak = {"bytes": 0, "entries": 0, "stored": 0, "runs": 0}

        async def one(index: int) -> None:
            r = await client.post("/tools/call", json=add(f"id-{index}", index))
            assert r.status_code == 200 and r.json()["value"] == index + 1
            peak["bytes"] = max(peak["bytes"], idempotent.retained.bytes)
            peak["entries"] = max(peak["entries"], len(idempotent.retained))
            peak["stored"] = max(peak["stored"], gateway.store.count("oxp"))
            peak["runs"] = max(peak["runs"], gateway.runs.running + gateway.runs.finished)

        for batch in range(0, CALLS, CONCURRENCY):
            await asyncio.gather(*(one(i) for i in range(batch, min(batch + CONCURRENCY, CALLS))))

        newest = await client.post("/tools/call", json=add(f"id-{CALLS - 1}", CALLS - 1))
        oldest_again = await client.post("/tools/call", json=add("id-0", 0))
        stored = gateway.store.count("oxp")
        settled = (gateway.runs.running, gateway.runs.finished)
        await asyncio.sleep(0)  # let the last settle callbacks run
        gc.collect()
        still_alive = sum(1 for ref in alive if ref() is not None)

    assert peak["bytes"] <= MAX_BYTES and peak["entries"] <= MAX_ENTRIES, peak
    assert peak["stored"] <= MAX_ENTRIES + CONCURRENCY, peak  # done records within the count, plus those running
    assert peak["runs"] <= CONCURRENCY, peak
    assert stored <= MAX_ENTRIES
    assert settled == (0, 0)
    assert still_alive <= 2, still_alive  # settled runs are released, not held by a timer for the retention
    # The newest record is replayed (the same duration); the oldest was evicted first, so it runs again.
    assert newest.json()["value"] == CALLS and newest.headers["oxp-version"] == "1.0"
    assert oldest_again.json()["value"] == 1


async def test_an_outcome_larger_than_the_budget_is_answered_but_not_kept() -> None:
    fronts = "retention_max_bytes: 64"
    async with asgi_client(oxp_config(fronts=fronts)) as client:
        request = {"call_id": "big-1", "tool_id": "Doorbell.Ring@0.1.0", "input": {"doorbell_id": "doorbell1"}}
        first = await client.post("/tools/call", json=request)
        store = client.app.state.gateway.store  # type: ignore[attr-defined]
        record = await store.get("oxp:~:call:big-1")
    assert first.status_code == 200 and first.json()["error"]["message"] == "Doorbell ID not found"
    assert record is None


async def finished_after(registry: RunRegistry, keys: list[str]) -> None:
    """Start one run per key (each ends at once: the tool does not exist) and let them finish."""
    runs = [registry.start(key, Call("Nowhere_Nothing", {})) for key in keys]
    await asyncio.gather(*(run.task for run in runs))
    await asyncio.sleep(0)  # the done callbacks


async def test_uncollected_runs_are_bounded_and_dropped_after_the_retention() -> None:
    """What a ToolServerNode 450 leaves behind when nobody collects it: a bounded map, no timer per run."""
    dispatcher = Dispatcher(Catalog([]), {})
    bounded = RunRegistry(dispatcher.call, retention=600, max_finished=3)
    await finished_after(bounded, [f"k{i}" for i in range(5)])
    assert (bounded.running, bounded.finished) == (0, 3)
    assert bounded.get("k0") is None and bounded.get("k4") is not None  # the oldest went first
    bounded.forget("k4")
    assert bounded.finished == 2 and bounded.get("k4") is None

    expiring = RunRegistry(dispatcher.call, retention=0)
    await finished_after(expiring, ["a", "b"])
    assert expiring.get("a") is None and expiring.finished == 0
