"""What the gateway costs per call, as a ratio against a bare server measured in the same run.

Both servers run as subprocesses on loopback; the same client sends the same OpenTool
`/call` (Math_Add) a bounded number of times at a fixed concurrency, in alternating
rounds so that noise on the shared machine hits both alike. Figures are medians over
the rounds.

    .venv/bin/python -m bench.gateway_overhead [--requests 2000] [--concurrency 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import httpx

from tests.support import DEFAULT_CONFIG, gateway_process, python_server

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
    with python_server("bench.baseline_server") as port, gateway_process(DEFAULT_CONFIG) as gateway:
        targets = {"baseline": f"http://127.0.0.1:{port}", "gateway": gateway}
        for base in targets.values():  # warm-up
            asyncio.run(drive(base, min(200, args.requests), args.concurrency))
        for _ in range(args.rounds):
            for name, base in targets.items():
                rate, latencies = asyncio.run(drive(base, args.requests, args.concurrency))
                rates[name].append(rate)
                p50[name].append(statistics.median(latencies))
    base_rate, gw_rate = statistics.median(rates["baseline"]), statistics.median(rates["gateway"])
    base_p50, gw_p50 = statistics.median(p50["baseline"]), statistics.median(p50["gateway"])
    print(f"requests={args.requests} concurrency={args.concurrency} rounds={args.rounds}")
    print(f"baseline  {base_rate:8.0f} req/s   p50 {base_p50:6.2f} ms")
    print(f"gateway   {gw_rate:8.0f} req/s   p50 {gw_p50:6.2f} ms")
    print(f"gateway/baseline throughput ratio {gw_rate / base_rate:.2f}; latency ratio {gw_p50 / base_p50:.2f}")


if __name__ == "__main__":
    sys.exit(main())
