"""Every enabled front's routes, from the installed adapters and the `fronts` section.

Routes carry their full path (each front applies its own prefix from its
settings), so fronts share the root without knowing about each other. A front
gets the narrow `FrontServices` and its own typed settings, nothing else.
"""

from __future__ import annotations

from typing import Any

from starlette.routing import BaseRoute

from gateway.auth import auth_configured
from gateway.config import GatewayConfig
from gateway.errors import ConfigError
from gateway.guard import is_loopback
from gateway.plugins import fronts, resolve
from gateway.services import FrontServices


def enabled(settings: Any, bind_host: str | None) -> bool:
    """A front's `enabled`; a front whose default is unset (None: the console) is on only when the gateway is
    bound to a loopback address, where only this machine reaches it."""
    if settings.enabled is None:
        return bind_host is not None and is_loopback(bind_host)
    return bool(settings.enabled)


def front_routes(services: FrontServices, config: GatewayConfig, bind_host: str | None = None) -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for name, plugin in fronts().items():
        settings = getattr(config.settings.fronts, name)
        if enabled(settings, bind_host):
            _check_exposure(name, settings, config, bind_host)
            routes.extend(resolve(plugin.routes)(services, settings))
    return routes


def _check_exposure(name: str, settings: Any, config: GatewayConfig, bind_host: str | None) -> None:
    """A front that makes every caller an admin when auth is off is refused on an address beyond loopback."""
    if not settings.local_without_auth or auth_configured(config.settings.auth):
        return
    if bind_host is None or is_loopback(bind_host):
        return
    raise ConfigError(
        [
            f"fronts.{name}: enabled on {bind_host}, which is not a loopback address, with auth off: whoever "
            "reaches it would see every caller's data and decide pins; configure auth (api_keys, jwt or oauth), "
            f"bind to 127.0.0.1, or set fronts.{name}.enabled: false"
        ]
    )
