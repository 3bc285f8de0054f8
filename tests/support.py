"""Test plumbing: gateways in-process (ASGI) and as real subprocesses on free loopback ports."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from gateway.app import create_app
from gateway.config import parse_config
from gateway.model import Call, Outcome
from gateway.runs import Run
from gateway.runtime import Gateway

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "config" / "gateway.yaml"

BUILTIN_BACKENDS = """
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
  - {name: text, kind: python, module: "adapters.python.toolkits.text:toolkit"}
  - {name: time, kind: python, module: "adapters.python.toolkits.clock:toolkit"}
  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}
"""


# How long a process started by a test may take to answer: a gateway starts in 2-5 s, but on a 2-core machine
# shared with other work (CI neighbours, pytest's other worker) it has taken over 20 s; a bound, never a wait.
START_TIMEOUT_S = 60.0


def until(check: Callable[[], Any], what: str, deadline_s: float = 20.0, every_s: float = 0.05) -> Any:
    """Poll `check` until it returns something truthy (returned), bounded in time: never a sleep for
    synchronisation, a wait for a state the test can see."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {deadline_s} s")


# Ports handed out for servers the tests start: below the kernel's ephemeral range (32768-60999 on Linux), where
# outgoing connections never take one, a span of its own per pytest-xdist worker, walked in turn from a random
# start. A port found free by binding port 0 and closing goes back to the ephemeral pool: the kernel may hand it
# to the next caller, in this process or another worker, before the server it was meant for binds it (CI failed
# so, a server answering on another's port).
PORT_BASE = 20000
PORT_SPAN = 1500  # per worker: 8 workers fit below 32768
_PORT_START = int.from_bytes(os.urandom(2), "big") % PORT_SPAN
_ports_handed = itertools.count()


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker[2:]) % 8 if worker[2:].isdigit() else 0


def free_port(*hosts: str) -> int:
    """A port nothing is bound to now on each of `hosts` (default 127.0.0.1; replicas on loopback addresses of
    their own listen on the same port, as containers do), and that no other call in this test run is handed soon."""
    base = PORT_BASE + _worker_index() * PORT_SPAN
    for _ in range(PORT_SPAN):
        port = base + (_PORT_START + next(_ports_handed)) % PORT_SPAN
        with contextlib.ExitStack() as held:
            try:
                for host in hosts or ("127.0.0.1",):
                    sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    sock.bind((host, port))  # no SO_REUSEADDR: fails while any socket holds the port
            except OSError:
                continue
            return port
    raise RuntimeError(f"no port free on {hosts or '127.0.0.1'} in {base}-{base + PORT_SPAN - 1}")


@functools.cache
def _refusing() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def refused_port() -> int:
    """A loopback port where every connection is refused, for as long as this test process lives.

    The port is held by a socket that is bound but never listens: nothing else (another test's
    server on another worker) can take it, which a port merely found free cannot promise.
    """
    return int(_refusing().getsockname()[1])


@contextlib.contextmanager
def unanswered_port(host: str = "127.0.0.1", port: int = 0) -> Iterator[int]:
    """A port on `host` where connecting hangs (no SYN is answered), as at an address nothing answers any more:
    a listener whose accept queue is full drops further SYNs. Yields the port."""
    listener = socket.socket()
    listener.bind((host, port))
    listener.listen(0)
    fillers: list[socket.socket] = []
    try:
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(listener.getsockname())
            fillers.append(filler)
        yield int(listener.getsockname()[1])
    finally:
        for sock in [*fillers, listener]:
            sock.close()


@contextlib.asynccontextmanager
async def asgi_client(config_yaml: str, env: dict[str, str] | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client talking to an in-process gateway whose lifespan has run."""
    config = parse_config(textwrap.dedent(config_yaml), "test.yaml", env=env if env is not None else dict(os.environ))
    app = create_app(config)
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=30) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


async def started_gateway(config_yaml: str) -> Gateway:
    """A Gateway (no HTTP) whose backends are started; the caller closes it."""
    gateway = Gateway(parse_config(textwrap.dedent(config_yaml), "test.yaml", env=dict(os.environ)))
    await gateway.start()
    return gateway


def track_runs(gateway: Gateway) -> list[weakref.ref[Run]]:
    """Weak references to every run the gateway starts from now on: what is still alive after is held somewhere."""
    alive: list[weakref.ref[Run]] = []
    start = gateway.runs.start

    def tracked(key: str, call: Call, **kw: Any) -> Run:
        run = start(key, call, **kw)
        alive.append(weakref.ref(run))
        return run

    gateway.runs.start = tracked  # type: ignore[method-assign]
    return alive


async def call_tool(gateway: Gateway, tool: str, arguments: dict[str, Any] | None = None, **fields: Any) -> Outcome:
    """One call through the dispatch core, as a front would make it."""
    return await gateway.services.call(Call(tool, arguments or {}, **fields))


def wait_for_http(url: str, process: subprocess.Popen[bytes] | None = None, timeout: float = START_TIMEOUT_S) -> None:
    """Poll `url` until it answers 200; bounded in time, fails fast if the process died."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout} s: {last}")


@contextlib.contextmanager
def gateway_process(
    config_path: Path, env: dict[str, str] | None = None, log_path: Path | None = None
) -> Iterator[str]:
    """`toolplex serve` as a real subprocess on a free port; yields its base URL."""
    with served_gateway(config_path, env, log_path) as (base, _process):
        yield base


@contextlib.contextmanager
def served_gateway(
    config_path: Path,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    extra_args: list[str] | None = None,
    port: int | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`toolplex serve` as a real subprocess on a free port (or `port`, when the configuration must name its own
    URL); yields its base URL and the process.

    Its log (stderr) goes to `log_path`, or to a temporary file: never to a pipe nobody reads,
    which would block the server once the pipe is full.
    """
    port = port or free_port()
    cmd = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config_path), "--port", str(port)]
    log = open(log_path, "wb") if log_path else tempfile.TemporaryFile()  # noqa: SIM115
    process = subprocess.Popen(
        [*cmd, *(extra_args or [])],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/healthz", process)
        yield base, process
    finally:
        stop(process)
        log.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill if it does not exit in time; always reaped."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None, timeout: float = START_TIMEOUT_S) -> None:
    """Poll until something accepts TCP connections on 127.0.0.1:`port`; bounded in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before port {port} opened")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} did not open within {timeout} s")


@contextlib.contextmanager
def server_process(
    command: list[str], port: int, env: dict[str, str] | None = None, timeout: float = START_TIMEOUT_S
) -> Iterator[int]:
    """Run `command` (which must listen on 127.0.0.1:`port`); yield the port once it accepts connections."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log, stderr=log)
        try:
            wait_for_port(port, process, timeout=timeout)
            yield port
        finally:
            stop(process)


@contextlib.contextmanager
def python_server(module: str, *args: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """`python -m module --port P *args` on a free loopback port; yields P once it accepts connections."""
    port = free_port()
    with server_process([sys.executable, "-m", module, "--port", str(port), *args], port, env) as ready:
        yield ready
