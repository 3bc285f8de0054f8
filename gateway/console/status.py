"""Each replica's own view for the console, in the state store: its backends, calls in flight and configuration.

`publish` runs every few seconds on every replica (`Gateway`'s console loop), so any replica's console shows
every replica: an entry `console:status:<replica>` that lives three ticks, so a replica that stopped
publishing drops out of the view, with the traffic of its last hour kept (`gateway.console.traffic`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from gateway.console.traffic import NAMESPACE, PUBLISH_EVERY_S, entries, publish_quietly
from gateway.errors import GatewayError
from gateway.state import StateStore
from gateway.timestamps import utc_iso

if TYPE_CHECKING:
    from gateway.runtime import Gateway

log = structlog.get_logger("toolplex.console")

STATUS_TTL_S = 3 * PUBLISH_EVERY_S + 1


async def status_of(gateway: Gateway) -> dict[str, Any]:
    """What this replica shows of itself."""
    in_flight = gateway.in_flight  # every configuration's: an older one's calls still run after a reload
    replicas = gateway.replicas
    return {
        "id": replicas.id,
        "url": replicas.url,
        "leaving": replicas.leaving,
        "started": utc_iso(replicas.started),
        "reported_at": utc_iso(),
        "backends": await gateway.backend_states(),
        "in_flight": {"total": in_flight.count, "by_front": dict(in_flight.by_front)},
        "config": gateway.history.public(),
    }


async def publish(gateway: Gateway) -> None:
    """This replica's traffic and status, into the store; a store that does not answer is only logged."""
    await publish_quietly(gateway.traffic, gateway.store)
    try:
        status = await status_of(gateway)
        await gateway.store.set(f"{NAMESPACE}:status:{gateway.replicas.id}", status, STATUS_TTL_S)
    except GatewayError as exc:
        log.warning("console_status_not_published", error=exc.failure.developer_message)


async def read_statuses(store: StateStore, own: dict[str, Any]) -> list[dict[str, Any]]:
    """Every replica's last status, this one's (`own`, fresh) first, the others by id."""
    others = [
        body for _key, body in await entries(store, "status") if isinstance(body, dict) and body.get("id") != own["id"]
    ]
    return [{**own, "self": True}, *({**body, "self": False} for body in sorted(others, key=lambda b: b["id"]))]
