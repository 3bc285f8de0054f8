"""Every enabled front's routes, from the installed adapters and the `fronts` section.

Routes carry their full path (each front applies its own prefix from its
settings), so fronts share the root without knowing about each other. A front
gets the narrow `FrontServices` and its own typed settings, nothing else.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.config import GatewayConfig
from gateway.plugins import fronts, resolve
from gateway.services import FrontServices


def front_routes(services: FrontServices, config: GatewayConfig) -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for name, plugin in fronts().items():
        settings = getattr(config.settings.fronts, name)
        if settings.enabled:
            routes.extend(resolve(plugin.routes)(services, settings))
    return routes
