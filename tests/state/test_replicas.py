"""Two `toolplex serve` processes sharing a real Redis act as one gateway (issue 14, point 2).

- a ToolServerNode session begun on A continues on B; what lives on A's disk (the
  session's workspace) and in A's process (its pending calls) is reached through B,
  which forwards to A;
- an OXP call_id sent to A and retried on B runs once, and both get its result,
  byte for byte, from either replica and after both restarted;
- when A is killed mid-call, B answers that call_id with an error saying the
  replica was lost, once A's lease ran out: never a hang, never a second run;
- a result that finished while nobody collected it survives a restart.

Gate.Hold (tests/state/fixtures/gate.py) counts its runs in a file both processes
see, and holds each run until the test opens the gate.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.state.fixtures.gate import runs
from tests.support import served_gateway

LEASE_S = 1
DEADLINE_S = 20.0  # bound on every wait here; a lost replica is answered within a few leases
CONFIG = f"""
server: {{shutdown_grace_s: 2}}
state: {{store: redis, url: "${{REDIS_URL}}", lease_s: {LEASE_S}, key_prefix: "${{KEY_PREFIX}}"}}
workspaces:
  root: "${{WS_ROOT}}"
  shared: ${{WS_SHARED:-false}}
fronts:
  oxp: {{patience_s: 0.3, retry_after_ms: 100}}
  toolserver: {{patience_s: 0.3}}
backends:
  - {{name: gate, kind: python, module: "tests.state.fixtures.gate:toolkit"}}
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
"""


class Cluster:
    """Replicas of one configuration on one Redis; each with its own workspace root."""

    def __init__(self, tmp: Path, redis_url: str) -> None:
        self.tmp = tmp
        self.config = tmp / "gateway.yaml"
        self.config.write_text(CONFIG)
        self.gate = tmp / "gate"
        self.gate.mkdir()
        self.env = {
            "REDIS_URL": redis_url,
            "KEY_PREFIX": f"replicas-{secrets.token_hex(4)}:",
            "TOOLPLEX_TEST_GATE_DIR": str(self.gate),
        }
        self._stack = contextlib.ExitStack()

    def start(self, name: str, *, shared: bool = False) -> tuple[str, subprocess.Popen[bytes]]:
        """A replica named `name` (its log its own, its workspace root too unless `shared`: one volume for all);
        stopped when the cluster closes."""
        root = self.tmp / ("ws-shared" if shared else f"ws-{name}")
        env = {**self.env, "WS_ROOT": str(root), "WS_SHARED": "true" if shared else "false"}
        return self._stack.enter_context(served_gateway(self.config, env, self.tmp / f"{name}.log"))

    def kept_result(self, handle: str) -> bool:
        """A 450 handle's record in Redis holds the finished outcome (so no process memory is needed)."""
        client = redis.Redis.from_url(self.env["REDIS_URL"])
        try:
            raw = client.get(f"{self.env['KEY_PREFIX']}toolserver:~:call:{handle}")  # anonymous: owner ""
        finally:
            client.close()
        return raw is not None and "outcome" in json.loads(raw)

    def open_gate(self) -> None:
        (self.gate / "open").touch()

    def close(self) -> None:
        self.open_gate()  # never leave a run blocked
        self._stack.close()


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str) -> Iterator[Cluster]:
    made = Cluster(tmp_path, redis_url)
    try:
        yield made
    finally:
        made.close()


