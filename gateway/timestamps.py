"""Times as answers and state records show them: UTC, ISO 8601, to the second."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def utc_iso(seconds: float | None = None) -> str:
    """`seconds` since the epoch (now when None) as `2026-11-28T12:00:00+00:00`."""
    return datetime.fromtimestamp(time.time() if seconds is None else seconds, UTC).isoformat(timespec="seconds")
