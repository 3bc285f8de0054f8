"""A long run of the default configuration: does the gateway's memory stay flat?

Starts `toolplex serve` with config/gateway.yaml on a free loopback port and sends, per
kind, `--calls` requests at a fixed concurrency: OXP `/tools/call` with a distinct
`call_id` each (the ledger's worst case), and ToolServerNode `/execute_tool` in one
cookie session. The gateway's resident memory (its own plus its descendants': sidecars,
workers) is read after a warm-up of 10 % of the calls and at the end; the growth between
the two is the figure, with the number of descendant processes. Bounded in count and in
time (`--max-seconds`); traffic goes to loopback only.

    .venv/bin/python -m bench.soak [--calls 100000] [--concurrency 16] [--max-seconds 1800]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil

from tests.support import DEFAULT_CONFIG, gateway_process

RESULTS = Path(__file__).resolve().parent / "results"
Send = Callable[[httpx.AsyncClient, int], Awaitable[int]]


def footprint(port: int) -> tuple[int, int]:
    """(RSS in bytes of the process listening on `port` and its descendants, number of descendants)."""
    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            root = psutil.Process(conn.pid)
            children = root.children(recursive=True)
            return sum(p.memory_info().rss for p in [root, *children] if p.is_running()), len(children)
    raise RuntimeError(f"no process listens on port {port}")


async def oxp_call(http: httpx.AsyncClient, index: int) -> int:
    body = {"call_id": f"soak-{uuid.uuid4().hex}", "tool_id": "Math.Add", "input": {"a": index, "b": 1}}
    return (await http.post("/tools/call", json=body)).status_code


async def execute_tool(http: httpx.AsyncClient, index: int) -> int:
    body = {"tool_name": "Math_Add", "arguments": {"a": index, "b": 1}}
    return (await http.post("/execute_tool", json=body)).status_code


async def drive(base: str, send: Send, calls: int, concurrency: int, stop_at: float) -> dict[int, int]:
    """Send `calls` requests (fewer if `stop_at` passes); count the answers by status."""
    statuses: dict[int, int] = {}
    counter = iter(range(calls))
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        await http.post("/get_cookie")

        async def worker() -> None:
            for index in counter:
                if time.monotonic() > stop_at:
                    return
                status = await send(http, index)
                statuses[status] = statuses.get(status, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return statuses


def soak(kind: str, send: Send, base: str, port: int, calls: int, concurrency: int, stop_at: float) -> dict:
    warm = max(1, calls // 10)
    asyncio.run(drive(base, send, warm, concurrency, stop_at))
    before, _ = footprint(port)
    started = time.monotonic()
    statuses = asyncio.run(drive(base, send, calls, concurrency, stop_at))
    seconds = time.monotonic() - started
    after, descendants = footprint(port)
    sent = sum(statuses.values())
    return {
        "kind": kind,
        "calls": sent,
        "statuses": statuses,
        "seconds": round(seconds, 1),
        "rss_after_warmup_mb": round(before / 2**20, 1),
        "rss_end_mb": round(after / 2**20, 1),
        "growth_pct": round(100 * (after - before) / before, 1),
        "descendant_processes": descendants,
    }


def run_soak(calls: int, concurrency: int, stop_at: float) -> list[dict]:
    """Each kind's soak against one `toolplex serve` of the default configuration; a line per kind printed."""
    rows = []
    with gateway_process(DEFAULT_CONFIG) as base:
        port = int(base.rsplit(":", 1)[1])
        for kind, send in (("oxp /tools/call, distinct call_ids", oxp_call), ("tsn /execute_tool", execute_tool)):
            row = soak(kind, send, base, port, calls, concurrency, stop_at)
            rows.append(row)
            print(
                f"{row['kind']:<36} {row['calls']:>7} calls in {row['seconds']:>6} s  "
                f"RSS {row['rss_after_warmup_mb']} -> {row['rss_end_mb']} MB ({row['growth_pct']:+} %)  "
                f"{row['descendant_processes']} descendant process(es)  statuses {row['statuses']}"
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-seconds", type=float, default=1800)
    args = parser.parse_args()
    rows = run_soak(args.calls, args.concurrency, time.monotonic() + args.max_seconds)
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"soak-{stamp}.json"
    out.write_text(json.dumps({"command": "python -m bench.soak", "args": vars(args), "rows": rows}, indent=2))
    print(f"written: {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
