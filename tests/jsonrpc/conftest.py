"""Shared configuration and helpers for the JSON-RPC front's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.jsonrpc import probe
from tests.support import BUILTIN_BACKENDS

PROBE_BACKEND = '  - {name: probe, kind: python, module: "tests.jsonrpc.probe:toolkit"}\n'
CONFIG = BUILTIN_BACKENDS + PROBE_BACKEND


def execute(tool: str, parameters: dict[str, Any] | None = None, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    """A `tool.execute` request as seed 002 writes it."""
    body: dict[str, Any] = {"tool": tool, **params}
    if parameters is not None:
        body["parameters"] = parameters
    return {"jsonrpc": "2.0", "id": request_id, "method": "tool.execute", "params": body}


@pytest.fixture(autouse=True)
def _release_blocked_threads() -> Iterator[None]:
    """Every Probe.Block thread a test leaves behind is let go when the test ends."""
    probe.RELEASE.clear()
    yield
    probe.RELEASE.set()
