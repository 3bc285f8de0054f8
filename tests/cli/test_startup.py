"""What an operator sees of `toolplex serve` starting (issue 14, point 6): the version, the
"listening on" line with the port really bound, and a start that an upstream which accepts
connections and never answers holds up no longer than that upstream's discovery bound
(`timeouts_s.total`, retries included).

Real processes on loopback; every wait is bounded, the hanging upstream's by its configured bound.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx

from tests.support import BUILTIN_BACKENDS, DEFAULT_CONFIG, ROOT, stop

CONSOLE_SCRIPT = Path(sys.executable).parent / "toolplex"
LISTENING = re.compile(
    r"^Toolplex (?P<version>\S+) listening on http://(?P<host>[^:\s]+):(?P<port>\d+) "
    r"\((?P<tools>\d+) tools? from (?P<backends>\d+) backends?\)$"
)
START_WAIT_S = 60.0  # the default configuration starts a Node.js sidecar: generous on a busy 2-core machine

# The hanging upstreams' discovery bound, and how many times that the whole start may take (the
# interpreter, the Python backend). Without the bound each attempt is cut at `total` and retried
# (until the circuit breaker opens): with the defaults (read 30 s, 2 retries) that was 92 s.
DISCOVERY_TOTAL_S = 2.0
START_WAIT_FACTOR = 10
RETRIES = 10
UPSTREAM_KINDS = ("oxp", "opentool", "jsonrpc", "toolserver")

# What a gateway with every front on, auth off and only in-process tools does not load by the time it listens:
# each was a sizeable part of every start, and loads where it is used (a token to check, an upstream, a
# retrieval). `gateway.app` is there to show that the check sees what is loaded. (The MCP SDK loads at start:
# built by the first request, it made a new replica's first MCP requests wait seconds under load.)
LOADED_ONLY_WHEN_USED = (
    "jwt",  # (cryptography is not listed: the MCP SDK, loaded at start, imports it)
    "gateway.oauth.client",
    "gateway.oauth.resource",
    "aiohttp",
    "gateway.upstream",
    "snowballstemmer",
)
# `toolplex serve` whose server, once listening, prints which of the names given are imported, then stops.
MODULES_AT_LISTENING = """
import json, sys
import gateway.serving

class Recording(gateway.serving.GatewayServer):
    async def startup(self, sockets=None):
        await super().startup(sockets)
        print(json.dumps(sorted(name for name in sys.argv[2:] if name in sys.modules)), flush=True)
        self.should_exit = True

gateway.serving.GatewayServer = Recording
from gateway.cli import main
sys.exit(main(["serve", "--config", sys.argv[1], "--port", "0", "--no-reload"]))
"""


def toolplex() -> list[str]:
    """The installed console script, as a user runs it (the module where it is not installed)."""
    return [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "gateway.cli"]


def events(log: Path) -> list[dict[str, Any]]:
    """The JSON log events written so far (complete lines only; anything else is skipped)."""
    found = []
    for line in log.read_text().splitlines(keepends=True):
        if not line.endswith("\n"):
            break  # still being written
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                found.append(event)
    return found


def listening_index(found: list[dict[str, Any]]) -> int | None:
    for index, event in enumerate(found):
        if LISTENING.match(str(event.get("event", ""))):
            return index
    return None


@contextlib.contextmanager
def serve_on_port_zero(config: Path, log: Path, wait_s: float) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """`toolplex serve --port 0`; yields the log events up to the listening line and that line's index."""
    command = [*toolplex(), "serve", "--config", str(config), "--port", "0", "--no-reload"]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                found = events(log)
                index = listening_index(found)
                if index is not None:
                    break
                assert process.poll() is None, f"toolplex serve exited with {process.returncode}:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"no listening line within {wait_s:g} s:\n{log.read_text()}"
                time.sleep(0.05)
            yield found, index
        finally:
            stop(process)


