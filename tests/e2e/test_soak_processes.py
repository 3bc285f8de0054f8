"""Rediscovery does not grow the process tree: a real gateway, a short discovery interval, counted children.

Each rediscovery used to start a new Node.js sidecar and never stop the old
one (~75 MB each, every 30 s in the default configuration). Here the gateway
rediscovers every 50 ms; after at least 20 rounds its descendants are counted
(and their memory summed) with psutil.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.isolation.processes import running, wait_until
from tests.support import ROOT, free_port, wait_for_http

BAD_TOOLS = ROOT / "tests" / "typescript" / "tools"  # BadTs_* (pid, echo, ...) and Plain_Add
URL_TOOLKIT = ROOT / "config" / "typescript" / "url.ts"
MiB = 1024 * 1024

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    base: str
    log: Path

    def rediscoveries(self) -> int:
        return self.log.read_text(errors="replace").count("discovery_refreshed")

    def sidecars(self, module: Path) -> list[psutil.Process]:
        """The gateway's Node.js descendants started for `module` (a file, or a folder of tool modules)."""
        found = []
        for child in psutil.Process(self.process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                argv = child.cmdline()
                if child.status() != psutil.STATUS_ZOMBIE and any(a.startswith(str(module)) for a in argv[2:]):
                    found.append(child)
        return found

    def call(self, tool: str, params: dict[str, Any] | None = None) -> Any:
        body = {"jsonrpc": "2.0", "method": tool, "params": params or {}, "id": "1"}
        answer = httpx.post(f"{self.base}/opentool/call", json=body, timeout=30).json()
        assert answer.get("error") is None, answer
        return answer["result"]  # OpenTool: an object as it is, any other value as {"result": value}


@contextlib.contextmanager
def serve(tmp_path: Path, interval_s: float, bad_pool: int = 2) -> Iterator[Served]:
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "logging: {level: debug}\n"  # discovery_refreshed is a debug event: the count of rediscoveries
        f"discovery: {{interval_s: {interval_s}}}\n"
        "backends:\n"
        f'  - {{name: bad, kind: typescript, modules: ["{BAD_TOOLS}"], pool_size: {bad_pool}}}\n'
        f'  - {{name: url, kind: typescript, modules: ["{URL_TOOLKIT}"], pool_size: 1}}\n'
    )
    port = free_port()
    log = tmp_path / "gateway.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    served = Served(process, f"http://127.0.0.1:{port}", log)
    try:
        wait_for_http(f"{served.base}/healthz", process)
        yield served
    finally:
        with contextlib.suppress(psutil.Error):
            leftovers = psutil.Process(process.pid).children(recursive=True)
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        for child in leftovers:
            with contextlib.suppress(psutil.Error):
                child.kill()


def test_rediscovery_reuses_the_sidecars(tmp_path: Path) -> None:
    with serve(tmp_path, interval_s=0.05) as served:
        with ThreadPoolExecutor(8) as pool:  # concurrent calls may grow `bad` to its pool_size of 2
            texts = list(pool.map(lambda i: served.call("BadTs_Echo", {"text": str(i)})["text"], range(16)))
        assert texts == [str(i) for i in range(16)]

        assert wait_until(lambda: served.rediscoveries() >= 20, timeout=60), f"{served.rediscoveries()} rounds"
        first = {p.pid for p in served.sidecars(BAD_TOOLS)} | {p.pid for p in served.sidecars(URL_TOOLKIT)}
        rounds = served.rediscoveries()
        assert wait_until(lambda: served.rediscoveries() >= rounds + 20, timeout=60)

        bad, url = served.sidecars(BAD_TOOLS), served.sidecars(URL_TOOLKIT)
        assert 1 <= len(bad) <= 2, [p.cmdline() for p in bad]  # pool_size 2
        assert len(url) == 1, [p.cmdline() for p in url]  # pool_size 1
        assert {p.pid for p in bad + url} == first  # the same processes, reused by every round
        descendants = psutil.Process(served.process.pid).children(recursive=True)
        sidecars = {p.pid for p in bad + url}
        # Nothing else was started either: every other descendant is a helper of a sidecar (tsx starts an
        # esbuild service to compile .ts modules when its cache is cold, e.g. on a fresh clone).
        helpers = [p for p in descendants if p.pid not in sidecars]
        assert all(p.ppid() in sidecars for p in helpers), [(p.pid, p.ppid(), p.name()) for p in helpers]
        assert len(helpers) <= len(sidecars), [p.name() for p in helpers]
        rss = sum(p.memory_info().rss for p in descendants)
        print(f"after {served.rediscoveries()} rediscoveries: {len(descendants)} processes, {rss / MiB:.0f} MiB RSS")
        assert rss < len(descendants) * 256 * MiB  # one leaked sidecar per round would be ~40 x 75 MB
        assert served.call("Url_Resolve", {"base": "https://a.org/x/", "reference": "y"}) == {
            "href": "https://a.org/x/y"
        }


def test_a_killed_sidecar_is_restarted_by_the_next_call(tmp_path: Path) -> None:
    with serve(tmp_path, interval_s=0, bad_pool=1) as served:  # no rediscovery: only the call can restart it
        before = served.call("BadTs_Pid")["result"]
        os.kill(before, signal.SIGKILL)
        assert wait_until(lambda: not running(before)), "the sidecar was not killed"

        after = served.call("BadTs_Pid")["result"]

        assert after != before and running(after)
        assert [p.pid for p in served.sidecars(BAD_TOOLS)] == [after]


def test_a_killed_sidecar_is_restarted_by_the_next_discovery(tmp_path: Path) -> None:
    with serve(tmp_path, interval_s=0.05) as served:
        (victim,) = served.sidecars(URL_TOOLKIT)
        victim.kill()
        assert wait_until(lambda: not running(victim.pid)), "the sidecar was not killed"

        restarted = wait_until(lambda: [p.pid for p in served.sidecars(URL_TOOLKIT)] not in ([], [victim.pid]))

        assert restarted, "no discovery round started a new sidecar"
        assert len(served.sidecars(URL_TOOLKIT)) == 1
        assert served.call("Url_Resolve", {"base": "https://a.org/", "reference": "b"}) == {"href": "https://a.org/b"}
