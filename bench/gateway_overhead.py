"""What the gateway costs per call, as a ratio against a bare server measured in the same run.

Both servers run as subprocesses on loopback; the same client sends the same OpenTool
`/call` (Math_Add) a bounded number of times at a fixed concurrency, in alternating
rounds so that noise on the shared machine hits both alike. Figures are medians over
the rounds. The telling figure is the server's CPU time per request (read from
/proc): a Python client saturates before either server does, so throughput and
latency mostly measure the client, while CPU per request measures the server's work.

    .venv/bin/python -m bench.gateway_overhead [--requests 2000] [--concurrency 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

from tests.support import DEFAULT_CONFIG, gateway_process, python_server

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(marker: str) -> float:
    """User + system CPU of this process's children whose command line contains `marker`."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():  # field 4: the parent's pid
                continue
            if marker.encode() not in (stat.parent / "cmdline").read_bytes():
                continue
            total += (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return total


BODY = b'{"jsonrpc":"2.0","method":"Math_Add","params":{"a":10,"b":5},"id":"bench"}'


async def drive(base: str, requests: int, concurrency: int) -> tuple[float, list[float]]:
    """Requests per second and per-request latencies (ms)."""
    latencies: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(requests):
        queue.put_nowait(index)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:

        async def worker() -> None:
            while not queue.empty():
                queue.get_nowait()
                started = time.perf_counter()
                response = await client.post(
                    "/opentool/call", content=BODY, headers={"content-type": "application/json"}
                )
                latencies.append((time.perf_counter() - started) * 1000)
                if response.json()["result"] != {"result": 15}:
                    raise RuntimeError(f"unexpected answer: {response.text}")

        started = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), timeout=300)
        elapsed = time.perf_counter() - started
    return requests / elapsed, latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"baseline": [], "gateway": []}
    p50: dict[str, list[float]] = {"baseline": [], "gateway": []}
    cpu_ms: dict[str, list[float]] = {"baseline": [], "gateway": []}
    markers = {"baseline": "bench.baseline_server", "gateway": "gateway.cli"}
    with python_server("bench.baseline_server") as port, gateway_process(DEFAULT_CONFIG) as gateway:
        targets = {"baseline": f"http://127.0.0.1:{port}", "gateway": gateway}
        for base in targets.values():  # warm-up
            asyncio.run(drive(base, min(200, args.requests), args.concurrency))
        for _ in range(args.rounds):
            for name, base in targets.items():
                before = cpu_seconds(markers[name])
                rate, latencies = asyncio.run(drive(base, args.requests, args.concurrency))
                cpu_ms[name].append((cpu_seconds(markers[name]) - before) * 1000 / args.requests)
                rates[name].append(rate)
                p50[name].append(statistics.median(latencies))
    base_rate, gw_rate = statistics.median(rates["baseline"]), statistics.median(rates["gateway"])
    base_p50, gw_p50 = statistics.median(p50["baseline"]), statistics.median(p50["gateway"])
    print(f"requests={args.requests} concurrency={args.concurrency} rounds={args.rounds}")
    base_cpu, gw_cpu = statistics.median(cpu_ms["baseline"]), statistics.median(cpu_ms["gateway"])
    print(f"baseline  {base_rate:8.0f} req/s   p50 {base_p50:6.2f} ms   server CPU {base_cpu:.3f} ms/request")
    print(f"gateway   {gw_rate:8.0f} req/s   p50 {gw_p50:6.2f} ms   server CPU {gw_cpu:.3f} ms/request")
    print(f"gateway/baseline: server CPU per request x{gw_cpu / base_cpu:.2f}", end="; ")
    print(f"throughput x{gw_rate / base_rate:.2f}; p50 latency x{gw_p50 / base_p50:.2f} (client-bound)")


if __name__ == "__main__":
    sys.exit(main())
