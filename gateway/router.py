"""Starlette's router with fixed paths found by one dict lookup.

Starlette tries each route's regular expression in order; with every front
mounted at the root that is a dozen or more per request before a call's route.
A fixed-path route is indexed by its path when no route before it could match
that path (a route with parameters, a mount), so the route found is always the
one Starlette's scan would find; anything the index does not settle (405, a
slash redirect, a path with parameters) goes through the scan as before.
"""

from __future__ import annotations

from typing import Any

from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Match, Route, Router
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


def _could_match(route: BaseRoute, path: str) -> bool:
    regex = getattr(route, "path_regex", None)
    return regex is None or regex.match(path) is not None
