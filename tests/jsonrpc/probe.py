"""Probe: tools whose traces (files, counters) let a test see what really happened to a call.

Markers are file paths, so a test can watch a tool in a gateway subprocess as
well as in-process.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from pathlib import Path
from typing import Annotated, Any

from adapters.python import AuthorizationRequirement, CallContext, ToolError, Toolkit, tool

# Released by a test to let blocked threads finish; bounded by each call's `seconds`.
RELEASE = threading.Event()
_counter = itertools.count(1)


def _touch(marker: str, suffix: str) -> None:
    Path(f"{marker}.{suffix}").write_text(suffix)


@tool(name="Hang", side_effects=False)
async def hang(marker: Annotated[str, "File path prefix for the traces"], seconds: float = 30) -> str:
    """Wait (async) for up to `seconds`; leaves `.started`, then `.cancelled` or `.finished`."""
    _touch(marker, "started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _touch(marker, "cancelled")
        raise
    _touch(marker, "finished")
    return "finished"


@tool(name="Block", side_effects=False)
def block(marker: Annotated[str, "File path prefix for the traces"], seconds: float = 30) -> str:
    """Block a worker thread until RELEASE is set or `seconds` pass; leaves `.started` and `.finished`."""
    _touch(marker, "started")
    RELEASE.wait(timeout=seconds)
    _touch(marker, "finished")
    return "finished"


@tool(name="Count", side_effects=False)
def count(key: str) -> dict[str, Any]:
    """A pure-looking tool that reveals how often it really ran (for caching)."""
    return {"key": key, "run": next(_counter)}


@tool(name="Interim", side_effects=False)
def interim(key: str, context: CallContext) -> dict[str, Any]:
    """Like Count, but says its value depends on more than its arguments (as a tool's question would)."""
    context.cacheable = False
    return {"key": key, "run": next(_counter)}


@tool(name="Effect")
def effect(key: str) -> dict[str, Any]:
    """Like Count, but declares side effects (the default), so it is never cached."""
    return {"key": key, "run": next(_counter)}


_failed_once: set[str] = set()


@tool(name="Flaky", side_effects=False)
def flaky(key: str) -> dict[str, Any]:
    """Fails the first time it sees `key`, then answers like Count (a failure must not be cached)."""
    if key not in _failed_once:
        _failed_once.add(key)
        raise ToolError(f"first call for {key} fails")
    return {"key": key, "run": next(_counter)}


@tool(name="Greet", side_effects=False)
def greet(name: str) -> str:
    """A string result: JSON-RPC's `output` carries it as it is."""
    return f"Hello, {name}!"


@tool(name="Whoami", side_effects=False)
def whoami(context: CallContext) -> dict[str, Any]:
    """What the call context says: session and message ids from the client."""
    return {"session_id": context.session_id, "message_id": context.message_id, "front": context.front}


@tool(name="Rendezvous", side_effects=False)
async def rendezvous(group: str, size: int = 2) -> int:
    """Return once `size` calls of the same group are running at the same time (proves concurrency)."""
    waiting = _GROUPS.setdefault(group, [])
    event = asyncio.Event()
    waiting.append(event)
    if len(waiting) >= size:
        for other in waiting:
            other.set()
    await event.wait()
    return len(waiting)


_GROUPS: dict[str, list[asyncio.Event]] = {}


@tool(
    name="Private",
    side_effects=False,
    authorization=[AuthorizationRequirement(id="github", url="https://auth.example/{provider}?tool={tool}")],
)
def private() -> str:
    """Needs the caller's GitHub authorization."""
    return "secret"


toolkit = Toolkit("Probe", [hang, block, count, interim, effect, flaky, greet, whoami, rendezvous, private])
