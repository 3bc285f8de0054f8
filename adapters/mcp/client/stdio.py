"""A stdio MCP server as a child process, and the SDK transport over its pipes.

The process is ours, not the SDK's `stdio_client`'s, because the gateway must
supervise it: know its pid and exit status, log its stderr line by line (through
the gateway's redacting log setup), and stop it together with everything it
started. It runs in a process group of its own (its pid is the group id), so
stopping it signals the whole group: SIGTERM, then SIGKILL after `grace_s` for
whatever is left, and an `npx` wrapper cannot leave its node child behind.

`connect(process)` is the SDK `Transport` over the pipes: one JSON-RPC message
per line each way, exactly what the MCP stdio transport specifies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

import anyio
import structlog
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

from adapters.mcp.sdk import TransportStreams
from adapters.stdio import log_stderr

log = structlog.get_logger("toolplex.mcp")

# What every process needs from the gateway's environment; nothing else is passed on unless `env:` says so.
INHERITED_ENV = ("HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
STDERR_TAIL_LINES = 20
GROUP_POLL_S = 0.02  # how often a stop looks whether the group is gone (each stop is bounded by its grace)


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: the few inherited variables above, then `env:` on top."""
    env = {key: os.environ[key] for key in INHERITED_ENV if key in os.environ}
    env.update(extra)
    return env


class ServerProcess:
    """One stdio MCP server process: spawned in its own group, its stderr logged, stopped with its whole group."""

    def __init__(self, process: asyncio.subprocess.Process, label: str) -> None:
        self.process = process
        self.label = label
        self.started = time.monotonic()
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_task = asyncio.create_task(self._read_stderr(), name=f"mcp-stderr-{label}")

    @classmethod
    async def spawn(
        cls,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        label: str,
        line_limit: int,
    ) -> ServerProcess:
        """Start the server; OSError when it cannot be started (no such command, not executable)."""
        process = await asyncio.create_subprocess_exec(
            command,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            limit=line_limit,
            start_new_session=True,  # its own process group: the group is what `stop` signals
        )
        log.info("mcp_server_started", backend=label, pid=process.pid, command=command)
        return cls(process, label)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        await log_stderr(self.process.stderr, self._stderr, "mcp_server_stderr", backend=self.label, pid=self.pid)

    async def settle(self, seconds: float) -> None:
        """Wait (at most `seconds`) for an ending process's exit status and last stderr lines: its stdout
        closes a moment before both are known, and an error message wants them."""
        deadline = time.monotonic() + seconds
        while self.process.returncode is None and time.monotonic() < deadline:
            await asyncio.sleep(GROUP_POLL_S)
        if self.process.returncode is not None:
            await asyncio.wait({self._stderr_task}, timeout=max(0.0, deadline - time.monotonic()))

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    async def _wait_gone(self, seconds: float) -> bool:
        """Whether the leader exited and the group emptied within `seconds` (polling: a group has no waiter)."""
        deadline = time.monotonic() + seconds
        while self.process.returncode is None or self._group_alive():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(GROUP_POLL_S)
        return True

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    async def stop(self, grace_s: float) -> None:
        """SIGTERM the group, SIGKILL what is left after `grace_s`, and reap: bounded by `grace_s` + 2 s."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        if self.process.returncode is None or self._group_alive():
            self._signal_group(signal.SIGTERM)
            if not await self._wait_gone(grace_s):
                log.warning("mcp_server_killed", backend=self.label, pid=self.pid, after_s=grace_s)
                self._signal_group(signal.SIGKILL)
                if not await self._wait_gone(2.0):
                    log.error("mcp_server_not_gone", backend=self.label, pid=self.pid)
        await asyncio.wait({self._stderr_task}, timeout=1)
        if not self._stderr_task.done():
            self._stderr_task.cancel()


@contextlib.asynccontextmanager
async def connect(process: ServerProcess, on_closed: Callable[[], None]) -> AsyncIterator[TransportStreams]:
    """The SDK transport over the process's pipes; `on_closed` runs once its stdout ends (it exited, or closed it)."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    stdout, stdin = process.process.stdout, process.process.stdin
    assert stdout is not None and stdin is not None

    async def read_stdout() -> None:
        try:
            async with read_writer:
                while True:
                    try:
                        line = await stdout.readline()
                    except (ValueError, asyncio.LimitOverrunError):
                        log.error("mcp_server_message_too_large", backend=process.label, pid=process.pid)
                        with contextlib.suppress(ProcessLookupError):
                            process.process.kill()  # the stream cannot be resynchronised: the supervisor restarts it
                        return
                    if not line:
                        return
                    if not line.strip():
                        continue
                    try:
                        message: SessionMessage | Exception = SessionMessage(
                            jsonrpc_message_adapter.validate_json(line, by_name=False)
                        )
                    except ValidationError as exc:
                        shown = line[:200].decode(errors="replace")
                        log.warning("mcp_server_sent_non_jsonrpc", backend=process.label, line=shown)
                        message = exc
                    await read_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        finally:
            on_closed()

    async def write_stdin() -> None:
        try:
            async with write_reader:
                async for session_message in write_reader:
                    data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    stdin.write(data.encode() + b"\n")
                    await stdin.drain()
        except (BrokenPipeError, ConnectionResetError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            await read_writer.aclose()  # the process stopped reading: requests end instead of hanging

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            tasks.cancel_scope.cancel()
            for stream in (read_stream, write_stream):
                await stream.aclose()
