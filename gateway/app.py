"""The ASGI application: health, then every enabled front's routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.config import GatewayConfig
from gateway.fronts import front_routes
from gateway.guard import HostOriginGuard, default_hosts
from gateway.http import json_response
from gateway.observability import config_secrets, register_secrets
from gateway.runtime import Gateway


def create_app(config: GatewayConfig, *, start_with_server: bool = True, bind_host: str | None = None) -> Starlette:
    """The app; its lifespan starts and closes the gateway unless the caller does (`toolplex serve`).

    `bind_host` is the address the server listens on (`toolplex serve` passes it): bound to
    loopback, only loopback Host names are served unless `server.allowed_hosts` says otherwise.
    An app not bound by us (in-process use, tests) checks Host only against a configured list.
    """
    register_secrets(config_secrets(config.data))  # API keys, upstream credentials: never in a log line
    gateway = Gateway(config)
    server = config.section("server")
    configured_hosts = server.get("allowed_hosts")
    guard = Middleware(
        HostOriginGuard,
        allowed_hosts=configured_hosts if configured_hosts is not None else default_hosts(bind_host),
        allowed_origins=server.get("allowed_origins") or (),
    )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if not start_with_server:
            yield
            return
        await gateway.start()
        try:
            yield
        finally:
            await gateway.close()

    async def healthz(_request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(_request: Request) -> Response:
        """200 once started ("degraded" while some backend is down); 503 before. Lists every backend."""
        if not gateway.ready:
            return json_response({"status": "starting", "backends": gateway.backend_states()}, status=503)
        states = gateway.backend_states()
        status = "ready" if all(s["state"] == "up" for s in states) else "degraded"
        return json_response({"status": status, "tools": len(gateway.catalog), "backends": states})

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return json_response({"detail": exc.detail}, status=exc.status_code, headers=exc.headers)

    async def internal_error(_request: Request, _exc: Exception) -> Response:
        return json_response({"detail": "Internal server error"}, status=500)

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            *front_routes(gateway),
        ],
        lifespan=lifespan,
        middleware=[guard],
        exception_handlers={HTTPException: http_error, Exception: internal_error},
    )
    app.state.gateway = gateway
    return app
