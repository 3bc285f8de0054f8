"""Graceful shutdown of a real `toolplex serve`: in-flight calls get answers, no process outlives it.

Each gateway runs a TypeScript backend (a Node.js sidecar) and an isolated Python
backend (worker processes). Every process it starts inherits a marker in its
environment, so the test finds them all in /proc, also after the gateway has
exited and they would have been re-parented.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from gateway import runtime
from gateway.config.models import ServerSettings
from gateway.errors import ErrorKind
from gateway.serving import GatewayServer, event_loop_factory, uvicorn_config
from tests.isolation.processes import eventually, running, wait_until
from tests.support import ROOT, call_tool, free_port, started_gateway, wait_for_http

SLOW_TS = ROOT / "tests" / "e2e" / "tools" / "slow.mjs"
SLOW_PY = "tests.isolation.misbehaving:toolkit"  # Bad_Sleep touches `started`, then sleeps
MARK = "TOOLPLEX_SHUTDOWN_TEST_MARK"

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    base: str
    port: int
    log: Path
    mark: str
    answers: dict[str, httpx.Response | BaseException] = field(default_factory=dict)

    def marked(self) -> list[int]:
        """Live processes (the gateway and all it started) carrying this test's marker."""
        return [pid for pid in _pids_with_env(MARK, self.mark) if running(pid)]


def _pids_with_env(name: str, value: str) -> list[int]:
    needle = f"{name}={value}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


@contextlib.contextmanager
def serve(tmp_path: Path, grace: float) -> Iterator[Served]:
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f"server: {{shutdown_grace_s: {grace}}}\n"
        "logging: {level: info}\n"
        "discovery: {interval_s: 0.5}\n"  # rediscovery keeps running while the gateway drains
        "backends:\n"
        f'  - {{name: slow, kind: typescript, modules: ["{SLOW_TS}"]}}\n'
        f'  - {{name: bad, kind: python, module: "{SLOW_PY}", isolation: process, pool_size: 2}}\n'
    )
    port = free_port()
    log = tmp_path / "gateway.log"
    mark = uuid.uuid4().hex
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)],
            cwd=ROOT,
            env={**os.environ, MARK: mark},
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    served = Served(process, f"http://127.0.0.1:{port}", port, log, mark)
    try:
        wait_for_http(f"{served.base}/healthz", process)
        yield served
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        for pid in served.marked():  # never leave anything behind, whatever the test found
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _opentool(base: str, tool: str, params: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "method": tool, "params": params, "id": "1"}
    return httpx.post(f"{base}/opentool/call", json=body, timeout=60)


def _rpc(base: str, tool: str, params: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "method": "tool.execute", "params": {"tool": tool, "parameters": params}, "id": 1}
    return httpx.post(f"{base}/rpc", json=body, timeout=60)


def _in_background(served: Served, name: str, send: Any, *args: Any) -> threading.Thread:
    def run() -> None:
        try:
            served.answers[name] = send(served.base, *args)
        except BaseException as exc:  # recorded: a dropped connection is what the test must rule out
            served.answers[name] = exc

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


def _start_two_calls(served: Served, tmp_path: Path, ts_ms: int, py_s: float) -> list[threading.Thread]:
    """One call in the Node sidecar (OpenTool front), one in an isolated worker (JSON-RPC front); both running."""
    ts_started, py_started = tmp_path / "ts.started", tmp_path / "py.started"
    threads = [
        _in_background(served, "ts", _opentool, "Slow_Sleep", {"ms": ts_ms, "started": str(ts_started)}),
        _in_background(served, "py", _rpc, "Bad_Sleep", {"seconds": py_s, "started": str(py_started)}),
    ]
    assert wait_until(lambda: ts_started.exists() and py_started.exists(), timeout=30), "the calls did not start"
    return threads


def _refuses_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


