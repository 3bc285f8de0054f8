"""`Upstream.request`'s direct path (aiohttp, no httpx models) against real loopback servers: the request
goes out as httpx sent it, the answer reads as httpx's did, and the limits, timeouts and error mapping
of the httpx path hold (a call that may have arrived is never sent twice)."""

from __future__ import annotations

import asyncio
import gzip
import time

import httpx
import orjson
import pytest

from gateway.errors import ErrorKind, GatewayError
from gateway.upstream import Reply, Upstream, UpstreamSettings, json_of
from tests.core.test_aiohttp_transport import TEST_S, Server, answer, reset

LIMIT = 64 * 1024


def upstream_of(url: str, **settings: object) -> Upstream:
    return Upstream("u", UpstreamSettings(url=url, **settings))  # type: ignore[arg-type]


def through_httpx(url: str, **settings: object) -> Upstream:
    """The same client on the httpx path: a client `auth=` (here a no-op one) goes through httpx's auth flow."""
    return Upstream("u", UpstreamSettings(url=url, **settings), auth=httpx.Auth())  # type: ignore[arg-type]


def canonical(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return sorted((k.lower(), v) for k, v in headers)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"json": {"a": "é" * 100, "b": [1, 2.5, None, True], "big": 2**70}},
        {"content": b"raw bytes", "headers": {"Content-Type": "text/plain", "accept": "application/json"}},
        {"params": {"q": "a b/c?", "flag": True, "n": 3}, "headers": {"Cookie": "node_id=1"}},
        {},
    ],
)
async def test_the_request_goes_out_as_httpx_sent_it(kwargs: dict[str, object]) -> None:
    server = Server()
    async with asyncio.timeout(TEST_S), server:
        direct = upstream_of(server.url + "/base", headers={"X-Backend": "configured"})
        other = through_httpx(server.url + "/base", headers={"X-Backend": "configured"})
        try:
            reply = await direct.request("POST", "/call é", **kwargs)  # type: ignore[arg-type]
            response = await other.request("POST", "/call é", **kwargs)  # type: ignore[arg-type]
        finally:
            await direct.close()
            await other.close()
    assert isinstance(reply, Reply) and isinstance(response, httpx.Response)
    (line, headers, body), (line_httpx, headers_httpx, body_httpx) = server.requests
    assert line == line_httpx
    assert body == body_httpx
    assert canonical(headers) == canonical(headers_httpx)


async def test_an_answer_reads_as_httpx_read_it() -> None:
    body = '{"text": "héllo"}'.encode("utf-16")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            headers = [("Content-Type", "application/json; charset=utf-16"), ("Set-Cookie", "a=1")]
            writer.write(answer(201, body=body, headers=[*headers, ("Set-Cookie", "b=2"), ("X-Two", "1")]))
            await writer.drain()

    server = Server(handle)
    async with asyncio.timeout(TEST_S), server:
        direct, other = upstream_of(server.url), through_httpx(server.url)
        try:
            reply = await direct.request("GET", "/x")
            response = await other.request("GET", "/x")
            await direct.request("GET", "/again")
        finally:
            await direct.close()
            await other.close()
    assert isinstance(reply, Reply)
    assert (reply.status_code, reply.reason_phrase, reply.content) == (201, "OK", response.content)
    assert reply.text == response.text == '{"text": "héllo"}'
    assert reply.json() == response.json() == json_of(direct, reply) == {"text": "héllo"}
    assert reply.headers.get("set-cookie") == response.headers.get("set-cookie") == "a=1, b=2"
    assert reply.headers.get_list("Set-Cookie") == response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert dict(reply.headers) == dict(response.headers)
    assert reply.request.method == "GET" and reply.request.url.path == "/x"
    assert not any(k.lower() == b"cookie" for k, _ in server.requests[2][1])  # an answer's cookies are never kept


