"""gateway.aiohttp_transport against real loopback servers: answers, and above all which httpx
error each failure becomes (a connect error only when the request cannot have been sent)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import shutil
import socket
import ssl
import struct
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import orjson
import pytest

from gateway.aiohttp_transport import AiohttpTransport
from gateway.errors import GatewayError
from gateway.upstream import NOT_SENT, Upstream, UpstreamSettings
from tests.support import refused_port, unanswered_port

TEST_S = 10  # every test body is bounded by asyncio.timeout too

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """An asyncio server on a free loopback port that counts connections and requests.
    Without a handler it answers every request of a connection with {"ok": true}."""

    def __init__(self, handler: Handler | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler or self.answer_json
        self.tls = tls
        self.connections = 0
        self.requests: list[tuple[bytes, list[tuple[bytes, bytes]], bytes]] = []  # (request line, headers, body)
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)  # type: ignore[arg-type]
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the test is over
        finally:
            writer.transport.abort()

    async def answer_json(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await self.read_request(reader)
            writer.write(answer(body=b'{"ok": true}', headers=[("Content-Type", "application/json")]))
            await writer.drain()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        """One request (Content-Length or chunked body); its body."""
        head = await reader.readuntil(b"\r\n\r\n")
        line, *lines = head[:-4].split(b"\r\n")
        headers = [tuple(part.strip() for part in h.split(b":", 1)) for h in lines]
        fields = {k.lower(): v for k, v in headers}
        if b"content-length" in fields:
            body = await reader.readexactly(int(fields[b"content-length"]))
        elif fields.get(b"transfer-encoding") == b"chunked":
            body = b""
            while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
                body += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")
        else:
            body = b""
        self.requests.append((line, headers, body))  # type: ignore[arg-type]
        return body

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.tls)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()


def answer(status: int = 200, body: bytes = b"", headers: list[tuple[str, str]] = ()) -> bytes:  # type: ignore[assignment]
    lines = [f"HTTP/1.1 {status} OK", f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@contextlib.asynccontextmanager
async def client(**transport: object) -> AsyncIterator[httpx.AsyncClient]:
    async with asyncio.timeout(TEST_S), httpx.AsyncClient(transport=AiohttpTransport(**transport)) as c:  # type: ignore[arg-type]
        yield c


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), not a FIN."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# Answers


async def test_a_json_answer() -> None:
    server = Server()
    async with server, client() as c:
        response = await c.get(f"{server.url}/x?q=a%2Fb")
        assert response.status_code == 200 and response.json() == {"ok": True}
        assert response.http_version == "HTTP/1.1" and response.reason_phrase == "OK"
        assert server.requests[0][0] == b"GET /x?q=a%2Fb HTTP/1.1"  # the URL as httpx encoded it


async def test_keep_alive_reuses_one_connection() -> None:
    server = Server()
    async with server, client() as c:
        for _ in range(3):
            assert (await c.post(f"{server.url}/call", json={})).json() == {"ok": True}
        assert server.connections == 1 and len(server.requests) == 3


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(answer(body=b"{}"))  # no "Connection: close": the client learns of it from the FIN
        await writer.drain()
        writer.close()

    server = Server(handle)
    async with server, client() as c:
        for _ in range(6):
            assert (await c.post(f"{server.url}/call", json={})).status_code == 200
        assert server.connections == 6


async def test_the_request_goes_out_as_httpx_built_it() -> None:
    server = Server()
    payload = orjson.dumps({"a": "é" * 5000, "b": list(range(1000))})

    async def parts() -> AsyncIterator[bytes]:
        yield b"part one,"
        yield b"part two"

    async with server, client() as c:
        await c.post(f"{server.url}/bytes", content=payload, headers=[("X-Twice", "1"), ("X-Twice", "2")])
        await c.post(f"{server.url}/stream", content=parts())
        (_, headers, body), (_, streamed_headers, streamed) = server.requests
        assert body == payload
        names = [k.lower() for k, _ in headers]
        assert [v for k, v in headers if k.lower() == b"x-twice"] == [b"1", b"2"]
        assert b"content-type" not in names  # aiohttp adds none of its own
        assert dict((k.lower(), v) for k, v in headers)[b"user-agent"].startswith(b"python-httpx/")
        assert streamed == b"part one,part two"
        assert (b"transfer-encoding", b"chunked") in [(k.lower(), v) for k, v in streamed_headers]


async def test_credentials_in_the_url_become_basic_auth() -> None:
    server = Server()
    async with server, client() as c:
        assert (await c.get(server.url.replace("http://", "http://ada:s3cret@") + "/x")).status_code == 200
        line, headers, _ = server.requests[0]
        assert line == b"GET /x HTTP/1.1"
        assert (b"Authorization", b"Basic " + base64.b64encode(b"ada:s3cret")) in headers


async def test_a_header_that_would_inject_another_is_refused() -> None:
    server = Server()
    async with server, client() as c:
        with pytest.raises(httpx.LocalProtocolError):
            await c.get(server.url, headers={"X-Note": "a\r\nX-Injected: 1"})
        assert server.requests == []


async def test_duplicate_response_headers_are_kept() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(answer(body=b"{}", headers=[("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")]))
        await writer.drain()

    server = Server(handle)
    async with server, client() as c:
        response = await c.get(server.url)
        assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]


async def test_gzip_is_decoded_once_by_httpx() -> None:
    body = b'{"text": "' + b"x" * 10_000 + b'"}'

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(answer(body=gzip.compress(body), headers=[("Content-Encoding", "gzip")]))
        await writer.drain()

    server = Server(handle)
    async with server, client() as c:
        response = await c.get(server.url)
        assert response.content == body
        assert response.num_bytes_downloaded == len(gzip.compress(body))  # the raw bytes reached httpx


async def test_a_stream_closed_early_frees_its_connection() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            if len(server.requests) == 1:  # a long body, sent slowly
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i in range(1000):
                    writer.write(b"6\r\nchunk%d\r\n" % (i % 10))
                    await writer.drain()
                    await asyncio.sleep(0.01)
            else:
                writer.write(answer(body=b"next"))
                await writer.drain()

    server = Server(handle)
    async with server, client(max_connections=1) as c:
        async with c.stream("GET", server.url) as response:
            chunks = []
            async for chunk in response.aiter_raw():
                chunks.append(chunk)
                if len(chunks) == 3:
                    break
        assert b"".join(chunks).startswith(b"chunk0")
        second = await c.get(server.url, timeout=httpx.Timeout(2))  # one connection: the first one is free
        assert second.content == b"next"
        assert server.connections == 2  # the unfinished one was closed, not reused


# Errors: nothing sent (safe to retry)


async def test_refused_is_a_connect_error() -> None:
    async with client() as c:
        with pytest.raises(httpx.ConnectError) as info:
            await c.post(f"http://127.0.0.1:{refused_port()}/call", json={})
        assert info.value.request.url.path == "/call"


async def test_an_unknown_host_is_a_connect_error() -> None:
    async with client() as c:
        with pytest.raises(httpx.ConnectError):
            await c.get("http://does-not-exist.invalid/")


async def test_a_full_pool_is_a_pool_timeout() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        await asyncio.sleep(TEST_S)  # holds the only connection

    server = Server(handle)
    async with server, client(max_connections=1) as c:
        first = asyncio.create_task(c.get(server.url))
        while not server.requests:
            await asyncio.sleep(0.01)
        with pytest.raises(httpx.PoolTimeout) as info:
            await c.get(server.url, timeout=httpx.Timeout(5, pool=0.2))
        assert info.value.request is not None
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        assert len(server.requests) == 1


async def test_a_connect_that_hangs_is_a_connect_timeout() -> None:
    with unanswered_port() as port:
        async with client() as c:
            with pytest.raises(httpx.ConnectTimeout):
                await c.get(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(5, connect=0.3))


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command for a test certificate")
async def test_https_verifies_the_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    self_signed = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
    self_signed += ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(self_signed, check=True, capture_output=True, timeout=30)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server = Server(tls=tls)
    async with server:
        url = server.url.replace("http://", "https://")
        async with client(verify=ssl.create_default_context(cafile=str(cert))) as trusting:
            assert (await trusting.get(url)).json() == {"ok": True}
        async with client() as default:  # certifi does not know this certificate: nothing was sent
            with pytest.raises(httpx.ConnectError):
                await default.get(url)
        assert len(server.requests) == 1


# Errors: the request may have arrived (never re-sent)


async def test_closed_after_the_request_is_a_protocol_error() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.close()

    server = Server(handle)
    async with server, client() as c:
        with pytest.raises(httpx.RemoteProtocolError) as info:
            await c.post(server.url, json={})
        assert info.value.request is not None and len(server.requests) == 1


async def test_reset_after_the_request_is_a_read_error() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        reset(writer)

    server = Server(handle)
    async with server, client() as c:
        with pytest.raises(httpx.TransportError) as info:
            await c.post(server.url, json={})
        assert isinstance(info.value, httpx.ReadError | httpx.RemoteProtocolError), repr(info.value)
        assert not isinstance(info.value, NOT_SENT) and info.value.request is not None


async def test_garbage_is_a_protocol_error() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    server = Server(handle)
    async with server, client() as c:
        with pytest.raises(httpx.RemoteProtocolError) as info:
            await c.get(server.url)
        assert info.value.request is not None


async def test_a_body_cut_short_is_a_protocol_error() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
        await writer.drain()

    server = Server(handle)
    async with server, client() as c:
        with pytest.raises(httpx.RemoteProtocolError) as info:
            await c.get(server.url)
        assert info.value.request is not None


async def test_broken_chunked_encoding_is_a_protocol_error() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    server = Server(handle)
    async with server, client() as c:
        with pytest.raises(httpx.RemoteProtocolError):
            await c.get(server.url)


async def test_no_answer_is_a_read_timeout() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        await asyncio.sleep(TEST_S)

    server = Server(handle)
    async with server, client() as c:
        with pytest.raises(httpx.ReadTimeout) as info:
            await c.get(server.url, timeout=httpx.Timeout(5, read=0.2))
        assert info.value.request is not None


async def test_a_body_that_stalls_is_a_read_timeout() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nthe start")
        await writer.drain()
        await asyncio.sleep(TEST_S)

    server = Server(handle)
    async with server, client() as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.get(server.url, timeout=httpx.Timeout(5, read=0.2))


async def test_cancelling_a_call_frees_its_connection() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        if len(server.requests) == 1:
            await asyncio.sleep(TEST_S)
        writer.write(answer(body=b"second"))
        await writer.drain()

    server = Server(handle)
    async with server, client(max_connections=1) as c:
        call = asyncio.create_task(c.get(server.url))
        while not server.requests:
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await c.get(server.url, timeout=httpx.Timeout(2))).content == b"second"


async def test_proxies_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server()
    async with server:
        monkeypatch.setenv("HTTP_PROXY", server.url)
        monkeypatch.setenv("NO_PROXY", "skipped.invalid")
        async with client() as c:
            assert (await c.get("http://upstream.invalid/tools")).json() == {"ok": True}
            with pytest.raises(httpx.ConnectError):
                await c.get("http://skipped.invalid/")
        assert server.requests[0][0] == b"GET http://upstream.invalid/tools HTTP/1.1"


# Through Upstream: what may have arrived is never sent twice


async def test_upstream_retries_a_refused_call_but_never_a_reset_one() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        reset(writer)

    server = Server(handle)
    async with asyncio.timeout(TEST_S), server:
        upstream = Upstream("u", UpstreamSettings(url=server.url, retries=2, backoff_s=0.01))
        assert isinstance(upstream.client._transport, AiohttpTransport)
        try:
            with pytest.raises(GatewayError) as info:
                await upstream.request("POST", "/call", json={})
            assert "the connection failed" in info.value.failure.message
            assert len(server.requests) == 1 and server.connections == 1
        finally:
            await upstream.close()
        refused = Upstream("r", UpstreamSettings(url=f"http://127.0.0.1:{refused_port()}", retries=2, backoff_s=0.01))
        try:
            with pytest.raises(GatewayError) as info:
                await refused.request("POST", "/call", json={})
            assert "cannot connect (ConnectError)" in info.value.failure.message
            assert refused.breaker.failures == 3  # 1 + 2 retries
        finally:
            await refused.close()
