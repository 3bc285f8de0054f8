"""A tool that writes credentials to stderr and then ends its worker process, for the redaction tests."""

from __future__ import annotations

import os
import sys

from adapters.python import Toolkit, tool

LEAKED = ("Authorization: Bearer sk-live-abcdef123456", "password=hunter2secret")


@tool(name="Spill")
def spill() -> None:
    """Print credentials on stderr, then leave the process without unwinding (as a crashing library would)."""
    for line in LEAKED:
        print(line, file=sys.stderr, flush=True)
    os._exit(3)


toolkit = Toolkit("Leaky", [spill])
