"""A toolkit that imports in the gateway but not in a worker: the start-up check must catch it."""

from __future__ import annotations

import sys

from adapters.python import Toolkit, tool

if sys.argv[0].endswith("worker.py"):
    raise RuntimeError("this toolkit cannot be imported in an isolated worker")


@tool
def noop() -> None:
    """Do nothing."""


toolkit = Toolkit("ParentOnly", [noop])
