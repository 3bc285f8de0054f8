"""Starlette's router with fixed paths found by one dict lookup.

Starlette tries each route's regular expression in order; with every front
mounted at the root that is a dozen or more per request before a call's route.
A fixed-path route is indexed by its path when no route before it could match
that path (a route with parameters, a mount), so the route found is always the
one Starlette's scan would find; anything the index does not settle (405, a
slash redirect, a path with parameters) goes through the scan as before.

`fast` goes one step further for the gateway's own app (`gateway.edge.Edge`), where no exception
handlers are installed per route: a fixed-path route of an async endpoint, for a method it
accepts, is looked up by (path, method) and its endpoint called with a `Request` directly,
without the per-request wrappers of `Route.handle` (method check, exception handler lookup).
"""

from __future__ import annotations

from typing import Any

from starlette._utils import get_route_path, is_async_callable
from starlette.requests import Request
from starlette.routing import BaseRoute, Match, Route, Router, request_response
from starlette.types import Receive, Scope, Send


def _fixed(route: BaseRoute) -> bool:
    return isinstance(route, Route) and not route.param_convertors


class IndexedRouter(Router):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.by_path: dict[str, list[Route]] = {}
        for index, route in enumerate(self.routes):
            if not _fixed(route):
                continue
            assert isinstance(route, Route)
            earlier = self.routes[:index]
            if any(not _fixed(r) and _could_match(r, route.path) for r in earlier):
                continue
            self.by_path.setdefault(route.path, []).append(route)
        # Routes whose app is Starlette's plain wrapper of an async function (no route middleware, no body limit).
        self.direct = {id(r) for routes in self.by_path.values() for r in routes if _plain_function(r)}
        self.by_method: dict[tuple[str, str], Route] = {}  # (path, method) -> the route Starlette would pick
        self.any_method: dict[str, Route] = {}  # path -> a route taking every method (no earlier one matched)
        for path, found in self.by_path.items():
            for route in found:
                if route.methods is None:
                    self.any_method[path] = route
                    break
                for method in route.methods:
                    self.by_method.setdefault((path, method), route)

    async def fast(self, scope: Scope, receive: Receive, send: Send) -> None:
        """As `app`, with a fixed-path async endpoint called directly (see the module docstring)."""
        if scope["type"] == "http":
            path = get_route_path(scope)
            route = self.by_method.get((path, scope["method"])) or self.any_method.get(path)
            if route is not None:
                scope.setdefault("router", self)
                scope["route"] = route
                scope["endpoint"] = endpoint = route.endpoint
                scope["path_params"] = {}
                if id(route) in self.direct:
                    response = await endpoint(Request(scope, receive, send))
                    await response(scope, receive, send)
                else:  # an ASGI app, or a sync function (run in a thread by Starlette's wrapper)
                    await route.app(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self.by_path.get(get_route_path(scope), ()):
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    scope.setdefault("router", self)
                    scope["route"] = route
                    scope.update(child_scope)
                    await route.handle(scope, receive, send)
                    return
        await super().app(scope, receive, send)


def _plain_function(route: Route) -> bool:
    wrapped = getattr(route.app, "__qualname__", "") == request_response.__qualname__ + ".<locals>.app"
    return wrapped and is_async_callable(route.endpoint)


def _could_match(route: BaseRoute, path: str) -> bool:
    regex = getattr(route, "path_regex", None)
    return regex is None or regex.match(path) is not None
