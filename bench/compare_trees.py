"""Throughput of every front of two source trees of the gateway, side by side in one run.

One gateway per tree (`toolplex serve` with that tree's config/gateway.yaml, that tree's
`gateway` and `adapters` first on the path, checked before the start; a free loopback port),
then for every front the same in-process call, Math.Add with a per-request `a` so that a
cached or stale answer cannot pass: OpenTool `/opentool/call`, OXP `/tools/call` (a fresh
`call_id` each), ToolServerNode `/execute_tool` (a cookie session per connection) and
JSON-RPC `/rpc` `tool.execute`. Every answer is checked; a wrong one stops the run.

Proxied calls (`--proxied`): one upstream, a `toolplex serve` of the `--before` tree with its
default configuration, and per tree a second gateway (bench/proxied.yaml) that reaches it as
a `kind: opentool` backend (the upstream's Math.Add served as Ot.Add) and as a `kind: oxp`
backend (Ox.Add). "opentool via opentool" asks `/opentool/call` for Ot_Add (the gateway calls
the upstream's `/opentool/call`), "oxp via oxp" asks `/tools/call` for Ox.Add (the gateway calls
the upstream's `/tools/call`). Both trees share the upstream; its CPU is not counted in theirs.

Noise: within each round the two trees run back to back per front and concurrency, in
alternating order from round to round, and the ratio after/before is the median of the
rounds' own ratios, so that drifts of a shared machine hit both alike. Its 95 % interval
is printed next to it (a ratio is resolved to 5 % only when that interval is as narrow),
and so is the share of the CPUs that other processes used meanwhile. Many short rounds
beat a few long ones: the noise seen on a 2-CPU VM came in bursts of tens of ms, and the
interval narrows with the number of rounds. The client is pinned to one CPU and the
servers to the others, and is a minimal keep-alive HTTP/1.1 client on asyncio streams,
cheap enough (its CPU per request is printed) that the rate is the server's. Server CPU
per request counts every thread of the gateway and of its descendants, in nanoseconds.

Prints a table, writes every round to bench/results/compare-<time>.json (gitignored).
Bounded in count (requests x rounds) and in time (`--max-seconds`); servers always stopped.

    .venv/bin/python -m bench.compare_trees --before /tmp/before --after . \
        [--requests 200] [--rounds 25] [--concurrency 1 16] [--fronts oxp ...] [--max-seconds 1800]
        [--proxied opentool oxp]  # proxied calls too (`--fronts` with no name: only those)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from tests.support import stop

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
PROXIED_CONFIG = BENCH / "proxied.yaml"
TREES = ("before", "after")
# The client's own CPU per request says whether it, rather than the server, set the pace.
FIGURES = ("rps", "cpu_ms", "client_cpu_ms")
_ids = itertools.count()


def unique_id() -> str:
    """Unique over the whole run: OXP's ledger keys calls by `call_id`."""
    return f"bench-{next(_ids)}"


