"""Client sessions over the state store, for any front that needs them.

A session is an unguessable id a client carries (ToolServerNode's `node_id`
cookie today), kept alive by use and forgotten after an idle time. It belongs
to the front and the principal that created it: each front keeps its sessions
in its own store namespace, each principal's under keys of its own
(`gateway.ownership.owned_key`), so a session presented by another principal is
a key nobody wrote (answered exactly as an unknown id), and one principal
creating sessions without end pushes out only its own oldest ones. Fronts
record the store keys that belong to a session so that releasing it forgets
everything the session left behind. Everything lives in the `StateStore`, so
a shared store (Redis) serves sessions to every replica; a session's `home`
names the replica holding what lives in one process (its workspace, its
pending calls), to which other replicas forward its requests.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.model import Principal, principal_name
from gateway.ownership import owned_key
from gateway.state import StateStore

# token_urlsafe(32): 256 random bits, 43 characters of the URL-safe base64 alphabet.
TOKEN_BYTES = 32
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
MAX_OWNED_KEYS = 1000


@dataclass
class Session:
    id: str
    front: str
    principal: str = ""  # principal_name() of the creator; "" with authentication off
    created: float = field(default_factory=time.time)
    owned: list[str] = field(default_factory=list)  # store keys to forget on release
    home: str | None = None  # the replica holding what lives in one process (workspace, runs, upstream sessions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "front": self.front,
            "principal": self.principal,
            "created": self.created,
            "owned": self.owned,
            "home": self.home,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Session:
        return cls(
            id=data["id"],
            front=data["front"],
            principal=data.get("principal", ""),
            created=data["created"],
            owned=list(data.get("owned") or []),
            home=data.get("home"),
        )


class SessionRegistry:
    """One front's sessions: create, look up (which keeps alive), and release them in a state store."""

    def __init__(self, store: StateStore, *, front: str, idle_s: float, home: str | None = None) -> None:
        self.store = store
        self.home = home  # this replica's id: new sessions live here
        self.front = front
        self.idle_s = idle_s
        self.namespace = f"session.{front}"  # a store namespace of its own: its own bound, no other front's ids

    def _key(self, session_id: str, owner: str) -> str:
        return owned_key(self.namespace, owner, session_id)

    @staticmethod
    def well_formed(session_id: str) -> bool:
        """Ids we could have issued; anything else is refused without a store look-up."""
        return bool(ID_PATTERN.match(session_id))

    async def create(self, principal: Principal | None) -> Session:
        """A new session of `principal`; beyond its share of the front's sessions its own oldest one is
        forgotten, and a store full of other principals' sessions refuses it (`rate_limited`)."""
        owner = principal_name(principal)
        while True:  # a collision of 256 random bits will not happen, but `add` makes it impossible
            session = Session(id=secrets.token_urlsafe(TOKEN_BYTES), front=self.front, principal=owner, home=self.home)
            if await self.store.add(self._key(session.id, owner), session.to_dict(), self.idle_s):
                return session

    async def get(self, session_id: str, principal: Principal | None) -> Session | None:
        """The caller's live session with this id, its idle timer restarted.

        None when unknown, expired, or created by another principal: a caller cannot
        tell someone else's session from one that never existed.
        """
        if not self.well_formed(session_id):
            return None
        owner = principal_name(principal)
        key = self._key(session_id, owner)
        data = await self.store.get(key)
        if data is None or data.get("principal", "") != owner:
            return None
        await self.store.touch(key, self.idle_s)
        return Session.from_dict(data)

    async def adopt(self, session: Session) -> Session:
        """Make this replica the session's home (its old home was lost: what lived there is gone)."""
        key = self._key(session.id, session.principal)
        data = await self.store.get(key)
        if data is None:
            return session
        adopted = Session.from_dict({**data, "home": self.home})
        await self.store.set(key, adopted.to_dict(), self.idle_s)
        return adopted

    async def own(self, session: Session, key: str) -> None:
        """Record that store entry `key` belongs to the session (forgotten on release)."""
        record = self._key(session.id, session.principal)
        data = await self.store.get(record)
        if data is None:
            return
        current = Session.from_dict(data)
        if key not in current.owned:
            current.owned.append(key)
            del current.owned[:-MAX_OWNED_KEYS]
            await self.store.set(record, current.to_dict(), self.idle_s)

    async def disown(self, session: Session, key: str) -> None:
        record = self._key(session.id, session.principal)
        data = await self.store.get(record)
        if data is None:
            return
        current = Session.from_dict(data)
        if key in current.owned:
            current.owned.remove(key)
            await self.store.set(record, current.to_dict(), self.idle_s)

    async def release(self, session_id: str, principal: Principal | None) -> Session | None:
        """Forget the caller's session and every store entry it owned; returns what was forgotten."""
        if not self.well_formed(session_id):
            return None
        owner = principal_name(principal)
        key = self._key(session_id, owner)
        data = await self.store.get(key)
        if data is None or data.get("principal", "") != owner:
            return None
        await self.store.delete(key)
        session = Session.from_dict(data)
        for owned in session.owned:
            await self.store.delete(owned)
        return session
