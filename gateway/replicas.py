"""Which gateway processes share the state store, and where each one is reached.

Some things live in one process only: a running call's task, a session's
workspace on disk, an upstream session. Each replica registers itself under
`replica:<id>` with the address other replicas forward such requests to, and
renews that lease every `lease_s / 3`. A replica whose lease ran out is taken
as lost: what it owned is answered as lost (never waited on, never run
again), and what it held in the store is adopted by whoever asks next.

The id is new in every process: a restarted replica is a new one, so nothing
is forwarded to a process that no longer holds what was asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
from typing import Any

import structlog

from gateway.errors import GatewayError
from gateway.state import StateStore
from gateway.timestamps import utc_iso

log = structlog.get_logger("toolplex.replicas")

NAMESPACE = "replica"
WILDCARD_HOSTS = {"0.0.0.0", "::", ""}


def advertised_url(host: str, port: int, configured: str | None) -> str:
    """The address other replicas use: the configured one, else this host and port (a name for 0.0.0.0)."""
    if configured:
        return configured.rstrip("/")
    if host in WILDCARD_HOSTS:
        host = socket.gethostname()
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


class Replicas:
    """This process's registration, and look-ups of the others'."""

    def __init__(self, store: StateStore, *, lease_s: float) -> None:
        self.store = store
        self.lease_s = lease_s
        self.id = secrets.token_hex(8)
        self.url: str | None = None  # known once the port is bound
        self.started = time.time()
        self._heartbeat: asyncio.Task[None] | None = None
        self.leaving = False  # stopping: what can move (sessions) moves to other replicas (`leave`)

    def _key(self, replica_id: str) -> str:
        return f"{NAMESPACE}:{replica_id}"

    def _record(self) -> dict[str, Any]:
        record = {"url": self.url, "pid": os.getpid(), "started": self.started, "renewed": time.time()}
        return {**record, "leaving": True} if self.leaving else record

    async def register(self, url: str) -> None:
        """Announce this replica at `url` and keep the lease renewed until `deregister`."""
        self.url = url
        await self.store.set(self._key(self.id), self._record(), self.lease_s)
        if self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._renew())
        log.info("replica_registered", replica=self.id, url=url, lease_s=self.lease_s)

    async def _renew(self) -> None:
        """Renew the lease every third of it; a missed renewal is retried at the next tick, not in a loop."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await self.store.set(self._key(self.id), self._record(), self.lease_s)
            except GatewayError as exc:  # the store is unreachable for now: other replicas may take us as lost
                log.warning("replica_lease_not_renewed", replica=self.id, error=exc.failure.developer_message)

    async def deregister(self) -> None:
        """Stop renewing and withdraw the lease now, so others need not wait for it to run out."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        with contextlib.suppress(GatewayError):
            await self.store.delete(self._key(self.id))

    async def leave(self) -> None:
        """Say that this replica is stopping: it still serves what reaches it and keeps its lease (its running
        calls are followed to their end), but other replicas adopt its sessions rather than forward to it."""
        if self.leaving:
            return
        self.leaving = True
        if self.url is not None:
            try:
                await self.store.set(self._key(self.id), self._record(), self.lease_s)
            except GatewayError as exc:  # the store is down: the sessions move once the lease runs out
                log.warning("replica_leave_not_recorded", replica=self.id, error=exc.failure.developer_message)
        log.info("replica_leaving", replica=self.id)

    async def leases(self) -> dict[str, dict[str, Any]]:
        """Every live replica's lease as the store holds it: when it was last renewed and when it runs out
        (the console's state page)."""
        found: dict[str, dict[str, Any]] = {}
        for key in await self.store.keys(NAMESPACE):
            record = await self.store.get(key)
            if isinstance(record, dict):
                renewed = record.get("renewed")
                expires = renewed + self.lease_s if isinstance(renewed, int | float) else None
                found[key.partition(":")[2]] = {
                    "renewed": None if expires is None else utc_iso(renewed),
                    "expires": None if expires is None else utc_iso(expires),
                    "lease_s": self.lease_s,
                    "leaving": bool(record.get("leaving")),
                }
        return found

    def is_self(self, replica_id: str | None) -> bool:
        return replica_id is None or replica_id == self.id

    async def address(self, replica_id: str) -> str | None:
        """Where a live replica is reached; None when its lease ran out (it is lost) or it never existed."""
        found = await self.lookup(replica_id)
        return None if found is None else found[0]

    async def lookup(self, replica_id: str) -> tuple[str | None, bool] | None:
        """A live replica's address and whether it is leaving (`leave`); None when its lease ran out."""
        if replica_id == self.id:
            return self.url, self.leaving
        record = await self.store.get(self._key(replica_id))
        if not isinstance(record, dict):
            return None
        return record.get("url"), bool(record.get("leaving"))

    async def alive(self, replica_id: str) -> bool:
        if replica_id == self.id:
            return True
        return await self.store.get(self._key(replica_id)) is not None
