"""Bookkeeping of the `toolserver` backend: upstream node sessions and pending continuations.

A node keeps state per `node_id` (a workspace, running shells), so the backend holds one upstream
session per front session, and one per principal for its calls without a front session: nothing of a
node is shared between two principals unless the backend is configured so (`sessions: shared`, or a bare
node, which has one workspace for everybody). Both maps belong to their principals (`gateway.ownership`):
each principal may hold its share of the bound, beyond which its own least recently used entries go;
idle ones are forgotten. What falls out of the session map is handed back so the backend can release it
upstream.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.ownership import OwnedEntries, Shares, StoreFull

SHARED = ""  # key of the one upstream session of discovery and of `sessions: shared` (the gateway's own)


@dataclass(frozen=True)
class NodeKey:
    """An upstream node session: whose (a principal's name) and which of its sessions."""

    owner: str
    key: str


GATEWAY_NODE = NodeKey("", SHARED)


@dataclass
class NodeSession:
    """One upstream session: its cookie (None until obtained, or when the node sets none)."""

    key: NodeKey
    node_id: str | None = None
    ready: bool = False  # a cookie was asked for (the node may answer without one)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)


class NodeSessions:
    """NodeKey -> NodeSession: each principal within its share of `max_sessions`, idle ones expire; the
    gateway's own shared session (discovery, `sessions: shared`) is kept apart and never evicted."""

    def __init__(self, max_sessions: int, idle_s: float, shares: Shares | None = None) -> None:
        self.shared = NodeSession(GATEWAY_NODE)
        self._held: OwnedEntries[str, NodeSession] = OwnedEntries(
            max_entries=max(1, max_sessions - 1), shares=shares, idle_s=idle_s, what="upstream node sessions"
        )

    def get(self, key: NodeKey) -> tuple[NodeSession, list[NodeSession]]:
        """The session for `key` (created when new) and the sessions dropped to make room or by idleness.

        Raises `StoreFull` (rate_limited) when every session is another principal's."""
        if key == GATEWAY_NODE:
            return self.shared, self._held.expire()
        evicted = self._held.expire()
        session = self._held.get(key.owner, key.key)
        if session is None:
            session = NodeSession(key)
            try:
                evicted += self._held.put(key.owner, key.key, session)
            except StoreFull as refused:
                refused.dropped = evicted + refused.dropped
                raise
        return session, evicted

    def pop(self, key: NodeKey) -> NodeSession | None:
        return self._held.pop(key.owner, key.key)

    def drain(self) -> list[NodeSession]:
        return [self.shared, *self._held.clear()]

    def __len__(self) -> int:
        return len(self._held) + 1


@dataclass(frozen=True)
class Continuation:
    """What an upstream 450 asked for: call `tool` with `arguments` in the upstream session `key`.

    `owner` (front, principal and session of the caller) alone may continue it.
    """

    key: NodeKey
    owner: str
    tool: str
    arguments: dict[str, Any]
    created: float = field(default_factory=time.monotonic)


class Continuations:
    """Unguessable tokens for continuations handed to ToolServerNode clients; each is used once, each
    principal within its share of `max_entries`."""

    def __init__(self, max_entries: int, ttl_s: float, shares: Shares | None = None) -> None:
        self.ttl_s = ttl_s
        self._entries: OwnedEntries[str, Continuation] = OwnedEntries(
            max_entries=max_entries, shares=shares, idle_s=ttl_s, what="pending continuations"
        )

    def add(self, continuation: Continuation) -> str:
        token = secrets.token_urlsafe(24)
        self._entries.put(continuation.key.owner, token, continuation)
        return token

    def take(self, token: str, principal: str, owner: str) -> Continuation | None:
        """The continuation, if it exists, is fresh and belongs to `owner` (of `principal`); it is then
        forgotten. Anyone else's token is unknown here."""
        found = self._entries.get(principal, token, touch=False)
        if found is None or found.owner != owner or found.created < time.monotonic() - self.ttl_s:
            return None
        self._entries.pop(principal, token)
        return found

    def forget_session(self, owner: str) -> None:
        for principal, token, continuation in list(self._entries.items()):
            if continuation.owner == owner:
                self._entries.pop(principal, token)
