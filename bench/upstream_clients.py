"""Which HTTP client should the gateway use to call upstream tool servers: figures.

Starts `bench.servers` (bare Starlette, uvicorn + uvloop) as a subprocess on a free
loopback port, then on uvloop, in alternating rounds (the order rotates every round),
sends `POST /add` with a JSON body through each client below and reads the whole body,
with one shared client and N concurrent asyncio tasks:

- `httpx`: httpx.AsyncClient, default transport, max_connections=100 (the gateway's
  default), driven as gateway/upstream.py does: `build_request(timeout=)` +
  `send(stream=True)` + `aiter_bytes()` + `aclose()`, inside `asyncio.timeout`;
- `httpx+aiohttp`: the same code on the transport of the `httpx-aiohttp` package;
- `aiohttp`: aiohttp.ClientSession used directly (TCPConnector limit=100),
  the body read with `content.iter_chunked`;
- `httpx-keepalive`: httpx as above with max_keepalive_connections=100 (default 20),
  to see whether configuration alone removes the pool's cost;
- `httpx-x4`: four such httpx clients (max_connections=25 each) used in turn: httpcore's
  pool work grows with connections x requests in one pool, so smaller pools may help.

Each round builds a fresh client, warms it untimed, then times a fixed number of requests.
Figures are medians over the rounds: requests/s, client CPU per request (process_time of
this process: the server is another process), p50/p99 latency, the server's CPU per
request (from /proc), and ratios against `httpx` measured in the same run (the median
of per-round ratios).

    .venv/bin/python -m bench.upstream_clients [--requests 1000] [--rounds 5] [--concurrency 1 32]

Needs `pip install httpx-aiohttp` (it brings aiohttp).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx
import orjson
import uvloop
from httpx_aiohttp import AiohttpTransport

PAYLOAD = {"a": 1, "b": 2}
TICKS = os.sysconf("SC_CLK_TCK")
TIMEOUT_S = 30.0
CONNECT_S = 5.0

Send = Callable[[], Awaitable[bytes]]


@dataclass
class Client:
    """One client under test: `send` does one request and returns the body; `close` frees it."""

    send: Send
    close: Callable[[], Awaitable[None]]


def httpx_client(
    base: str, transport: httpx.AsyncBaseTransport | None = None, connections: int = 100, keepalive: int = 20
) -> Client:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=keepalive)
    client = httpx.AsyncClient(
        base_url=base,
        timeout=httpx.Timeout(TIMEOUT_S, connect=CONNECT_S),
        limits=limits,
        follow_redirects=False,
        transport=transport,
    )

    async def send() -> bytes:
        # As Upstream._attempts/_exchange/_read_bounded: a per-request timeout, streamed, bounded read.
        async with asyncio.timeout(TIMEOUT_S):
            timeout = httpx.Timeout(TIMEOUT_S, connect=CONNECT_S)
            request = client.build_request("POST", "/add", timeout=timeout, json=PAYLOAD)
            response = await client.send(request, stream=True)
            try:
                chunks = [chunk async for chunk in response.aiter_bytes()]
            finally:
                await response.aclose()
        return b"".join(chunks)

    return Client(send, client.aclose)


def httpx_aiohttp_client(base: str) -> Client:
    return httpx_client(base, transport=AiohttpTransport(limits=httpx.Limits(max_connections=100)))


def httpx_keepalive_client(base: str) -> Client:
    return httpx_client(base, keepalive=100)


def httpx_sharded_client(base: str, shards: int = 4) -> Client:
    size = 100 // shards
    clients = [httpx_client(base, connections=size, keepalive=size) for _ in range(shards)]
    turn = itertools.cycle(clients)

    async def send() -> bytes:
        return await next(turn).send()

    async def close() -> None:
        for client in clients:
            await client.close()

    return Client(send, close)


def aiohttp_client(base: str) -> Client:
    session = aiohttp.ClientSession(
        base, connector=aiohttp.TCPConnector(limit=100), timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)
    )
    timeout = aiohttp.ClientTimeout(sock_connect=CONNECT_S, sock_read=TIMEOUT_S)

    async def send() -> bytes:
        async with asyncio.timeout(TIMEOUT_S), session.post("/add", json=PAYLOAD, timeout=timeout) as response:
            chunks = [chunk async for chunk in response.content.iter_chunked(65536)]
        return b"".join(chunks)

    return Client(send, session.close)


CLIENTS: dict[str, Callable[[str], Client]] = {
    "httpx": httpx_client,
    "httpx+aiohttp": httpx_aiohttp_client,
    "aiohttp": aiohttp_client,
    "httpx-keepalive": httpx_keepalive_client,
    "httpx-x4": httpx_sharded_client,
}


@dataclass
class Cell:
    """The rounds of one client at one concurrency."""

    rps: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    server_cpu_us: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    errors: int = 0


def server_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def run_round(client: Client, requests: int, concurrency: int, server_pid: int, cell: Cell) -> None:
    latencies: list[float] = []
    errors = 0

    async def worker(count: int, record: bool) -> None:
        nonlocal errors
        for _ in range(count):
            start = time.perf_counter()
            try:
                body = await client.send()
                ok = orjson.loads(body) == {"result": 3}
            except Exception:  # a bench counts failures, whatever they are
                ok = False
            if record:
                latencies.append(time.perf_counter() - start)
                errors += not ok

    # Warm up: open the connections this concurrency needs (untimed).
    await asyncio.gather(*(worker(4, False) for _ in range(concurrency)))
    share, extra = divmod(requests, concurrency)
    counts = [share + (i < extra) for i in range(concurrency)]
    cpu0, srv0, wall0 = time.process_time(), server_cpu(server_pid), time.perf_counter()
    await asyncio.gather(*(worker(n, True) for n in counts))
    wall, cpu, srv = time.perf_counter() - wall0, time.process_time() - cpu0, server_cpu(server_pid) - srv0
    latencies.sort()
    cell.rps.append(requests / wall)
    cell.cpu_us.append(cpu / requests * 1e6)
    cell.server_cpu_us.append(srv / requests * 1e6)
    cell.p50_ms.append(latencies[len(latencies) // 2] * 1e3)
    cell.p99_ms.append(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3)
    cell.errors += errors


async def measure(base: str, args: argparse.Namespace, server_pid: int) -> dict[tuple[str, int], Cell]:
    names = args.clients
    cells = {(name, c): Cell() for name in names for c in args.concurrency}
    deadline = time.monotonic() + args.max_seconds
    for round_no in range(args.rounds):
        order = names[round_no % len(names) :] + names[: round_no % len(names)]
        for concurrency in args.concurrency:
            for name in order:
                client = CLIENTS[name](base)
                try:
                    await run_round(client, args.requests, concurrency, server_pid, cells[name, concurrency])
                finally:
                    await client.close()
        print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        if time.monotonic() > deadline:
            print(f"stopping: past --max-seconds {args.max_seconds}", file=sys.stderr)
            break
    return cells


def paired(values: list[float], base: list[float]) -> float:
    """The median of per-round ratios: each round against the baseline's round next to it."""
    return statistics.median(v / b for v, b in zip(values, base, strict=False))


