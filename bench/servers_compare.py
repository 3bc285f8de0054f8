"""uvicorn against granian, serving the same bare Starlette app (`bench.servers:app`), by figures.

Each server runs as a subprocess on a free loopback port, one process/worker, no access log.
`wrk` (one thread, a Lua script for the JSON-RPC POST to `/call`, every answer checked) loads
each at 1 and 32 connections, in alternating rounds (ABBA: the order reverses every round) so
that noise on the shared machine hits all alike. Figures are medians over the rounds: req/s,
p50/p99/max latency, and the server's CPU time per request, read from
/proc/<pid>/task/*/schedstat of the server and its children (granian serves from a worker
process) before and after each measurement. Ratios are against uvicorn in the same run.
By default wrk runs on the first CPU and the servers on the others (`--no-pin`: anywhere).

    .venv/bin/python -m bench.servers_compare [--seconds 5] [--warmup 1] [--rounds 3] [--no-pin]

Needs granian (`.venv/bin/pip install granian`) and wrk on the PATH (or /usr/bin/wrk).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

APP = "bench.servers:app"
PATH = "/call"
BODY = '{"jsonrpc":"2.0","method":"Math_Add","params":{"a":10,"b":5},"id":"bench"}'
EXPECT = '{"jsonrpc":"2.0","result":{"result":15},"id":"bench"}'
ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

# name -> command line (the port is appended by `start`)
SERVERS: dict[str, list[str]] = {
    "uvicorn": [
        str(BIN / "uvicorn"),
        APP,
        "--host=127.0.0.1",
        "--loop=uvloop",
        "--http=httptools",
        "--workers=1",
        "--no-access-log",
        "--log-level=warning",
        "--lifespan=off",
        "--port",
    ],
}
GRANIAN = [str(BIN / "granian"), APP, "--interface=asgi", "--workers=1", "--no-access-log", "--log-level=warning"]
SERVERS["granian-h1-uvloop"] = [*GRANIAN, "--http=1", "--loop=uvloop", "--port"]
SERVERS["granian-auto-default"] = [*GRANIAN, "--port"]  # --http auto, --loop auto (rloop, else uvloop)
SERVERS["granian-h1-asyncio"] = [*GRANIAN, "--http=1", "--loop=asyncio", "--port"]
BASELINE = "uvicorn"

LUA = f"""
wrk.method = "POST"
wrk.body = [[{BODY}]]
wrk.headers["Content-Type"] = "application/json"
local expect = [[{EXPECT}]]
local threads = {{}}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0 end
function response(status, headers, body)
  if status ~= 200 or body ~= expect then bad = bad + 1 end
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %f %f %f %d\\n", summary.requests, b,
    e.connect + e.read + e.write + e.timeout + e.status,
    latency:percentile(50), latency:percentile(99), latency.max, summary.duration))
end
"""
RESULT = re.compile(r"^RESULT (\d+) (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+) (\d+)$", re.MULTILINE)


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]

    def cpu_ns(self) -> int:
        """Time on CPU of every thread of the server and of its children, in nanoseconds."""
        total = 0
        with contextlib.suppress(psutil.Error):
            procs = [self.process.pid, *(p.pid for p in psutil.Process(self.process.pid).children(recursive=True))]
            for pid in procs:
                for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        total += int(stat.read_text().split()[0])
        return total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(server: Server, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.process.returncode}")
        url = f"http://127.0.0.1:{server.port}/healthz"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as answer:
            if answer.status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{server.name} not ready after {timeout:g} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGINT to the server, then a kill for it or any of its children still alive after 10 s."""
    children: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        children = psutil.Process(process.pid).children(recursive=True)
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    _, alive = psutil.wait_procs(children, timeout=5)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