def until(condition: Callable[[], Any], what: str, deadline_s: float = DEADLINE_S) -> Any:
    """Poll `condition` until it returns something truthy, bounded in time."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def oxp_call(base: str, call_id: str, key: str) -> httpx.Response:
    body = {"call_id": call_id, "tool_id": "Gate.Hold", "input": {"key": key}}
    return httpx.post(f"{base}/tools/call", json=body, timeout=DEADLINE_S)


def finished(base: str, call_id: str, key: str) -> httpx.Response | None:
    """The answer to `call_id` once it is no longer pending (OXP: can_retry with the same call_id)."""
    answer = oxp_call(base, call_id, key)
    body = answer.json()
    pending = body.get("success") is False and "same call_id" in body["error"]["message"]
    return None if pending else answer


def test_a_call_id_retried_on_another_replica_runs_once_and_both_get_the_same_bytes(cluster: Cluster) -> None:
    a, _ = cluster.start("a")
    b, _ = cluster.start("b")
    first = oxp_call(a, "once-1", "once")
    assert first.status_code == 200 and first.json()["success"] is False  # still running after A's patience
    until(lambda: runs("once", cluster.gate) == 1, "the run to start on A")

    retried = oxp_call(b, "once-1", "once")  # B finds A's running record: it waits, it does not run it
    assert "still running" in retried.json()["error"]["message"], retried.text
    cluster.open_gate()

    from_b = until(lambda: finished(b, "once-1", "once"), "B to hand out A's result")
    from_a = oxp_call(a, "once-1", "once")
    assert from_b.json()["success"] is True
    assert from_b.json()["value"]["runs"] == 1
    assert from_a.content == from_b.content  # byte for byte, from either replica
    assert runs("once", cluster.gate) == 1


def test_concurrent_first_calls_on_two_replicas_claim_the_call_id_once(cluster: Cluster) -> None:
    a, _ = cluster.start("a")
    b, _ = cluster.start("b")
    cluster.open_gate()
    with httpx.Client(timeout=DEADLINE_S) as http:
        body = {"call_id": "race-1", "tool_id": "Gate.Hold", "input": {"key": "race"}}
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(lambda base: http.post(f"{base}/tools/call", json=body), [a, b] * 4))
    assert runs("race", cluster.gate) == 1
    done = until(lambda: finished(a, "race-1", "race"), "the result")
    assert done.json()["value"]["runs"] == 1
    assert all(answer.status_code == 200 for answer in answers)


def test_a_replica_killed_mid_call_is_reported_lost_after_its_lease_and_nothing_runs_again(
    cluster: Cluster,
) -> None:
    a, a_process = cluster.start("a")
    b, _ = cluster.start("b")
    assert oxp_call(a, "lost-1", "lost").json()["success"] is False
    until(lambda: runs("lost", cluster.gate) == 1, "the run to start on A")
    os.kill(a_process.pid, signal.SIGKILL)  # no goodbye: its lease must run out
    a_process.wait(timeout=10)

    killed = time.monotonic()
    answer = until(lambda: finished(b, "lost-1", "lost"), "B to report the lost replica", LEASE_S * 3 + 10)
    body = answer.json()
    assert body["success"] is False
    assert "replica running the earlier call with this call_id was lost" in body["error"]["message"]
    assert time.monotonic() - killed >= LEASE_S * 0.5  # it waited for the lease, not less
    cluster.open_gate()
    again = oxp_call(b, "lost-1", "lost")
    assert again.json()["error"]["message"] == body["error"]["message"]
    assert runs("lost", cluster.gate) == 1  # never a second run


def toolserver_session(base: str) -> dict[str, str]:
    answer = httpx.post(f"{base}/get_cookie", timeout=DEADLINE_S)
    assert answer.status_code == 200
    return {"Cookie": f"node_id={answer.cookies['node_id']}"}


def execute(base: str, session: dict[str, str], tool: str, arguments: dict[str, Any]) -> httpx.Response:
    body = {"tool_name": tool, "arguments": arguments}
    return httpx.post(f"{base}/execute_tool", json=body, headers=session, timeout=DEADLINE_S)


def files_under(root: Path, name: str) -> list[Path]:
    return [p for p in root.rglob(name) if p.is_file()] if root.exists() else []


def test_a_toolserver_session_begun_on_one_replica_continues_on_the_other(cluster: Cluster) -> None:
    a, _ = cluster.start("a")
    b, _ = cluster.start("b")
    session = toolserver_session(a)

    added = execute(b, session, "Math_Add", {"a": 2, "b": 3})
    assert (added.status_code, added.json()) == (200, 5)

    files = {"file": ("notes.txt", b"kept on A"), "filename": (None, "notes.txt")}
    uploaded = httpx.post(f"{b}/upload_file", files=files, headers=session, timeout=DEADLINE_S)
    assert (uploaded.status_code, uploaded.json()) == (200, {"message": "Upload Success!"})
    assert files_under(cluster.tmp / "ws-a", "notes.txt")  # the workspace lives on the session's home, A
    assert not files_under(cluster.tmp / "ws-b", "notes.txt")
    downloaded = httpx.post(
        f"{b}/download_file", json={"file_path": "workspace/notes.txt"}, headers=session, timeout=DEADLINE_S
    )
    assert (downloaded.status_code, downloaded.content) == (200, b"kept on A")

    stranger = httpx.post(
        f"{b}/execute_tool",
        json={"tool_name": "Math_Add", "arguments": {"a": 1, "b": 1}},
        headers={"Cookie": "node_id=" + "x" * 43},
        timeout=DEADLINE_S,
    )
    assert stranger.status_code == 403  # an unknown session is unknown on every replica


# Hop-by-hop headers (RFC 9110 section 7.6.1): each describes one connection, never passed on by a proxy.
HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade")


def test_a_forwarded_answer_carries_the_headers_of_one_server(cluster: Cluster) -> None:
    """Issue 26, item 5: B passed back A's `date` and `server` and its own server added them again."""
    a, _ = cluster.start("a")
    b, _ = cluster.start("b")
    session = toolserver_session(a)
    files = {"file": ("notes.txt", b"kept on A"), "filename": (None, "notes.txt")}
    requests: list[tuple[str, dict[str, Any]]] = [
        ("/execute_tool", {"json": {"tool_name": "Math_Add", "arguments": {"a": 2, "b": 3}}}),
        ("/upload_file", {"files": files}),
        ("/download_file", {"json": {"file_path": "workspace/notes.txt"}}),  # a FileResponse on A
        ("/get_workspace_structure", {}),
    ]
    with httpx.Client(timeout=DEADLINE_S, headers=session) as client:  # httpx keeps repeated headers apart
        for path, body in requests:
            forwarded = client.post(f"{b}{path}", **body)
            direct = client.post(f"{a}{path}", **body)  # what A itself answers to the same request
            assert forwarded.status_code == direct.status_code == 200, (path, forwarded.text)
            headers = forwarded.headers
            assert len(headers.get_list("date")) == 1, (path, headers.raw)
            assert headers.get_list("server") == ["uvicorn"], (path, headers.raw)
            assert [name for name in HOP_BY_HOP if name in headers] == [], (path, headers.raw)
            assert len(headers.get_list("transfer-encoding")) <= 1
            assert sorted(name for name, _ in headers.multi_items()) == sorted(
                name for name, _ in direct.headers.multi_items()
            ), path  # the same headers as A's own answer: nothing added, nothing doubled
            assert forwarded.content == direct.content, path


