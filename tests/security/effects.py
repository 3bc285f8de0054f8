"""Effects.Touch: a tool whose runs are counted, so a test can prove a refused request ran nothing."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from adapters.python import Toolkit, tool

RUNS: Counter[str] = Counter()


@tool(name="Touch")
def touch(key: Annotated[str, "What to count this run under"] = "default") -> dict[str, object]:
    """Count one run under `key`."""
    RUNS[key] += 1
    return {"key": key, "runs": RUNS[key]}


toolkit = Toolkit("Effects", [touch])
