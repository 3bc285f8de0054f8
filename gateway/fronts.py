"""The registry of front kinds: each maps to `module:routes(gateway, settings) -> list[BaseRoute]`.

Routes carry their full path (the front applies its own prefix from settings),
so fronts can share the root without knowing about each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

from gateway.backends import load_object

if TYPE_CHECKING:
    from gateway.runtime import Gateway

FRONT_KINDS: dict[str, str] = {
    "opentool": "adapters.opentool.front:routes",
    "oxp": "adapters.oxp.front:routes",
    "toolserver": "adapters.toolserver.front:routes",
    "jsonrpc": "adapters.jsonrpc.front:routes",
    "metrics": "gateway.metrics:routes",
}


def front_routes(gateway: Gateway) -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for name, target in FRONT_KINDS.items():
        settings = gateway.front_settings(name)
        if settings.get("enabled", True):
            routes.extend(load_object(target)(gateway, settings))
    return routes
