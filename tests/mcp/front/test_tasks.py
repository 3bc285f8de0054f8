"""The MCP tasks extension (io.modelcontextprotocol/tasks, SEP-2663) relayed from an MCP upstream.

Real processes: tests/mcp/reference_server.py (which runs tasks) upstream, two `toolplex serve` replicas
in front of it sharing a real Redis, two API keys. The 2026-07-28 requests are raw HTTP, byte for byte
what the revision asks (`Mcp-Method`, `Mcp-Name`, the `_meta` envelope); the handshake era uses the
`mcp` SDK's client. A task made through one replica is polled through the other: nothing about it lives
in a replica's memory, and its id opens for the caller that made it only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client

from adapters.mcp.server import tasks
from adapters.mcp.server.tasks import EXTENSION, Sealer
from gateway.model import Principal
from gateway.state import MemoryStore
from tests.mcp import conformance
from tests.mcp.front.modern_http import DEADLINE_S, MODERN, Caller, message_of
from tests.mcp.front.two_replicas import ALICE, BOB, fronting_reference

WITH_TASKS = {"extensions": {EXTENSION: {}}, "elicitation": {}}

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[tuple[str, str]]:
    """Two replicas (their MCP URLs) fronting one reference server, sharing one Redis."""
    with fronting_reference(redis_url, tmp_path_factory.mktemp("mcp-tasks")) as urls:
        yield urls


DONE = frozenset({"completed", "failed", "cancelled"})
POLLING = ("ttlMs", "pollIntervalMs")


def test_the_front_advertises_the_extension_on_2026_07_28_only(gateways: tuple[str, str]) -> None:
    a, _ = gateways
    discovered = Caller(ALICE, {}).result(a, "server/discover", {})
    assert discovered["capabilities"]["extensions"] == {EXTENSION: {}}

    params = {"protocolVersion": "2025-11-25", "capabilities": WITH_TASKS, "clientInfo": {"name": "t", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    headers = {"Authorization": f"Bearer {ALICE}", "Accept": "application/json, text/event-stream"}
    initialized = message_of(httpx.post(a, json=body, headers=headers, timeout=DEADLINE_S))
    assert EXTENSION not in (initialized["result"]["capabilities"].get("extensions") or {})


def test_a_task_made_through_one_replica_is_polled_to_its_result_through_the_other(
    gateways: tuple[str, str],
) -> None:
    a, b = gateways
    alice = Caller(ALICE, WITH_TASKS)
    created = alice.call(a, "slow_compute", {"seconds": 0.3, "label": "relayed"})
    assert created["resultType"] == "task" and created["status"] == "working"
    # The upstream's flat CreateTaskResult, every field as it came (the id aside; `_meta` is the gateway's).
    assert set(created) - {"_meta"} == {"resultType", "taskId", "status", "createdAt", "lastUpdatedAt", *POLLING}

    task = alice.poll(b, created["taskId"], DONE)
    assert task["status"] == "completed" and task["resultType"] == "complete"
    assert task["result"]["content"][0]["text"] == "Computed relayed in 0.3 s"
    assert task["createdAt"] == created["createdAt"]


def test_a_task_is_its_callers_only_and_its_id_cannot_be_forged(gateways: tuple[str, str]) -> None:
    a, b = gateways
    alice, bob = Caller(ALICE, WITH_TASKS), Caller(BOB, WITH_TASKS)
    task_id = alice.call(a, "slow_compute", {"seconds": 60})["taskId"]
    tampered = task_id[:-2] + ("AA" if task_id[-2:] != "AA" else "BB")
    for who, method, sent in (
        (bob, "tasks/get", task_id),  # another principal, the very id
        (bob, "tasks/cancel", task_id),
        (bob, "tasks/update", task_id),
        (alice, "tasks/get", tampered),
        (alice, "tasks/get", "0123456789abcdef0123456789abcdef"),  # shaped like an upstream's own id
    ):
        params: dict[str, Any] = {"taskId": sent} | ({"inputResponses": {}} if method == "tasks/update" else {})
        error = who.request(b, method, params)["error"]
        assert error["code"] == types.INVALID_PARAMS and error["message"] == f"Unknown task: {sent}", error
        assert error["data"] == {"taskId": sent}

    assert alice.result(a, "tasks/get", {"taskId": task_id})["status"] == "working"  # bob's cancel reached nothing
    ack = alice.result(b, "tasks/cancel", {"taskId": task_id})
    assert ack["resultType"] == "complete" and not {"taskId", "status"} & set(ack)
    assert alice.poll(a, task_id, DONE)["status"] == "cancelled"
    assert alice.result(a, "tasks/cancel", {"taskId": task_id})["resultType"] == "complete"  # idempotent


def test_a_task_asks_its_caller_through_tasks_get_and_is_answered_through_tasks_update(
    gateways: tuple[str, str],
) -> None:
    a, b = gateways
    alice = Caller(ALICE, WITH_TASKS)
    task_id = alice.call(a, "confirm_delete", {"filename": "notes.txt"})["taskId"]
    waiting = alice.poll(b, task_id, DONE | {"input_required"})
    assert waiting["status"] == "input_required"
    (key, asked), *_ = waiting["inputRequests"].items()
    assert asked["method"] == "elicitation/create" and "notes.txt" in asked["params"]["message"]

    ack = alice.result(a, "tasks/update", {"taskId": task_id, "inputResponses": {key: ACCEPT_CONFIRM}})
    assert ack["resultType"] == "complete" and not {"taskId", "status", "inputRequests"} & set(ack)
    done = alice.poll(b, task_id, DONE)
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Deleted notes.txt"


ACCEPT_CONFIRM = {"action": "accept", "content": {"confirm": True}}


def test_a_tool_error_completes_and_a_protocol_error_fails_as_the_upstream_says(gateways: tuple[str, str]) -> None:
    a, b = gateways
    alice = Caller(ALICE, WITH_TASKS)
    tool_error = alice.poll(b, alice.call(a, "failing_job", {})["taskId"], DONE)
    assert tool_error["status"] == "completed" and tool_error["result"]["isError"] is True
    protocol_error = alice.poll(b, alice.call(a, "protocol_error_job", {})["taskId"], DONE)
    assert protocol_error["status"] == "failed" and "result" not in protocol_error
    assert protocol_error["error"]["code"] == types.INTERNAL_ERROR


def test_without_the_extension_tools_run_inline_and_tasks_are_refused_as_upstream(
    gateways: tuple[str, str],
) -> None:
    a, _ = gateways
    plain = Caller(ALICE, {})
    inline = plain.call(a, "slow_compute", {"seconds": 0, "label": "inline"})
    assert inline["resultType"] == "complete" and "taskId" not in inline
    assert inline["content"][0]["text"] == "Computed inline in 0 s"

    required = plain.request(a, "tools/call", {"name": "failing_job", "arguments": {}})["error"]
    assert required["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY  # the upstream's own answer
    assert required["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    for method in ("tasks/get", "tasks/cancel"):
        refused = plain.request(a, method, {"taskId": "any"})["error"]
        assert refused["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY


def test_mcp_name_must_name_the_task(gateways: tuple[str, str]) -> None:
    a, _ = gateways
    alice = Caller(ALICE, WITH_TASKS)
    task_id = alice.call(a, "slow_compute", {"seconds": 0})["taskId"]
    answer = alice.send(a, "tasks/get", {"taskId": task_id}, name="another-task")
    assert answer.status_code == 400 and message_of(answer)["error"]["code"] == types.HEADER_MISMATCH
    missing = alice.send(a, "tasks/get", {"taskId": task_id})
    assert message_of(missing)["error"]["code"] == types.HEADER_MISMATCH


async def test_a_handshake_era_caller_that_declares_the_extension_never_gets_a_task(
    gateways: tuple[str, str],
) -> None:
    """Its declaration does not go upstream: it has no tasks/get to poll with."""
    a, _ = gateways
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=DEADLINE_S)
    transport = streamable_http_client(a, http_client=http)
    async with Client(
        transport, mode="legacy", extensions=[advertise(EXTENSION)], read_timeout_seconds=DEADLINE_S
    ) as mcp:
        assert mcp.protocol_version != MODERN
        result = await mcp.call_tool("slow_compute", {"seconds": 0, "label": "handshake"})
    assert not result.is_error and result.content[0].text == "Computed handshake in 0 s"  # type: ignore[union-attr]


MISSING = conformance.missing_reason()


@pytest.mark.skipif(MISSING is not None, reason=f"MCP conformance suite not installed: {MISSING}")
def test_the_suites_task_scenarios_pass_through_toolplex(tmp_path: Path) -> None:
    """`make conformance`'s `toolplex-reference` target at 2026-07-28, the tasks extension's scenarios counted."""
    with conformance.toolplex_reference_server() as url:
        rows = conformance.run_version(url, MODERN, tmp_path)
    extension = [row for row in rows if row.category == conformance.EXTENSION]
    assert len(extension) == 10 and all(row.scenario.startswith("tasks-") for row in extension)
    assert [row for row in rows if not row.passed] == []
    assert sum(row.warnings for row in rows) == 0


class _Holder:
    """What a `Sealer` reads of its endpoint: the gateway's state store, here one shared by two 'replicas'."""

    def __init__(self, store: MemoryStore) -> None:
        self.endpoint = SimpleNamespace(services=SimpleNamespace(store=store))


