"""JSON-RPC 2.0 with a child process over its stdin/stdout, one JSON document per line.

The isolated Python workers and the TypeScript sidecars both speak it, so the
plumbing lives here once: spawning, matching answers to requests, keeping the
last lines of stderr for error messages, and killing and reaping the child so
that no process outlives its owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
from collections import deque
from collections.abc import Sequence
from typing import Any

import orjson
import structlog

log = structlog.get_logger("toolplex.stdio")

# One message per line; a tool's result may be large, but not unbounded.
LINE_LIMIT = 64 * 1024 * 1024
STDERR_TAIL_LINES = 20


class PeerExited(Exception):
    """The child ended (or was killed) while a request was open."""

    def __init__(self, returncode: int | None, stderr_tail: str, note: str | None = None) -> None:
        super().__init__(note or describe_exit(returncode))
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.note = note  # why this side ended it, when it did


class RemoteError(Exception):
    """The child answered a request with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


async def log_stderr(stream: asyncio.StreamReader, tail: deque[str], event: str, **fields: Any) -> None:
    """Log a child's stderr a line at a time (keeping the last ones in `tail`) until it closes.

    An over-long line is skipped; the next ones are still logged.
    """
    while True:
        try:
            line = await stream.readline()
        except (ValueError, asyncio.LimitOverrunError):
            continue
        if not line:
            return
        text = line.decode(errors="replace").rstrip()
        tail.append(text)
        log.info(event, line=text, **fields)


def describe_exit(returncode: int | None) -> str:
    """`exit status 3` / `signal SIGXCPU`: how a process ended, for people."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class StdioPeer:
    """One child process and the requests open with it."""

    def __init__(self, process: asyncio.subprocess.Process, label: str) -> None:
        self.process = process
        self.label = label
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._closing = False
        self._note: str | None = None
        self._stderr_task = asyncio.create_task(self._read_stderr(), name=f"{label}-stderr")
        self._stdout_task = asyncio.create_task(self._read_stdout(), name=f"{label}-stdout")

    @classmethod
    async def start(
        cls, argv: Sequence[str], *, label: str, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> StdioPeer:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
            limit=LINE_LIMIT,
            # Out of the terminal's process group: Ctrl-C reaches the gateway, which stops its children.
            start_new_session=True,
        )
        return cls(process, label)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.returncode is None and not self._closing and not self._stdout_task.done()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its answer; raises RemoteError or PeerExited."""
        _request_id, future = await self.start_request(method, params)
        return await future

    async def start_request(self, method: str, params: Any) -> tuple[int, asyncio.Future[Any]]:
        """Send a request; hand back its id (to cancel it by) and the future of its answer."""
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        future.add_done_callback(lambda _f: self._pending.pop(request_id, None))
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        except BaseException:
            future.cancel()
            raise
        return request_id, future

    async def notify(self, method: str, params: Any) -> None:
        with contextlib.suppress(PeerExited):
            await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _send(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        if stdin is None or not self.alive:
            raise PeerExited(self.process.returncode, self.stderr_tail())
        try:
            stdin.write(orjson.dumps(message) + b"\n")
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            await self._stdout_task  # the reader notices the end and fails every open request
            raise PeerExited(self.process.returncode, self.stderr_tail()) from None

    async def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                try:
                    line = await stdout.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    log.error("peer_message_too_large", peer=self.label, pid=self.pid, limit=LINE_LIMIT)
                    self._note = f"it sent a message over {LINE_LIMIT // (1024 * 1024)} MiB (a result too large?)"
                    self.process.kill()
                    break
                if not line:
                    break
                self._deliver(line)
        except asyncio.CancelledError:
            # The loop is being torn down without close(): the child goes with it, or the wait below never ends.
            self._closing = True
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            raise
        finally:
            await self.process.wait()
            await asyncio.wait({self._stderr_task}, timeout=2)  # the tail explains the end
            exited = PeerExited(self.process.returncode, self.stderr_tail(), self._note)
            for future in list(self._pending.values()):
                if not future.done():
                    future.set_exception(exited)
            if not self._closing:
                log.warning("peer_exited", peer=self.label, pid=self.pid, how=describe_exit(self.process.returncode))

    def _deliver(self, line: bytes) -> None:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            log.warning("peer_sent_non_json", peer=self.label, pid=self.pid, line=line[:200].decode(errors="replace"))
            return
        if not isinstance(message, dict):
            return
        future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            future.set_exception(
                RemoteError(int(error.get("code", -32603)), str(error.get("message", "")), error.get("data"))
            )
        else:
            future.set_result(message.get("result"))

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        await log_stderr(self.process.stderr, self._stderr, "peer_stderr", peer=self.label, pid=self.pid)

    async def kill(self, note: str | None = None) -> None:
        """SIGKILL the child and reap it: when this returns the process is gone.

        `note` says why (e.g. "it did not stop a cancelled call"); the requests
        still open get it in their PeerExited.
        """
        if note is not None and self.process.returncode is None:
            self._note = note
        self._closing = True
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        await asyncio.shield(self._wait_closed())

    async def _wait_closed(self) -> None:
        await self.process.wait()
        await asyncio.wait({self._stdout_task, self._stderr_task}, timeout=5)
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
