"""Homes: where a caller's in-process state lives, and the way there. One service for every front.

Some state lives in one process: an MCP session (the SDK's transport and its event log), a call held open
for its caller's answers (its upstream connection), a ToolServerNode session (its workspace on disk, its
pending calls, its upstream node sessions), a call running in the background. Its home is the replica that
holds it. Homes records it in the state store under the caller's principal (`gateway.ownership.owned_key`),
so another principal's lookup finds nothing, and routes a request that reaches another replica: here, there
(forwarded once, `gateway.forwarding`), or gone (the home's lease ran out, and what lived there with it),
where the front decides what its protocol says: adopt the session here, answer 404, report the call lost.

What can move (a session: its state is in the store, its files on a shared volume) moves when its home is
stopping (`Replicas.leave`) or cannot be connected to: such a home counts as gone for it (`movable=True`),
so a scale-down, a restart or a killed replica costs its sessions nothing. What cannot move (a held call,
a running one) is still forwarded to a stopping home, which serves until its calls end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.forwarding import Forwarder, HomeUnreachable
from gateway.ownership import owned_key
from gateway.replicas import Replicas
from gateway.state import StateStore
from gateway.wire import WireRequest


class Where(Enum):
    HERE = "here"  # this replica holds it (or the request was forwarded here already: served as it is)
    THERE = "there"  # another replica, alive: forward the request there
    GONE = "gone"  # its replica was lost, and what lived in that process with it


@dataclass(frozen=True)
class Route:
    where: Where
    url: str | None = None  # THERE: the home's address


HERE = Route(Where.HERE)
GONE = Route(Where.GONE)
MAX_UNREACHABLE = 64  # homes remembered as unreachable (a few replicas; bounded all the same)


class Homes:
    """Records, finds and routes to the home replica of a key (see the module docstring)."""

    def __init__(self, store: StateStore, replicas: Replicas, forwarder: Forwarder) -> None:
        self.store = store
        self.replicas = replicas
        self.forwarder = forwarder
        self._unreachable: dict[str, float] = {}  # a home's url -> until when it counts as lost for movable state

    @property
    def here(self) -> str:
        """This replica's id, the home of what it records."""
        return self.replicas.id

    @staticmethod
    def key(space: str, owner: str, name: str) -> str:
        return owned_key(space, owner, name)

    async def record(self, space: str, owner: str, name: str, ttl: float, **facts: Any) -> None:
        """This replica is the home of `name`, `owner`'s, for `ttl` seconds (renewed by `touch`)."""
        await self.store.set(self.key(space, owner, name), {"home": self.here, "principal": owner, **facts}, ttl)

    async def find(self, space: str, owner: str, name: str) -> dict[str, Any] | None:
        """The record of `owner`'s `name`; None for a name nobody recorded, or another principal's."""
        record = await self.store.get(self.key(space, owner, name))
        if not isinstance(record, dict) or record.get("principal") != owner:
            return None
        return record

    async def touch(self, space: str, owner: str, name: str, ttl: float) -> bool:
        return await self.store.touch(self.key(space, owner, name), ttl)

    async def forget(self, space: str, owner: str, name: str) -> None:
        await self.store.delete(self.key(space, owner, name))

    async def route(
        self, home: str | None, request: Request | WireRequest | None = None, *, movable: bool = False
    ) -> Route:
        """Where a request for what lives at `home` is served: HERE (this replica, or a request another
        replica forwarded: served as it is, never forwarded again), THERE (forward it to `Route.url`), or
        GONE (that replica's lease ran out; for `movable` state also when it is stopping or could not be
        connected to within the last lease)."""
        if self.replicas.is_self(home) or (request is not None and self.forwarder.forwarded(request)):
            return HERE
        assert home is not None
        found = await self.replicas.lookup(home)
        if found is None or found[0] is None:
            return GONE
        url, leaving = found
        if movable and (leaving or self._unreachable.get(url, 0.0) > time.monotonic()):
            return GONE
        return Route(Where.THERE, url)

    async def forward(self, request: Request, url: str, *, body: bytes | None = None) -> Response:
        """The home's answer to the request (`Forwarder.forward`: its end-to-end headers, streamed). A home
        that cannot be connected to raises `HomeUnreachable`, and counts as gone for movable state for a
        lease: the caller may adopt what it asked for (nothing reached the home)."""
        try:
            return await self.forwarder.forward(request, url, body=body)
        except HomeUnreachable:
            now = time.monotonic()
            if len(self._unreachable) >= MAX_UNREACHABLE:
                self._unreachable = {u: t for u, t in self._unreachable.items() if t > now}
            if len(self._unreachable) < MAX_UNREACHABLE:
                self._unreachable[url] = now + self.replicas.lease_s
            raise

    async def alive(self, home: str | None) -> bool:
        """The replica `home` still holds its lease (or is this one)."""
        return home is None or self.replicas.is_self(home) or await self.replicas.alive(home)
