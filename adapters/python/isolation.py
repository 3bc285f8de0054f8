"""`isolation: process`: a Python toolkit run by a pool of reused worker subprocesses.

The gateway keeps the schemas (it imported the toolkit to discover it); the
workers import the same module and run one call at a time under per-call
CPU-time and memory rlimits. Whatever happens to a worker (a crash, `os._exit`,
SIGXCPU, the wall deadline) fails that one call with a message a person can
act on; the dead worker is dropped and the next call starts a fresh one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

import structlog

from adapters.stdio import PeerExited, RemoteError, StdioPeer, describe_exit
from gateway.errors import ConfigError, ErrorKind, Failure, GatewayError
from gateway.model import CallContext

if TYPE_CHECKING:
    from adapters.python.settings import PythonBackendSettings

log = structlog.get_logger("toolplex.isolation")


def context_payload(context: CallContext) -> dict[str, Any]:
    """The parts of a CallContext a tool may read, in JSON form."""
    principal = context.principal
    return {
        "call_id": context.call_id,
        "front": context.front,
        "principal": None
        if principal is None
        else {"name": principal.name, "tools": list(principal.tools) if principal.tools is not None else None},
        "session_id": context.session_id,
        "message_id": context.message_id,
        "trace_id": context.trace_id,
        "user_id": context.user_id,
        "secrets": context.secrets,
        "authorization": context.authorization,
        "remaining": context.remaining(),
    }


def worker_environment() -> dict[str, str]:
    """The gateway's environment, plus its import path so the worker finds the same modules."""
    paths = [p or os.getcwd() for p in sys.path]
    existing = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *([existing] if existing else [])])}


class WorkerPool:
    """Up to `pool_size` workers for one backend; a call borrows one and returns it if it is still sound."""

    def __init__(self, backend: str, module_path: str, settings: PythonBackendSettings) -> None:
        # pool_size, cpu_seconds and memory_mb are read from the backend's settings, where their defaults live.
        self.backend = backend
        self.module_path = module_path
        self.settings = settings
        self._slots = asyncio.Semaphore(settings.pool_size)
        self._idle: list[StdioPeer] = []
        self._all: set[StdioPeer] = set()
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """Live worker pids (for operators and tests)."""
        return [w.pid for w in self._all if w.alive]

    @property
    def busy(self) -> int:
        """Workers running a call right now."""
        return len(self._all) - len(self._idle)

    async def execute(self, label: str, binding: dict[str, Any], arguments: dict[str, Any], ctx: CallContext) -> Any:
        if self._closed:
            raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {self.backend!r} is shutting down")
        params = {"label": label, "binding": binding, "arguments": arguments, "context": context_payload(ctx)}
        async with self._slots:
            worker = await self._borrow()
            try:
                answer = await worker.request("tool.execute", params)
            except asyncio.CancelledError:
                # The wall deadline (or the client went away): the process goes, with whatever it was doing.
                await self._discard(worker)
                log.info("worker_killed_at_deadline", backend=self.backend, pid=worker.pid, call_id=ctx.call_id)
                raise
            except PeerExited as exc:
                await self._discard(worker)
                raise GatewayError(self._death_failure(label, exc)) from None
            except RemoteError as exc:
                data = exc.data if isinstance(exc.data, dict) else {}
                self._give_back(worker, bool(data.get("recycle")))
                raise GatewayError(self._remote_failure(label, exc, data, ctx)) from None
            except BaseException:
                await self._discard(worker)
                raise
            self._give_back(worker, bool(answer.get("recycle")))
            return answer.get("value")

    async def warm(self, timeout: float = 60.0) -> None:
        """Start one worker and see it import the module, so a broken setup fails at start-up.

        Rediscovery calls this again: with a worker alive there is nothing to prove,
        and waiting for a free slot would hold up discovery behind long calls.
        """
        if self._closed:
            raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {self.backend!r} is shutting down")
        if any(worker.alive for worker in self._all):
            return
        async with self._slots:
            worker = await self._borrow()
            try:
                await asyncio.wait_for(worker.request("ping", {}), timeout)
            except (PeerExited, TimeoutError) as exc:
                await self._discard(worker)
                why = "did not answer in time" if isinstance(exc, TimeoutError) else f"ended with {exc}"
                tail = worker.stderr_tail()
                raise ConfigError(
                    [f"backend {self.backend!r}: the isolated worker {why}" + (f":\n{tail}" if tail else "")]
                ) from None
            self._give_back(worker, False)

    async def _borrow(self) -> StdioPeer:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                return worker
            await self._discard(worker)
        cpu = "-" if self.settings.cpu_seconds is None else str(self.settings.cpu_seconds)
        memory = "-" if self.settings.memory_mb is None else str(self.settings.memory_mb)
        argv = [sys.executable, "-m", "adapters.python.worker", self.module_path, cpu, memory]
        worker = await StdioPeer.start(argv, label=f"python-worker:{self.backend}", env=worker_environment())
        self._all.add(worker)
        log.info("worker_started", backend=self.backend, pid=worker.pid)
        return worker

    def _give_back(self, worker: StdioPeer, recycle: bool) -> None:
        if recycle or self._closed or not worker.alive:
            asyncio.get_running_loop().create_task(self._discard(worker))
        else:
            self._idle.append(worker)

    async def _discard(self, worker: StdioPeer) -> None:
        self._all.discard(worker)
        await worker.kill()

    def _death_failure(self, label: str, exc: PeerExited) -> Failure:
        code = exc.returncode
        if exc.note:
            why = f"was stopped: {exc.note}"
        elif code == -signal.SIGXCPU:
            why = f"used more than its CPU-time limit of {self.settings.cpu_seconds:g} s (cpu_seconds) and was stopped"
        elif code == -signal.SIGKILL:
            why = "was killed (SIGKILL), most likely because the machine ran out of memory"
        elif code is not None and code < 0:
            why = f"crashed: its worker process died from {describe_exit(code)}"
        else:
            why = f"ended its worker process with {describe_exit(code)} (os._exit or a fatal error in the tool?)"
        return Failure(
            kind=ErrorKind.TOOL_FAILED,
            message=f"Tool {label} {why}. The call did not complete; the worker was replaced, so you may retry.",
            developer_message=("Worker stderr (last lines):\n" + exc.stderr_tail) if exc.stderr_tail else None,
            can_retry=True,
            details={"worker_exit": describe_exit(code)},
        )

    def _remote_failure(self, label: str, exc: RemoteError, data: dict[str, Any], ctx: CallContext) -> Failure:
        raw = data.get("failure")
        if not isinstance(raw, dict):
            return Failure(kind=ErrorKind.INTERNAL, message=f"Worker of {label} answered oddly: {exc.message}")
        failure = Failure.from_dict(raw)
        if failure.kind is ErrorKind.INTERNAL:
            # Same as an in-process tool: the traceback goes to the log, the caller gets a call id.
            log.error("tool_exception", tool=label, call_id=ctx.call_id, traceback=data.get("traceback"))
            return Failure(
                kind=ErrorKind.INTERNAL, message=f"Internal error; quote call id {ctx.call_id} to the operator"
            )
        return failure

    async def close(self) -> None:
        """Kill every worker, idle or busy; returns when all are reaped."""
        self._closed = True
        workers = list(self._all)
        self._all.clear()
        self._idle.clear()
        await asyncio.gather(*(w.kill() for w in workers), return_exceptions=True)
