"""Retry and breaker policy of gateway.upstream against a real loopback socket server."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.errors import ErrorKind, GatewayError
from gateway.upstream import CircuitBreaker, Upstream, UpstreamSettings, json_of


async def resetting_server() -> tuple[asyncio.Server, list[str], int]:
    """Reads each request, then resets the connection: the request may have arrived."""
    seen: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.split(b" ")[1].decode())
        writer.transport.abort()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, seen, server.sockets[0].getsockname()[1]


async def test_a_call_that_may_have_arrived_is_never_sent_twice() -> None:
    server, seen, port = await resetting_server()
    upstream = Upstream("u", UpstreamSettings(url=f"http://127.0.0.1:{port}", retries=3, backoff_s=0.01))
    try:
        with pytest.raises(GatewayError) as info:
            await upstream.request("POST", "/call", json={})
        assert info.value.failure.kind == ErrorKind.UPSTREAM_UNAVAILABLE
        assert seen == ["/call"]
        seen.clear()
        with pytest.raises(GatewayError):
            await upstream.request("GET", "/load", idempotent=True)
        assert seen == ["/load"] * 4  # discovery is safe to repeat: 1 + 3 retries
    finally:
        await upstream.close()
        server.close()
        await server.wait_closed()


async def test_connection_refused_is_retried_because_nothing_was_sent() -> None:
    server, _, port = await resetting_server()
    server.close()
    await server.wait_closed()  # the port is closed now: connections are refused
    upstream = Upstream("u", UpstreamSettings(url=f"http://127.0.0.1:{port}", retries=2, backoff_s=0.01))
    with pytest.raises(GatewayError) as info:
        await upstream.request("POST", "/call", json={})
    await upstream.close()
    assert "cannot connect" in info.value.failure.message
    assert upstream.breaker.failures == 3  # every attempt was made


async def test_deadline_wins_over_configured_timeouts() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(30)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    upstream = Upstream("u", UpstreamSettings(url=f"http://127.0.0.1:{port}", read_timeout_s=30))
    started = time.monotonic()
    with pytest.raises(GatewayError) as info:
        await upstream.request("POST", "/call", deadline=time.monotonic() + 0.3)
    elapsed = time.monotonic() - started
    await upstream.close()
    server.close()
    assert info.value.failure.kind == ErrorKind.DEADLINE
    assert elapsed < 5


def test_breaker_half_open_lets_one_probe_through() -> None:
    breaker = CircuitBreaker(threshold=2, cooldown=0.0)
    breaker.failure()
    assert breaker.state == "closed" and breaker.allow()
    breaker.failure()
    assert breaker.state == "half-open"  # cooldown 0: immediately probing
    assert breaker.allow() and not breaker.allow()  # one probe at a time
    breaker.failure()
    assert breaker.opened_at is not None
    breaker = CircuitBreaker(threshold=1, cooldown=3600)
    breaker.failure()
    assert breaker.state == "open" and not breaker.allow()
    breaker.success()
    assert breaker.state == "closed" and breaker.allow()


async def test_answers_that_are_not_json_open_the_circuit() -> None:
    async def html(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        page = b"<html>502 Bad Gateway</html>"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(page), page))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(html, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    upstream = Upstream("u", UpstreamSettings(url=f"http://127.0.0.1:{port}", breaker_failures=3))
    try:
        for _ in range(3):
            response = await upstream.request("POST", "/call", json={})
            with pytest.raises(GatewayError):
                json_of(upstream, response)
        assert upstream.breaker.state == "open"
        with pytest.raises(GatewayError) as info:
            await upstream.request("POST", "/call", json={})
        assert "circuit open" in info.value.failure.message
        text = Upstream("t", UpstreamSettings(url=f"http://127.0.0.1:{port}", breaker_failures=1))
        await text.request("GET", "/page", expect_json=False)  # a text endpoint: HTML is an answer
        assert text.breaker.state == "closed"
        await text.close()
    finally:
        await upstream.close()
        server.close()
