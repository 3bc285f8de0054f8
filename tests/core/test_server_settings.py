"""`server.loop`, `server.workers` and `logging.calls`: what each setting changes in a running gateway."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import uvloop

from gateway.config import parse_config
from gateway.config.models import LoggingSettings, ServerSettings
from gateway.errors import ConfigError
from gateway.middleware import CallLog
from gateway.serving import event_loop_factory
from tests.support import BUILTIN_BACKENDS, DEFAULT_CONFIG, asgi_client, served_gateway

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/maps")


def problems_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "g.yaml", env={})
    return info.value.problems


def test_the_defaults() -> None:
    server = ServerSettings()
    assert (server.loop, server.workers) == ("asyncio", 1)
    assert LoggingSettings().calls is True
    config = parse_config("", "g.yaml", env={})
    assert config.data["server"]["loop"] == "asyncio" and config.data["server"]["workers"] == 1
    assert config.data["logging"]["calls"] is True


@pytest.mark.parametrize("loop", ["auto", "uvloop", "asyncio"])
def test_every_loop_is_accepted(loop: str) -> None:
    assert parse_config(f"server: {{loop: {loop}}}\n", "g.yaml", env={}).settings.server.loop == loop


def test_an_unknown_loop_is_refused() -> None:
    [problem] = problems_of("server: {loop: trio}\n")
    assert "server.loop" in problem and "'trio'" in problem


@pytest.mark.parametrize("workers", [2, 8, 64])
def test_more_than_one_worker_is_refused_with_the_in_memory_state(workers: int) -> None:
    text = f"backends: []\nserver:\n  port: 8080\n  workers: {workers}\n"
    [problem] = problems_of(text)
    assert problem.startswith("g.yaml:4:")  # the line of `workers:`
    assert "server.workers" in problem
    assert "state.store: memory" in problem
    assert "Use workers: 1" in problem
    [explicit] = problems_of(f"state: {{kind: memory}}\nserver: {{workers: {workers}}}\n")
    assert explicit.startswith("g.yaml:2:") and "server.workers" in explicit and "Use workers: 1" in explicit


def test_one_worker_is_accepted() -> None:
    config = parse_config("server:\n  workers: 1\nstate: {kind: memory}\n", "g.yaml", env={})
    assert config.settings.server.workers == 1


@pytest.mark.parametrize("workers", [0, -1, 65, "many"])
def test_a_worker_count_out_of_range_is_refused(workers: object) -> None:
    [problem] = problems_of(f"server: {{workers: {workers}}}\n")
    assert "server.workers" in problem


def test_the_event_loop_factory() -> None:
    assert event_loop_factory("auto") is uvloop.new_event_loop
    assert event_loop_factory() is None  # the default: asyncio (uvloop accepts one connection per turn)
    assert event_loop_factory("uvloop") is uvloop.new_event_loop
    assert event_loop_factory("asyncio") is None


def test_without_uvloop_auto_falls_back_and_uvloop_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` now raises ImportError
    assert event_loop_factory("auto") is None
    with pytest.raises(ImportError):
        event_loop_factory("uvloop")


def uvloop_mapped(pid: int) -> bool:
    """True when uvloop's compiled extension is mapped into the process."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return any("/uvloop/" in line and ".so" in line for line in maps.splitlines())


@linux_only
def test_toolplex_serve_runs_asyncio_by_default_and_uvloop_when_asked(tmp_path: Path) -> None:
    """asyncio by default: uvloop accepts one connection per loop turn (docs/operations.md, the event loop)."""
    with served_gateway(DEFAULT_CONFIG) as (_base, process):
        assert not uvloop_mapped(process.pid)
    config = tmp_path / "gateway.yaml"
    config.write_text("server: {loop: uvloop}\n" + BUILTIN_BACKENDS)
    with served_gateway(config) as (_base, process):
        assert uvloop_mapped(process.pid)


def rpc_call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": tool, "parameters": arguments}}


async def test_logging_calls_false_leaves_out_the_call_event(events: list[dict[str, Any]]) -> None:
    async with asgi_client("logging: {calls: false}\n" + BUILTIN_BACKENDS) as client:
        chain = client.app.state.gateway.pipeline.middleware  # type: ignore[attr-defined]
        assert not any(isinstance(m, CallLog) for m in chain)
        answer = (await client.post("/rpc", json=rpc_call("Math_Add", {"a": 10, "b": 5}))).json()
    assert answer["result"]["output"] == "15"
    assert [e for e in events if e["event"] == "call"] == []


async def test_by_default_each_call_logs_exactly_one_call_event(events: list[dict[str, Any]]) -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        answer = (await client.post("/rpc", json=rpc_call("Math_Add", {"a": 10, "b": 5}))).json()
    assert answer["result"]["output"] == "15"
    calls = [e for e in events if e["event"] == "call"]
    assert len(calls) == 1
    assert (calls[0]["tool"], calls[0]["outcome"], calls[0]["call_id"]) == (
        "Math_Add",
        "ok",
        answer["result"]["metadata"]["callId"],
    )


async def test_logging_calls_false_keeps_configured_middleware(events: list[dict[str, Any]]) -> None:
    config = "logging: {calls: false}\nmiddleware:\n  - use: gateway.metrics:Metrics\n" + BUILTIN_BACKENDS
    async with asgi_client(config) as client:
        chain = client.app.state.gateway.pipeline.middleware  # type: ignore[attr-defined]
        assert [type(m).__name__ for m in chain] == ["Metrics"]
        answer = (await client.post("/rpc", json=rpc_call("Math_Add", {"a": 1, "b": 2}))).json()
    assert answer["result"]["output"] == "3"
    assert [e for e in events if e["event"] == "call"] == []
