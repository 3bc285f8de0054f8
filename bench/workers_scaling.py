"""Throughput with `server.workers: 2` against one worker, measured in the same run (issue 30).

Starts, per worker count, `toolplex serve` with bench/gateway.yaml, `server.workers` set
and state in a Redis of its own (more than one worker needs a shared store; one worker
gets the same store, so only the worker count differs), and loads the in-process OpenTool
call (Math_Add) and the proxied one (Up_Add, a REST tool of bench/servers.py's upstream)
with wrk at `--concurrency` (64 by default).
Rounds alternate which worker count goes first; the figure is the median over rounds of
each round's own ratio (two workers' req/s over one's), as `make bench` takes its ratios.
The machine's cores are shared with wrk and the upstream, so the ratio says what a
second worker buys on this machine, not on a bigger one: the output names the cores.
`make bench` runs it after the call table (bench/run.py, `--skip-workers` to leave it out).

    .venv/bin/python -m bench.workers_scaling [--rounds 4] [--seconds 3] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

import psutil
import yaml

from bench.cases import FRONTS, cases
from bench.load import Request, measure, wrk_path
from bench.processes import spawn
from bench.run import CONFIG, ROOT, WARMUP_S, cpu_seconds, probe
from tests.state.redis_server import redis_server

# `make bench`'s OpenTool cases (bench/cases.py), in process and proxied: the same requests and checks.
CASES = {f"{c.group} via OpenTool": c for c in cases() if c.server == "gateway" and c.name == FRONTS[0].name}


def config_with_workers(workers: int, directory: Path, redis: str) -> Path:
    """bench/gateway.yaml with `server.workers` set, on the Redis at `redis`."""
    settings = yaml.safe_load(CONFIG.read_text())
    settings.setdefault("server", {})["workers"] = workers
    settings["state"] = {"store": "redis", "url": redis, "key_prefix": f"bench{workers}:"}
    path = directory / f"gateway-{workers}.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def one_round(
    workers: int, upstream: str, redis: str, args: argparse.Namespace, directory: Path
) -> dict[str, dict[str, float]]:
    """Each case's req/s, p99 and CPU per call on a gateway of `workers` workers, started for this round."""
    config = config_with_workers(workers, directory, redis)
    serve = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config)]
    figures: dict[str, dict[str, float]] = {}
    with spawn([*serve, "--no-reload"], ROOT, {"BENCH_UPSTREAM_URL": upstream}) as gateway:
        process = psutil.Process(gateway.process.pid)
        for name, case in CASES.items():
            request = Request(gateway.port, case.path, case.body, case.expect, case.headers)
            asyncio.run(probe(request))
            measure(request, args.concurrency, WARMUP_S, use_wrk=True)
            cpu = cpu_seconds(process)
            result = measure(request, args.concurrency, args.seconds, use_wrk=True)
            cpu = cpu_seconds(process) - cpu
            figures[name] = {
                "rps": result.rps,
                "p99_ms": result.p99_ms,
                "cpu_us": cpu * 1e6 / max(1, result.requests),
                "bad": result.bad,
            }
            print(f"  workers={workers} {name:<26} {result.rps:>8.0f} req/s  p99 {result.p99_ms:6.1f} ms")
    return figures


def run_workers(rounds: int, seconds: float, concurrency: int) -> tuple[list[dict[str, float | str]], str]:
    """Both worker counts, rounds alternating: a row per case (medians, and the median of each round's own
    ratio) and the Markdown table. `make bench` runs it too (bench/run.py)."""
    args = argparse.Namespace(seconds=seconds, concurrency=concurrency)
    results: dict[int, list[dict[str, dict[str, float]]]] = {1: [], 2: []}
    with (
        tempfile.TemporaryDirectory() as directory,
        spawn([sys.executable, "-m", "bench.servers"], ROOT) as upstream,
        redis_server() as redis,
    ):
        for index in range(rounds):
            for workers in (1, 2) if index % 2 == 0 else (2, 1):
                results[workers].append(one_round(workers, upstream.base, redis, args, Path(directory)))
    rows: list[dict[str, float | str]] = []
    lines = [
        f"{os.cpu_count()} cores, c={concurrency}, {rounds} rounds of {seconds} s (medians)",
        "",
        "| case | 1 worker req/s | 2 workers req/s | ratio | p99 1 → 2 (ms) | CPU µs/call 1 → 2 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in CASES:
        one = [r[name] for r in results[1]]
        two = [r[name] for r in results[2]]

        def med(runs: list[dict[str, float]], field: str) -> float:
            return statistics.median(r[field] for r in runs)

        row: dict[str, float | str] = {
            "case": name,
            "rps_1": med(one, "rps"),
            "rps_2": med(two, "rps"),
            "ratio": statistics.median(b["rps"] / a["rps"] for a, b in zip(one, two, strict=True)),
            "p99_1": med(one, "p99_ms"),
            "p99_2": med(two, "p99_ms"),
            "cpu_us_1": med(one, "cpu_us"),
            "cpu_us_2": med(two, "cpu_us"),
            "bad": sum(r["bad"] for r in one + two),
        }
        rows.append(row)
        lines.append(
            f"| {name} | {row['rps_1']:,.0f} | {row['rps_2']:,.0f} | {row['ratio']:.2f}x | "
            f"{row['p99_1']:.1f} → {row['p99_2']:.1f} | {row['cpu_us_1']:.0f} → {row['cpu_us_2']:.0f} |"
        )
    return rows, "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    if wrk_path() is None:
        raise SystemExit("wrk is missing: bench/install_wrk.sh installs it")
    _rows, table = run_workers(args.rounds, args.seconds, args.concurrency)
    print(f"\n{table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
