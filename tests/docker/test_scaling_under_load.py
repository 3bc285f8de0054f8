"""Replicas scaled, restarted and killed under a mixed load through nginx, on the loopback stack.

The compose stack of tests/docker/loopback.py (docker/nginx.conf, docker/gateway.yaml, Redis, the `tools`
upstream), with replicas as processes on addresses of their own, goes through `tests.docker.load`'s
scenario as `docker compose` would make it: a stopping replica is dropped from the DNS answer at once and
sent SIGTERM (as Docker does), a killed one gets SIGKILL. `make compose-test` runs the same scenario on a
real Docker engine (tests/docker/test_compose_stack.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.docker.dns import LoopbackDNS
from tests.docker.load import STEP_TIMEOUT_S, check, run_scenario
from tests.docker.loopback import (
    compose_backing,
    loopback_nginx_conf,
    missing,
    nginx,
    start_toolplex,
)
from tests.docker.stack import wait_until_ok
from tests.support import free_port, stop

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
DRAIN_S = 2  # docker/gateway.yaml's drain, shortened: on loopback a stopped replica refuses at once


class Replicas:
    """Replica processes on their own addresses and one port, and the DNS answer that names them."""

    def __init__(self, dns: LoopbackDNS, env: dict[str, str], port: int, logs: Path, access: Path, base: str) -> None:
        self.base = base
        self.dns = dns
        self.env = env
        self.port = port
        self.logs = logs
        self.access = access
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def _published(self) -> None:
        self.dns.set("gateway", sorted(self.running))

    def start(self, address: str) -> None:
        env = {**self.env, "TOOLPLEX_HOST": address, "TOOLPLEX_PORT": str(self.port)}
        log = self.logs / f"gateway-{address}.log"
        since = self.access.stat().st_size
        self.running[address] = start_toolplex(env, f"http://{address}:{self.port}", log)
        self._published()
        self.wait_for_traffic(address, since)

    def wait_for_traffic(self, address: str, since: int) -> None:
        """Until nginx logged a request it sent to `address` after byte `since` of its log (nginx asks the
        DNS again every 2 s)."""
        wanted = f"upstream={address}:{self.port}".encode()
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{self.base}/healthz", timeout=5)  # a request of its own, should the load be off
            with open(self.access, "rb") as log:
                log.seek(since)
                if wanted in log.read():
                    return
            assert time.monotonic() < deadline, f"nginx never sent a request to {address}"
            time.sleep(0.1)

    def stop(self, *addresses: str) -> None:
        """`docker stop`: out of the DNS answer at once, SIGTERM, then waited for (drain and grace)."""
        stopping = [self.running.pop(address) for address in addresses]
        self._published()
        for process in stopping:
            process.send_signal(signal.SIGTERM)
        for process in stopping:
            assert process.wait(timeout=STEP_TIMEOUT_S) == 0, "a replica did not stop cleanly"

    def kill(self, address: str) -> None:
        """`docker kill`: SIGKILL, and out of the DNS answer."""
        process = self.running.pop(address)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=STEP_TIMEOUT_S)
        self._published()

    def scale(self, replicas: int) -> None:
        """Start replicas on free addresses, or stop the newest ones together, until `replicas` run."""
        free = [address for address in ADDRESSES if address not in self.running]
        while len(self.running) < replicas:
            self.start(free.pop(0))
        if len(self.running) > replicas:
            self.stop(*list(self.running)[replicas:])

    def restart_each(self) -> list[str]:
        names = list(self.running)
        for address in names:
            self.stop(address)
            self.start(address)
        return names

    def kill_one(self) -> None:
        self.kill(next(iter(self.running)))

    def close(self) -> None:
        for process in self.running.values():
            stop(process)
        self.running.clear()


@contextlib.contextmanager
def loopback_stack(tmp_path: Path) -> Iterator[tuple[str, Replicas]]:
    """Redis, the `tools` upstream, DNS and nginx; no replica yet."""
    port = free_port(*ADDRESSES)
    with compose_backing(tmp_path) as backing, LoopbackDNS({"gateway": []}) as dns:
        env = {**backing, "TOOLPLEX_DRAIN_S": str(DRAIN_S)}
        conf = functools.partial(loopback_nginx_conf, dns.port, port)
        with nginx(conf, tmp_path / "nginx") as (nginx_port, access):
            base = f"http://127.0.0.1:{nginx_port}"
            replicas = Replicas(dns, env, port, tmp_path, access, base)
            try:
                yield base, replicas
            finally:
                replicas.close()


@pytest.mark.skipif(missing() is not None, reason=missing() or "")
def test_scaling_restarting_and_losing_replicas_under_load(tmp_path: Path) -> None:
    with loopback_stack(tmp_path) as (base, replicas):
        replicas.scale(2)
        wait_until_ok(f"{base}/healthz", STEP_TIMEOUT_S)
        run = run_scenario(base, replicas)
        logs = "".join(p.read_text() for p in tmp_path.glob("gateway-*.log"))
    check(run)
    # The handovers happened: sessions moved off stopping and killed replicas rather than failing.
    assert "mcp_session_adopted" in logs and "session_adopted" in logs, run.report()