async def test_ids_open_on_every_replica_for_their_principal_only_across_a_lapsed_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MemoryStore()
    a, b = Sealer(_Holder(store)), Sealer(_Holder(store))  # type: ignore[arg-type]
    alice, bob = Principal("alice"), Principal("bob")
    sealed = await a.seal("reference", "upstream-1", alice)
    assert "upstream-1" not in sealed and "reference" not in sealed  # opaque
    assert await b.open(sealed, alice) == ("reference", "upstream-1")
    assert await b.open(sealed, bob) is None and await b.open(sealed, None) is None
    assert await b.open(sealed[:-1] + ("A" if sealed[-1] != "A" else "B"), alice) is None

    await store.delete(tasks.KEY)  # the key lapsed: the next replica to need one writes a new one
    fresh = Sealer(_Holder(store))  # type: ignore[arg-type]
    renewed = await fresh.seal("reference", "upstream-2", alice)
    assert await fresh.open(sealed, alice) is None  # sealed under a key this replica never saw
    monkeypatch.setattr(tasks, "RECHECK_S", 0.0)  # (at most once a second otherwise)
    assert await a.open(renewed, alice) == ("reference", "upstream-2")  # a reads the new key, keeps the old
    assert await a.open(sealed, alice) == ("reference", "upstream-1")
