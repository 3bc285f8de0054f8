"""The state store: sessions, pending calls and idempotency records live here.

Values are JSON-able so that a shared store (Redis) can replace the
in-memory one without changing callers. Every entry has a time to live and
each namespace has bounds in entries and bytes, so nothing grows without limit;
entries owned by a principal (`gateway.ownership.owned_key`) are bounded per
owner, so one caller's flood never pushes out another's.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any, Protocol

import orjson

from gateway.errors import ErrorKind, Failure
from gateway.ownership import FULL_RETRY_MS, WHOLE, Shares, StoreFull, owner_of_space, space_of, too_large


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

    async def keys(self, namespace: str, limit: int = 10_000) -> list[str]:
        """Up to `limit` live keys of one namespace (for an operator's views: the console's replicas and traffic)."""
        ...

    async def owners(self, namespace: str) -> dict[str, int]:
        """Live entries of one namespace per owning principal (`gateway.ownership.owned_key`), by owner name."""
        ...

    async def close(self) -> None: ...


def bucket_ttl(rate: float, burst: float) -> float:
    """A bucket untouched this long is full again, so forgetting it changes nothing."""
    return burst / rate + 1.0


def namespace_of(key: str) -> str:
    """`oxp:call:...` -> `oxp`: entries are bounded per namespace, so one kind cannot evict another's."""
    return key.split(":", 1)[0]


DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # `state.max_bytes`'s default (the settings model holds it too)

# Namespaces whose entries no other write may push out: approved tool definitions (`gateway.pinning`), which an
# upstream that lists many tools must not be able to evict. A write past their bounds is refused (`KeptFull`).
KEPT = frozenset({"pins"})


class KeptFull(StoreFull):
    """A new entry of a kept namespace refused at its bounds: nothing in it is evicted for the new one."""

    def __init__(self, namespace: str, cap: int, max_bytes: int) -> None:
        super().__init__(f"entries of kind {namespace!r} in the state store", cap)
        self.failure = Failure(
            kind=ErrorKind.RATE_LIMITED,
            message=(
                f"The state store's {namespace!r} entries are at their bounds ({cap} entries, {max_bytes} bytes): "
                "a new one is refused rather than evicting an old one (raise state.max_entries or state.max_bytes)"
            ),
            can_retry=True,
            retry_after_ms=FULL_RETRY_MS,
        )
        self.args = (self.failure.message,)


def size_of(value: Any) -> int:
    """What an entry weighs against the byte bounds: its JSON, as a shared store (Redis) holds it."""
    return len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


class _Space:
    """The entries of one namespace (no owner) or of one owner in a namespace, least recently written first."""

    __slots__ = ("bytes", "entries")

    def __init__(self) -> None:
        self.entries: OrderedDict[str, tuple[float, Any, int]] = OrderedDict()  # key -> (expires, value, size)
        self.bytes = 0