def table(cells: dict[tuple[str, int], Cell], names: list[str], concurrencies: list[int]) -> str:
    med = statistics.median
    head = (
        f"{'client':<16} {'conc':>4} {'req/s':>7} {'cpu_us/req':>10} {'p50_ms':>7} {'p99_ms':>7} "
        f"{'srv_us/req':>10} {'x rps':>6} {'x cpu':>6} {'x p50':>6} {'x p99':>6} {'rounds':>6} {'errs':>4}"
    )
    lines = [head, "-" * len(head)]
    for c in concurrencies:
        base = cells[names[0], c]
        for name in names:
            cell = cells[name, c]
            ratios = [paired(getattr(cell, k), getattr(base, k)) for k in ("rps", "cpu_us", "p50_ms", "p99_ms")]
            lines.append(
                f"{name:<16} {c:>4} {med(cell.rps):>7.0f} {med(cell.cpu_us):>10.0f} {med(cell.p50_ms):>7.2f} "
                f"{med(cell.p99_ms):>7.2f} {med(cell.server_cpu_us):>10.0f} "
                + " ".join(f"{r:>6.2f}" for r in ratios)
                + f" {len(cell.rps):>6} {cell.errors:>4}"
            )
    return "\n".join(lines)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(base: str, proc: subprocess.Popen[bytes], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"bench.servers exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("bench.servers did not become ready")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="timed requests per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=list(CLIENTS))
    parser.add_argument("--max-seconds", type=float, default=170.0, help="no round starts after this")
    args = parser.parse_args()
    if args.clients[0] != "httpx" and "httpx" in args.clients:
        args.clients.remove("httpx")
        args.clients.insert(0, "httpx")

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "bench.servers", "--port", str(port)])
    try:
        wait_ready(base, proc)
        started = time.monotonic()
        cells = uvloop.run(measure(base, args, proc.pid))
        elapsed = time.monotonic() - started
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    versions = f"httpx {httpx.__version__}, aiohttp {aiohttp.__version__}, uvloop {uvloop.__version__}"
    print(f"{args.requests} requests/round, medians over rounds, {elapsed:.0f} s; {versions}")
    print(f"ratios (x) against {args.clients[0]!r} at the same concurrency, same run")
    print(table(cells, args.clients, args.concurrency))


if __name__ == "__main__":
    main()
