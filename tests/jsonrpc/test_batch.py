"""Batches (concurrent, answered in order, bounded) and notifications (run, never answered)."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.jsonrpc.conftest import CONFIG, execute
from tests.support import asgi_client


async def test_batch_mixing_valid_and_invalid_entries_is_answered_in_order() -> None:
    batch = [
        execute("Math_Add", {"a": 1, "b": 2}, request_id="one"),
        {"jsonrpc": "2.0", "id": "two", "method": "nope"},
        42,
        execute("Math_Divide", {"a": 1, "b": 0}, request_id=4),
        {"jsonrpc": "1.0", "id": 5, "method": "tool.list"},
        execute("Math_Multiply", {"a": 3, "b": 4}, request_id=6),
        [execute("Math_Add", {"a": 1, "b": 1}, request_id=7)],
        execute("Math_Add", {"a": "x", "b": 1}, request_id=8),
    ]
    async with asgi_client(CONFIG) as client:
        r = await client.post("/rpc", json=batch)
    assert r.status_code == 200
    answers = r.json()
    assert [a["id"] for a in answers] == ["one", "two", None, 4, 5, 6, None, 8]
    assert answers[0]["result"]["output"] == "3"
    assert answers[1]["error"]["code"] == -32601
    assert answers[2]["error"]["code"] == -32600
    assert answers[3]["error"]["code"] == -32000 and answers[3]["error"]["message"] == "Cannot divide by zero"
    assert answers[4]["error"]["code"] == -32600
    assert answers[5]["result"]["output"] == "12"
    assert answers[6]["error"]["code"] == -32600  # a batch inside a batch is not a request
    assert answers[7]["error"]["code"] == -32602
    assert all(a["protocol"] == "1.0.0" and a["jsonrpc"] == "2.0" for a in answers)


async def test_batch_entries_run_concurrently() -> None:
    # Each Rendezvous call returns only once all three run at the same time; run one by one, they would
    # wait out their 5 s deadline and answer -32001 instead.
    group = uuid.uuid4().hex
    batch = [
        execute("Probe_Rendezvous", {"group": group, "size": 3}, request_id=i, context={"timeout": 5000})
        for i in range(3)
    ]
    async with asgi_client(CONFIG) as client:
        answers = (await client.post("/rpc", json=batch)).json()
    assert [a["id"] for a in answers] == [0, 1, 2]
    assert [a["result"]["metadata"]["value"] for a in answers] == [3, 3, 3]


async def test_empty_batch_is_one_32600() -> None:
    async with asgi_client(CONFIG) as client:
        r = await client.post("/rpc", json=[])
    assert r.status_code == 200
    answer = r.json()
    assert isinstance(answer, dict) and answer["id"] is None and answer["error"]["code"] == -32600


async def test_batch_over_the_limit_is_refused_whole(tmp_path: Path) -> None:
    config = CONFIG + "fronts:\n  jsonrpc:\n    max_batch: 3\n"
    markers = [str(tmp_path / f"m{i}") for i in range(4)]
    batch = [execute("Probe_Hang", {"marker": m, "seconds": 0}, request_id=i) for i, m in enumerate(markers)]
    async with asgi_client(config) as client:
        over = (await client.post("/rpc", json=batch)).json()
        at_limit = (await client.post("/rpc", json=batch[:3])).json()
    assert isinstance(over, dict) and over["error"]["code"] == -32600
    assert over["error"]["data"] == {"max_batch": 3} and "at most 3" in over["error"]["message"]
    assert not any(Path(f"{m}.started").exists() for m in markers[3:])  # nothing of the refused batch ran
    assert [a["result"]["output"] for a in at_limit] == ["finished"] * 3


async def test_notification_runs_and_gets_no_answer(tmp_path: Path) -> None:
    marker = str(tmp_path / "note")
    note = {
        "jsonrpc": "2.0",
        "method": "tool.execute",
        "params": {"tool": "Probe_Hang", "parameters": {"marker": marker, "seconds": 0}},
    }
    async with asgi_client(CONFIG) as client:
        r = await client.post("/rpc", json=note)
    assert r.status_code == 204 and r.content == b""
    assert Path(f"{marker}.finished").exists()


async def test_failing_notification_is_not_answered_either() -> None:
    notes = [
        {"jsonrpc": "2.0", "method": "tool.execute", "params": {"tool": "Demo_Fail", "parameters": {"message": "x"}}},
        {"jsonrpc": "2.0", "method": "no.such.method"},
        {"jsonrpc": "2.0", "method": "tool.execute", "params": ["positional"]},
    ]
    async with asgi_client(CONFIG) as client:
        single = await client.post("/rpc", json=notes[0])
        batch = await client.post("/rpc", json=notes)
    assert (single.status_code, single.content) == (204, b"")
    assert (batch.status_code, batch.content) == (204, b"")


async def test_batch_answers_only_the_requests_not_the_notifications() -> None:
    batch = [
        {"jsonrpc": "2.0", "method": "tool.execute", "params": {"tool": "Math_Add", "parameters": {"a": 1, "b": 1}}},
        execute("Math_Add", {"a": 2, "b": 2}, request_id="r"),
        {"jsonrpc": "2.0", "method": "tool.list"},
        {"jsonrpc": "2.0", "method": 5},  # not a valid notification: an Invalid Request, answered with id null
    ]
    async with asgi_client(CONFIG) as client:
        answers = (await client.post("/rpc", json=batch)).json()
    assert len(answers) == 2
    assert answers[0]["id"] == "r" and answers[0]["result"]["output"] == "4"
    assert answers[1]["id"] is None and answers[1]["error"]["code"] == -32600
