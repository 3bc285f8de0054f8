"""Live reload: a new configuration becomes a new snapshot, swapped whole; what did not change is kept.

In-process first (the gateway's own `reload`), then a real `toolplex serve`
reloading on SIGHUP and on a change of its file.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import signal
import textwrap
import weakref
from pathlib import Path

import httpx
import pytest

from gateway.config import parse_config
from gateway.heap import settle_heap
from gateway.model import Call
from gateway.reload import ConfigReloader
from gateway.runtime import Gateway
from tests.isolation.processes import eventually, running, wait_until
from tests.support import ROOT, call_tool, served_gateway, started_gateway

MATH = "  - {name: math, kind: python, module: 'adapters.python.toolkits.arithmetic:toolkit'}\n"
TEXT = "  - {name: text, kind: python, module: 'adapters.python.toolkits.text:toolkit'}\n"
DEMO = "  - {name: demo, kind: python, module: 'adapters.python.toolkits.demo:toolkit'}\n"
URL_TS = ROOT / "config" / "typescript" / "url.ts"
URL = f"  - {{name: url, kind: typescript, modules: ['{URL_TS}'], pool_size: 1}}\n"
METRICS = "fronts:\n  metrics: {enabled: true}\nmiddleware:\n  - use: gateway.metrics:Metrics\n"


def config(*backends: str, extra: str = "") -> str:
    return extra + "backends:\n" + "".join(backends)


def parsed(text: str) -> object:
    return parse_config(textwrap.dedent(text), "reload.yaml", env=dict(os.environ))


def names(gateway: Gateway) -> set[str]:
    return {spec.flat_name for spec in gateway.catalog.latest()}


async def test_a_front_waiting_for_the_next_snapshot_wakes_at_a_reload_and_not_before() -> None:
    gateway = await started_gateway(config(MATH))
    try:
        waiting = asyncio.ensure_future(gateway.services.snapshot_swapped())
        await asyncio.sleep(0)  # the waiter is parked on the current snapshot's event
        assert not waiting.done()
        before = gateway.snapshot
        assert await gateway.reload(parsed(config(MATH, TEXT)))  # type: ignore[arg-type]
        await asyncio.wait_for(waiting, 5)
        assert gateway.snapshot is not before
        again = asyncio.ensure_future(gateway.services.snapshot_swapped())  # a new wait needs a new swap
        await asyncio.sleep(0)
        assert not again.done()
        again.cancel()
    finally:
        await gateway.close()


async def test_close_runs_the_fronts_close_hooks_even_when_one_fails() -> None:
    gateway = await started_gateway(config(MATH))
    ran: list[str] = []

    async def failing() -> None:
        ran.append("failing")
        raise RuntimeError("on purpose")

    async def fine() -> None:
        ran.append("fine")
        assert "math" in gateway.backends and not gateway.ready  # before the backends close, after admission stops

    gateway.services.at_close(fine)
    gateway.services.at_close(failing)
    await gateway.close()
    assert ran == ["failing", "fine"]  # newest first, and the failure stopped nothing


async def test_a_backend_added_by_a_reload_serves_its_tools_and_the_others_are_kept() -> None:
    gateway = await started_gateway(config(MATH))
    try:
        math = gateway.backends["math"]
        assert "Text_WordCount" not in names(gateway)
        assert await gateway.reload(parsed(config(MATH, TEXT)))  # type: ignore[arg-type]
        assert "Text_WordCount" in names(gateway) and "Math_Add" in names(gateway)
        assert gateway.backends["math"] is math  # unchanged settings: the very same backend, not restarted
        outcome = await call_tool(gateway, "Text_WordCount", {"text": "one two three"})
        assert outcome.error is None and outcome.value == 3
        assert gateway.reloads == {"ok": 1, "failed": 0}
    finally:
        await gateway.close()


async def test_a_backend_removed_by_a_reload_is_gone_and_closed() -> None:
    gateway = await started_gateway(config(MATH, URL))
    try:
        url = gateway.backends["url"]
        pids = list(url.pids)  # type: ignore[attr-defined]
        assert pids and all(running(pid) for pid in pids)
        assert await gateway.reload(parsed(config(MATH)))  # type: ignore[arg-type]
        assert "url" not in gateway.backends and not any(n.startswith("Url_") for n in names(gateway))
        gone = await call_tool(gateway, "Url_Parse", {"url": "https://example.com/a"})
        assert gone.error is not None and gone.error.kind.value == "not_found"
        assert await eventually(lambda: not any(running(pid) for pid in pids))  # its Node sidecar was stopped
    finally:
        await gateway.close()


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
async def test_a_kept_sidecar_is_not_restarted_by_a_reload() -> None:
    gateway = await started_gateway(config(MATH, URL))
    try:
        url = gateway.backends["url"]
        pids = list(url.pids)  # type: ignore[attr-defined]
        assert await gateway.reload(parsed(config(MATH, URL, TEXT)))  # type: ignore[arg-type]
        assert gateway.backends["url"] is url and list(url.pids) == pids  # type: ignore[attr-defined]
        assert all(running(pid) for pid in pids)
    finally:
        await gateway.close()


async def test_an_invalid_config_keeps_the_running_snapshot_and_is_counted() -> None:
    gateway = await started_gateway(config(MATH))
    try:
        before = gateway.snapshot
        broken = parsed(config(MATH, "  - {name: nowhere, kind: python, module: 'no.such.module:toolkit'}\n"))
        assert not await gateway.reload(broken)  # type: ignore[arg-type]
        assert gateway.snapshot is before and names(gateway) == {s.flat_name for s in before.catalog.latest()}
        assert gateway.reloads == {"ok": 0, "failed": 1}
        outcome = await call_tool(gateway, "Math_Add", {"a": 1, "b": 2})
        assert outcome.value == 3
    finally:
        await gateway.close()


async def test_an_unreadable_or_invalid_file_is_refused_by_the_reloader(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(config(MATH))
    gateway = await started_gateway(config(MATH))
    try:
        reloader = ConfigReloader(gateway, path)
        path.write_text("backends:\n  - {name: math, kind: python}\n")  # `module` is missing
        assert not await reloader.reload_now()
        path.write_text(config(MATH, TEXT))
        assert await reloader.reload_now()
        assert "Text_WordCount" in names(gateway)
        assert gateway.reloads == {"ok": 1, "failed": 1}
    finally:
        await gateway.close()


async def test_a_call_in_flight_finishes_on_the_old_snapshot_across_a_reload() -> None:
    gateway = await started_gateway(config(MATH, DEMO))
    try:
        demo = gateway.backends["demo"]
        closed = asyncio.Event()
        original_close = demo.close

        async def close() -> None:
            closed.set()
            await original_close()

        demo.close = close  # type: ignore[method-assign]
        sleeping = asyncio.create_task(gateway.services.call(Call("Demo_Sleep", {"seconds": 0.5})))
        assert await eventually(lambda: gateway.running == 1)
        assert await gateway.reload(parsed(config(MATH)))  # the call's backend is dropped while it runs
        assert "Demo_Sleep" not in names(gateway)
        assert not closed.is_set()  # not closed under the running call
        outcome = await asyncio.wait_for(sleeping, 10)
        assert outcome.error is None and outcome.value == {"slept": 0.5}
        await asyncio.wait_for(closed.wait(), 10)  # closed once the old configuration's calls ended
        fresh = await call_tool(gateway, "Demo_Sleep", {"seconds": 0})
        assert fresh.error is not None and fresh.error.kind.value == "not_found"
    finally:
        await gateway.close()


async def test_without_watching_the_reloader_starts_no_watcher(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(config(MATH))
    gateway = await started_gateway(config(MATH))
    reloader = ConfigReloader(gateway, path)
    try:
        reloader.start(watch=False)
        assert reloader._watcher is None and reloader._task is not None
    finally:
        await reloader.stop()
        await gateway.close()


def _listed(base: str) -> set[str]:
    return {item["name"] for item in httpx.get(f"{base}/tools", timeout=10).json()["items"]}


def _reloads(base: str) -> str:
    return httpx.get(f"{base}/metrics", timeout=10).text


def test_sighup_reloads_a_served_gateway_and_a_bad_file_keeps_it_running(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(config(MATH, extra=METRICS))
    log = tmp_path / "gateway.log"
    with served_gateway(path, log_path=log, extra_args=["--no-reload"]) as (base, process):
        assert "Text_WordCount" not in _listed(base)
        path.write_text(config(MATH, TEXT, extra=METRICS))
        process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "Text_WordCount" in _listed(base), timeout=20)
        path.write_text("backends: [\n")  # not even YAML
        process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: 'toolplex_config_reloads_total{result="failed"} 1.0' in _reloads(base), timeout=20)
        assert process.poll() is None and "Text_WordCount" in _listed(base)
        assert 'toolplex_config_reloads_total{result="ok"} 1.0' in _reloads(base)
    assert "config_reload_failed" in log.read_text()


def test_a_change_of_the_file_is_picked_up_without_a_signal(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(config(MATH, extra=METRICS))
    with served_gateway(path) as (base, _process):
        assert "Text_WordCount" not in _listed(base)
        path.write_text(config(MATH, TEXT, extra=METRICS))
        assert wait_until(lambda: "Text_WordCount" in _listed(base), timeout=20)


class _Cyclic:
    """Garbage only the cyclic collector can free: it refers to itself."""

    def __init__(self) -> None:
        self.itself = self


def test_garbage_frozen_at_start_is_collected_by_the_first_reload() -> None:
    """`settle_heap(start=True)` freezes without a full collection; the next reload's settle collects what it froze."""
    try:
        left = _Cyclic()
        gone = weakref.ref(left)
        del left
        settle_heap(start=True)
        assert gone() is not None  # frozen with the rest: never scanned meanwhile
        settle_heap()  # a reload's
        assert gone() is None
    finally:
        gc.unfreeze()  # the test process's heap is the collector's again
