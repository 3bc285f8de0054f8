"""The state store: sessions, pending calls and idempotency records live here.

Values are JSON-able so that a shared store (Redis) can replace the
in-memory one without changing callers. Every entry has a time to live and
the store has a bound, so nothing grows without limit.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any, Protocol


class StateStore(Protocol):
    async def get(self, key: str) -> Any | None: ...

    async def set(self, key: str, value: Any, ttl: float) -> None: ...

    async def add(self, key: str, value: Any, ttl: float) -> bool:
        """Set only if absent; True when this caller created the entry."""
        ...

    async def delete(self, key: str) -> None: ...

    async def touch(self, key: str, ttl: float) -> bool:
        """Extend an entry's life; False when it does not exist (or expired)."""
        ...

    async def close(self) -> None: ...


class MemoryStore:
    """A bounded, expiring dict for one process; the default store."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._data: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self._max = max_entries
        self._lock = asyncio.Lock()

    def _live(self, key: str) -> tuple[float, Any] | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del self._data[key]
            return None
        return entry

    def _put(self, key: str, value: Any, ttl: float) -> None:
        self._data[key] = (time.monotonic() + ttl, value)
        self._data.move_to_end(key)
        while len(self._data) > self._max:
            self._data.popitem(last=False)

    async def get(self, key: str) -> Any | None:
        entry = self._live(key)
        return None if entry is None else entry[1]

    async def set(self, key: str, value: Any, ttl: float) -> None:
        self._put(key, value, ttl)

    async def add(self, key: str, value: Any, ttl: float) -> bool:
        async with self._lock:
            if self._live(key) is not None:
                return False
            self._put(key, value, ttl)
            return True

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def touch(self, key: str, ttl: float) -> bool:
        entry = self._live(key)
        if entry is None:
            return False
        self._put(key, entry[1], ttl)
        return True

    async def close(self) -> None:
        self._data.clear()