@contextlib.contextmanager
def started(names: list[str], pin: bool) -> Iterator[dict[str, Server]]:
    """Every server, each in its own process group, up and answering /healthz; all stopped on the way out.

    With `pin` (and two CPUs or more) the servers and their children inherit every CPU but the first, and
    this process, hence wrk, keeps the first: the client never competes with the server for a CPU.
    """
    servers: dict[str, Server] = {}
    cpus = sorted(os.sched_getaffinity(0))
    pin = pin and len(cpus) > 1
    if pin:
        os.sched_setaffinity(0, set(cpus[1:]))
    try:
        for name in names:
            port = free_port()
            process = subprocess.Popen(
                [*SERVERS[name], str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, start_new_session=True
            )
            servers[name] = Server(name, port, process)
            wait_ready(servers[name])
        if pin:
            os.sched_setaffinity(0, {cpus[0]})
        yield servers
    finally:
        for server in servers.values():
            stop(server.process)


def wrk(
    binary: str, script: Path, port: int, connections: int, seconds: float
) -> tuple[int, int, float, float, float, float]:
    """One wrk run: requests, bad answers (status, body or socket errors), p50/p99/max in ms, duration in s."""
    command = [binary, "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "5s", "--latency", "-s", str(script)]
    out = subprocess.run(
        [*command, f"http://127.0.0.1:{port}{PATH}"], capture_output=True, text=True, timeout=seconds + 30
    )
    match = RESULT.search(out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stdout[-400:]}{out.stderr[-400:]}")
    requests, bad, errors, p50, p99, peak, duration = match.groups()
    return (
        int(requests),
        int(bad) + int(errors),
        float(p50) / 1e3,
        float(p99) / 1e3,
        float(peak) / 1e3,
        int(duration) / 1e6,
    )


def measure(
    binary: str, script: Path, server: Server, connections: int, seconds: float, warmup: float
) -> dict[str, float]:
    if warmup > 0:
        wrk(binary, script, server.port, connections, warmup)
    before = server.cpu_ns()
    requests, bad, p50, p99, peak, duration = wrk(binary, script, server.port, connections, seconds)
    cpu = server.cpu_ns() - before
    if bad:
        raise RuntimeError(f"{server.name}: {bad} bad answers of {requests} at c={connections}")
    return {
        "rps": requests / duration,
        "p50": p50,
        "p99": p99,
        "max": peak,
        "cpu_us": cpu / 1e3 / max(requests, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5, help="length of each measurement (whole seconds: wrk)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured load before each measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--no-pin", action="store_true", help="let wrk and the servers share every CPU")
    parser.add_argument("--servers", nargs="+", default=list(SERVERS), choices=list(SERVERS))
    args = parser.parse_args()
    binary = shutil.which("wrk") or "/usr/bin/wrk"
    names = [BASELINE, *(n for n in args.servers if n != BASELINE)]
    figures: dict[tuple[str, int], list[dict[str, float]]] = {(n, c): [] for n in names for c in args.connections}
    started_at = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, started(names, pin=not args.no_pin) as servers:
        script = Path(tmp) / "call.lua"
        script.write_text(LUA)
        for round_ in range(args.rounds):
            order = names if round_ % 2 == 0 else names[::-1]  # uvicorn, granian..., granian..., uvicorn
            for connections in args.connections:
                for name in order:
                    result = measure(binary, script, servers[name], connections, args.seconds, args.warmup)
                    figures[name, connections].append(result)
                    print(
                        f"round {round_ + 1} c={connections:<3} {name:<21} {result['rps']:8.0f} req/s "
                        f"p50 {result['p50']:6.3f} ms  cpu {result['cpu_us']:6.1f} us/req",
                        file=sys.stderr,
                    )
    print(
        f"\nmedians of {args.rounds} rounds, {args.seconds:g} s each after {args.warmup:g} s warm-up; "
        f"wrk -t1, {'not ' if args.no_pin else ''}pinned apart; ratios vs {BASELINE} (same run); "
        f"{time.monotonic() - started_at:.0f} s; {os.cpu_count()} CPUs"
    )
    keys = ["rps", "p50", "p99", "max", "cpu_us"]
    print(
        f"{'server':<21} {'c':>3} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'cpu us/req':>10}"
        f"   {'x rps':>6} {'x p50':>6} {'x p99':>6} {'x cpu':>6}"
    )
    for connections in args.connections:
        base = {k: statistics.median(r[k] for r in figures[BASELINE, connections]) for k in keys}
        for name in names:
            med = {k: statistics.median(r[k] for r in figures[name, connections]) for k in keys}
            ratio = {k: med[k] / base[k] for k in keys}
            print(
                f"{name:<21} {connections:>3} {med['rps']:>8.0f} {med['p50']:>7.3f} {med['p99']:>7.3f} "
                f"{med['max']:>7.2f} {med['cpu_us']:>10.1f}   {ratio['rps']:>6.2f} "
                f"{ratio['p50']:>6.2f} {ratio['p99']:>6.2f} {ratio['cpu_us']:>6.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
