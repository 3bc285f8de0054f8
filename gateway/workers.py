"""`server.workers: N`: N gateway processes serving one port, kept running by a small supervisor.

The supervisor binds the port once per worker (`SO_REUSEPORT`) and starts N
`toolplex serve` processes, each inheriting its own listening socket; the
kernel spreads new connections over the sockets by their addresses. One socket
shared by all did not spread them: asyncio accepts every waiting connection at
once, so the first worker to wake took a whole burst (wrk's 64 connections all
went to one worker, and two workers served no more than one). A worker that
dies is started again on the same socket, which the supervisor keeps open: the
connections that arrive for it meanwhile wait in its backlog, none is refused.
Where `SO_REUSEPORT` is missing, the workers share one socket as before.

Each worker is a replica of its own in the shared state store (so more than
one worker needs `state.store: redis`): it also listens on a private port of
its own, which is the address it registers, so that another worker can
forward a request for something only it holds (a session's workspace, a
running call) to exactly it, not to whichever worker the shared port picks.

Signals: SIGTERM and SIGINT stop every worker gracefully (each drains its
calls within `server.shutdown_grace_s`); SIGHUP is passed on (each reloads its
configuration). A worker that dies is started again after a pause, at most
`MAX_RESTARTS` times a minute; past that the supervisor stops them all and
exits, rather than restart a crashing worker forever.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from types import FrameType

import structlog

log = structlog.get_logger("toolplex.workers")

BACKLOG = 2048
RESTART_PAUSE_S = 1.0
MAX_RESTARTS = 5  # within RESTART_WINDOW_S
RESTART_WINDOW_S = 60.0
POLL_S = 0.2
KILL_MARGIN_S = 10.0  # beyond the shutdown grace, before a worker that does not stop is killed


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening socket (IPv4 or IPv6, as `host` is), inheritable by a worker; with `reuse_port`, one of
    a group bound to the same port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def bind_group(host: str, port: int, count: int) -> list[socket.socket]:
    """One listening socket per worker on one port (`SO_REUSEPORT`), or one shared socket where the system
    has no such option."""
    if not hasattr(socket, "SO_REUSEPORT"):
        return [bind(host, port)]
    first = bind(host, port, reuse_port=True)
    group = [first]
    try:
        for _ in range(count - 1):
            group.append(bind(host, first.getsockname()[1], reuse_port=True))
    except OSError:
        for sock in group:
            sock.close()
        raise
    return group


class Supervisor:
    """Starts the workers, passes signals on, restarts the ones that die (bounded)."""

    def __init__(self, command: list[str], count: int, listeners: list[socket.socket], grace_s: float) -> None:
        self.command = command  # `toolplex serve ...` without the worker's own arguments
        self.count = count
        self.listeners = listeners  # one per worker, or one shared by all
        self.grace_s = grace_s
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self.stopping = False
        self._restarts: deque[float] = deque()

    def _spawn(self, index: int) -> None:
        fd = self.listeners[index % len(self.listeners)].fileno()
        process = subprocess.Popen(
            [*self.command, "--listen-fd", str(fd), "--worker", str(index)],
            pass_fds=(fd,),
        )
        self.workers[index] = process
        log.info("worker_started", worker=index, pid=process.pid)

    def _signal(self, signum: int, _frame: FrameType | None) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
        for process in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM if signum == signal.SIGINT else signum)

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._signal)
        for index in range(self.count):
            self._spawn(index)
        host, port = self.listeners[0].getsockname()[:2]
        log.info("workers_serving", workers=self.count, host=host, port=port, sockets=len(self.listeners))
        failed = False
        while not self.stopping:
            time.sleep(POLL_S)
            for index, process in list(self.workers.items()):
                code = process.poll()
                if code is None or self.stopping:
                    continue
                log.error("worker_exited", worker=index, pid=process.pid, code=code)
                if not self._may_restart():
                    log.error("workers_failing", restarts=len(self._restarts), window_s=RESTART_WINDOW_S)
                    failed = True
                    self.stopping = True
                    break
                time.sleep(RESTART_PAUSE_S)
                self._spawn(index)
        self._stop_all()
        for listener in self.listeners:
            listener.close()
        return 1 if failed else 0

    def _may_restart(self) -> bool:
        now = time.monotonic()
        while self._restarts and now - self._restarts[0] > RESTART_WINDOW_S:
            self._restarts.popleft()
        if len(self._restarts) >= MAX_RESTARTS:
            return False
        self._restarts.append(now)
        return True

    def _stop_all(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s + KILL_MARGIN_S
        for index, process in self.workers.items():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("worker_killed", worker=index, pid=process.pid)
                process.kill()
                process.wait()


def serve_workers(config_path: str, host: str, port: int, count: int, grace_s: float, *, watch: bool) -> int:
    """Run `count` workers on host:port until a stop signal; the exit code of the whole."""
    try:
        listeners = bind_group(host, port, count)
    except OSError as exc:
        print(f"cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", config_path, "--host", host]
    command += ["--port", str(listeners[0].getsockname()[1])]
    if not watch:
        command.append("--no-reload")
    os.environ.pop("TOOLPLEX_PORT", None)  # the workers get the bound port explicitly
    return Supervisor(command, count, listeners, grace_s).run()
