"""The MCP front's routes (`gateway.plugins.FrontPlugin.routes`): its endpoints, each made by its first request.

An `Endpoint` (`adapters.mcp.server.endpoint`) is the `mcp` SDK's low-level server and session manager, and
importing the SDK costs a good part of a gateway's start-up. So the routes hold a `Place` per path instead,
which imports the endpoint module and builds the endpoint when the first request reaches it: a gateway whose
MCP front is on but has no MCP client yet never loads the SDK, and that first request pays for it once (about
half a second; the import runs in a worker thread, so the event loop keeps serving other requests meanwhile).

A place lives as long as the gateway (`FrontServices.kept`), as the endpoint did: the endpoint's sessions
outlive a reload, and each reload hands the place its new settings, kept for the endpoint until it exists.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Final

from starlette.routing import BaseRoute, Route

from gateway.heap import settle_import

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from adapters.mcp.server.endpoint import Endpoint
    from adapters.mcp.server.settings import McpFrontSettings
    from gateway.services import FrontServices

FRONT: Final = "mcp"
ALL: Final = ("*",)  # include globs that take every tool
METHODS: Final = ["GET", "POST", "DELETE"]
ENDPOINT_MODULE: Final = "adapters.mcp.server.endpoint"  # the endpoint, and with it the SDK


class Place:
    """Where one MCP endpoint (the main path or a virtual server) is served: the endpoint once a request came,
    until then the configuration it is to be built with."""

    def __init__(self, services: FrontServices, path: str) -> None:
        self.services = services
        self.path = path
        self.endpoint: Endpoint | None = None
        self._configuration: tuple[McpFrontSettings, tuple[str, ...], tuple[str, ...]] | None = None

    def configure(self, settings: McpFrontSettings, include: tuple[str, ...], exclude: tuple[str, ...]) -> None:
        if self.endpoint is not None:
            self.endpoint.configure(settings, include, exclude)
        else:
            self._configuration = (settings, include, exclude)

    def built(self) -> Endpoint:
        """The endpoint, built now if no request needed it before (with the latest configuration)."""
        if self.endpoint is None:
            from adapters.mcp.server.endpoint import Endpoint  # the SDK, on the front's first request

            assert self._configuration is not None  # `routes` configures a place before serving it
            settings, include, exclude = self._configuration
            endpoint = Endpoint(self.services, settings, self.path)
            endpoint.configure(settings, include, exclude)
            self.endpoint, self._configuration = endpoint, None
        return self.endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoint
        if endpoint is None:
            await asyncio.to_thread(importlib.import_module, ENDPOINT_MODULE)  # off the event loop
            if self.endpoint is None:  # the first request back: the SDK is out of the collector's way
                settle_import()
            endpoint = self.built()  # (a request that came meanwhile may have built it: then that one)
        await endpoint(scope, receive, send)


def place(services: FrontServices, path: str) -> Place:
    """The place at `path`: one per gateway, kept by its services across reloads."""
    return services.kept((FRONT, "endpoint", path), lambda: Place(services, path))  # type: ignore[no-any-return]


def routes(services: FrontServices, settings: McpFrontSettings) -> list[BaseRoute]:
    """The MCP endpoint and one per virtual server."""
    main = place(services, settings.path)
    main.configure(settings, ALL, ())
    served: list[BaseRoute] = [Route(settings.path, main, methods=METHODS)]
    for name, virtual in settings.servers.items():
        path = f"{settings.path}/{name}"
        one = place(services, path)
        one.configure(settings, tuple(virtual.include), tuple(virtual.exclude))
        served.append(Route(path, one, methods=METHODS))
    return served