class HangingServer:
    """A TCP server on loopback that accepts every connection and never reads, answers or closes one."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = int(self.listener.getsockname()[1])
        self.held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="hanging-server", daemon=True)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            with self._lock:
                self.held.append(connection)

    def accepted(self) -> int:
        with self._lock:
            return len(self.held)

    def wait_accepted(self, count: int, wait_s: float) -> int:
        """How many connections were accepted, once `count` were (the kernel queued them; this thread may lag)."""
        deadline = time.monotonic() + wait_s
        while self.accepted() < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.accepted()

    def __enter__(self) -> HangingServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        for connection in self.held:
            connection.close()
        self.listener.close()


def test_version_prints_the_installed_version() -> None:
    result = subprocess.run(
        [*toolplex(), "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"toolplex {version('toolplex')}\n"


def test_listening_line_names_the_port_really_bound(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with serve_on_port_zero(DEFAULT_CONFIG, log, START_WAIT_S) as (found, index):
        line = found[index]
        match = LISTENING.match(line["event"])
        assert match is not None
        port = int(match["port"])
        assert port != 0 and line["port"] == port and line["level"] == "info"
        assert match["version"] == version("toolplex") == line["version"]
        assert match["host"] == "127.0.0.1"
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/healthz", timeout=10).json() == {"status": "ok"}
        ready = httpx.get(f"{base}/readyz", timeout=10).json()
        assert ready["status"] == "ready"
        assert int(match["backends"]) == line["backends"] == len(ready["backends"])
        listed = httpx.get(f"{base}/tools", timeout=10).json()["items"]  # every default tool is listed, once
        assert int(match["tools"]) == line["tools"] == len(listed)
    assert sum(1 for event in events(log) if LISTENING.match(str(event.get("event", "")))) == 1


def test_a_gateway_without_auth_upstreams_or_mcp_clients_starts_without_their_libraries(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(f"server: {{host: 127.0.0.1}}\n{BUILTIN_BACKENDS}")  # every front on: the defaults
    result = subprocess.run(
        [sys.executable, "-c", MODULES_AT_LISTENING, str(config), "gateway.app", *LOADED_ONLY_WHEN_USED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=START_WAIT_S,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == ["gateway.app"]


def test_a_hanging_upstream_delays_the_start_by_its_discovery_bound_at_most(tmp_path: Path) -> None:
    with HangingServer() as hanging:
        stuck = "".join(
            f"""
  - name: stuck_{kind}
    kind: {kind}
    url: http://127.0.0.1:{hanging.port}
    timeouts_s: {{connect: 5, read: 30, total: {DISCOVERY_TOTAL_S}}}
    retries: {RETRIES}
    retry_backoff_s: 0
"""
            for kind in UPSTREAM_KINDS
        )
        config = tmp_path / "hanging.yaml"
        config.write_text(
            "discovery: {interval_s: 0}\n"
            "backends:\n"
            '  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}' + stuck
        )
        log = tmp_path / "serve.log"
        with serve_on_port_zero(config, log, DISCOVERY_TOTAL_S * START_WAIT_FACTOR) as (found, index):
            # Each stuck backend opened one connection, which is still open and unanswered: the gateway
            # listens without waiting for the upstream, and no retry began after the bound had passed.
            assert hanging.wait_accepted(len(UPSTREAM_KINDS), DISCOVERY_TOTAL_S) == len(UPSTREAM_KINDS)
            line = LISTENING.match(found[index]["event"])
            assert line is not None and (line["tools"], line["backends"]) == ("4", "1")
            assert found[index]["backends_down"] == [f"stuck_{kind}" for kind in UPSTREAM_KINDS]
            timed_out = f"discovery did not finish within {DISCOVERY_TOTAL_S:g} s (timeouts_s.total)"
            down = {e["backend"]: e["error"] for e in found[:index] if e.get("event") == "backend_down"}
            assert down == {f"stuck_{kind}": timed_out for kind in UPSTREAM_KINDS}
            base = f"http://127.0.0.1:{line['port']}"
            assert httpx.get(f"{base}/healthz", timeout=10).json() == {"status": "ok"}
            ready = httpx.get(f"{base}/readyz", timeout=10).json()
            assert ready["status"] == "degraded"
            states = {b["name"]: (b["state"], b["error"]) for b in ready["backends"]}
            assert states == {"math": ("up", None), **{f"stuck_{k}": ("down", timed_out) for k in UPSTREAM_KINDS}}
            assert hanging.accepted() == len(UPSTREAM_KINDS)
