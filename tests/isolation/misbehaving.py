"""Tools that misbehave on purpose, to show that isolation contains them."""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

from adapters.python import CallContext, ToolError, Toolkit, tool

_hoard: list[bytes] = []  # a leak that survives the call, as real leaks do


@tool(name="Pid")
def pid() -> int:
    """The worker's process id."""
    return os.getpid()


@tool(name="Echo")
def echo(text: Annotated[str, "Anything"], context: CallContext) -> dict[str, Any]:
    """Return the text and what the worker knows about the call."""
    print("echo was called", text)  # must not disturb the protocol
    return {"text": text, "session_id": context.session_id, "call_id": context.call_id}


@tool(name="Async")
async def async_double(n: int) -> int:
    """Double n in a coroutine."""
    return 2 * n


@tool(name="Crash")
def crash() -> None:
    """Dereference a null pointer: SIGSEGV."""
    ctypes.string_at(0)


@tool(name="Exit")
def exit_now(status: int = 3) -> None:
    """Leave the process without unwinding."""
    os._exit(status)


@tool(name="SysExit")
def sys_exit() -> None:
    """Raise SystemExit."""
    sys.exit(4)


@tool(name="Leak")
def leak(chunk_mb: int = 16) -> int:
    """Keep allocating until memory runs out."""
    while True:
        _hoard.append(b"x" * (chunk_mb * 1024 * 1024))


@tool(name="Spin")
def spin() -> None:
    """Loop forever on the CPU."""
    while True:
        pass


@tool(name="Sleep")
def sleep(seconds: float, started: str | None = None) -> float:
    """Sleep without using the CPU; touch the file `started` first, so a test knows the call is running."""
    if started:
        Path(started).touch()
    time.sleep(seconds)
    return seconds


@tool(name="SlowPid")
def slow_pid(seconds: float) -> int:
    """Sleep, then return the worker's process id (to see calls spread over the pool)."""
    time.sleep(seconds)
    return os.getpid()


@tool(name="Refuse")
def refuse() -> None:
    """Raise a ToolError with every field set."""
    raise ToolError("No, not today", developer_message="Refuse always refuses", can_retry=True, retry_after_ms=250)


@tool(name="Buggy")
def buggy() -> None:
    """Raise an ordinary exception."""
    raise KeyError("missing")


@tool(name="Unencodable")
def unencodable():  # no return annotation on purpose: nothing converts the value
    """Return something that is not JSON."""
    return object()


toolkit = Toolkit(
    "Bad",
    [pid, echo, async_double, crash, exit_now, sys_exit, leak, spin, sleep, slow_pid, refuse, buggy, unencodable],
)
