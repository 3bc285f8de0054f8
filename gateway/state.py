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

    async def take(self, key: str, rate: float, burst: float) -> float:
        """Take one token from the bucket `key`, refilled at `rate` per second up to `burst`.

        0.0 when a token was taken; otherwise the seconds until one will be there
        (nothing is taken). Atomic, so replicas sharing the store share the bucket.
        """
        ...

    async def close(self) -> None: ...


def bucket_ttl(rate: float, burst: float) -> float:
    """A bucket untouched this long is full again, so forgetting it changes nothing."""
    return burst / rate + 1.0


def namespace_of(key: str) -> str:
    """`oxp:call:...` -> `oxp`: entries are bounded per namespace, so one kind cannot evict another's."""
    return key.split(":", 1)[0]


class MemoryStore:
    """A bounded, expiring dict for one process; the default store.

    Each namespace (the key up to its first `:`) has its own LRU bound: a flood of
    one kind of entry (OXP call records, say) never evicts another kind (sessions).
    """

    def __init__(self, max_entries: int = 100_000, caps: dict[str, int] | None = None) -> None:
        self._spaces: dict[str, OrderedDict[str, tuple[float, Any]]] = {}
        self._max = max_entries
        self._caps = dict(caps or {})
        self._lock = asyncio.Lock()

    def cap(self, namespace: str) -> int:
        return self._caps.get(namespace, self._max)

    def count(self, namespace: str) -> int:
        """Entries held in one namespace now (expired ones included until touched)."""
        return len(self._spaces.get(namespace, ()))

    def _space(self, key: str) -> OrderedDict[str, tuple[float, Any]]:
        space = self._spaces.get(namespace_of(key))
        if space is None:
            space = self._spaces[namespace_of(key)] = OrderedDict()
        return space

    def _live(self, key: str) -> tuple[float, Any] | None:
        space = self._space(key)
        entry = space.get(key)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del space[key]
            return None
        return entry

    def _put(self, key: str, value: Any, ttl: float) -> None:
        space = self._space(key)
        space[key] = (time.monotonic() + ttl, value)
        space.move_to_end(key)
        bound = self.cap(namespace_of(key))
        now = time.monotonic()
        while space:  # expired entries at the old end go first; then the least recently used over the bound
            oldest_key, (expires, _) = next(iter(space.items()))
            if expires > now and len(space) <= bound:
                break
            del space[oldest_key]

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
        self._space(key).pop(key, None)

    async def touch(self, key: str, ttl: float) -> bool:
        entry = self._live(key)
        if entry is None:
            return False
        self._put(key, entry[1], ttl)
        return True

    async def take(self, key: str, rate: float, burst: float) -> float:
        now = time.monotonic()
        entry = self._live(key)
        tokens, stamp = (burst, now) if entry is None else entry[1]
        tokens = min(burst, tokens + (now - stamp) * rate)
        if tokens < 1.0:
            wait = (1.0 - tokens) / rate
            self._put(key, (tokens, now), bucket_ttl(rate, burst))
            return wait
        self._put(key, (tokens - 1.0, now), bucket_ttl(rate, burst))
        return 0.0

    async def close(self) -> None:
        self._spaces.clear()
