"""The isolated worker: `python -m adapters.python.worker module:attribute`.

It imports the same toolkit as the gateway and runs one call at a time, asked
over stdin/stdout with JSON-RPC (`tool.execute`). Each call runs under its own
CPU-time and address-space limits. The parent answers for everything that
kills the process (crash, `os._exit`, SIGXCPU, the wall deadline); this side
reports what Python can still catch. After a MemoryError, a `sys.exit` or
growth past the limit it answers and then exits, so the next call gets a
fresh process.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import inspect
import math
import os
import resource
import signal
import sys
import time
import traceback
import types
from typing import IO, Any

import orjson
from pydantic_core import PydanticSerializationError, to_jsonable_python

from adapters.python.backend import decorated_functions
from adapters.python.decorator import PythonTool, tool_of
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import CallContext, Principal
from gateway.plugins import load_object

MiB = 1024 * 1024
TOOL_ERROR = -32000  # the seed's "tool execution error"; data.failure carries the canonical failure


class Recycle(Exception):
    """The call failed in a way that leaves this process suspect: answer, then exit."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the gateway dies, so no worker is orphaned."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def protocol_streams() -> tuple[IO[bytes], IO[bytes]]:
    """Keep private copies of stdin/stdout for the protocol; tools' prints go to stderr."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return proto_in, proto_out


def address_space() -> int:
    """This process's virtual size in bytes (what RLIMIT_AS counts); 0 where /proc is missing."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Limits:
    """Per-call rlimits: CPU seconds from now, memory on top of what the worker holds now."""

    def __init__(self, cpu_seconds: float | None, memory_mb: int | None) -> None:
        self.cpu_seconds = cpu_seconds
        self.memory_mb = memory_mb
        self.cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        self.as_hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        self.baseline = address_space()

    @staticmethod
    def _cap(value: int, hard: int) -> int:
        return value if hard == resource.RLIM_INFINITY else min(value, hard)

    def arm(self) -> None:
        if self.cpu_seconds is not None:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            soft = math.ceil(usage.ru_utime + usage.ru_stime + self.cpu_seconds)
            resource.setrlimit(resource.RLIMIT_CPU, (self._cap(soft, self.cpu_hard), self.cpu_hard))
        if self.memory_mb is not None:
            soft = address_space() + self.memory_mb * MiB
            resource.setrlimit(resource.RLIMIT_AS, (self._cap(soft, self.as_hard), self.as_hard))

    def disarm(self) -> None:
        if self.cpu_seconds is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_hard, self.cpu_hard))
        if self.memory_mb is not None:
            resource.setrlimit(resource.RLIMIT_AS, (self.as_hard, self.as_hard))

    def grown_too_much(self) -> bool:
        """A worker that kept more than one call's allowance is replaced rather than reused."""
        return self.memory_mb is not None and address_space() > self.baseline + self.memory_mb * MiB


