"""Ownership: every piece of per-caller state has an owning principal, and each owner a share of every bound.

Why: a store bounded only as a whole lets one caller's flood push out everyone else's entries (their
workspaces, sessions, event logs, result handles). Here each entry belongs to an owner (a principal's
name, `gateway.model.principal_name`), and a bounded store keeps, per owner, at most a share of its
bound in entries and in bytes:

- an owner over its share loses its own least recently used entries, never another owner's;
- a store full as a whole (many owners at their shares) refuses the new entry with `rate_limited`
  rather than evict anyone;
- a lookup names its owner: another owner's entry under the same key is not there (`get` answers None,
  exactly as for a key nobody used).

The share is `limits.principal_share` of each bound (`Shares`), the same for every store; with
authentication off every caller is the one anonymous principal, which may then fill the whole store.

`OwnedEntries` is the in-process form (workspaces, upstream node sessions, SSE event logs, held calls,
result caches, finished runs). Entries in the shared state store are owned through their key
(`owned_key`): `MemoryStore` and `RedisStore` bound each owner's space of a namespace the same way.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import quote, unquote

from gateway.errors import ErrorKind, GatewayError

V = TypeVar("V")
K = TypeVar("K", bound=Hashable)

DEFAULT_SHARE = 0.25  # `limits.principal_share`'s default (the settings model holds it too)
OWNED_MARK = "~"  # the second part of an owned state-store key starts with it: `<namespace>:~<owner>:<id>`
FULL_RETRY_MS = 1000


@dataclass
class Shares:
    """The fraction of every bounded store one owner may fill; set by the gateway from its configuration.

    One object shared by every store of a gateway, so a reload that changes the fraction (or turns
    authentication on) reaches them all at once.
    """

    fraction: float = DEFAULT_SHARE

    def of(self, bound: int) -> int:
        """One owner's share of `bound` (at least 1, at most the bound)."""
        return max(1, min(bound, math.floor(bound * self.fraction)))


WHOLE = Shares(1.0)  # for stores whose only owner is the gateway itself, and for tests


def _monotonic() -> float:
    return time.monotonic()  # looked up per call (tests move the clock by patching time.monotonic)


def owned_key(namespace: str, owner: str, key: str) -> str:
    """A state-store key owned by `owner`: the stores bound each owner's entries of `namespace` apart.

    The owner is quoted (a JWT principal `jwt:a:b` has colons), so no owner can shift the split.
    """
    return f"{namespace}:{OWNED_MARK}{quote(owner, safe='')}:{key}"


def space_of(key: str) -> tuple[str, str | None]:
    """(namespace, owner's space) of a state-store key; the space is None for a key no principal owns."""
    namespace, sep, rest = key.partition(":")
    if sep and rest.startswith(OWNED_MARK):
        owner, found, _ = rest.partition(":")
        if found:
            return namespace, f"{namespace}:{owner}"
    return namespace, None


def owner_of_space(space: str) -> str | None:
    """The owner's name of an owned space (`<namespace>:~<quoted owner>`), None for a namespace's own space."""
    _, sep, rest = space.partition(":")
    if not sep or not rest.startswith(OWNED_MARK):
        return None
    return unquote(rest[len(OWNED_MARK) :])


class StoreFull(GatewayError):
    """A new entry refused: the store is full of other owners' entries, which are never evicted for it.

    `dropped` holds what the refused call had already let go (idle entries), for its caller to release.
    """

    def __init__(self, what: str, bound: int, dropped: list[object] | None = None) -> None:
        super().__init__(full(what, bound).failure)
        self.dropped = dropped or []


def full(what: str, bound: int) -> GatewayError:
    """The refusal of a new entry when a store is full of other owners' entries (never evicted for it)."""
    return GatewayError.of(
        ErrorKind.RATE_LIMITED,
        f"The gateway holds its limit of {bound} {what}; try again later",
        developer_message="Every caller is at its share of this bound (limits.principal_share); raise the bound",
        can_retry=True,
        retry_after_ms=FULL_RETRY_MS,
    )