def _stopped(served: Served, threads: list[threading.Thread]) -> int:
    """Wait (bounded) for the answers and the exit; returns the exit status."""
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), f"call {thread.name} got no answer"
    return served.process.wait(timeout=60)


@needs_node
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_in_flight_calls_finish_within_the_grace_and_nothing_outlives_the_gateway(
    tmp_path: Path, stop: signal.Signals
) -> None:
    with serve(tmp_path, grace=60) as served:
        threads = _start_two_calls(served, tmp_path, ts_ms=4000, py_s=4)
        children = [pid for pid in served.marked() if pid != served.process.pid]
        assert len(children) >= 2, children  # the sidecar and the isolated worker(s)

        served.process.send_signal(stop)

        assert wait_until(lambda: _refuses_connections(served.port), timeout=30), "still accepting connections"
        status = _stopped(served, threads)

        ts, py = served.answers["ts"], served.answers["py"]
        assert isinstance(ts, httpx.Response) and ts.status_code == 200, ts
        assert ts.json()["result"] == {"result": 4000}  # finished normally during the grace
        assert isinstance(py, httpx.Response) and py.status_code == 200, py
        assert py.json()["result"]["output"] == "4.0"  # seed 002 sends a tool's output as text
        assert status == 0
        log = served.log.read_text()
        assert '"calls":2' in log, "both calls were running when the shutdown began"
        assert wait_until(lambda: not served.marked()), f"processes outlived the gateway: {served.marked()}"


@needs_node
def test_calls_still_running_after_the_grace_are_answered_shutting_down(tmp_path: Path) -> None:
    with serve(tmp_path, grace=1) as served:
        threads = _start_two_calls(served, tmp_path, ts_ms=120_000, py_s=120)

        served.process.send_signal(signal.SIGTERM)
        status = _stopped(served, threads)

        ts, py = served.answers["ts"], served.answers["py"]
        assert isinstance(ts, httpx.Response), f"the OpenTool call got no answer: {ts!r}"
        error = ts.json()["error"]
        assert error["code"] == 503 and "shutting down" in error["message"]  # upstream unavailable, OpenTool
        assert isinstance(py, httpx.Response), f"the JSON-RPC call got no answer: {py!r}"
        error = py.json()["error"]
        assert error["code"] == -32603 and "shutting down" in error["message"]  # upstream unavailable, JSON-RPC
        assert status == 0
        assert wait_until(lambda: not served.marked()), f"processes outlived the gateway: {served.marked()}"


@needs_node
def test_sighup_reloads_and_does_not_stop_the_gateway(tmp_path: Path) -> None:
    with serve(tmp_path, grace=5) as served:
        served.process.send_signal(signal.SIGHUP)

        assert wait_until(lambda: "config_reloaded" in served.log.read_text()), "SIGHUP did not reload"
        assert served.process.poll() is None
        assert httpx.get(f"{served.base}/healthz", timeout=5).status_code == 200
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=30) == 0
        assert wait_until(lambda: not served.marked()), f"processes outlived the gateway: {served.marked()}"


# ---- the pieces, in process ----

IN_PROCESS = """
backends:
  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
"""


async def test_drain_waits_for_calls_that_finish_within_the_grace() -> None:
    gateway = await started_gateway(IN_PROCESS)
    try:
        call = asyncio.create_task(call_tool(gateway, "Demo_Sleep", {"seconds": 0.3}))
        await eventually(lambda: gateway.running == 1)

        assert await gateway.drain(grace=30) == 0  # returned when the call was done, not after 30 s

        assert (await call).value == {"slept": 0.3}
        refused = await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})  # no new call once draining
        assert refused.error is not None and refused.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert "shutting down" in refused.error.message and refused.error.can_retry
    finally:
        await gateway.close()


