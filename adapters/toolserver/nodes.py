"""Bookkeeping of the `toolserver` backend: upstream node sessions and pending continuations.

A node keeps state per `node_id` (a workspace, running shells), so the backend
holds one upstream session per front session. Both maps are bounded and forget
idle entries; what falls out of the session map is handed back so the backend
can release it upstream.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

SHARED = ""  # key of the one upstream session used by calls without a front session (and in shared mode)


@dataclass
class NodeSession:
    """One upstream session: its cookie (None until obtained, or when the node sets none)."""

    key: str
    node_id: str | None = None
    ready: bool = False  # a cookie was asked for (the node may answer without one)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    used: float = field(default_factory=time.monotonic)


class NodeSessions:
    """Front session key -> NodeSession; least recently used first, bounded, idle ones expire."""

    def __init__(self, max_sessions: int, idle_s: float) -> None:
        self.max_sessions = max(2, max_sessions)  # room for the shared session and one more
        self.idle_s = idle_s
        self._sessions: OrderedDict[str, NodeSession] = OrderedDict()

    def get(self, key: str) -> tuple[NodeSession, list[NodeSession]]:
        """The session for `key` (created when new) and the sessions evicted to make room or by idleness."""
        evicted = self._expire(keep=key)
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = NodeSession(key)
        self._sessions.move_to_end(key)
        session.used = time.monotonic()
        while len(self._sessions) > self.max_sessions:
            oldest = next(k for k in self._sessions if k not in (key, SHARED))
            evicted.append(self._sessions.pop(oldest))
        return session, evicted

    def _expire(self, keep: str) -> list[NodeSession]:
        expired = []
        cutoff = time.monotonic() - self.idle_s
        for key in list(self._sessions):
            session = self._sessions[key]
            if session.used >= cutoff:
                break  # ordered by use: the rest are younger
            if key not in (keep, SHARED):
                expired.append(self._sessions.pop(key))
        return expired

    def pop(self, key: str) -> NodeSession | None:
        return self._sessions.pop(key, None)

    def drain(self) -> list[NodeSession]:
        sessions = list(self._sessions.values())
        self._sessions.clear()
        return sessions

    def __len__(self) -> int:
        return len(self._sessions)


@dataclass(frozen=True)
class Continuation:
    """What an upstream 450 asked for: call `tool` with `arguments` in the upstream session `key`.

    `owner` (front, principal and session of the caller) alone may continue it.
    """

    key: str
    owner: str
    tool: str
    arguments: dict[str, Any]
    created: float = field(default_factory=time.monotonic)


class Continuations:
    """Unguessable tokens for continuations handed to ToolServerNode clients; each is used once."""

    def __init__(self, max_entries: int, ttl_s: float) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._entries: OrderedDict[str, Continuation] = OrderedDict()

    def add(self, continuation: Continuation) -> str:
        token = secrets.token_urlsafe(24)
        self._entries[token] = continuation
        cutoff = time.monotonic() - self.ttl_s
        while self._entries and (
            len(self._entries) > self.max_entries or next(iter(self._entries.values())).created < cutoff
        ):
            self._entries.popitem(last=False)
        return token

    def take(self, token: str, owner: str) -> Continuation | None:
        """The continuation, if it exists, is fresh and belongs to `owner`; it is then forgotten."""
        found = self._entries.get(token)
        if found is None or found.owner != owner or found.created < time.monotonic() - self.ttl_s:
            return None
        del self._entries[token]
        return found

    def forget_session(self, owner: str) -> None:
        for token in [t for t, c in self._entries.items() if c.owner == owner]:
            del self._entries[token]