def too_large(what: str, size: int, share: int) -> GatewayError:
    return GatewayError.of(
        ErrorKind.TOO_LARGE,
        f"One entry of {size} bytes is more than a caller's share ({share} bytes) of the gateway's {what}",
    )


@dataclass
class _Entry(Generic[V]):
    value: V
    size: int
    used: float


class _Owner(Generic[K, V]):
    __slots__ = ("bytes", "entries")

    def __init__(self) -> None:
        self.entries: OrderedDict[K, _Entry[V]] = OrderedDict()  # least recently used first
        self.bytes = 0


class OwnedEntries(Generic[K, V]):
    """Entries by (owner, key), each owner within its share of `max_entries` and `max_bytes` (see module doc).

    `idle_s` forgets entries unused that long. What is dropped (an owner's own beyond its share, or
    idle) is handed back by the call that dropped it, for the caller to release (a directory, a
    connection). Not locked: an owner from threads wraps it in its own lock.
    """

    def __init__(
        self,
        *,
        max_entries: int,
        max_bytes: int | None = None,
        shares: Shares | None = None,
        idle_s: float | None = None,
        what: str = "entries",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.shares = shares if shares is not None else WHOLE  # told nothing of principals: one owner, the whole
        self.idle_s = idle_s
        self.what = what
        self._clock = clock if clock is not None else _monotonic
        self._owners: dict[str, _Owner[K, V]] = {}
        self._order: OrderedDict[tuple[str, K], None] = OrderedDict()  # every entry, least recently used first
        self.bytes = 0

    # ---- reading ----

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, owner_key: object) -> bool:
        return owner_key in self._order

    def count(self, owner: str) -> int:
        found = self._owners.get(owner)
        return len(found.entries) if found is not None else 0

    def bytes_of(self, owner: str) -> int:
        found = self._owners.get(owner)
        return found.bytes if found is not None else 0

    @property
    def share_entries(self) -> int:
        return self.shares.of(self.max_entries)

    @property
    def share_bytes(self) -> int | None:
        return None if self.max_bytes is None else self.shares.of(self.max_bytes)

    def get(self, owner: str, key: K, *, touch: bool = True) -> V | None:
        """The owner's entry (its idle timer restarted unless `touch` is False); None for anyone else's."""
        found = self._owners.get(owner)
        entry = found.entries.get(key) if found is not None else None
        if entry is None:
            return None
        if touch:
            self._use(owner, key, entry)
        return entry.value

    def keys(self, owner: str) -> list[K]:
        found = self._owners.get(owner)
        return list(found.entries) if found is not None else []

    def items(self) -> Iterator[tuple[str, K, V]]:
        """Every (owner, key, value), least recently used first."""
        for owner, key in list(self._order):
            yield owner, key, self._owners[owner].entries[key].value

    # ---- writing ----

    def put(self, owner: str, key: K, value: V, size: int = 0) -> list[V]:
        """Keep `value` for `owner` under `key`; returns what was dropped to make room (the owner's own, or
        idle entries). Raises `rate_limited` when the store is full of other owners' entries, and
        `payload_too_large` when this one entry is more than an owner's share of the bytes."""
        dropped = self.expire()
        share_bytes = self.share_bytes
        if share_bytes is not None and size > share_bytes:
            raise too_large(self.what, size, share_bytes)
        mine = self._owners.get(owner)
        old = mine.entries.get(key) if mine is not None else None
        grows = 1 if old is None else 0
        extra = size - (old.size if old is not None else 0)
        # Decided before anything is let go: could the store take it if every other entry of this owner went?
        others = len(mine.entries) - (0 if old is None else 1) if mine is not None else 0
        others_bytes = mine.bytes - (old.size if old is not None else 0) if mine is not None else 0
        if len(self._order) - others + grows > self.max_entries or (
            self.max_bytes is not None and self.bytes - others_bytes + extra > self.max_bytes
        ):
            raise StoreFull(self.what, self.max_entries, list(dropped))
        # Room first from the owner's own entries (beyond its share), then the whole store's bound.
        dropped += self._shrink(owner, keep=key, entries=grows, size=extra)
        if len(self._order) + grows > self.max_entries or (
            self.max_bytes is not None and self.bytes + extra > self.max_bytes
        ):
            dropped += self._make_room(owner, key, grows, extra)
        mine = self._owners.get(owner)  # dropping the owner's last other entry forgot the owner
        if mine is None:
            mine = self._owners[owner] = _Owner()
        if old is not None:
            mine.bytes -= old.size
            self.bytes -= old.size
        entry = _Entry(value, size, self._clock())
        mine.entries[key] = entry
        mine.entries.move_to_end(key)
        mine.bytes += size
        self.bytes += size
        self._order[(owner, key)] = None
        self._order.move_to_end((owner, key))
        return dropped

    def resize(self, owner: str, key: K, size: int) -> list[V]:
        """An entry's size changed (a log that grew): the owner's own oldest entries go beyond its share.

        Raises as `put` does when the owner's share or the store cannot take the new size; the entry
        is then left at its old size."""
        value = self.get(owner, key, touch=False)
        if value is None:
            return []
        return self.put(owner, key, value, size)

    def pop(self, owner: str, key: K) -> V | None:
        """Forget the owner's entry; returns it (None when the owner has none under `key`)."""
        found = self._owners.get(owner)
        entry = found.entries.pop(key, None) if found is not None else None
        if entry is None or found is None:
            return None
        found.bytes -= entry.size
        self.bytes -= entry.size
        self._order.pop((owner, key), None)
        if not found.entries:
            del self._owners[owner]
        return entry.value

    def expire(self) -> list[V]:
        """Forget entries unused for `idle_s`; returns them."""
        if self.idle_s is None or not self._order:
            return []
        cutoff = self._clock() - self.idle_s
        dropped: list[V] = []
        while self._order:
            owner, key = next(iter(self._order))
            entry = self._owners[owner].entries[key]
            if entry.used >= cutoff:
                break
            dropped.append(entry.value)
            self.pop(owner, key)
        return dropped

    def clear(self) -> list[V]:
        values = [value for _, _, value in self.items()]
        self._owners.clear()
        self._order.clear()
        self.bytes = 0
        return values

    # ---- inside ----

    def _use(self, owner: str, key: K, entry: _Entry[V]) -> None:
        entry.used = self._clock()
        self._owners[owner].entries.move_to_end(key)
        self._order.move_to_end((owner, key))

    def _shrink(self, owner: str, *, keep: K, entries: int, size: int) -> list[V]:
        """Drop the owner's least recently used entries (never `keep`) until `entries` and `size` more fit its share."""
        mine = self._owners.get(owner)
        if mine is None:
            return []
        dropped: list[V] = []
        share_entries, share_bytes = self.share_entries, self.share_bytes
        while True:
            over_count = len(mine.entries) + entries > share_entries
            over_bytes = share_bytes is not None and mine.bytes + size > share_bytes
            if not (over_count or over_bytes):
                return dropped
            victim = next((k for k in mine.entries if k != keep), None)
            if victim is None:
                return dropped
            value = self.pop(owner, victim)
            if value is not None:
                dropped.append(value)
            if owner not in self._owners:
                return dropped

    def _make_room(self, owner: str, key: K, entries: int, size: int) -> list[V]:
        """The store is full: the owner's own older entries may go; nobody else's. Refused when that is not enough."""
        dropped: list[V] = []
        while len(self._order) + entries > self.max_entries or (
            self.max_bytes is not None and self.bytes + size > self.max_bytes
        ):
            mine = self._owners.get(owner)
            victim = next((k for k in mine.entries if k != key), None) if mine is not None else None
            if victim is None:  # not reached: `put` checked the owner's entries were enough
                raise StoreFull(self.what, self.max_entries, dropped)
            value = self.pop(owner, victim)
            if value is not None:
                dropped.append(value)
        return dropped