async def test_a_call_that_begins_while_connections_close_is_served_then_new_ones_are_refused() -> None:
    gateway = await started_gateway(IN_PROCESS)
    try:
        quiet = asyncio.Event()  # the server's connections are not all closed yet
        draining = asyncio.create_task(gateway.drain(grace=30, quiet=quiet))
        await asyncio.sleep(0)  # the drain has begun
        late = await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})  # a request the server had accepted
        assert late.error is None and late.value == 3
        assert not draining.done()
        quiet.set()  # the last connection closed: nothing else can bring a call
        assert await asyncio.wait_for(draining, timeout=10) == 0
        refused = await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})
        assert refused.error is not None and "shutting down" in refused.error.message
    finally:
        await gateway.close()


async def test_drain_ends_calls_still_running_after_the_grace_with_an_answer() -> None:
    gateway = await started_gateway(IN_PROCESS)
    try:
        calls = [asyncio.create_task(call_tool(gateway, "Demo_Sleep", {"seconds": 60})) for _ in range(3)]
        await eventually(lambda: gateway.running == 3)

        assert await gateway.drain(grace=0.2) == 3

        for outcome in await asyncio.gather(*calls):  # answered, not cancelled
            assert outcome.error is not None and outcome.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE
            assert outcome.error.message.startswith("The gateway is shutting down")
        assert gateway.running == 0 and gateway.limiter.running == 0
    finally:
        await gateway.close()


async def test_a_second_ctrl_c_ends_the_running_calls_without_waiting_for_the_grace() -> None:
    gateway = await started_gateway(IN_PROCESS)
    try:
        call = asyncio.create_task(call_tool(gateway, "Demo_Sleep", {"seconds": 60}))
        await eventually(lambda: gateway.running == 1)
        draining = asyncio.create_task(gateway.drain(grace=600))
        await eventually(lambda: gateway.admission.shutting_down)

        gateway.hurry()

        assert await asyncio.wait_for(draining, timeout=30) == 1
        outcome = await call
        assert outcome.error is not None and outcome.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE
    finally:
        await gateway.close()


async def test_a_cancellation_that_is_not_the_shutdown_still_cancels() -> None:
    gateway = await started_gateway(IN_PROCESS)
    try:
        call = asyncio.create_task(call_tool(gateway, "Demo_Sleep", {"seconds": 60}))
        await eventually(lambda: gateway.running == 1)
        call.cancel()  # e.g. the client went away
        with pytest.raises(asyncio.CancelledError):
            await call
        assert gateway.running == 0
    finally:
        await gateway.close()


async def test_close_closes_every_backend_even_when_one_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "BACKEND_CLOSE_TIMEOUT_S", 0.2)
    gateway = await started_gateway(IN_PROCESS)
    closed: list[str] = []
    hung = asyncio.Event()

    async def hangs() -> None:
        hung.set()
        await asyncio.Event().wait()  # never returns: cut off by the bound

    async def records() -> None:
        closed.append("math")

    monkeypatch.setattr(gateway.backends["demo"], "close", hangs)
    monkeypatch.setattr(gateway.backends["math"], "close", records)

    await asyncio.wait_for(gateway.close(), timeout=10)

    assert hung.is_set() and closed == ["math"]


def test_a_draining_gateway_fails_readyz_and_serves_on_until_the_drain_ends(tmp_path: Path) -> None:
    """`server.drain_s`: SIGTERM turns /readyz to 503 at once; calls are still answered during the drain; a
    second SIGTERM ends the drain (a stop that need not wait it out)."""
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "server: {drain_s: 120}\n"
        "backends:\n  - {name: math, kind: python, module: 'adapters.python.toolkits.arithmetic:toolkit'}\n"
    )
    port = free_port()
    log = tmp_path / "gateway.log"
    with open(log, "wb") as written:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=written,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/healthz", process)
        assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert wait_until(lambda: httpx.get(f"{base}/readyz", timeout=10).status_code == 503, timeout=20)
        assert httpx.get(f"{base}/readyz", timeout=10).json() == {"status": "draining"}
        body = {"tool_id": "Math.Add", "input": {"a": 2, "b": 3}}
        answer = httpx.post(f"{base}/tools/call", json=body, timeout=10).json()  # still served: a 120 s drain
        assert answer["value"] == 5, answer
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)  # a second signal: no more waiting
        process.wait(timeout=30)
        assert process.returncode == 0
        assert '"event":"drain_started"' in log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


