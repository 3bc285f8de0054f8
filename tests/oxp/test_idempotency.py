"""call_id as an idempotency key, and patience for long calls, proven with a tool that counts its runs.

Counter.Hold counts each run and blocks until the test opens its gate, so
"the call is still running" is a fact the test controls, not a timing guess.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest

from adapters.oxp.codec import fingerprint
from gateway.config import parse_config
from tests.oxp.fixtures import counter
from tests.oxp.helpers import oxp_config
from tests.support import asgi_client

DEADLINE_S = 10.0  # bound on every wait in this file


@pytest.fixture(autouse=True)
async def fresh_counter() -> AsyncIterator[None]:
    counter.reset()
    yield
    counter.open_gate()  # never leave a run blocked


def hold(call_id: str, key: str = "k", **extra: Any) -> dict[str, Any]:
    return {"call_id": call_id, "tool_id": "Counter.Hold", "input": {"key": key}, **extra}


async def until(condition: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Poll `condition` (bounded in time) instead of sleeping for a guessed while."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        result = condition()
        if result if isinstance(result, bool) else await result:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_concurrent_duplicates_wait_for_one_run() -> None:
    async with asgi_client(oxp_config(fronts="patience_s: 30")) as client:

        async def open_when_running() -> None:
            await until(lambda: counter.RUNS["k"] == 1, "the first run to start")
            counter.open_gate()

        *answers, _ = await asyncio.gather(
            *(client.post("/tools/call", json=hold("dup-1")) for _ in range(6)), open_when_running()
        )
        replay = await client.post("/tools/call", json=hold("dup-1"))
    bodies = [a.json() for a in answers]
    assert {a.status_code for a in answers} == {200}
    assert all(b["success"] is True and b["value"] == {"key": "k", "runs": 1} for b in bodies)
    assert {b["call_id"] for b in bodies} == {"dup-1"}
    assert len({b["duration"] for b in bodies}) == 1  # one run, one measured duration
    assert replay.json() == bodies[0]  # replayed from the record, the same bytes as the first answer
    assert counter.RUNS["k"] == 1


async def test_after_the_patience_the_run_goes_on_and_a_retry_collects_it() -> None:
    config = oxp_config(fronts="patience_s: 0.05\nretry_after_ms: 250")
    async with asgi_client(config) as client:
        impatient = await asyncio.gather(*(client.post("/tools/call", json=hold("long-1")) for _ in range(4)))
        for answer in impatient:
            assert answer.status_code == 200
            body = answer.json()
            assert body["call_id"] == "long-1"
            assert body["success"] is False
            assert body["error"]["can_retry"] is True
            assert body["error"]["retry_after_ms"] == 250
            assert "same call_id" in body["error"]["message"]
            assert body["duration"] >= 0
        assert counter.RUNS["k"] == 1  # four requests, one run, still going

        counter.open_gate()
        collected: dict[str, Any] = {}

        async def retry() -> bool:
            r = await client.post("/tools/call", json=hold("long-1"))
            collected.update(r.json())
            return bool(r.json()["success"])

        await until(retry, "a retry to collect the run")
        assert collected["value"] == {"key": "k", "runs": 1}
        again = await client.post("/tools/call", json=hold("long-1"))
    assert again.json() == collected
    assert counter.RUNS["k"] == 1


async def test_the_same_call_id_with_other_input_or_tool_is_a_400() -> None:
    async with asgi_client(oxp_config(fronts="patience_s: 0.05")) as client:
        await client.post("/tools/call", json=hold("c-1"))  # still running (gate closed)
        while_running = await client.post("/tools/call", json=hold("c-1", key="other"))
        counter.open_gate()
        await until(lambda: _done(client, "c-1"), "the run to finish")
        after_done = await client.post("/tools/call", json=hold("c-1", key="other"))
        other_tool = await client.post(
            "/tools/call", json={"call_id": "c-1", "tool_id": "Calculator.Add", "input": {"key": "k"}}
        )
        other_user = await client.post("/tools/call", json=hold("c-1", context={"user_id": "someone"}))
    for response in (while_running, after_done, other_tool, other_user):
        assert response.status_code == 400
        assert response.headers["oxp-version"] == "1.0"
        body = response.json()
        assert body["message"] == "call_id 'c-1' was already used for a different call"
        assert "idempotency key" in body["developer_message"]
    assert counter.RUNS == {"k": 1}


async def _done(client: httpx.AsyncClient, call_id: str) -> bool:
    record = await client.app.state.gateway.store.get(f"oxp:~:call:{call_id}")  # type: ignore[attr-defined]
    return record is not None and record["status"] == "done"


async def test_outcomes_are_recorded_as_json_in_the_state_store() -> None:
    counter.open_gate()
    async with asgi_client(oxp_config()) as client:
        first = await client.post("/tools/call", json=hold("rec-1"))
        record = await client.app.state.gateway.store.get("oxp:~:call:rec-1")  # type: ignore[attr-defined]
    assert record["status"] == "done"
    assert orjson.loads(orjson.dumps(record)) == record  # JSON all the way down: a shared store can hold it
    assert record["outcome"]["value"] == first.json()["value"]
    assert record["outcome"]["error"] is None


async def test_tool_errors_are_replayed_without_running_again() -> None:
    counter.open_gate()
    body = {"call_id": "bell-1", "tool_id": "Doorbell.Ring@0.1.0", "input": {"doorbell_id": "doorbell1"}}
    async with asgi_client(oxp_config()) as client:
        first = await client.post("/tools/call", json=body)
        second = await client.post("/tools/call", json=body)
        record = await client.app.state.gateway.store.get("oxp:~:call:bell-1")  # type: ignore[attr-defined]
    assert first.json()["success"] is False
    assert second.content == first.content
    assert record["outcome"]["error"]["additional_prompt_content"] == "ids: doorbell42,doorbell84"


async def test_failures_before_the_tool_ran_are_not_recorded() -> None:
    """After completing the authorization, the same call_id must run, not replay the challenge."""
    request = {"call_id": "auth-1", "tool_id": "Demo.WhoAmI", "context": {"user_id": "ada"}}
    authorized = {**request, "context": {"user_id": "ada", "authorization": [{"id": "demo", "token": "t"}]}}
    async with asgi_client(oxp_config()) as client:
        challenge = await client.post("/tools/call", json=request)
        store = client.app.state.gateway.store  # type: ignore[attr-defined]
        assert await store.get("oxp:~:call:auth-1") is None
        ran = await client.post("/tools/call", json=authorized)
    assert challenge.status_code == 400
    assert ran.status_code == 200
    assert ran.json()["value"]["user_id"] == "ada"


async def test_invalid_input_is_not_recorded_either() -> None:
    async with asgi_client(oxp_config()) as client:
        bad = await client.post("/tools/call", json=hold("val-1", input={"key": 5}))
        counter.open_gate()
        good = await client.post("/tools/call", json=hold("val-2"))
    assert bad.status_code == 422
    assert good.status_code == 200
    assert counter.RUNS == {"k": 1}


async def test_a_deadline_is_a_retryable_200_and_is_replayed() -> None:
    config = oxp_config(fronts="patience_s: 30").replace(
        'module: "tests.oxp.fixtures.counter:toolkit"}',
        'module: "tests.oxp.fixtures.counter:toolkit", timeouts: {Hold: 0.05}}',
    )
    async with asgi_client(config) as client:
        first = await client.post("/tools/call", json=hold("slow-1"))
        second = await client.post("/tools/call", json=hold("slow-1"))
    body = first.json()
    assert first.status_code == 200
    assert body["success"] is False
    assert body["error"]["can_retry"] is True
    assert "did not finish within 0.05 s" in body["error"]["message"]
    assert second.content == first.content
    assert counter.RUNS["k"] == 1


async def test_call_ids_are_scoped_to_the_caller() -> None:
    counter.open_gate()
    keys = "auth:\n  api_keys:\n    - {name: one, key: key-one-0123456}\n    - {name: two, key: key-two-0123456}\n"
    async with asgi_client(oxp_config(extra=keys)) as client:
        one = await client.post(
            "/tools/call", json=hold("shared", key="a"), headers={"Authorization": "Bearer key-one-0123456"}
        )
        two = await client.post(
            "/tools/call", json=hold("shared", key="b"), headers={"Authorization": "Bearer key-two-0123456"}
        )
    assert one.json()["value"] == {"key": "a", "runs": 1}
    assert two.json()["value"] == {"key": "b", "runs": 1}  # not a conflict, and not the other caller's outcome


async def test_after_the_retention_the_call_id_runs_again() -> None:
    counter.open_gate()
    async with asgi_client(oxp_config(fronts="retention_s: 0.2")) as client:
        first = await client.post("/tools/call", json=hold("ret-1"))
        store = client.app.state.gateway.store  # type: ignore[attr-defined]

        async def expired() -> bool:
            return await store.get("oxp:~:call:ret-1") is None

        await until(expired, "the record to expire")
        second = await client.post("/tools/call", json=hold("ret-1"))
    assert first.json()["value"] == {"key": "k", "runs": 1}
    assert second.json()["value"] == {"key": "k", "runs": 2}


async def test_a_run_in_another_replica_is_polled_through_the_store() -> None:
    """A `running` record with no local run: wait on the shared record, then collect what the other wrote."""
    fp = fingerprint("Counter.Hold", {"key": "k"}, None)
    key = "oxp:~:call:remote-1"
    async with asgi_client(oxp_config(fronts="patience_s: 0.1")) as client:
        store = client.app.state.gateway.store  # type: ignore[attr-defined]
        running = {"status": "running", "fingerprint": fp, "token": "other", "lost_at": time.time() + 600}
        await store.set(key, running, 600)
        pending = await client.post("/tools/call", json=hold("remote-1"))
        outcome = {"value": {"key": "k", "runs": 7}, "error": None, "duration_ms": 12.5}
        await store.set(key, {"status": "done", "fingerprint": fp, "token": "other", "outcome": outcome}, 600)
        collected = await client.post("/tools/call", json=hold("remote-1"))
    assert pending.json()["success"] is False and pending.json()["error"]["can_retry"] is True
    assert collected.json() == {
        "call_id": "remote-1",
        "duration": 12.5,
        "success": True,
        "value": {"key": "k", "runs": 7},
    }
    assert counter.RUNS == {}  # never run here


async def test_a_running_record_past_its_deadline_with_no_run_is_reported_lost() -> None:
    fp = fingerprint("Counter.Hold", {"key": "k"}, None)
    async with asgi_client(oxp_config()) as client:
        store = client.app.state.gateway.store  # type: ignore[attr-defined]
        lost = {"status": "running", "fingerprint": fp, "token": "gone", "lost_at": time.time() - 1}
        await store.set("oxp:~:call:lost-1", lost, 600)
        r = await client.post("/tools/call", json=hold("lost-1"))
    body = r.json()
    assert r.status_code == 200
    assert body["success"] is False
    assert body["error"]["message"].startswith("The earlier call with this call_id stopped before it finished")
    assert counter.RUNS == {}


async def test_a_reload_keeps_the_runs_and_records_and_applies_the_new_settings() -> None:
    """The front is rebuilt on a reload; the idempotent runs it configures are the gateway's and stay."""
    async with asgi_client(oxp_config(fronts="patience_s: 0.05\nretry_after_ms: 250")) as client:
        gateway = client.app.state.gateway  # type: ignore[attr-defined]
        before = await client.post("/tools/call", json=hold("reload-1"))
        reloaded = parse_config(oxp_config(fronts="patience_s: 0.05\nretry_after_ms: 900"), "test.yaml")
        assert await gateway.reload(reloaded)
        after = await client.post("/tools/call", json=hold("reload-1"))
        assert counter.RUNS == {"k": 1}  # the run started before the reload is the one waited for
        counter.open_gate()
        collected: dict[str, Any] = {}

        async def retry() -> bool:
            r = await client.post("/tools/call", json=hold("reload-1"))
            collected.update(r.json())
            return bool(r.json()["success"])

        await until(retry, "a retry to collect the run")
        replayed = await client.post("/tools/call", json=hold("reload-1"))
    assert before.json()["error"]["retry_after_ms"] == 250
    assert after.json()["error"]["retry_after_ms"] == 900  # the new settings apply at once
    assert collected["value"] == {"key": "k", "runs": 1}
    assert replayed.json() == collected
    assert counter.RUNS == {"k": 1}
