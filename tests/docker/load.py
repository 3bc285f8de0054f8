"""A mixed load through the stack while its replicas are scaled, restarted and killed: what holds, checked.

The load (every kind of request: stateless OpenTool and OXP calls, OXP `call_id`s, ToolServerNode sessions,
MCP sessions of the handshake era and 2026-07-28 calls) runs through nginx while a `Deployment` (loopback
processes, or a real Docker engine) goes through the steps of `run_scenario`: scaled 2 -> 3 -> 1 -> 2,
restarted one by one, one killed. `check` then asks what the issue "Deployments without a failed request"
asks: no request of any kind fails while replicas are scaled or restarted (a session whose home stops goes
on elsewhere, with its files); when one is killed, only requests in flight at that moment may fail; no
request takes 2 s or more; no call runs twice (each ToolServerNode step appends one line to its session's
file, read back whole every step); no finished result is lost (an OXP `call_id` answered earlier answers
the same bytes later, whichever replica is asked).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from tests.mcp.front.modern_http import MODERN, message_of

SLOW_S = 2.0  # no request may take this long
PACE_S = 0.03  # between one worker's requests: a steady load the 2-core machine serves without queueing
HANDSHAKE = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
STEP_TIMEOUT_S = 60.0
SETTLE_S = 1.0  # the load alone, before the first step and after the kill


class _Stopped(Exception):
    """The load is over: a worker ends where it is."""


Timed = Callable[[Callable[[], None]], bool]


class _Stopped(Exception):
    """The load is over: a worker ends where it is."""


Timed = Callable[[Callable[[], None]], bool]


@dataclass
class Result:
    kind: str
    started: float
    ended: float
    ok: bool
    detail: str = ""


class Load:
    """Workers sending requests through nginx until stopped, each result recorded with its times."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.results: list[Result] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self, kind: str, worker: Callable[[httpx.Client, Timed], None]) -> None:
        def run() -> None:
            with httpx.Client(base_url=self.base, timeout=30) as client, contextlib.suppress(_Stopped):
                while not self.stopping.is_set():
                    worker(client, lambda step: self._timed(kind, step))

        thread = threading.Thread(target=run, name=kind, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _timed(self, kind: str, step: Callable[[], None]) -> bool:
        """Send one request (`step`) and record how it went; True when it succeeded."""
        if self.stopping.is_set():
            raise _Stopped
        started = time.monotonic()
        try:
            step()
            ok, detail = True, ""
        except Exception as exc:  # a failed request, whatever failed in it: recorded, the load goes on
            ok, detail = False, f"{type(exc).__name__}: {str(exc)[:300]}"
        ended = time.monotonic()
        with self._lock:
            self.results.append(Result(kind, started, ended, ok, detail))
        self.stopping.wait(PACE_S)
        return ok

    def stop(self) -> list[Result]:
        self.stopping.set()
        for thread in self._threads:
            thread.join(timeout=STEP_TIMEOUT_S)
        with self._lock:
            return list(self.results)


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


# ---- the workers: one kind of request each ----


def opentool(client: httpx.Client, timed: Timed) -> None:
    """Stateless calls, a local tool and the `tools` upstream's, over OpenTool and OXP."""
    for n in itertools.count():

        def add(n: int = n) -> None:
            body = {"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": n, "b": 1}, "id": str(n)}
            answer = client.post("/opentool/call", json=body)
            expect(answer.status_code == 200 and answer.json().get("result") == {"result": n + 1}, answer.text)

        def count() -> None:
            answer = client.post("/tools/call", json={"tool_id": "Text.WordCount", "input": {"text": "a b c"}})
            expect(answer.status_code == 200 and answer.json().get("value") == 3, answer.text)

        timed(add)
        timed(count)