class Connection:
    """One keep-alive HTTP/1.1 connection; answers must carry Content-Length (the gateway's JSON does)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        self.reader, self.writer, self.port = reader, writer, port

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, port)

    async def post(self, path: str, body: bytes, extra: str = "") -> tuple[int, dict[str, str], bytes]:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n"
        )
        self.writer.write(head.encode() + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise RuntimeError(f"{path}: an answer without Content-Length: {lines}")
        return int(lines[0].split()[1]), headers, await self.reader.readexactly(int(headers["content-length"]))

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


@dataclass(frozen=True)
class Front:
    """How one front asks for an addition (a, 5) and what a correct answer looks like."""

    path: str
    body: Callable[[str, str, str, int], dict[str, Any]]  # (request id, flat name, OXP tool id, a) -> JSON body
    correct: Callable[[Any, str, int], bool]  # (decoded answer, request id, expected sum)
    session: bool = False  # ToolServerNode: a `node_id` cookie per connection


FRONTS = {
    "opentool": Front(
        "/opentool/call",
        lambda rid, flat, _tid, a: {"jsonrpc": "2.0", "method": flat, "params": {"a": a, "b": 5}, "id": rid},
        lambda ans, rid, want: ans.get("result") == {"result": want} and ans.get("id") == rid,
    ),
    "oxp": Front(
        "/tools/call",
        lambda rid, _flat, tid, a: {"call_id": rid, "tool_id": tid, "input": {"a": a, "b": 5}},
        lambda ans, rid, want: ans.get("success") is True and ans.get("value") == want and ans.get("call_id") == rid,
    ),
    "toolserver": Front(
        "/execute_tool",
        lambda _rid, flat, _tid, a: {"tool_name": flat, "arguments": {"a": a, "b": 5}},
        lambda ans, _rid, want: ans == want,
        session=True,
    ),
    "jsonrpc": Front(
        "/rpc",
        lambda rid, flat, _tid, a: {
            "jsonrpc": "2.0",
            "method": "tool.execute",
            "params": {"tool": flat, "parameters": {"a": a, "b": 5}},
            "id": rid,
        },
        lambda ans, rid, want: ans.get("id") == rid and (ans.get("result") or {}).get("output") == str(want),
    ),
}


@dataclass(frozen=True)
class Case:
    """One row of the table: a front asked for a tool, in process (`Math_Add`) or proxied (`Ot_Add`, `Ox_Add`)."""

    name: str
    front: str  # a key of FRONTS
    tool: str  # the flat name the front asks for
    proxied: bool = False


# --proxied: the front asked, and the upstream backend of the same protocol (bench/proxied.yaml).
PROXIED = {
    "opentool": Case("opentool via opentool", "opentool", "Ot_Add", proxied=True),
    "oxp": Case("oxp via oxp", "oxp", "Ox_Add", proxied=True),
}


@dataclass
class Tree:
    """A running gateway of one source tree."""

    root: Path
    port: int
    process: psutil.Process
    oxp_tool_ids: dict[str, str] = field(default_factory=dict)  # flat name -> OXP tool id

    def cpu_seconds(self) -> float:
        """Time on CPU of every thread of the gateway and of its descendants (sidecars, workers).

        From /proc/<pid>/task/*/schedstat, in nanoseconds: utime and stime come in 10 ms ticks, too coarse
        for a round of a few hundred requests. A thread that exits between two readings takes its time with
        it; the gateway's threads (its executor's) live as long as it does.
        """
        total = 0
        for proc in [self.process, *self.process.children(recursive=True)]:
            for stat in Path(f"/proc/{proc.pid}/task").glob("*/schedstat"):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    total += int(stat.read_text().split()[0])
        return total / 1e9


def tree_env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root)}


def check_imports(root: Path) -> dict[str, str]:
    """Which files `gateway` and `adapters` come from, run as the server will be: both must be in `root`."""
    code = "import gateway, adapters; print(gateway.__file__); print(adapters.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=tree_env(root), capture_output=True, text=True, timeout=60
    )
    files = out.stdout.split()
    if out.returncode != 0 or len(files) != 2 or not all(Path(f).resolve().is_relative_to(root) for f in files):
        raise RuntimeError(f"{root}: gateway/adapters do not import from this tree: {out.stdout}{out.stderr}")
    return {"gateway": files[0], "adapters": files[1]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def get_json(port: int, path: str) -> Any:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        raw = await reader.read()  # bounded: the server closes the connection after this one answer
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"GET {path}: {head[:200]!r}")
    return json.loads(body)