class MemoryStore:
    """A bounded, expiring dict for one process; the default store.

    Each namespace (the key up to its first `:`) is bounded apart, in entries (`max_entries`, or its
    own cap) and in bytes of JSON (`max_bytes`), so a flood of one kind of entry (OXP call records,
    say) never evicts another kind (sessions). Within a namespace, keys made by `owned_key` belong
    to their principal (`gateway.ownership`): each owner may fill its share of the namespace's bounds,
    beyond which its own least recently written entries go; a namespace full of other owners' entries
    refuses a new one (`StoreFull`) rather than evict theirs. A namespace of unowned keys (rate
    buckets, replica leases) drops its least recently written entries beyond its bounds, except a `kept`
    namespace (pins), which refuses a new entry at its bounds (`KeptFull`) and evicts nothing.
    """

    def __init__(
        self,
        max_entries: int = 100_000,
        caps: dict[str, int] | None = None,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        shares: Shares | None = None,
        kept: frozenset[str] = KEPT,
    ) -> None:
        self.kept = kept
        self._spaces: dict[str, _Space] = {}  # a namespace, or "<namespace>:~<owner>"
        self._in: dict[str, set[str]] = {}  # namespace -> its spaces
        self._count: dict[str, int] = {}  # namespace -> entries in all its spaces
        self._bytes: dict[str, int] = {}  # namespace -> bytes in all its spaces
        self._max = max_entries
        self.max_bytes = max_bytes
        self.shares = shares if shares is not None else WHOLE
        self._caps = dict(caps or {})
        self._lock = asyncio.Lock()

    def cap(self, namespace: str) -> int:
        return self._caps.get(namespace, self._max)

    def count(self, namespace: str) -> int:
        """Entries held in one namespace now (expired ones included until touched)."""
        return self._count.get(namespace, 0)

    def bytes(self, namespace: str) -> int:
        return self._bytes.get(namespace, 0)

    def _space(self, key: str, *, create: bool = False) -> tuple[str, str, _Space | None]:
        namespace, owned = space_of(key)
        name = owned or namespace
        space = self._spaces.get(name)
        if space is None and create:
            space = self._spaces[name] = _Space()
            self._in.setdefault(namespace, set()).add(name)
        return namespace, name, space

    def _drop(self, namespace: str, name: str, space: _Space, key: str) -> None:
        entry = space.entries.pop(key, None)
        if entry is None:
            return
        space.bytes -= entry[2]
        self._count[namespace] -= 1
        self._bytes[namespace] -= entry[2]
        if not space.entries:
            del self._spaces[name]
            self._in[namespace].discard(name)

    def _live(self, key: str) -> tuple[float, Any, int] | None:
        namespace, name, space = self._space(key)
        entry = space.entries.get(key) if space is not None else None
        if entry is None or space is None:
            return None
        if entry[0] <= time.monotonic():
            self._drop(namespace, name, space, key)
            return None
        return entry

    def _sweep(self, namespace: str, name: str) -> None:
        """Expired entries at the old end of one space go (they were written first)."""
        space = self._spaces.get(name)
        now = time.monotonic()
        while space is not None and space.entries:
            oldest, (expires, _, _) = next(iter(space.entries.items()))
            if expires > now:
                return
            self._drop(namespace, name, space, oldest)
            space = self._spaces.get(name)

    def _sweep_all(self, namespace: str) -> None:
        """Every expired entry of a namespace: when it is full, what expired must not count."""
        now = time.monotonic()
        for name in list(self._in.get(namespace, ())):
            space = self._spaces.get(name)
            if space is None:
                continue
            for key in [k for k, (expires, _, _) in space.entries.items() if expires <= now]:
                self._drop(namespace, name, space, key)
                if name not in self._spaces:
                    break

    def _full(self, namespace: str, entries: int, size: int) -> bool:
        return self.count(namespace) + entries > self.cap(namespace) or self.bytes(namespace) + size > self.max_bytes

    def _put(self, key: str, value: Any, ttl: float) -> None:
        size = size_of(value)
        namespace, name, space = self._space(key, create=True)
        assert space is not None
        owned = name != namespace
        cap, max_bytes = self.cap(namespace), self.max_bytes
        share_entries = self.shares.of(cap) if owned else cap
        share_bytes = self.shares.of(max_bytes) if owned else max_bytes
        if size > share_bytes:
            if not space.entries:
                self._drop_space(namespace, name)
            raise too_large(f"state entries ({namespace})", size, share_bytes)
        self._sweep(namespace, name)
        space = self._spaces.get(name) or self._space(key, create=True)[2]
        assert space is not None
        old = space.entries.get(key)
        grows, extra = (1, size) if old is None else (0, size - old[2])
        kept = namespace in self.kept
        if (kept or owned) and self._full(namespace, grows, extra):
            self._sweep_all(namespace)  # what expired goes; nothing live does
            space = self._spaces.get(name) or self._space(key, create=True)[2]
            assert space is not None
            old = space.entries.get(key)
            grows, extra = (1, size) if old is None else (0, size - old[2])
            if kept:  # nothing in it goes for a new entry
                refused = self._full(namespace, grows, extra)
            else:  # an owner's own entries may make room below, never another owner's
                others = len(space.entries) - (0 if old is None else 1)
                others_bytes = space.bytes - (0 if old is None else old[2])
                refused = (
                    self.count(namespace) - others + grows > cap
                    or self.bytes(namespace) - others_bytes + extra > max_bytes
                )
            if refused:
                if not space.entries:
                    self._drop_space(namespace, name)
                if kept:
                    raise KeptFull(namespace, cap, max_bytes)
                raise StoreFull(f"entries of kind {namespace!r} in the state store", cap)
        if old is not None:
            space.bytes -= old[2]
            self._count[namespace] -= 1
            self._bytes[namespace] -= old[2]
        space.entries[key] = (time.monotonic() + ttl, value, size)
        space.entries.move_to_end(key)
        space.bytes += size
        self._count[namespace] = self._count.get(namespace, 0) + 1
        self._bytes[namespace] = self._bytes.get(namespace, 0) + size
        # The space's own least recently written entries beyond its bounds (an owner's share; a namespace's whole).
        while len(space.entries) > share_entries or space.bytes > share_bytes or self._full(namespace, 0, 0):
            oldest = next(iter(space.entries))
            if oldest == key:
                break
            self._drop(namespace, name, space, oldest)

    def _drop_space(self, namespace: str, name: str) -> None:
        space = self._spaces.get(name)
        if space is not None and not space.entries:
            del self._spaces[name]
            self._in.get(namespace, set()).discard(name)

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
        namespace, name, space = self._space(key)
        if space is not None:
            self._drop(namespace, name, space, key)

    async def touch(self, key: str, ttl: float) -> bool:
        entry = self._live(key)
        if entry is None:
            return False
        _, _, space = self._space(key)
        assert space is not None
        space.entries[key] = (time.monotonic() + ttl, entry[1], entry[2])
        space.entries.move_to_end(key)
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

    async def keys(self, namespace: str, limit: int = 10_000) -> list[str]:
        now = time.monotonic()
        found: list[str] = []
        for name in list(self._in.get(namespace, ())):
            space = self._spaces.get(name)
            if space is None:
                continue
            found.extend(key for key, (expires, _, _) in space.entries.items() if expires > now)
            if len(found) >= limit:
                return found[:limit]
        return found

    async def owners(self, namespace: str) -> dict[str, int]:
        now = time.monotonic()
        counts: dict[str, int] = {}
        for name in list(self._in.get(namespace, ())):
            owner = owner_of_space(name)
            space = self._spaces.get(name)
            if owner is None or space is None:
                continue
            live = sum(1 for expires, _, _ in space.entries.values() if expires > now)
            if live:
                counts[owner] = live
        return counts

    async def close(self) -> None:
        self._spaces.clear()
        self._in.clear()
        self._count.clear()
        self._bytes.clear()
