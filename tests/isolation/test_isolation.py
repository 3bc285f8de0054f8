"""`isolation: process`: misbehaving Python tools fail their own call only, in real worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gateway.config import parse_config
from gateway.errors import ConfigError, ErrorKind
from gateway.model import CallContext
from gateway.runtime import Gateway
from tests.isolation.processes import children_of, eventually, running, wait_until
from tests.support import ROOT, call_tool, free_port, started_gateway, wait_for_http

BAD = "tests.isolation.misbehaving:toolkit"
CONFIG = f"""
backends:
  - {{name: bad, kind: python, module: "{BAD}", isolation: process, pool_size: 1, cpu_seconds: 1, memory_mb: 256}}
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
"""


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = await started_gateway(CONFIG)
    try:
        yield gw
    finally:
        await gw.close()


async def worker_pid(gw: Gateway) -> int:
    outcome = await call_tool(gw, "Bad_Pid")
    assert outcome.ok, outcome.error
    return int(outcome.value)


async def test_calls_run_in_one_reused_worker_process(gateway: Gateway) -> None:
    first = await worker_pid(gateway)
    assert first != os.getpid() and running(first)
    assert await worker_pid(gateway) == first  # pooled: the same process serves the next call

    context = CallContext(session_id="s-1", message_id="m-1")
    echoed = await call_tool(gateway, "Bad_Echo", {"text": "hi"}, context=context)
    assert echoed.value == {"text": "hi", "session_id": "s-1", "call_id": context.call_id}  # print() did not interfere
    doubled = await call_tool(gateway, "Bad_Async", {"n": 21})
    assert doubled.value == 42
    assert await worker_pid(gateway) == first


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("Bad_Crash", {}, "died from signal SIGSEGV"),
        ("Bad_Exit", {"status": 3}, "exit status 3"),
        ("Bad_SysExit", {}, "called sys.exit(4)"),
        ("Bad_Leak", {}, "ran out of memory: one call may allocate at most 256 MB"),
        ("Bad_Spin", {}, "used more than its CPU-time limit of 1 s"),
    ],
)
async def test_a_misbehaving_tool_fails_its_call_only(
    gateway: Gateway, tool: str, arguments: dict, expected: str
) -> None:
    before = await worker_pid(gateway)

    outcome = await call_tool(gateway, tool, arguments)

    assert outcome.error is not None
    assert outcome.error.kind is ErrorKind.TOOL_FAILED
    assert expected in outcome.error.message
    assert await eventually(lambda: not running(before)), "the broken worker is still running"
    after = await worker_pid(gateway)  # the pool replaced the worker
    assert after != before and running(after)
    assert (await call_tool(gateway, "Math_Add", {"a": 2, "b": 3})).value == 5  # the gateway keeps serving


async def test_the_wall_deadline_kills_the_worker(gateway: Gateway) -> None:
    before = await worker_pid(gateway)

    outcome = await call_tool(gateway, "Bad_Sleep", {"seconds": 60}, timeout=0.5)

    assert outcome.error is not None and outcome.error.kind is ErrorKind.DEADLINE
    assert not running(before), "the deadline answer came before the worker was gone"
    assert (await call_tool(gateway, "Bad_Sleep", {"seconds": 0})).value == 0
    assert await worker_pid(gateway) != before


async def test_ordinary_failures_keep_the_worker(gateway: Gateway) -> None:
    before = await worker_pid(gateway)

    refused = await call_tool(gateway, "Bad_Refuse")
    assert refused.error is not None
    assert (refused.error.kind, refused.error.message) == (ErrorKind.TOOL_FAILED, "No, not today")
    assert refused.error.developer_message == "Refuse always refuses"
    assert (refused.error.can_retry, refused.error.retry_after_ms) == (True, 250)

    buggy = await call_tool(gateway, "Bad_Buggy")
    assert buggy.error is not None and buggy.error.kind is ErrorKind.INTERNAL
    assert buggy.call_id in buggy.error.message and "KeyError" not in buggy.error.message

    odd = await call_tool(gateway, "Bad_Unencodable")
    assert odd.error is not None and odd.error.kind is ErrorKind.TOOL_FAILED
    assert "not JSON" in odd.error.message

    invalid = await call_tool(gateway, "Bad_Sleep", {"seconds": "long"})
    assert invalid.error is not None and invalid.error.kind is ErrorKind.INVALID_ARGUMENTS

    assert await worker_pid(gateway) == before


async def test_the_pool_runs_at_most_pool_size_calls_at_once() -> None:
    gw = await started_gateway(f"""
        backends:
          - {{name: bad, kind: python, module: "{BAD}", isolation: process, pool_size: 2}}
        """)
    try:
        outcomes = await asyncio.gather(*(call_tool(gw, "Bad_SlowPid", {"seconds": 0.3}) for _ in range(4)))
        pids = {o.value for o in outcomes}
        assert all(o.ok for o in outcomes)
        assert len(pids) == 2  # two calls at a time, each in its own process; the other two reused them
        assert set(gw.backends["bad"].pool.pids) == pids  # type: ignore[attr-defined]
    finally:
        await gw.close()


@pytest.mark.parametrize(
    ("module", "tool"),
    [("tests.isolation.info_module", "InfoModule_Whereami"), ("tests.isolation.info_module:pid_tool", "PidTools_pid")],
    ids=["seed-002-module", "seed-000-tool-object"],
)
async def test_the_other_tool_styles_run_isolated_too(module: str, tool: str) -> None:
    gw = await started_gateway(f"""
        backends:
          - {{name: other, kind: python, module: "{module}", isolation: process}}
        """)
    try:
        outcome = await call_tool(gw, tool, {"tag": "x"})
        assert outcome.ok, outcome.error
        assert outcome.value["tag"] == "x" and outcome.value["pid"] != os.getpid()
        assert outcome.value["pid"] in gw.backends["other"].pool.pids  # type: ignore[attr-defined]
    finally:
        await gw.close()


async def test_closing_the_gateway_kills_busy_and_idle_workers() -> None:
    gw = await started_gateway(f"""
        backends:
          - {{name: bad, kind: python, module: "{BAD}", isolation: process, pool_size: 2}}
        """)
    pool = gw.backends["bad"].pool  # type: ignore[attr-defined]
    busy_call = asyncio.create_task(call_tool(gw, "Bad_Sleep", {"seconds": 60}))
    try:
        assert await eventually(lambda: pool.busy == 1), "the long call did not start"
        idle = await worker_pid(gw)  # the first worker is busy, so this one is new, then idle
        pids = list(pool.pids)
        assert len(pids) == 2 and idle in pids
    finally:
        await gw.close()

    assert not any(running(pid) for pid in pids)
    outcome = await asyncio.wait_for(busy_call, 10)
    assert outcome.error is not None and outcome.error.kind is ErrorKind.TOOL_FAILED


async def test_a_worker_that_cannot_start_is_a_configuration_error() -> None:
    module = "tests.isolation.parent_only:toolkit"
    gw = Gateway(parse_config(f'backends:\n  - {{name: p, kind: python, module: "{module}", isolation: process}}\n'))
    with pytest.raises(ConfigError) as raised:
        await gw.start()
    message = str(raised.value)
    assert "the isolated worker ended with exit status 1" in message
    assert "cannot be imported in an isolated worker" in message  # the worker's own traceback


def test_limits_need_process_isolation() -> None:
    with pytest.raises(ConfigError, match="isolation"):
        parse_config("backends:\n  - {name: m, kind: python, module: x, cpu_seconds: 2}\n")
    with pytest.raises(ConfigError, match="isolation"):
        parse_config("backends:\n  - {name: m, kind: python, module: x, isolation: thread}\n")


def _call(base: str, tool: str, arguments: dict, timeout: float = 10) -> httpx.Response:
    body = {"jsonrpc": "2.0", "method": tool, "params": arguments, "id": "1"}
    return httpx.post(f"{base}/opentool/call", json=body, timeout=timeout)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["shutdown", "gateway-killed"])
def test_no_worker_outlives_the_gateway_process(tmp_path: Path, stop: signal.Signals) -> None:
    """One worker idle, one busy in a long call: after the gateway stops, neither runs on."""
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "server: {shutdown_grace_s: 1}\n"  # the busy call is not waited for (tests/e2e/test_shutdown.py does that)
        f'backends:\n  - {{name: bad, kind: python, module: "{BAD}", isolation: process}}\n'
    )
    port = free_port()
    gateway = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    started = tmp_path / "busy.started"
    busy = threading.Thread(target=_busy_call, args=(base, str(started)))
    try:
        wait_for_http(f"{base}/healthz", gateway)
        assert len(children_of(gateway.pid)) == 1  # started and checked with the gateway
        busy.start()
        assert wait_until(started.exists), "the long call did not start"  # it holds the first worker now
        idle = int(_call(base, "Bad_Pid", {}).json()["result"]["result"])
        assert wait_until(lambda: len(children_of(gateway.pid)) == 2), "expected one busy and one idle worker"
        workers = children_of(gateway.pid)
        assert idle in workers

        gateway.send_signal(stop)
        gateway.wait(timeout=15)

        assert wait_until(lambda: not any(running(pid) for pid in workers)), f"workers {workers} outlived the gateway"
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait(timeout=5)
        busy.join(timeout=15)


def _busy_call(base: str, started: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        _call(base, "Bad_Sleep", {"seconds": 60, "started": started}, timeout=30)
