"""Load for `make bench`: wrk when it is installed, else a bounded asyncio client.

Every run is bounded in time (wrk's `-d`, the fallback's deadline) and sends only to
loopback. Each answer's body is checked for a substring that only a correct answer
holds: wrong answers are counted, never mistaken for speed.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.compare_trees import Connection


@dataclass(frozen=True)
class Request:
    """One POST, sent again and again; `expect` is a substring of every correct answer."""

    port: int
    path: str
    body: bytes
    expect: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Figures:
    rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    requests: int
    bad: int  # answers that were not 2xx or lacked `expect`, plus socket errors
    tool: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def wrk_path() -> str | None:
    return shutil.which("wrk")


def _lua_string(data: bytes) -> str:
    """A Lua long bracket literal holding `data` verbatim (no escapes are interpreted inside)."""
    text = data.decode()
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


def wrk_script(request: Request) -> str:
    """The request, and a check of every answer, as a wrk Lua script (one thread: counters are global)."""
    headers = "\n".join(
        f"wrk.headers[ {_lua_string(k.encode())} ] = {_lua_string(v.encode())}" for k, v in request.headers
    )
    return f"""
wrk.method = "POST"
wrk.body = {_lua_string(request.body)}
wrk.headers["Content-Type"] = "application/json"
{headers}
local expect = {_lua_string(request.expect)}
local threads = {{}}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0 end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, expect, 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("bad") end
  local e = summary.errors
  io.write(string.format("BENCH %d %d %f %f %f %f %d\\n", summary.requests, total,
    latency:percentile(50), latency:percentile(99), latency.max, summary.duration,
    e.connect + e.read + e.write + e.timeout + e.status))
end
"""


_BENCH_LINE = re.compile(r"^BENCH (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+) ([\d.]+) (\d+)$", re.MULTILINE)


def run_wrk(request: Request, concurrency: int, seconds: float) -> Figures:
    """One wrk thread (the machine is small; one LuaJIT thread outpaces a Python server), `concurrency` connections."""
    wrk = wrk_path()
    assert wrk is not None
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(wrk_script(request))
        script = Path(handle.name)
    try:
        command = [wrk, "-t1", f"-c{concurrency}", f"-d{seconds:g}s", "--timeout", "10s", "-s", str(script)]
        out = subprocess.run(
            [*command, f"http://127.0.0.1:{request.port}{request.path}"],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
        )
    finally:
        script.unlink(missing_ok=True)
    match = _BENCH_LINE.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stdout[-500:]}{out.stderr[-500:]}")
    requests, bad, p50, p99, peak, duration_us, errors = match.groups()
    return Figures(
        rps=int(requests) / (float(duration_us) / 1e6),
        p50_ms=float(p50) / 1000,
        p99_ms=float(p99) / 1000,
        max_ms=float(peak) / 1000,
        requests=int(requests),
        bad=int(bad) + int(errors),
        tool="wrk",
    )


async def _drive(request: Request, concurrency: int, seconds: float, max_requests: int) -> Figures:
    """`concurrency` keep-alive connections sending until `seconds` pass or `max_requests` are sent."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in request.headers)
    conns = [await Connection.open(request.port) for _ in range(concurrency)]
    latencies: list[float] = []
    bad = 0
    sent = iter(range(max_requests))
    started = time.perf_counter()
    deadline = started + seconds

    async def worker(conn: Connection) -> None:
        nonlocal bad
        for _ in sent:
            if time.perf_counter() > deadline:
                return
            begun = time.perf_counter()
            status, _, body = await conn.post(request.path, request.body, extra)
            latencies.append((time.perf_counter() - begun) * 1000)
            if status != 200 or request.expect not in body:
                bad += 1

    try:
        await asyncio.wait_for(asyncio.gather(*(worker(c) for c in conns)), seconds + 30)
    finally:
        for conn in conns:
            await conn.close()
    elapsed = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return Figures(
        rps=len(latencies) / elapsed,
        p50_ms=cuts[49],
        p99_ms=cuts[98],
        max_ms=max(latencies, default=0.0),
        requests=len(latencies),
        bad=bad,
        tool="python",
    )


def run_python(request: Request, concurrency: int, seconds: float, max_requests: int = 1_000_000) -> Figures:
    return asyncio.run(_drive(request, concurrency, seconds, max_requests))


def measure(request: Request, concurrency: int, seconds: float, *, use_wrk: bool) -> Figures:
    if use_wrk:
        return run_wrk(request, concurrency, seconds)
    return run_python(request, concurrency, seconds)