async def test_gzip_is_decoded_and_bounded_decoded() -> None:
    body = b'{"text": "' + b"x" * (2 * LIMIT) + b'"}'

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            writer.write(answer(body=gzip.compress(body), headers=[("Content-Encoding", "gzip")]))
            await writer.drain()

    server = Server(handle)
    async with asyncio.timeout(TEST_S), server:
        roomy, tight = upstream_of(server.url), upstream_of(server.url, max_response_bytes=LIMIT)
        try:
            assert (await roomy.request("GET", "/")).content == body
            with pytest.raises(GatewayError) as info:
                await tight.request("GET", "/")
        finally:
            await roomy.close()
            await tight.close()
    assert "(limits.max_upstream_response_bytes)" in info.value.failure.message


async def test_an_endless_answer_stops_at_the_limit_and_a_declared_one_before_reading() -> None:
    sent = 0

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"x" * 16384
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            sent += len(piece)

    async def declared(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{")
        await writer.drain()
        await asyncio.Event().wait()

    for handler in (endless, declared):
        server = Server(handler)
        async with asyncio.timeout(TEST_S), server:
            upstream = upstream_of(server.url, retries=0, max_response_bytes=LIMIT)
            try:
                with pytest.raises(GatewayError) as info:
                    await upstream.request("POST", "/call", json={}, deadline=time.monotonic() + 5)
            finally:
                await upstream.close()
        failure = info.value.failure
        assert failure.message == f"Upstream 'u' answered more than {LIMIT} bytes (limits.max_upstream_response_bytes)"
        assert failure.details["bytes_read"] <= LIMIT + 65536
        assert upstream.breaker.failures_total == 0  # too much is not an upstream fault
    assert failure.details["bytes_read"] == 0  # the declared one: not a byte read


async def test_failures_after_sending_are_never_retried_and_map_as_on_the_httpx_path() -> None:
    async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()

    async def resets(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        reset(writer)

    async def stalls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()
        await asyncio.Event().wait()

    expected = {cut_short: "the connection failed", resets: "the connection failed", stalls: "deadline"}
    for handler, said in expected.items():
        server = Server(handler)
        async with asyncio.timeout(TEST_S), server:
            upstream = upstream_of(server.url, retries=3, backoff_s=0.01)
            try:
                with pytest.raises(GatewayError) as info:
                    await upstream.request("POST", "/call", json={"a": 1}, deadline=time.monotonic() + 0.5)
            finally:
                await upstream.close()
        assert said in info.value.failure.message, (handler.__name__, info.value.failure)
        kind = ErrorKind.DEADLINE if handler is stalls else ErrorKind.UPSTREAM_UNAVAILABLE
        assert info.value.failure.kind == kind
        assert len(server.requests) == 1, handler.__name__  # it may have arrived: sent once


async def test_proxies_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server()
    async with asyncio.timeout(TEST_S), server:
        monkeypatch.setenv("HTTP_PROXY", server.url)
        monkeypatch.setenv("NO_PROXY", "")
        upstream = upstream_of("http://upstream.invalid/api")
        try:
            assert json_of(upstream, await upstream.request("POST", "/call", json={"x": 1})) == {"ok": True}
        finally:
            await upstream.close()
    line, _, body = server.requests[0]
    assert line == b"POST http://upstream.invalid/api/call HTTP/1.1"
    assert orjson.loads(body) == {"x": 1}


async def test_oauth_and_streamed_bodies_go_through_httpx() -> None:
    async def parts():  # type: ignore[no-untyped-def]
        yield b"one,"
        yield b"two"

    server = Server()
    async with asyncio.timeout(TEST_S), server:
        upstream = upstream_of(server.url)
        try:
            assert isinstance(await upstream.request("GET", "/"), Reply)
            assert isinstance(await upstream.request("GET", "/", auth=httpx.Auth()), httpx.Response)
            assert isinstance(await upstream.request("POST", "/", content=parts()), httpx.Response)
            assert isinstance(await upstream.request("GET", "/", follow_redirects=True), httpx.Response)
        finally:
            await upstream.close()
        with_auth = through_httpx(server.url)
        try:
            assert isinstance(await with_auth.request("GET", "/"), httpx.Response)
        finally:
            await with_auth.close()
    assert server.requests[2][2] == b"one,two"
