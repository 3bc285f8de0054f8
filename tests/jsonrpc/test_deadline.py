"""`context.timeout` is the call's deadline: at it the answer is -32001 and the tool is stopped or flagged."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.jsonrpc import probe
from tests.jsonrpc.conftest import CONFIG, execute
from tests.support import asgi_client


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll `condition` until it holds or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


async def test_async_tool_is_cancelled_at_the_deadline(tmp_path: Path) -> None:
    marker = str(tmp_path / "hang")
    async with asgi_client(CONFIG) as client:
        r = await client.post("/rpc", json=execute("Probe_Hang", {"marker": marker}, context={"timeout": 150}))
    error = r.json()["error"]
    assert error["code"] == -32001
    assert error["data"]["kind"] == "deadline_exceeded" and error["data"]["canRetry"] is True
    assert error["data"]["info"] == {"timeout_s": 0.15}
    assert Path(f"{marker}.started").exists()
    assert Path(f"{marker}.cancelled").exists()  # the tool's own coroutine saw CancelledError
    assert not Path(f"{marker}.finished").exists()


async def test_thread_tool_is_abandoned_and_flagged(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    marker = str(tmp_path / "block")
    async with asgi_client(CONFIG) as client:
        r = await client.post("/rpc", json=execute("Probe_Block", {"marker": marker}, context={"timeout": 150}))
        error = r.json()["error"]
        assert error["code"] == -32001
        assert error["data"]["info"] == {"timeout_s": 0.15, "abandoned": "thread"}  # flagged in the answer too
        # Answered while the thread still runs: a thread cannot be stopped, so it is abandoned ...
        assert Path(f"{marker}.started").exists() and not Path(f"{marker}.finished").exists()
        flagged = [e for e in events if e["event"] == "thread_abandoned"]
        # ... and flagged with the call's id, next to the call event that says deadline_exceeded.
        assert [e["call_id"] for e in flagged] == [error["data"]["callId"]]
        assert flagged[0]["log_level"] == "warning"
        calls = [e for e in events if e["event"] == "call"]
        assert [(c["call_id"], c["outcome"]) for c in calls] == [(error["data"]["callId"], "deadline_exceeded")]
        probe.RELEASE.set()
        assert wait_until(lambda: Path(f"{marker}.finished").exists())  # it ran on to its own end


async def test_front_cap_limits_the_requested_timeout(tmp_path: Path) -> None:
    config = CONFIG + "fronts:\n  jsonrpc:\n    max_timeout_ms: 150\n"
    async with asgi_client(config) as client:
        body = execute("Probe_Hang", {"marker": str(tmp_path / "h")}, context={"timeout": 600000})
        error = (await client.post("/rpc", json=body)).json()["error"]
    assert error["code"] == -32001 and error["data"]["info"] == {"timeout_s": 0.15}


async def test_gateway_limit_caps_it_too(tmp_path: Path) -> None:
    config = CONFIG + "limits:\n  max_timeout_s: 0.2\n"
    async with asgi_client(config) as client:
        body = execute("Probe_Hang", {"marker": str(tmp_path / "h")}, context={"timeout": 600000})
        error = (await client.post("/rpc", json=body)).json()["error"]
    assert error["code"] == -32001 and error["data"]["info"] == {"timeout_s": 0.2}


async def test_call_within_its_deadline_succeeds(tmp_path: Path) -> None:
    marker = str(tmp_path / "quick")
    async with asgi_client(CONFIG) as client:
        body = execute("Probe_Hang", {"marker": marker, "seconds": 0}, context={"timeout": 10000})
        answer = (await client.post("/rpc", json=body)).json()
    assert answer["result"]["output"] == "finished"
    assert not Path(f"{marker}.cancelled").exists()
