"""The upstream faults every backend is tested against, and the canonical kind each must become."""

from __future__ import annotations

from gateway.errors import ErrorKind

# (faulty_server --mode, expected kind)
FAULTS: list[tuple[str, ErrorKind]] = [
    ("hang", ErrorKind.DEADLINE),  # accepts, never answers
    ("slow", ErrorKind.DEADLINE),  # answers after the deadline
    ("reset", ErrorKind.UPSTREAM_UNAVAILABLE),  # resets mid-body
    ("html", ErrorKind.UPSTREAM_UNAVAILABLE),  # an HTML page
    ("error500", ErrorKind.UPSTREAM_UNAVAILABLE),  # 500 with a body of no protocol
    ("wrong", ErrorKind.UPSTREAM_UNAVAILABLE),  # a valid JSON body of another protocol
]
