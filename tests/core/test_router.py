"""The indexed router finds the route Starlette's own scan would find, for every kind of route list."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Mount, Route

from gateway.router import IndexedRouter


def answer(text: str) -> Callable[[Request], Awaitable[PlainTextResponse]]:
    async def endpoint(_request: Request) -> PlainTextResponse:
        return PlainTextResponse(text)

    return endpoint


def app(routes: list[BaseRoute]) -> Starlette:
    built = Starlette()
    built.router = IndexedRouter(routes=routes)
    return built


async def get(application: Starlette, method: str, path: str) -> tuple[int, str]:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        response = await client.request(method, path)
        return response.status_code, response.text


async def test_a_fixed_path_is_found_by_the_index() -> None:
    router_app = app([Route("/a", answer("a")), Route("/b", answer("b"), methods=["POST"])])
    assert isinstance(router_app.router, IndexedRouter)
    assert set(router_app.router.by_path) == {"/a", "/b"}
    assert await get(router_app, "POST", "/b") == (200, "b")
    assert await get(router_app, "GET", "/a") == (200, "a")


async def test_an_earlier_route_with_parameters_still_wins() -> None:
    router_app = app([Route("/{name}", answer("param")), Route("/x", answer("fixed"))])
    assert "/x" not in router_app.router.by_path  # type: ignore[attr-defined]
    assert await get(router_app, "GET", "/x") == (200, "param")


async def test_an_earlier_mount_still_wins() -> None:
    inner = Starlette(routes=[Route("/x", answer("mounted"))])
    router_app = app([Mount("/m", app=inner), Route("/m/x", answer("fixed")), Route("/y", answer("y"))])
    assert "/m/x" not in router_app.router.by_path  # type: ignore[attr-defined]
    assert "/y" in router_app.router.by_path  # type: ignore[attr-defined]
    assert await get(router_app, "GET", "/m/x") == (200, "mounted")


async def test_methods_of_one_path_and_405_are_as_before() -> None:
    router_app = app([Route("/x", answer("post"), methods=["POST"]), Route("/x", answer("get"), methods=["GET"])])
    assert await get(router_app, "GET", "/x") == (200, "get")
    assert await get(router_app, "POST", "/x") == (200, "post")
    status, _ = await get(router_app, "DELETE", "/x")
    assert status == 405


async def test_unknown_paths_and_slash_redirects_are_as_before() -> None:
    router_app = app([Route("/x", answer("x"))])
    assert (await get(router_app, "GET", "/nope"))[0] == 404
    status, _ = await get(router_app, "GET", "/x/")
    assert status == 307