class Worker:
    def __init__(self, module_path: str, limits: Limits) -> None:
        self.target = load_object(module_path)
        self.limits = limits
        self.loop = asyncio.new_event_loop()
        self.decorated: dict[str, PythonTool] = {}
        target = self.target
        if hasattr(target, "call") and hasattr(target, "load") and not isinstance(target, types.ModuleType):
            self._settle(target.load())  # as the gateway did at discovery: some Tool objects set up there
        elif not (isinstance(target, types.ModuleType) and hasattr(target, "tool_info")):
            for fn in decorated_functions(self.target):
                declared = tool_of(fn)
                if declared is not None:
                    self.decorated[declared.name] = declared
        self.limits.baseline = address_space()

    def execute(self, params: dict[str, Any]) -> Any:
        binding = params["binding"]
        arguments = params["arguments"]
        context = self._context(params.get("context") or {})
        label = params.get("label", "tool")
        self.limits.arm()
        try:
            return self._run(binding, arguments, context)
        except MemoryError:
            raise Recycle(
                Failure(
                    kind=ErrorKind.TOOL_FAILED,
                    message=f"Tool {label} ran out of memory: one call may allocate at most "
                    f"{self.limits.memory_mb} MB (memory_mb); the worker was replaced",
                    developer_message="MemoryError under RLIMIT_AS in the isolated worker",
                )
            ) from None
        except PydanticSerializationError as exc:
            raise GatewayError.of(
                ErrorKind.TOOL_FAILED, f"Tool {label} returned a value that is not JSON: {exc}"
            ) from None
        except SystemExit as exc:
            raise Recycle(
                Failure(
                    kind=ErrorKind.TOOL_FAILED,
                    message=f"Tool {label} called sys.exit({exc.code!r}) instead of returning or raising ToolError",
                )
            ) from None
        finally:
            self.limits.disarm()

    def _run(self, binding: dict[str, Any], arguments: dict[str, Any], context: CallContext) -> Any:
        style = binding["style"]
        if style == "decorated":
            declared = self.decorated[binding["name"]]
            kwargs = declared.keyword_arguments(arguments, context)
            return declared.schemas.output(self._settle(declared.func(**kwargs)))
        if style == "info":
            return to_jsonable_python(self._settle(self.target.tool_function(**arguments)))
        if style == "opentool":
            return to_jsonable_python(self._settle(self.target.call(binding["function"], arguments)))
        raise GatewayError.of(ErrorKind.INTERNAL, f"unknown binding style {style!r}")

    def _settle(self, value: Any) -> Any:
        if inspect.isawaitable(value):
            return self.loop.run_until_complete(value)  # type: ignore[arg-type]
        return value

    @staticmethod
    def _context(data: dict[str, Any]) -> CallContext:
        principal = data.get("principal")
        remaining = data.get("remaining")
        return CallContext(
            call_id=data.get("call_id") or "",
            front=data.get("front") or "internal",
            principal=Principal(principal["name"], tuple(principal["tools"]) if principal.get("tools") else None)
            if principal
            else None,
            session_id=data.get("session_id"),
            message_id=data.get("message_id"),
            trace_id=data.get("trace_id"),
            user_id=data.get("user_id"),
            secrets=data.get("secrets") or {},
            authorization=data.get("authorization") or {},
            deadline=None if remaining is None else time.monotonic() + remaining,
        )


def failure_answer(request_id: Any, failure: Failure, *, recycle: bool = False, **extra: Any) -> dict[str, Any]:
    data = {"failure": failure.to_dict(), "recycle": recycle, **extra}
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": TOOL_ERROR, "message": failure.message, "data": data}}


def handle(worker: Worker, message: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """One request -> (answer, whether to exit after sending it)."""
    request_id = message.get("id")
    if message.get("method") == "ping":  # the pool's start-up check: the module imported, the worker serves
        return {"jsonrpc": "2.0", "id": request_id, "result": {"pid": os.getpid()}}, False
    if message.get("method") != "tool.execute":
        error = {"code": -32601, "message": f"unknown method {message.get('method')!r}"}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}, False
    params = message.get("params") or {}
    label = params.get("label", "tool")
    try:
        value = worker.execute(params)
    except Recycle as exc:
        return failure_answer(request_id, exc.failure, recycle=True), True
    except GatewayError as exc:
        return failure_answer(request_id, exc.failure), False
    except Exception as exc:
        failure = Failure(kind=ErrorKind.INTERNAL, message=f"Tool {label} raised {type(exc).__name__}: {exc}")
        return failure_answer(request_id, failure, traceback=traceback.format_exc()), False
    recycle = worker.limits.grown_too_much()
    return {"jsonrpc": "2.0", "id": request_id, "result": {"value": value, "recycle": recycle}}, recycle


def encode(answer: dict[str, Any], label: str) -> bytes:
    try:
        return orjson.dumps(answer)
    except TypeError as exc:
        failure = Failure(kind=ErrorKind.TOOL_FAILED, message=f"Tool {label} returned a value that is not JSON: {exc}")
        return orjson.dumps(failure_answer(answer.get("id"), failure))


def main(argv: list[str]) -> int:
    die_with_parent()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing tool leaves no core files behind
    proto_in, proto_out = protocol_streams()
    module_path = argv[1]
    cpu = float(argv[2]) if len(argv) > 2 and argv[2] != "-" else None
    memory = int(argv[3]) if len(argv) > 3 and argv[3] != "-" else None
    worker = Worker(module_path, Limits(cpu, memory))
    for line in proto_in:
        message = orjson.loads(line)
        answer, leave = handle(worker, message)
        label = ((message.get("params") or {}).get("label")) or "tool"
        proto_out.write(encode(answer, label) + b"\n")
        proto_out.flush()
        if leave:
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