def test_a_pending_call_is_collected_through_another_replica(cluster: Cluster) -> None:
    a, a_process = cluster.start("a")
    b, _ = cluster.start("b")
    session = toolserver_session(a)
    pending = execute(b, session, "Gate_Hold", {"key": "handle"})
    assert pending.status_code == 450
    retry = pending.json()["detail"]
    until(lambda: runs("handle", cluster.gate) == 1, "the run to start")
    cluster.open_gate()

    def collected() -> httpx.Response | None:
        answer = execute(b, session, retry["next_calling"], retry["arguments"])
        return None if answer.status_code == 450 else answer

    answer = until(collected, "the result through B")
    assert answer.status_code == 200
    assert answer.json()["data"]["runs"] == 1, answer.text
    assert answer.json()["data"]["pid"] == a_process.pid  # it ran on the session's home, A
    assert runs("handle", cluster.gate) == 1


def test_what_had_finished_survives_a_restart_of_every_replica(cluster: Cluster) -> None:
    a, a_process = cluster.start("a")
    session = toolserver_session(a)
    pending = execute(a, session, "Gate_Hold", {"key": "kept"})
    assert pending.status_code == 450
    retry = pending.json()["detail"]
    assert oxp_call(a, "kept-1", "kept-oxp").json()["success"] is False
    cluster.open_gate()
    oxp_answer = until(lambda: finished(a, "kept-1", "kept-oxp"), "the OXP result")
    until(lambda: cluster.kept_result(retry["arguments"]["handle"]), "A to keep the finished ToolServer result")

    a_process.send_signal(signal.SIGTERM)  # a graceful stop withdraws A's lease at once
    a_process.wait(timeout=15)
    c, _ = cluster.start("c")  # a new process: nothing of A's memory, only Redis

    again = oxp_call(c, "kept-1", "kept-oxp")
    assert again.content == oxp_answer.content  # the same bytes after the restart
    collected = execute(c, session, retry["next_calling"], retry["arguments"])
    assert collected.status_code == 200  # the session lives on (adopted by C) and its result was kept
    assert collected.json()["data"]["key"] == "kept", collected.text
    added = execute(c, session, "Math_Add", {"a": 1, "b": 1})
    assert (added.status_code, added.json()) == (200, 2)
    assert runs("kept", cluster.gate) == 1 and runs("kept-oxp", cluster.gate) == 1


def test_a_session_whose_home_stopped_keeps_its_files_on_a_shared_volume(cluster: Cluster) -> None:
    """Issue 29, item 2: workspaces where every replica reaches them (`workspaces.shared`)."""
    a, a_process = cluster.start("a", shared=True)
    b, _ = cluster.start("b", shared=True)
    session = toolserver_session(a)
    files = {"file": ("notes.txt", b"written through A"), "filename": (None, "notes.txt")}
    uploaded = httpx.post(f"{a}/upload_file", files=files, headers=session, timeout=DEADLINE_S)
    assert uploaded.status_code == 200, uploaded.text
    a_process.send_signal(signal.SIGTERM)  # A stops gracefully: its lease goes at once, its files stay
    a_process.wait(timeout=15)
    downloaded = httpx.post(
        f"{b}/download_file", json={"file_path": "workspace/notes.txt"}, headers=session, timeout=DEADLINE_S
    )
    assert (downloaded.status_code, downloaded.content) == (200, b"written through A")  # B adopted the session
