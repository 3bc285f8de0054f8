"""Servers the benchmarks start: on a free loopback port, timed until ready, always stopped.

One helper for bench/run.py and bench/catalog_scale.py; stopping is tests/support.py's `stop`.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import free_port, stop

READY_POLL_S = 0.01  # start-up is itself a figure (bench/catalog_scale.py): poll finely


@dataclass
class Served:
    port: int
    process: subprocess.Popen[bytes]
    startup_s: float  # from spawning until GET /healthz answered 200

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


@contextlib.contextmanager
def spawn(
    command: list[str], cwd: Path, env: dict[str, str] | None = None, *, deadline: float | None = None
) -> Iterator[Served]:
    """`command --port <free port>`, until /healthz answers (by `deadline`, default 60 s); its log's
    tail is printed when anything fails; terminated, killed if need be, and reaped in every case."""
    port = free_port()
    until = deadline if deadline is not None else time.monotonic() + 60
    with tempfile.TemporaryFile() as log:
        started = time.perf_counter()
        process = subprocess.Popen(
            [*command, "--port", str(port)],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            while not healthy(port):
                if process.poll() is not None:
                    raise RuntimeError(f"{' '.join(command)} exited with {process.returncode} before answering")
                if time.monotonic() > until:
                    raise TimeoutError(f"{' '.join(command)} did not answer /healthz in time")
                time.sleep(READY_POLL_S)
            yield Served(port, process, time.perf_counter() - started)
        except BaseException:
            log.seek(0)
            tail = log.read()[-4000:].decode(errors="replace")
            sys.stderr.write(f"--- log of {' '.join(command)} (tail) ---\n{tail}\n")
            raise
        finally:
            stop(process)