def oxp_call_ids(client: httpx.Client, timed: Timed) -> None:
    """OXP calls with `call_id`s of a tool whose answer differs on every run (the time): each new call, then
    an earlier one again, which must answer the very bytes it answered first (run once, never lost)."""
    answered: list[tuple[str, bytes]] = []
    for n in itertools.count():
        call_id = uuid.uuid4().hex

        def new(call_id: str = call_id) -> None:
            answer = client.post("/tools/call", json={"tool_id": "Time.Now", "input": {}, "call_id": call_id})
            expect(answer.status_code == 200 and "iso" in answer.json().get("value", {}), answer.text)
            answered.append((call_id, answer.content))

        def again(n: int = n) -> None:
            earlier, content = answered[(n * 7) % len(answered)]
            answer = client.post("/tools/call", json={"tool_id": "Time.Now", "input": {}, "call_id": earlier})
            expect(answer.status_code == 200 and answer.content == content, f"{content!r} then {answer.text}")

        timed(new)
        if answered:
            timed(again)


def toolserver(client: httpx.Client, timed: Timed) -> None:
    """A ToolServerNode session appending one line per step to a file of its workspace, reading back the
    whole file each time: a lost file, or a step run twice, shows."""
    client.cookies.clear()
    opened: list[bool] = []

    def open_session() -> None:
        answer = client.post("/get_cookie")
        expect(answer.status_code == 200 and bool(client.cookies.get("node_id")), answer.text)
        opened.append(True)

    timed(open_session)
    if not opened:
        return
    for n in range(1, 60):  # then a new session: new sessions land on the replicas of the moment

        def step(n: int = n) -> None:
            arguments = {"filepath": "steps.txt", "content": f"step {n}"}
            body = {"tool_name": "FileSystemEnv_write_to_file", "arguments": arguments}
            answer = client.post("/execute_tool", json=body)
            expect(answer.status_code == 200, f"{answer.status_code} {answer.text[:300]}")
            lines = re.findall(r"step (\d+)", answer.text)
            expect(lines == [str(i) for i in range(1, n + 1)], f"after step {n} the file holds steps {lines}")

        if not timed(step):  # the step may or may not have run (a request in flight when a replica was
            return  # killed): the file is no witness any more, a new session begins


def mcp_session(client: httpx.Client, timed: Timed) -> None:
    """A handshake-era MCP session: initialize, initialized, then calls; a new session every 60 calls."""
    session: dict[str, str] = {}

    def open_session() -> None:
        params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "load", "version": "1"}}
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        opened = client.post("/mcp", json=body, headers={"Accept": ACCEPT})
        expect(opened.status_code == 200, opened.text)
        session["id"] = opened.headers["mcp-session-id"]
        headers = {"Accept": ACCEPT, "MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session["id"]}
        note = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        expect(note.status_code == 202, note.text)

    timed(open_session)
    if "id" not in session:
        return
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session["id"]}
    for n in range(1, 60):

        def call(n: int = n) -> None:
            params = {"name": "Math_Add", "arguments": {"a": n, "b": 2}}
            body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
            answer = client.post("/mcp", json=body, headers=headers)
            expect(answer.status_code == 200, f"{answer.status_code} {answer.text[:300]}")
            expect(answer.headers.get("mcp-session-id") == session["id"], str(answer.headers))
            expect(message_of(answer)["result"]["content"][0]["text"] == str(n + 2), answer.text)

        timed(call)
    timed(lambda: expect(client.delete("/mcp", headers=headers).status_code == 200, "DELETE of the session"))


