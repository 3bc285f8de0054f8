"""A request forwarded to another replica (gateway/forwarding.py) carries only end-to-end headers, either way.

Issue 26, item 5: the forwarding replica passed back the owner's `Date` and `Server` and its own
server added them again (two of each; nginx warns twice per request). Here both sides are real
uvicorn servers with their default `Date` and `Server` headers, in this test's event loop: the
owner echoes the request headers it received and answers with every kind of hop-by-hop header
(RFC 9110 section 7.6.1: `Connection` and the headers it names, `Keep-Alive`, `Proxy-Connection`,
`TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`), its body streamed (chunked).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.forwarding import HOP_HEADER, Forwarder, end_to_end
from gateway.replicas import Replicas
from gateway.state import MemoryStore
from tests.support import free_port

WAIT_S = 20.0
HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "x-hop", "x-request-hop")
PIECES = [b"first piece, ", b"second piece, ", b"last piece"]


@contextlib.asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[str]:
    """`app` under a real uvicorn server (its own Date and Server headers) on a free loopback port."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning"))
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + WAIT_S
    while not server.started:
        assert not task.done() and time.monotonic() < deadline, "the server did not start"
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, WAIT_S)


async def owner_answer(request: Request) -> Response:
    """What the owning replica answers: the headers it was sent, or a streamed body with hop-by-hop headers."""
    if request.url.path == "/echo":
        return JSONResponse([[name.decode(), value.decode()] for name, value in request.headers.raw])

    async def body() -> AsyncIterator[bytes]:
        for piece in PIECES:
            yield piece

    headers = {
        "Connection": "x-hop",
        "X-Hop": "for the next hop only",
        "Keep-Alive": "timeout=5",
        "Proxy-Connection": "keep-alive",
        "Trailer": "x-checksum",
        "Upgrade": "h2c",
        "X-Kept": "end to end",
    }
    return StreamingResponse(body(), headers=headers, media_type="text/plain")


@contextlib.asynccontextmanager
async def replicas() -> AsyncIterator[str]:
    """The owner, and a replica that forwards every request to it; yields the forwarding replica's URL."""
    forwarder = Forwarder(Replicas(MemoryStore(), lease_s=15), timeout_s=WAIT_S)
    owner = Starlette(routes=[Route("/{path:path}", owner_answer, methods=["GET", "POST"])])
    async with serving(owner) as owner_url:

        async def forward(request: Request) -> Response:
            return await forwarder.forward(request, owner_url)

        front = Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])
        try:
            async with serving(front) as url:
                yield url
        finally:
            await forwarder.close()


async def test_the_answer_carries_the_forwarding_servers_own_date_and_server_and_no_hop_by_hop_header() -> None:
    async with replicas() as url, httpx.AsyncClient(base_url=url, timeout=WAIT_S) as client:
        answer = await client.get("/stream")
    headers = answer.headers
    assert (answer.status_code, answer.content) == (200, b"".join(PIECES))
    assert len(headers.get_list("date")) == 1 and headers.get_list("server") == ["uvicorn"]
    assert [name for name in HOP_BY_HOP if name in headers] == []
    assert headers.get_list("transfer-encoding") == ["chunked"]  # the forwarding server's own framing, once
    assert headers["x-kept"] == "end to end" and headers["content-type"].startswith("text/plain")


async def test_the_request_reaches_the_owner_without_hop_by_hop_headers() -> None:
    sent = {
        "Connection": "keep-alive, X-Request-Hop",
        "X-Request-Hop": "for the next hop only",
        "Keep-Alive": "timeout=5",
        "TE": "trailers",
        "Proxy-Authorization": "Basic cHJveHk6c2VjcmV0",
        "X-End": "end to end",
    }
    async with replicas() as url, httpx.AsyncClient(base_url=url, timeout=WAIT_S) as client:
        answer = await client.post("/echo", headers=sent, content=b"{}")
    received = {name.lower(): value for name, value in answer.json()}
    assert received["x-end"] == "end to end" and HOP_HEADER in received
    dropped = ("x-request-hop", "keep-alive", "te", "proxy-authorization")
    assert [name for name in dropped if name in received] == []
    assert len(answer.headers.get_list("date")) == 1 and len(answer.headers.get_list("server")) == 1


def test_end_to_end_drops_what_connection_names_whatever_its_case() -> None:
    headers = [
        (b"Connection", b"Keep-Alive, X-Private"),
        (b"connection", b"x-other"),
        (b"X-Private", b"1"),
        (b"x-other", b"2"),
        (b"Keep-Alive", b"timeout=5"),
        (b"Date", b"Mon, 01 Jan 2024 00:00:00 GMT"),
        (b"Set-Cookie", b"a=1"),
        (b"Set-Cookie", b"b=2"),
    ]
    kept = end_to_end(headers, dropped={"date"})
    assert kept == [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2")]  # repeated end-to-end headers all kept