# ---- the server's stop, on both event loops (`toolplex serve` runs uvloop where it is installed) ----

LOOPS = ["asyncio", "uvloop"]
REQUEST = b"POST /call HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}"


async def _answering(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A stand-in for the gateway's app: reads the request and answers b"served"."""
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"6")]})
    await send({"type": "http.response.body", "body": b"served"})


class _StandInGateway:
    """What `GatewayServer` asks of the gateway while it starts and stops; `leave` returns without letting the
    loop run, so nothing is accepted between a test's connects and the stop's first step."""

    version, running, draining, discovery = "test", 0, False, None
    catalog = SimpleNamespace(latest=lambda visible_only: [])

    async def listening(self, host: str, port: int) -> None:
        return None

    async def leave(self) -> None:
        return None

    async def drain(self, grace: float, quiet: asyncio.Event | None = None) -> int:
        if quiet is not None:
            await quiet.wait()
        return 0


async def _started_server() -> tuple[GatewayServer, int]:
    """uvicorn as `toolplex serve` configures it (its HTTP protocol, keep-alive, grace), on a free port."""
    config = uvicorn_config(_answering, ServerSettings(), "127.0.0.1", 0)
    config.load()
    server = GatewayServer(config, _StandInGateway(), grace=5)
    server.lifespan = config.lifespan_class(config)
    await server.startup()
    return server, int(server.servers[0].sockets[0].getsockname()[1])


def _answer(client: socket.socket) -> bytes:
    """Everything the server sent on `client` until it closed the connection (or reset it: raised)."""
    client.settimeout(10)
    received = b""
    while chunk := client.recv(4096):
        received += chunk
    return received


def _on(loop: str, scenario: Any) -> None:
    with asyncio.Runner(loop_factory=event_loop_factory(loop)) as runner:
        runner.run(scenario())


@pytest.mark.parametrize("loop", LOOPS)
def test_stopping_serves_the_connections_already_waiting_and_refuses_later_ones(loop: str) -> None:
    """A stop closes the listener: connections the kernel had accepted for it (waiting in its backlog, their
    requests sent) are served, not reset, whichever the event loop; a connection after the stop is refused, so a
    proxy sends it elsewhere. The loop never runs between the clients' connects and the stop: they all wait in
    the backlog."""

    async def scenario() -> None:
        server, port = await _started_server()
        clients = []
        for _ in range(3):
            client = socket.create_connection(("127.0.0.1", port), timeout=5)
            client.sendall(REQUEST)
            clients.append(client)
        assert not server.server_state.connections  # all three still in the backlog
        await server.shutdown()
        for client in clients:
            with client:
                assert _answer(client).endswith(b"served")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)

    _on(loop, scenario)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_request_still_on_its_way_when_the_listener_closes_is_served(loop: str) -> None:
    """A proxy connects, then sends its request: a stop that begins in between (the connection accepted, nothing
    read on it yet) waits for that request and serves it, rather than closing the connection under it (the
    proxy would see it reset after sending a POST it cannot send again)."""

    async def scenario() -> None:
        server, port = await _started_server()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            assert await eventually(lambda: len(server.server_state.connections) == 1)  # accepted, nothing sent
            stopping = asyncio.create_task(server.shutdown())
            assert await eventually(lambda: not any(s.is_serving() for s in server.servers))
            await asyncio.get_running_loop().sock_sendall(client, REQUEST)  # the request arrives after the close
            client.setblocking(True)
            answer = await asyncio.to_thread(_answer, client)
            await asyncio.wait_for(stopping, timeout=10)
        assert answer.endswith(b"served")

    _on(loop, scenario)
