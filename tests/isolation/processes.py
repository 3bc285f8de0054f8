"""Process checks for tests that must prove a child really stopped."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path


def running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a zombie has stopped; only its exit status is left)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def children_of(parent: int) -> list[int]:
    """Pids whose parent is `parent` (from /proc, so it also sees processes the test did not start)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    """Poll `condition` until it holds or `timeout` seconds pass; returns whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


async def eventually(condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    """`wait_until` for async tests: polls without blocking the event loop the gateway runs on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(interval)
    return condition()