def wait_ready(port: int, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Poll /healthz until it answers 200; bounded in time, fails fast if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the gateway on port {port} exited with {process.returncode}")
        try:
            asyncio.run(asyncio.wait_for(get_json(port, "/healthz"), 2))
            return
        except (OSError, RuntimeError, ValueError, TimeoutError):
            time.sleep(0.1)
    raise TimeoutError(f"the gateway on port {port} was not ready within {timeout} s")


@contextlib.contextmanager
def serve(
    root: Path, cpus: set[int] | None, config: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[Tree]:
    """`toolplex serve` of `root` with `config` (default: its own config/gateway.yaml); always stopped
    (terminate, then kill) and reaped."""
    port = free_port()
    config = config or root / "config" / "gateway.yaml"
    cmd = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--no-reload"]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [*cmd, "--port", str(port)],
            cwd=root,
            env={**tree_env(root), **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=log,
            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
        )
        try:
            wait_ready(port, process)
            tree = Tree(root, port, psutil.Process(process.pid))
            listing = asyncio.run(asyncio.wait_for(get_json(port, "/tools"), 10))
            tree.oxp_tool_ids = {item["name"]: item["id"] for item in listing["items"]}
            yield tree
        except BaseException:
            log.seek(0)
            tail = log.read()[-4000:].decode(errors="replace")
            sys.stderr.write(f"--- log of the {root} gateway (tail) ---\n{tail}\n")
            raise
        finally:
            stop(process)


async def session_cookie(conn: Connection) -> str:
    status, headers, body = await conn.post("/get_cookie", b"")
    cookie = headers.get("set-cookie", "").split(";", 1)[0]
    if status != 200 or not cookie.startswith("node_id="):
        raise RuntimeError(f"/get_cookie: {status} {headers} {body[:200]!r}")
    return f"Cookie: {cookie}\r\n"


async def drive(tree: Tree, case: Case, requests: int, concurrency: int, timeout: float) -> dict[str, float]:
    """`requests` calls over `concurrency` connections: requests per second, server and client CPU ms per request."""
    front, tool_id = FRONTS[case.front], tree.oxp_tool_ids[case.tool]
    conns = [await Connection.open(tree.port) for _ in range(concurrency)]
    try:
        extras = [await session_cookie(c) if front.session else "" for c in conns]
        todo = iter(range(requests))  # shared by the workers: each request is sent once

        async def worker(conn: Connection, extra: str) -> None:
            for a in todo:
                rid = unique_id()
                body = json.dumps(front.body(rid, case.tool, tool_id, a)).encode()
                status, _, raw = await conn.post(front.path, body, extra)
                if status != 200 or not front.correct(json.loads(raw), rid, a + 5):
                    raise RuntimeError(f"{tree.root} {front.path}: wrong answer {status} {raw[:300]!r}")

        cpu, client, started = tree.cpu_seconds(), time.process_time(), time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(worker(c, x) for c, x in zip(conns, extras, strict=True))), timeout)
        elapsed, cpu, client = time.perf_counter() - started, tree.cpu_seconds() - cpu, time.process_time() - client
    finally:
        for conn in conns:
            await conn.close()
    return {"rps": requests / elapsed, "cpu_ms": cpu * 1000 / requests, "client_cpu_ms": client * 1000 / requests}


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for the median: the order statistics d+1 and n-d, with the largest d
    such that P(Binomial(n, 1/2) <= d) <= (1 - confidence) / 2; min and max when the rounds are too few."""
    xs, n = sorted(values), len(values)
    d, cdf = 0, 0.5**n
    while d + 1 < n // 2 and cdf + math.comb(n, d + 1) * 0.5**n <= (1 - confidence) / 2:
        d, cdf = d + 1, cdf + math.comb(n, d + 1) * 0.5**n
    return xs[d], xs[n - 1 - d]


def summarize(rounds: dict[str, list[float]]) -> dict[str, float]:
    """Medians per tree, and after/before as the median of the rounds' own ratios (each pair ran back to
    back, so drifts of the machine cancel) with its 95 % interval: the noise this run could not remove."""
    ratios = [a / b for a, b in zip(rounds["after"], rounds["before"], strict=True)]
    low, high = median_interval(ratios)
    return {
        "before": statistics.median(rounds["before"]),
        "after": statistics.median(rounds["after"]),
        "ratio": statistics.median(ratios),
        "low": low,
        "high": high,
    }


def machine_busy_seconds() -> float:
    """CPU time spent by every process on every CPU (steal included), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def pin(off: bool) -> set[int] | None:
    """The client on one CPU, the servers on the others: neither is migrated onto the other's CPU mid-round,
    which on a small VM was a large share of the round-to-round noise. None when off or with one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if off or len(cpus) < 2:
        return None
    os.sched_setaffinity(0, {cpus[0]})
    return set(cpus[1:])


def cells(s: dict[str, float], width: int, digits: int) -> str:
    span = f"[{s['low']:.2f}-{s['high']:.2f}]"
    return f"{s['before']:>{width}.{digits}f}{s['after']:>7.{digits}f}{s['ratio']:>7.3f}{span:>13}"


@contextlib.contextmanager
def gateways(
    roots: dict[str, Path], cpus: set[int] | None, in_process: bool, proxied: bool
) -> Iterator[dict[tuple[str, bool], Tree]]:
    """Every gateway the cases need, by (tree, proxied): the in-process ones with each tree's default
    configuration; for proxied calls, the shared upstream first, then each tree's bench/proxied.yaml."""
    with contextlib.ExitStack() as stack:
        trees: dict[tuple[str, bool], Tree] = {}
        if in_process:
            for name in TREES:
                trees[name, False] = stack.enter_context(serve(roots[name], cpus))
        if proxied:
            upstream = stack.enter_context(serve(roots["before"], cpus))
            env = {"BENCH_UPSTREAM_URL": f"http://127.0.0.1:{upstream.port}"}
            for name in TREES:
                trees[name, True] = stack.enter_context(serve(roots[name], cpus, PROXIED_CONFIG, env))
        yield trees


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="source tree measured first in round 1")
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=200, help="per case, tree, concurrency and round")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument(
        "--fronts", nargs="*", choices=list(FRONTS), default=list(FRONTS), help="in-process calls (none: no name)"
    )
    parser.add_argument(
        "--proxied", nargs="*", choices=list(PROXIED), default=[], help="proxied calls through these backend kinds"
    )
    parser.add_argument("--max-seconds", type=float, default=1800, help="the whole run, servers started included")
    parser.add_argument("--no-pin", action="store_true", help="leave the client and the servers unpinned")
    args = parser.parse_args()
    chosen = [Case(f, f, "Math_Add") for f in args.fronts] + [PROXIED[k] for k in args.proxied]
    if not chosen:
        parser.error("no case: name --fronts or --proxied")
    deadline = time.monotonic() + args.max_seconds
    server_cpus = pin(args.no_pin)
    roots = {"before": args.before.resolve(), "after": args.after.resolve()}
    imports = {name: check_imports(root) for name, root in roots.items()}
    # results[case][concurrency][figure][tree]: one value per round
    results: dict[str, dict[int, dict[str, dict[str, list[float]]]]] = {
        c.name: {n: {k: {t: [] for t in TREES} for k in FIGURES} for n in args.concurrency} for c in chosen
    }

    def timed(tree: Tree, case: Case, requests: int, concurrency: int) -> dict[str, float]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"--max-seconds {args.max_seconds} used up")
        return asyncio.run(drive(tree, case, requests, concurrency, left))

    in_process, proxied = any(not c.proxied for c in chosen), any(c.proxied for c in chosen)
    with gateways(roots, server_cpus, in_process, proxied) as trees:
        for case, concurrency, name in itertools.product(chosen, args.concurrency, TREES):  # warm-up
            timed(trees[name, case.proxied], case, min(200, args.requests), concurrency)

        def ours() -> float:
            return time.process_time() + sum(tree.cpu_seconds() for tree in trees.values())

        busy, mine, started = machine_busy_seconds(), ours(), time.monotonic()
        for rnd in range(args.rounds):
            order = TREES if rnd % 2 == 0 else TREES[::-1]
            for case, concurrency, name in itertools.product(chosen, args.concurrency, order):
                figures = timed(trees[name, case.proxied], case, args.requests, concurrency)
                for key in FIGURES:
                    results[case.name][concurrency][key][name].append(figures[key])
        others_busy = machine_busy_seconds() - busy - (ours() - mine)
        others = others_busy / ((time.monotonic() - started) * (os.cpu_count() or 1))

    print(f"before={roots['before']} after={roots['after']} requests={args.requests} rounds={args.rounds}")
    print(f"other work on the machine during the rounds: {others:.0%} of its CPUs (beyond a few %, expect noise)")
    print("ratio: median of the rounds' own after/before [its 95 % interval]; client: the bench's own CPU")
    if proxied:
        print("proxied: '<front> via <backend kind>'; the shared upstream's CPU is in 'other work', not in CPU ms/req")
    width = max(11, *(len(c.name) + 1 for c in chosen))
    print(f"{'case':<{width}}{'c':>3} {'req/s before':>13}{'after':>7}{'ratio':>7}{'[95 %]':>13}", end="")
    print(f" {'CPU ms/req before':>18}{'after':>7}{'ratio':>7}{'[95 %]':>13} {'client ms/req':>14}")
    summary: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
    for case_name, by_c in results.items():
        for concurrency, figures in by_c.items():
            row = summary.setdefault(case_name, {})[concurrency] = {k: summarize(figures[k]) for k in FIGURES}
            client = max(row["client_cpu_ms"]["before"], row["client_cpu_ms"]["after"])
            print(
                f"{case_name:<{width}}{concurrency:>3} {cells(row['rps'], 13, 0)} {cells(row['cpu_ms'], 18, 3)}"
                f" {client:>14.3f}"
            )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"compare-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    arguments = {**vars(args), "before": str(roots["before"]), "after": str(roots["after"])}
    report = {"args": arguments, "imports": imports, "others_busy": others, "summary": summary, "rounds": results}
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