def mcp_stateless(client: httpx.Client, timed: Timed) -> None:
    """2026-07-28 calls: no session, every request whole."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "load", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "Math_Add"}
    for n in itertools.count():

        def call(n: int = n) -> None:
            params = {"name": "Math_Add", "arguments": {"a": n, "b": 3}, "_meta": meta}
            body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
            answer = client.post("/mcp", json=body, headers=headers)
            expect(answer.status_code == 200, f"{answer.status_code} {answer.text[:300]}")
            expect(message_of(answer)["result"]["content"][0]["text"] == str(n + 3), answer.text)

        timed(call)
        if n % 50 == 49:
            return


WORKERS: dict[str, Any] = {
    "opentool": opentool,
    "oxp_call_ids": oxp_call_ids,
    "toolserver_a": toolserver,
    "toolserver_b": toolserver,
    "mcp_session_a": mcp_session,
    "mcp_session_b": mcp_session,
    "mcp_stateless": mcp_stateless,
}


class Deployment(Protocol):
    """Replicas behind nginx, changed as `docker compose` changes them."""

    def scale(self, replicas: int) -> None:
        """Start or stop replicas until `replicas` run (stopping: out of DNS, SIGTERM, drained)."""

    def restart_each(self) -> list[str]:
        """Restart every replica, one after the other; their names."""

    def kill_one(self) -> None:
        """SIGKILL one replica."""


@dataclass
class Run:
    """What a scenario did: every request's result, each step's start, the moment of the kill."""

    results: list[Result]
    steps: list[tuple[str, float]] = field(default_factory=list)
    killed_at: float = 0.0
    killed_by: float = 0.0

    def in_flight_at_kill(self) -> list[Result]:
        """Begun before the killed process was gone, ended after the signal was on its way."""
        return [r for r in self.results if r.started < self.killed_by and r.ended >= self.killed_at]

    def report(self) -> str:
        in_flight = self.in_flight_at_kill()
        begun = self.steps[0][1] if self.steps else 0.0
        return (
            summary(self.results)
            + f"\nin flight at the kill: {len(in_flight)}, of which failed: {sum(not r.ok for r in in_flight)}\n"
            + "\n".join(f"{t - begun:6.1f} s  {name}" for name, t in self.steps)
        )


def run_scenario(base: str, deployment: Deployment) -> Run:
    """The load through `base` (nginx) while `deployment` goes 2 -> 3 -> 1 -> 2, restarts each, kills one."""
    load = Load(base)
    for kind, worker in WORKERS.items():
        load.start(kind, worker)
    steps: list[tuple[str, float]] = [("load on 2 replicas", time.monotonic())]
    killed_at = killed_by = 0.0
    try:
        time.sleep(SETTLE_S)  # the load's duration, not a synchronisation: sessions homed on both
        for replicas in (3, 1, 2):
            steps.append((f"scale to {replicas}", time.monotonic()))
            deployment.scale(replicas)
        steps.append(("restart each", time.monotonic()))
        deployment.restart_each()
        # Settled, as a replica is killed in real life: nginx skips a replica for fail_timeout (1 s) after it
        # refused a connection while restarting; the kill of the other one within that second is a double fault.
        time.sleep(2 * SETTLE_S)
        killed_at = time.monotonic()
        steps.append(("kill one", killed_at))
        deployment.kill_one()
        killed_by = time.monotonic()
        time.sleep(2 * SETTLE_S)  # the load's duration on the survivors, not a synchronisation
    finally:
        results = load.stop()
    return Run(results, steps, killed_at, killed_by)


def check(run: Run) -> None:
    """What the issue asks of a scenario's run (see the module docstring)."""
    report = run.report()
    print(report)
    in_flight = run.in_flight_at_kill()
    begun = run.steps[0][1]
    failed = [r for r in run.results if not r.ok and r not in in_flight]
    assert not failed, (
        f"{len(failed)} failed:\n"
        + "\n".join(f"{r.kind} at {r.started - begun:.2f} s: {r.detail}" for r in failed[:20])
        + "\n"
        + report
    )
    slow = [r for r in run.results if r.ok and r.ended - r.started >= SLOW_S]
    assert not slow, [(r.kind, round(r.ended - r.started, 2)) for r in slow]
    assert {r.kind for r in run.results if r.ok} == set(WORKERS), report


def summary(results: list[Result]) -> str:
    lines = []
    for kind in sorted({r.kind for r in results}):
        mine = [r for r in results if r.kind == kind]
        took = sorted(r.ended - r.started for r in mine)
        p99 = took[min(len(took) - 1, int(len(took) * 0.99))]
        failed = sum(not r.ok for r in mine)
        lines.append(
            f"{kind:14} {len(mine):6} requests  {failed} failed  p50 {statistics.median(took) * 1000:6.1f} ms"
            f"  p99 {p99 * 1000:6.1f} ms  max {took[-1] * 1000:6.1f} ms"
        )
    return "\n".join(lines)
