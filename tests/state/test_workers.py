"""`server.workers: 2` with Redis: two processes on one port act as one gateway, supervised.

Each request below opens a new connection, so the kernel hands them to either
worker; a session's workspace lives in one of them and must be reached from
both (the other forwards to its private port).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil

from tests.support import served_gateway

DEADLINE_S = 20.0
CONFIG = """
server: {workers: 2, shutdown_grace_s: 2}
state: {store: redis, url: "${REDIS_URL}", lease_s: 2, key_prefix: "${KEY_PREFIX}"}
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
"""


def workers_of(pid: int) -> list[psutil.Process]:
    return [child for child in psutil.Process(pid).children() if child.is_running() and child.status() != "zombie"]


def until_workers(pid: int, count: int, exclude: frozenset[int] = frozenset()) -> list[psutil.Process]:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        live = [w for w in workers_of(pid) if w.pid not in exclude]
        if len(live) == count:
            return live
        time.sleep(0.05)
    raise AssertionError(f"the supervisor did not get to {count} new workers")


def test_two_workers_share_the_port_and_sessions_and_one_that_dies_is_replaced(tmp_path: Path, redis_url: str) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(CONFIG)
    env = {"REDIS_URL": redis_url, "KEY_PREFIX": f"workers-{secrets.token_hex(4)}:"}
    with served_gateway(config, env, tmp_path / "log") as (base, supervisor):
        workers = until_workers(supervisor.pid, 2)
        cookie = httpx.post(f"{base}/get_cookie", timeout=DEADLINE_S).cookies["node_id"]
        session = {"Cookie": f"node_id={cookie}"}
        files = {"file": ("notes.txt", b"one workspace"), "filename": (None, "notes.txt")}
        assert httpx.post(f"{base}/upload_file", files=files, headers=session, timeout=DEADLINE_S).status_code == 200
        for index in range(12):  # new connections: either worker answers, the session's home serves the files
            body = {"tool_name": "Math_Add", "arguments": {"a": index, "b": 1}}
            added = httpx.post(f"{base}/execute_tool", json=body, headers=session, timeout=DEADLINE_S)
            assert (added.status_code, added.json()) == (200, index + 1)
            downloaded = httpx.post(
                f"{base}/download_file", json={"file_path": "workspace/notes.txt"}, headers=session, timeout=DEADLINE_S
            )
            assert (downloaded.status_code, downloaded.content) == (200, b"one workspace")

        os.kill(workers[0].pid, signal.SIGKILL)
        replaced = until_workers(supervisor.pid, 2, exclude=frozenset({workers[0].pid}))
        assert workers[1].pid in {w.pid for w in replaced}
        deadline = time.monotonic() + DEADLINE_S
        while httpx.get(f"{base}/healthz", timeout=DEADLINE_S).status_code != 200:
            assert time.monotonic() < deadline

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=DEADLINE_S) == 0
        assert not any(w.is_running() and w.status() != "zombie" for w in replaced)


BURST = 32  # connections opened at once, as a load generator or a proxy's pool does


def test_a_burst_of_connections_is_spread_over_both_workers(tmp_path: Path, redis_url: str) -> None:
    """One socket shared by the workers let the first to wake accept the whole burst (asyncio accepts all
    that wait): two workers then served no more than one. Each worker has its own socket on the port now."""
    config = tmp_path / "gateway.yaml"
    config.write_text(CONFIG)
    env = {"REDIS_URL": redis_url, "KEY_PREFIX": f"workers-{secrets.token_hex(4)}:"}
    with served_gateway(config, env, tmp_path / "log") as (base, supervisor):
        workers = until_workers(supervisor.pid, 2)
        address = urlsplit(base)
        port = int(address.port or 80)
        clients = [socket.create_connection((address.hostname, port), timeout=DEADLINE_S) for _ in range(BURST)]
        try:
            for client in clients:
                client.sendall(b"GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n" % address.netloc.encode())
            for client in clients:  # each answered, so each accepted by a worker, and still open (keep-alive)
                assert client.recv(65536).startswith(b"HTTP/1.1 200")
            held = {
                worker.pid: sum(
                    1
                    for c in worker.net_connections(kind="tcp")
                    if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port
                )
                for worker in workers
            }
        finally:
            for client in clients:
                client.close()
        assert sum(held.values()) == BURST, held
        # Spread by the kernel's hash of each connection's addresses: an even split is likeliest, and
        # fewer than 4 of 32 on one worker happens about once in a million runs.
        assert min(held.values()) >= 4, held
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=DEADLINE_S) == 0
