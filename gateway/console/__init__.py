"""The web console (`/console`): the catalog to search and try, backends, traffic, sessions, state and pins.

A front like any other: its routes are built from `FrontServices`, every call it makes goes through the
pipeline as the signed-in principal, and it reads what it shows from the state store (`traffic`, `status`),
so any replica shows the whole gateway. Pages are static files (`static/`) served by the gateway itself.
"""

from gateway.console.settings import ConsoleFrontSettings
from gateway.plugins import Adapter, FrontPlugin

ADAPTER = Adapter(
    name="console",
    description="A web console: catalog, tool forms, backends, traffic, sessions, configuration and pins",
    front=FrontPlugin(settings=ConsoleFrontSettings, routes="gateway.console.routes:routes"),
)

__all__ = ["ADAPTER"]
