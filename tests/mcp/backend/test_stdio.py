"""The `mcp` backend with the test MCP server as a supervised stdio child: eras, env, restarts, stopping."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import psutil
import pytest

from adapters.mcp.client.backend import McpBackend
from gateway.backends import Health
from gateway.errors import ErrorKind, GatewayError
from tests.isolation.processes import eventually, running
from tests.mcp.backend.support import SERVER_MODULE, TEST_TOOLS, call, dispatcher_for, mcp_backend, stdio_config
from tests.support import ROOT, call_tool, started_gateway


async def health_down(backend: McpBackend, timeout: float = 20.0) -> Health:
    """The backend's health once it says down (polled, bounded): the death is noticed after the exit."""
    deadline = time.monotonic() + timeout
    while (health := await backend.health()).state != "down" and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert health.state == "down", health
    return health


@pytest.mark.parametrize(("era", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_discovery_calls_and_era_over_stdio(era: str, version: str, events: list[dict[str, Any]]) -> None:
    backend = mcp_backend(**stdio_config(era=era))
    try:
        dispatcher = await dispatcher_for(backend)
        assert {s.binding.name for s in dispatcher.catalog.latest()} == set(TEST_TOOLS)
        assert backend.protocol_version == version
        assert (await call(dispatcher, "up_add", {"a": 1, "b": 2})).value == {"sum": 3}
        failed = await call(dispatcher, "up_fail", {"reason": "no"})
        assert failed.error is not None and failed.error.kind is ErrorKind.TOOL_FAILED
        assert (await call(dispatcher, "up_whoami")).value == "none"
        # the server's stderr, line by line in the gateway's log, with its pid
        pid = backend.pid
        assert pid is not None
        assert any(
            e["event"] == "mcp_server_stderr" and e["pid"] == pid and "test MCP server up (stdio" in e["line"]
            for e in events
        )
        assert any(e["event"] == "mcp_connected" and e["transport"] == "stdio" and e["pid"] == pid for e in events)
    finally:
        await backend.close()


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_list_changed_over_stdio(era: str) -> None:
    backend = mcp_backend(**stdio_config(era=era))
    try:
        dispatcher = await dispatcher_for(backend)
        assert (await call(dispatcher, "up_grow")).value == "grown"
        await asyncio.wait_for(backend.tools_changed.wait(), timeout=10)
        assert "up_grown" in {s.flat_name for s in (await dispatcher_for(backend)).catalog.latest()}
    finally:
        await backend.close()


async def test_the_deadline_over_stdio_is_never_sent_twice() -> None:
    backend = mcp_backend(**stdio_config())
    try:
        dispatcher = await dispatcher_for(backend)
        slow = await call(dispatcher, "up_slow", {"seconds": 5}, timeout=0.5)
        assert slow.error is not None and slow.error.kind is ErrorKind.DEADLINE
        assert (await call(dispatcher, "up_count", {"tool": "slow"})).value == "1"
    finally:
        await backend.close()


async def test_env_reaches_the_server_and_nothing_else_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEST_GREETING", "hello from the gateway's environment")
    monkeypatch.setenv("MCP_TEST_NOT_PASSED", "the gateway's own")
    config = f"""
    backends:
      - name: local
        kind: mcp
        command: {sys.executable}
        args: ["-m", "{SERVER_MODULE}"]
        cwd: {ROOT}
        env: {{GREETING: "${{MCP_TEST_GREETING}}", PLAIN: "as written"}}
    """
    gateway = await started_gateway(config)
    try:
        assert (await call_tool(gateway, "local_get__env", {"name": "GREETING"})).value == (
            "hello from the gateway's environment"
        )
        assert (await call_tool(gateway, "local_get__env", {"name": "PLAIN"})).value == "as written"
        assert (await call_tool(gateway, "local_get__env", {"name": "PATH"})).value == os.environ["PATH"]
        missing = await call_tool(gateway, "local_get__env", {"name": "MCP_TEST_NOT_PASSED"})
        assert missing.error is not None and missing.error.message == "MCP_TEST_NOT_PASSED is not set"
    finally:
        await gateway.close()


async def test_a_dead_server_is_restarted(events: list[dict[str, Any]]) -> None:
    backend = mcp_backend(**stdio_config(restart_backoff_s=0.1))
    try:
        dispatcher = await dispatcher_for(backend)
        first = backend.pid
        assert first is not None
        crashed = await call(dispatcher, "up_crash")
        assert crashed.error is not None and crashed.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert "exit status 3" in crashed.error.message and "not sent again" in crashed.error.message
        assert await eventually(lambda: backend.pid not in (None, first), timeout=20), "no new process"
        assert not running(first)
        assert (await call(dispatcher, "up_add", {"a": 2, "b": 2})).value == {"sum": 4}
        exited = [e for e in events if e["event"] == "mcp_server_exited"]
        assert exited and exited[0]["pid"] == first and exited[0]["how"] == "exit status 3"
        assert "crashing on request" in exited[0]["stderr"]
    finally:
        await backend.close()


async def test_restarts_are_bounded_per_minute() -> None:
    backend = mcp_backend(**stdio_config(restarts_per_minute=1, restart_backoff_s=0))
    try:
        dispatcher = await dispatcher_for(backend)
        first = backend.pid
        await call(dispatcher, "up_crash")
        assert await eventually(lambda: backend.pid not in (None, first), timeout=20), "no restart"
        second = backend.pid
        await call(dispatcher, "up_crash")  # a second death within the minute: no second restart
        health = await health_down(backend)
        assert "restarting in" in (health.detail or "") and second is not None and not running(second)
        refused = await call(dispatcher, "up_add", {"a": 1, "b": 1}, timeout=2)
        assert refused.error is not None and refused.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert "restarts_per_minute: 1" in refused.error.message and refused.error.retry_after_ms
        assert backend.pid is None
    finally:
        await backend.close()


async def test_no_restart_when_restarts_are_off() -> None:
    backend = mcp_backend(**stdio_config(restarts_per_minute=0))
    try:
        dispatcher = await dispatcher_for(backend)
        first = backend.pid
        await call(dispatcher, "up_crash")
        health = await health_down(backend)
        assert "not restarted" in (health.detail or "") and first is not None and not running(first)
        with pytest.raises(GatewayError) as raised:
            await backend.discover()
        assert "restarts_per_minute is 0" in raised.value.failure.message
    finally:
        await backend.close()


async def test_close_stops_the_whole_process_group() -> None:
    # `sh` stays the group leader and runs the server as its child: both must go.
    wrapped = f"{sys.executable} -m {SERVER_MODULE}; echo after"
    backend = mcp_backend(command="sh", args=["-c", wrapped], cwd=str(ROOT))
    try:
        await backend.discover()
        leader = backend.pid
        assert leader is not None
        children = [p.pid for p in psutil.Process(leader).children(recursive=True)]
        assert children, "the server runs under sh"
    finally:
        await backend.close()
    assert not running(leader) and not any(running(pid) for pid in children)


async def test_a_command_that_cannot_start_is_unavailable() -> None:
    backend = mcp_backend(command=str(ROOT / "no-such-server"), retries=0)
    try:
        with pytest.raises(GatewayError) as raised:
            await backend.discover()
        assert raised.value.failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert "cannot be started" in raised.value.failure.message
    finally:
        await backend.close()


async def test_a_server_that_exits_at_once_says_why() -> None:
    backend = mcp_backend(command=sys.executable, args=["-c", "import sys; sys.exit('no config here')"], retries=0)
    try:
        with pytest.raises(GatewayError) as raised:
            await backend.discover()
        failure = raised.value.failure
        assert "exit status 1" in failure.message and "no config here" in (failure.developer_message or "")
    finally:
        await backend.close()


async def test_the_catalog_follows_a_list_change_at_once() -> None:
    """Periodic discovery is off: the server's list_changed itself has the backend discovered again."""
    gateway = await started_gateway(
        f"""
        discovery: {{interval_s: 0}}
        backends:
          - {{name: local, kind: mcp, command: {sys.executable}, args: ["-m", "{SERVER_MODULE}"], cwd: {ROOT}}}
        """
    )
    try:
        assert "local_grown" not in {s.flat_name for s in gateway.catalog.latest()}
        assert (await call_tool(gateway, "local_grow")).value == "grown"
        assert await eventually(lambda: "local_grown" in {s.flat_name for s in gateway.catalog.latest()}, timeout=20)
        assert (await call_tool(gateway, "local_grown")).value == "hello from grown"
    finally:
        await gateway.close()
