"""The ASGI application: a thin entry that serves each request with the current snapshot's app.

The fronts' routes, the Host/Origin guard and the error handlers are built per
configuration (`front_app_builder`, behind one `gateway.edge.Edge`), so a reload can change any of them; the
entry itself (`GatewayApp`) only runs the lifespan and hands each request to
whatever snapshot is current when it arrives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.config import GatewayConfig
from gateway.edge import Edge, EdgeOptions
from gateway.fronts import front_routes
from gateway.guard import HostOriginGuard, default_hosts
from gateway.http import json_response
from gateway.observability import config_secrets, register_secrets
from gateway.router import IndexedRouter
from gateway.runtime import Gateway
from gateway.streams import EventStreams, wants_events


def front_app_builder(bind_host: str | None, options: EdgeOptions) -> Any:
    """How each configuration becomes an ASGI app: health routes, every enabled front, behind one `Edge`."""

    def build(gateway: Gateway, config: GatewayConfig) -> ASGIApp:
        server = config.settings.server
        guard = HostOriginGuard(
            None,  # type: ignore[arg-type]  # the Edge asks it for refusals; it wraps nothing
            allowed_hosts=server.allowed_hosts if server.allowed_hosts is not None else default_hosts(bind_host),
            allowed_origins=server.allowed_origins or (),
        )

        async def healthz(_request: Request) -> Response:
            return json_response({"status": "ok"})

        async def readyz(_request: Request) -> Response:
            """200 once started ("degraded" while some backend or the shared state store is down); 503 before."""
            if gateway.draining:  # going away: load balancers send new requests elsewhere
                return json_response({"status": "draining"}, status=503)
            states = await gateway.backend_states()
            if not gateway.ready:
                return json_response({"status": "starting", "backends": states}, status=503)
            store = await gateway.store_state()
            healthy = all(s["state"] == "up" for s in states) and store["state"] == "up"
            body = {"status": "ready" if healthy else "degraded", "tools": len(gateway.catalog), "backends": states}
            return json_response({**body, "state_store": store})

        wrap = None
        oauth_routes = []
        oauth = config.settings.auth.oauth
        if oauth is not None:  # the OAuth resource (PyJWT, cryptography) loads only for a gateway that is one
            from gateway.oauth.challenge import OAuthChallenges, metadata_routes
            from gateway.oauth.resource import Published

            published = Published.of(oauth, server.public_url)

            def wrap(app: ASGIApp) -> ASGIApp:
                return OAuthChallenges(
                    app,
                    authenticator=lambda: gateway.snapshot.authenticator,
                    published=published,
                    mcp_paths=mcp_paths(config),
                )

            oauth_routes = metadata_routes(published)
        router = IndexedRouter(
            routes=[
                Route("/healthz", healthz, methods=["GET"]),
                Route("/readyz", readyz, methods=["GET"]),
                *oauth_routes,
                *front_routes(gateway.services, config, bind_host),
            ]
        )
        return Edge(router, guard, options, wrap)

    return build


def mcp_paths(config: GatewayConfig) -> tuple[str, ...]:
    """The MCP endpoint's path when that front is on (its virtual servers are below it)."""
    mcp = getattr(config.settings.fronts, "mcp", None)
    if mcp is None or not getattr(mcp, "enabled", True):
        return ()
    return (mcp.path,)


class GatewayApp:
    """The ASGI entry: the lifespan starts and closes the gateway; requests go to the current snapshot's app."""

    def __init__(self, gateway: Gateway, *, start_with_server: bool, options: EdgeOptions | None = None) -> None:
        self.gateway = gateway
        self.options = options if options is not None else EdgeOptions()  # set by `toolplex serve`
        self.state = SimpleNamespace(gateway=gateway)
        self.start_with_server = start_with_server
        self.streams = EventStreams()  # GETs answered with an event stream: ended at the server's stop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "http":
            if self.gateway.draining:
                send = _closing(send)
            if wants_events(scope):
                await self.streams.serve(self.gateway.snapshot.app, scope, receive, send)
                return
        await self.gateway.snapshot.app(scope, receive, send)

    def end_streams(self) -> None:
        """The server stops: end the event streams answering GETs, now and from now on (`gateway.streams`)."""
        self.streams.end()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """The gateway started for the block (for embedding the app in-process, as tests do)."""
        if self.start_with_server:
            await self.gateway.start()
        try:
            yield
        finally:
            if self.start_with_server:
                await self.gateway.close()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """ASGI lifespan: start the gateway at startup (a failure is reported, not raised), close it at shutdown."""
        await receive()  # lifespan.startup
        try:
            if self.start_with_server:
                await self.gateway.start()
        except Exception as exc:
            await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            if self.start_with_server:
                await self.gateway.close()
        finally:
            await send({"type": "lifespan.shutdown.complete"})


def create_app(config: GatewayConfig, *, start_with_server: bool = True, bind_host: str | None = None) -> GatewayApp:
    """The app; its lifespan starts and closes the gateway unless the caller does (`toolplex serve`).

    `bind_host` is the address the server listens on (`toolplex serve` passes it): bound to
    loopback, only loopback Host names are served unless `server.allowed_hosts` says otherwise.
    An app not bound by us (in-process use, tests) checks Host only against a configured list.
    """
    register_secrets(config_secrets(config.data))  # API keys, upstream credentials: never in a log line
    options = EdgeOptions()
    gateway = Gateway(config, app_builder=front_app_builder(bind_host, options))
    return GatewayApp(gateway, start_with_server=start_with_server, options=options)


def _closing(send: Send) -> Send:
    """`send`, each answer saying `Connection: close`: while a replica drains, a proxy in front keeps no idle
    connection to it, so none is closed under a request the proxy just sent (which it could not send again)."""

    async def closing(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
            message = {**message, "headers": [*headers, (b"connection", b"close")]}
        await send(message)

    return closing
