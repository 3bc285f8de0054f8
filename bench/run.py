"""`make bench`: what a call through the gateway costs, against baselines measured in the same run.

Starts everything itself on loopback: the bare Starlette app (bench/servers.py), the
same app as the upstream, and `toolplex serve` with bench/gateway.yaml. Then, at each
concurrency, every case for `--seconds` after a warm-up: the bare app, the in-process
tool through each front, the upstream directly, and the upstream's tool proxied
through each front. Load comes from wrk (one thread) when it is installed, else from
a bounded asyncio client (much slower than wrk: its figures cap what it can measure).
Every answer is checked. Rounds alternate their order; figures are medians over rounds.

Then `server.workers: 2` against one worker at c=64 (bench/workers_scaling.py), the
catalog at scale (bench/catalog_scale.py) and a short soak (bench/soak.py), unless
skipped. Prints the tables as Markdown and writes everything to
bench/results/bench-<time>.json (gitignored).

    .venv/bin/python -m bench.run [--seconds 5] [--rounds 1] [--concurrency 1 32]
        [--tree PATH]  # measure the gateway of another source tree (a `git archive` of an older commit)
        [--skip-catalog] [--skip-soak] [--skip-workers] [--python-load] [--max-seconds 1800]
        [--cases OpenTool MCP]  # only cases whose name holds one of these (their baselines always run)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench import cases as bench_cases
from bench.compare_trees import Connection
from bench.load import Request, measure, wrk_path
from bench.processes import spawn

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CONFIG = ROOT / "bench" / "gateway.yaml"
WARMUP_S = 1.0


def key(case: bench_cases.Case) -> str:
    return f"{case.group}: {case.name}"


def cpu_seconds(process: psutil.Process) -> float:
    """On-CPU time of every thread of `process` and its descendants (schedstat, in ns: ticks are too coarse)."""
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        for stat in Path(f"/proc/{proc.pid}/task").glob("*/schedstat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(stat.read_text().split()[0])
    return total / 1e9


async def session_cookie(port: int) -> str:
    conn = await Connection.open(port)
    try:
        status, headers, body = await conn.post("/get_cookie", b"")
    finally:
        await conn.close()
    cookie = headers.get("set-cookie", "").split(";", 1)[0]
    if status != 200 or not cookie.startswith("node_id="):
        raise RuntimeError(f"/get_cookie: {status} {headers} {body[:200]!r}")
    return cookie


async def probe(request: Request) -> None:
    """One request before the load: a wrong answer stops the run with what the server said."""
    conn = await Connection.open(request.port)
    try:
        extra = "".join(f"{k}: {v}\r\n" for k, v in request.headers)
        status, _, body = await conn.post(request.path, request.body, extra)
    finally:
        await conn.close()
    if status != 200 or request.expect not in body:
        raise RuntimeError(
            f"POST {request.path} {request.body!r}: {status} {body[:300]!r}, expected {request.expect!r}"
        )


def selected(only: list[str] | None) -> list[bench_cases.Case]:
    """The cases whose name holds one of `only` (case-insensitive), with the baselines they are compared to."""
    listed = bench_cases.cases()
    if not only:
        return listed
    wanted = [w.lower() for w in only]
    chosen = [c for c in listed if c.baseline is not None and any(w in c.name.lower() for w in wanted)]
    if not chosen:
        raise SystemExit(f"--cases {' '.join(only)}: no case matches")
    bases = {c.baseline for c in chosen}
    return [c for c in listed if c in chosen or c.name in bases]


def run_cases(args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    tree = args.tree.resolve() if args.tree else ROOT
    python = [sys.executable, "-m"]
    gateway_env = {"BENCH_UPSTREAM_URL": "", "PYTHONPATH": str(tree)}
    use_wrk = wrk_path() is not None and not args.python_load
    if not use_wrk:
        print("wrk not found (`make bench` installs it): using the asyncio client, which caps the figures")
    with (
        spawn([*python, "bench.servers"], ROOT) as baseline,
        spawn([*python, "bench.servers"], ROOT) as upstream,
    ):
        gateway_env["BENCH_UPSTREAM_URL"] = upstream.base
        serve = [*python, "gateway.cli", "serve", "--config", str(CONFIG), "--no-reload"]
        with spawn(serve, tree, gateway_env) as gateway:
            served = {"baseline": baseline, "upstream": upstream, "gateway": gateway}
            ports = {name: server.port for name, server in served.items()}
            procs = {name: psutil.Process(server.process.pid) for name, server in served.items()}
            cookie = asyncio.run(session_cookie(gateway.port))
            requests: dict[str, Request] = {}
            listed = selected(args.cases)
            for case in listed:
                headers = case.headers + ((("Cookie", cookie),) if case.session else ())
                requests[key(case)] = Request(ports[case.server], case.path, case.body, case.expect, headers)
                asyncio.run(probe(requests[key(case)]))
            rounds: dict[int, dict[str, list[dict[str, Any]]]] = {
                c: {key(k): [] for k in listed} for c in args.concurrency
            }
            for index in range(args.rounds):
                order = listed if index % 2 == 0 else listed[::-1]
                for concurrency in args.concurrency:
                    for case in order:
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"--max-seconds {args.max_seconds} used up")
                        request = requests[key(case)]
                        measure(request, concurrency, WARMUP_S, use_wrk=use_wrk)
                        cpu = cpu_seconds(procs[case.server])
                        figures = measure(request, concurrency, args.seconds, use_wrk=use_wrk)
                        cpu = cpu_seconds(procs[case.server]) - cpu
                        row = figures.as_dict() | {"cpu_us": cpu * 1e6 / max(1, figures.requests)}
                        rounds[concurrency][key(case)].append(row)
                        print(f"  c={concurrency:<3} {key(case):<48} {figures.rps:>8.0f} req/s  bad {figures.bad}")
    return {"tree": str(tree), "load": "wrk" if use_wrk else "python", "rounds": rounds, "cases": args.cases}


def summarize(runs: dict[str, Any]) -> dict[int, dict[str, dict[str, Any]]]:
    """Medians over rounds; each case's ratio to its baseline is the median of the rounds' own ratios."""
    listed = {key(c): c for c in selected(runs.get("cases"))}
    by_name = {c.name: key(c) for c in listed.values() if c.baseline is None}
    table: dict[int, dict[str, dict[str, Any]]] = {}
    for concurrency, by_case in runs["rounds"].items():
        rows = table.setdefault(int(concurrency), {})
        for name, rounds in by_case.items():
            row: dict[str, Any] = {
                f: statistics.median(r[f] for r in rounds) for f in ("rps", "p50_ms", "p99_ms", "cpu_us")
            }
            row["max_ms"] = max(r["max_ms"] for r in rounds)
            row["bad"] = sum(r["bad"] for r in rounds)
            base = listed[name].baseline
            if base is not None:
                base_rounds = by_case[by_name[base]]
                row["ratio"] = statistics.median(r["rps"] / b["rps"] for r, b in zip(rounds, base_rounds, strict=True))
                row["added_p50_ms"] = statistics.median(
                    r["p50_ms"] - b["p50_ms"] for r, b in zip(rounds, base_rounds, strict=True)
                )
            rows[name] = row
    return table


def against_reference(runs: dict[str, Any], reference: str = bench_cases.FRONTS[0].name) -> list[dict[str, Any]]:
    """Each front against the reference front (OpenTool) on the same tool, concurrency and round.

    The machine is shared: one round's figures swing by a tenth or more, and the whole machine's speed
    drifts between rounds. A ratio of two cases measured one after the other in the same round cancels
    the drift; the median over rounds, with the quartiles to show the spread, is what is reported.
    Rounds alternate their order, so an even number of rounds gives each case as many first places.
    """
    rows: list[dict[str, Any]] = []
    for concurrency, by_case in runs["rounds"].items():
        for group in ("in-process", "proxied"):
            base = by_case.get(f"{group}: {reference}")
            if not base:
                continue
            for name, rounds in by_case.items():
                if not name.startswith(f"{group}: ") or name == f"{group}: {reference}":
                    continue
                pairs = [(r, b) for r, b in zip(rounds, base, strict=True) if b["rps"] > 0 and b["cpu_us"] > 0]
                if not pairs:  # the reference answered nothing in any round: no ratio to give
                    continue
                rps = sorted(r["rps"] / b["rps"] for r, b in pairs)
                cpu = sorted(r["cpu_us"] / b["cpu_us"] for r, b in pairs)
                rows.append(
                    {
                        "case": name,
                        "against": reference,
                        "concurrency": int(concurrency),
                        "rounds": len(rps),
                        "rps_ratio": statistics.median(rps),
                        "rps_quartiles": _quartiles(rps),
                        "cpu_ratio": statistics.median(cpu),
                        "cpu_quartiles": _quartiles(cpu),
                    }
                )
    return rows


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, high


def reference_markdown(rows: list[dict[str, Any]]) -> str:
    """`against_reference`'s rows as a Markdown table (`rows` is not empty)."""
    lines = [
        f"Against {rows[0]['against']}, same tool, concurrency and round (median over rounds, quartiles):",
        "",
        "| case | c | rounds | req/s ratio | quartiles | server CPU ratio | quartiles |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        rps_low, rps_high = row["rps_quartiles"]
        cpu_low, cpu_high = row["cpu_quartiles"]
        lines.append(
            f"| {row['case']} | {row['concurrency']} | {row['rounds']} | {row['rps_ratio']:.2f}x | "
            f"{rps_low:.2f} to {rps_high:.2f} | {row['cpu_ratio']:.2f}x | {cpu_low:.2f} to {cpu_high:.2f} |"
        )
    return "\n".join(lines)


def markdown(table: dict[int, dict[str, dict[str, Any]]]) -> str:
    lines = [
        "| case | c | req/s | ratio | p50 ms | p99 ms | max ms | added p50 ms | server CPU µs/req |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for concurrency, rows in sorted(table.items()):
        for name, row in rows.items():
            ratio = f"{row['ratio']:.2f}x" if "ratio" in row else "baseline"
            added = f"{row['added_p50_ms']:+.2f}" if "added_p50_ms" in row else ""
            bad = f" ({row['bad']} wrong)" if row["bad"] else ""
            lines.append(
                f"| {name}{bad} | {concurrency} | {row['rps']:,.0f} | {ratio} | {row['p50_ms']:.2f} | "
                f"{row['p99_ms']:.2f} | {row['max_ms']:.1f} | {added} | {row['cpu_us']:.0f} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per case, concurrency and round")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--tree", type=Path, help="the source tree whose gateway is measured (default: this one)")
    parser.add_argument(
        "--cases", nargs="+", metavar="WORD", help="only the cases whose name holds one of these (and their baselines)"
    )
    parser.add_argument("--skip-catalog", action="store_true")
    parser.add_argument("--skip-soak", action="store_true")
    parser.add_argument("--skip-workers", action="store_true", help="leave out server.workers 2 against 1")
    parser.add_argument("--soak-calls", type=int, default=20_000)
    parser.add_argument("--python-load", action="store_true", help="the asyncio client even when wrk is installed")
    parser.add_argument("--max-seconds", type=float, default=1800, help="the whole run, servers started included")
    args = parser.parse_args()
    deadline = time.monotonic() + args.max_seconds
    started = datetime.now(UTC)
    runs = run_cases(args, deadline)
    table = summarize(runs)
    report: dict[str, Any] = {
        "command": " ".join(["python -m bench.run", *sys.argv[1:]]),
        "started": started.isoformat(),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "load": runs["load"],
        "tree": runs["tree"],
        "table": table,
        "against_reference": against_reference(runs),
        "rounds": runs["rounds"],
    }
    print()
    print(markdown(table))
    if report["against_reference"]:
        print()
        print(reference_markdown(report["against_reference"]))
    if not args.skip_workers and not args.python_load and wrk_path() is not None and args.tree is None:
        from bench.workers_scaling import run_workers

        rows, workers_table = run_workers(rounds=max(2, args.rounds), seconds=3.0, concurrency=64)
        report["workers"] = rows
        print()
        print(workers_table)
    if not args.skip_catalog:
        from bench.catalog_scale import run_catalog

        report["catalog"] = run_catalog(Path(runs["tree"]), deadline)
    if not args.skip_soak:
        from bench.soak import run_soak

        report["soak"] = run_soak(args.soak_calls, concurrency=16, stop_at=deadline)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bench-{started:%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(report, indent=2))
    compared = f"\n\n{reference_markdown(report['against_reference'])}" if report["against_reference"] else ""
    workers = f"\n\n{workers_table}" if "workers" in report else ""
    (RESULTS / "latest.md").write_text(markdown(table) + compared + workers + "\n")
    print(f"\nwrote {out.relative_to(ROOT)} and bench/results/latest.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
