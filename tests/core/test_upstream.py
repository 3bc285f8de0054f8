"""Retry and breaker policy of gateway.upstream against a real loopback socket server."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from gateway.errors import ErrorKind, GatewayError
from gateway.upstream import CircuitBreaker, Upstream, UpstreamSettings, failure_for_status, json_of


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


# ---- helpers for the breaker, deadline and answer-bound tests below ----

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """A raw HTTP/1.1 server on a loopback port; yields its base URL; closed (handlers cancelled) after."""
    tasks: set[asyncio.Task[None]] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a client gone, or the server closing (we cancel the handlers): ends quietly
        finally:
            tasks.discard(task)
            writer.close()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def answer(status: str, body: bytes, content_type: str) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def fixed(status: str, body: bytes, content_type: str) -> Handler:
    """Answers every request the same way (keep-alive)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lengths = [ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")]
            length = int(lengths[0]) if lengths else 0
            if length:
                await reader.readexactly(length)
            writer.write(answer(status, body, content_type))
            await writer.drain()

    return handle


def hanging(arrived: asyncio.Event | None = None) -> Handler:
    """Reads the request, then never answers."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if arrived is not None:
            arrived.set()
        await asyncio.Event().wait()

    return handle


class FakeClock:
    """The breaker's clock, moved by the test instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def upstream_at(url: str, **settings: Any) -> Upstream:
    return Upstream("u", UpstreamSettings(url=url, retries=0, **settings))


# ---- 10.5: timeouts count, the half-open probe can never stick ----


async def test_a_call_cancelled_at_its_deadline_counts_against_the_breaker() -> None:
    """The dispatcher's own timeout may cancel the request before the request's timeout fires."""
    loop = asyncio.get_running_loop()
    async with serving(hanging()) as url:
        upstream = upstream_at(url, breaker_failures=3)
        try:
            for _ in range(3):
                deadline = time.monotonic() + 0.2
                task = asyncio.ensure_future(upstream.request("POST", "/call", json={}, deadline=deadline))
                loop.call_at(loop.time() + 0.199, task.cancel)  # as the dispatcher does, just before ours
                with pytest.raises((asyncio.CancelledError, GatewayError)):
                    await task
            assert upstream.breaker.failures_total == 3
            assert upstream.breaker.state == "open"
            with pytest.raises(GatewayError) as info:
                await upstream.request("POST", "/call", json={}, deadline=time.monotonic() + 5)
            assert "circuit open" in info.value.failure.message
        finally:
            await upstream.close()


async def test_a_hung_upstream_opens_the_breaker_under_a_dispatcher_like_timeout() -> None:
    async with serving(hanging()) as url:
        upstream = upstream_at(url, breaker_failures=4)
        try:
            for _ in range(4):
                deadline = time.monotonic() + 0.15
                with pytest.raises((TimeoutError, GatewayError)):
                    async with asyncio.timeout(0.15):  # entered after the deadline was set, like Dispatcher._run
                        await upstream.request("POST", "/call", json={}, deadline=deadline)
            assert upstream.breaker.failures_total == 4  # each call counted exactly once
            assert upstream.breaker.state == "open"
        finally:
            await upstream.close()


async def test_a_cancelled_probe_frees_the_half_open_slot() -> None:
    arrived = asyncio.Event()
    clock = FakeClock()
    async with serving(hanging(arrived)) as url:
        upstream = upstream_at(url)
        upstream.breaker = CircuitBreaker(threshold=1, cooldown=30, clock=clock)
        try:
            upstream.breaker.failure()
            assert upstream.breaker.state == "open"
            clock.now += 31
            assert upstream.breaker.state == "half-open"
            probe = asyncio.ensure_future(upstream.request("POST", "/call", deadline=time.monotonic() + 60))
            await asyncio.wait_for(arrived.wait(), 10)
            assert upstream.breaker.probing and not upstream.breaker.allow()  # one probe at a time
            probe.cancel()  # its caller went away: not a verdict on the upstream
            with pytest.raises(asyncio.CancelledError):
                await probe
            assert upstream.breaker.state == "half-open"
            assert upstream.breaker.failures_total == 1
            assert upstream.breaker.allow()  # the next caller probes
        finally:
            await upstream.close()


async def test_a_probe_that_times_out_reopens_the_breaker() -> None:
    clock = FakeClock()
    async with serving(hanging()) as url:
        upstream = upstream_at(url)
        upstream.breaker = CircuitBreaker(threshold=1, cooldown=30, clock=clock)
        try:
            upstream.breaker.failure()
            clock.now += 31
            with pytest.raises(GatewayError) as info:
                await upstream.request("POST", "/call", deadline=time.monotonic() + 0.2)
            assert info.value.failure.kind == ErrorKind.DEADLINE
            assert upstream.breaker.state == "open" and upstream.breaker.opened_at == clock.now
            clock.now += 31
            assert upstream.breaker.allow()  # a new cool-down, then a new probe
        finally:
            await upstream.close()


async def test_a_probe_that_raises_frees_the_half_open_slot() -> None:
    clock = FakeClock()
    upstream = upstream_at("http://127.0.0.1:9")
    upstream.breaker = CircuitBreaker(threshold=1, cooldown=30, clock=clock)
    try:
        upstream.breaker.failure()
        clock.now += 31
        with pytest.raises(TypeError):  # a body that cannot be encoded: nothing was learnt about the upstream
            await upstream.request("POST", "/call", json={"x": object()})
        assert upstream.breaker.state == "half-open" and upstream.breaker.allow()
    finally:
        await upstream.close()


async def test_an_open_breaker_says_when_to_retry() -> None:
    clock = FakeClock()
    upstream = upstream_at("http://127.0.0.1:9")
    upstream.breaker = CircuitBreaker(threshold=1, cooldown=30, clock=clock)
    try:
        upstream.breaker.failure()
        clock.now += 10
        with pytest.raises(GatewayError) as info:
            await upstream.request("POST", "/call", json={})
        assert "circuit open" in info.value.failure.message
        assert info.value.failure.retry_after_ms == 20_000  # the rest of the cool-down
    finally:
        await upstream.close()


def test_a_leaked_probe_permit_lapses_after_its_lease() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(threshold=1, cooldown=10, clock=clock)
    breaker.failure()
    clock.now += 10
    leaked = breaker.acquire(lease=5)
    assert leaked is not None and leaked.probe
    assert breaker.acquire(lease=5) is None
    clock.now += 5
    assert breaker.acquire(lease=5) is not None  # never stuck open, even if a holder never reports
    breaker.release(leaked)  # a stale permit frees nothing
    assert breaker.probing


async def test_a_successful_probe_closes_the_breaker() -> None:
    clock = FakeClock()
    async with serving(fixed("200 OK", b'{"ok": true}', "application/json")) as url:
        upstream = upstream_at(url)
        upstream.breaker = CircuitBreaker(threshold=1, cooldown=30, clock=clock)
        try:
            upstream.breaker.failure()
            clock.now += 31
            assert (await upstream.request("POST", "/call", json={})).json() == {"ok": True}
            assert upstream.breaker.state == "closed" and upstream.breaker.opened_total == 1
        finally:
            await upstream.close()


async def test_discovery_goes_through_an_open_breaker_and_its_success_closes_it() -> None:
    """Otherwise a recovered upstream stays shut out until a call happens to probe it after the cool-down."""
    clock = FakeClock()
    async with serving(fixed("200 OK", b'{"ok": true}', "application/json")) as url:
        upstream = upstream_at(url)
        upstream.breaker = CircuitBreaker(threshold=1, cooldown=30, clock=clock)
        try:
            upstream.breaker.failure()
            with pytest.raises(GatewayError, match="circuit open"):
                await upstream.request("POST", "/call", json={})  # a call is refused while open
            assert (await upstream.request("GET", "/load", idempotent=True)).json() == {"ok": True}
            assert upstream.breaker.state == "closed"
            assert (await upstream.request("POST", "/call", json={})).json() == {"ok": True}
        finally:
            await upstream.close()


# ---- 10.5 / 11.3: only upstream faults count ----


async def test_downloads_and_other_non_json_answers_never_count() -> None:
    data = bytes(range(256)) * 8
    async with serving(fixed("200 OK", data, "application/octet-stream")) as url:
        upstream = upstream_at(url, breaker_failures=1)
        try:
            for _ in range(5):  # as the ToolServerNode download passthrough asks: default arguments
                response = await upstream.request("POST", "/download_file", json={"file_path": "a.bin"})
                assert response.content == data
            assert upstream.breaker.state == "closed" and upstream.breaker.failures_total == 0
        finally:
            await upstream.close()


async def test_4xx_answers_never_count_whatever_their_body() -> None:
    page = b"<html><body>404 Not Found</body></html>"
    async with serving(fixed("404 Not Found", page, "text/html")) as url:
        upstream = upstream_at(url, breaker_failures=1)
        try:
            for _ in range(3):
                response = await upstream.request("POST", "/call", json={})
                with pytest.raises(GatewayError):
                    json_of(upstream, response)  # the adapter wanted JSON, but a 4xx page is no fault
            assert upstream.breaker.state == "closed"
        finally:
            await upstream.close()


@pytest.mark.parametrize(
    ("status", "content_type", "counts"),
    [
        ("500 Internal Server Error", "application/json", False),  # a tool failing (ToolServerNode, OpenTool)
        ("501 Not Implemented", "application/json", False),  # a protocol's "not implemented"
        ("500 Internal Server Error", "text/html", True),  # the server itself crashed
        ("502 Bad Gateway", "application/json", True),
        ("503 Service Unavailable", "application/json", True),
        ("504 Gateway Timeout", "text/plain", True),
    ],
)
async def test_which_5xx_answers_count(status: str, content_type: str, counts: bool) -> None:
    async with serving(fixed(status, b'{"detail": "x"}', content_type)) as url:
        upstream = upstream_at(url, breaker_failures=1)
        try:
            await upstream.request("POST", "/execute_tool", json={})
            assert upstream.breaker.failures_total == (1 if counts else 0)
        finally:
            await upstream.close()


async def test_malformed_answers_reported_by_the_adapter_count_once_and_reach_the_threshold() -> None:
    async with serving(fixed("200 OK", b'{"unrelated": true}', "application/json")) as url:
        upstream = upstream_at(url, breaker_failures=3)
        try:
            for _ in range(3):
                response = await upstream.request("POST", "/call", json={})
                upstream.protocol_fault("not a JSON-RPC answer")  # without the response: this task's last answer
                upstream.protocol_fault("reported twice", response)  # the same answer counts once
            assert upstream.breaker.failures_total == 3
            assert upstream.breaker.state == "open"  # each answer's provisional success was overruled
        finally:
            await upstream.close()


# ---- 11.4: the call's deadline is the only clock ----


async def test_a_call_reads_until_its_deadline_not_the_read_timeout() -> None:
    async def late(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(1.0)
        writer.write(answer("200 OK", b'{"late": true}', "application/json"))
        await writer.drain()

    async with serving(late) as url:
        upstream = upstream_at(url, read_timeout_s=0.3, total_timeout_s=0.5)
        try:
            response = await upstream.request("POST", "/call", deadline=time.monotonic() + 3)
            assert response.json() == {"late": True}
            with pytest.raises(GatewayError) as info:  # outside a call (discovery) the read timeout holds
                await upstream.request("GET", "/load", idempotent=True)
            assert info.value.failure.kind == ErrorKind.UPSTREAM_UNAVAILABLE
        finally:
            await upstream.close()


# ---- 10.4: answers are bounded ----


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts the body bytes that actually came off the socket."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bytes_read = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=CountedStream(response.stream, self),  # type: ignore[arg-type]
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class CountedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, owner: CountingTransport) -> None:
        self.inner = inner
        self.owner = owner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.owner.bytes_read += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def endless(content_type: str = "application/json", piece: bytes = b"x" * 65536, total: int = 64 << 20) -> Handler:
    """A chunked body of up to `total` bytes, without a Content-Length."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        for _ in range(total // len(piece)):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return handle


LIMIT = 256 * 1024


async def test_an_oversized_answer_stops_at_the_limit() -> None:
    counting = CountingTransport()
    async with serving(endless()) as url:
        upstream = Upstream("big", UpstreamSettings(url=url, retries=0, max_response_bytes=LIMIT), transport=counting)
        try:
            with pytest.raises(GatewayError) as info:
                await upstream.request("POST", "/call", json={}, deadline=time.monotonic() + 20)
        finally:
            await upstream.close()
    failure = info.value.failure
    assert failure.kind == ErrorKind.UPSTREAM_UNAVAILABLE
    assert failure.message == f"Upstream 'big' answered more than {LIMIT} bytes (limits.max_upstream_response_bytes)"
    assert LIMIT < counting.bytes_read <= LIMIT + 2 * 65536  # one chunk past the limit at most, of 64 MiB sent
    assert failure.details["bytes_read"] <= LIMIT + 2 * 65536
    assert upstream.breaker.failures_total == 0  # too much is not an upstream fault


async def test_a_declared_oversized_answer_is_refused_before_reading() -> None:
    async def declared(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{")
        await writer.drain()
        await asyncio.Event().wait()

    counting = CountingTransport()
    async with serving(declared) as url:
        upstream = Upstream("big", UpstreamSettings(url=url, retries=0, max_response_bytes=LIMIT), transport=counting)
        try:
            with pytest.raises(GatewayError) as info:
                await upstream.request("GET", "/x", deadline=time.monotonic() + 20)
        finally:
            await upstream.close()
    assert "(limits.max_upstream_response_bytes)" in info.value.failure.message
    assert counting.bytes_read == 0


async def test_streamed_events_are_bounded_each_not_in_total() -> None:
    event = b"event: data\ndata: " + b"y" * 1000 + b"\n\n"
    async with serving(endless("text/event-stream", event, total=len(event) * 400)) as url:
        upstream = upstream_at(url, max_response_bytes=8 * 1024)
        try:
            async with upstream.stream("POST", "/streamCall", deadline=time.monotonic() + 20) as response:
                lines = [line async for line in response.aiter_lines()]
        finally:
            await upstream.close()
    assert sum(1 for line in lines if line.startswith("data: ")) == 400  # 400 KB in all, 1 KB each: fine

    async with serving(endless("text/event-stream", b"data: " + b"z" * 4090 + b"\n")) as url:  # one endless event
        upstream = upstream_at(url, max_response_bytes=64 * 1024)
        try:
            with pytest.raises(GatewayError) as info:
                async with upstream.stream("POST", "/streamCall", deadline=time.monotonic() + 20) as response:
                    async for _line in response.aiter_lines():
                        pass
        finally:
            await upstream.close()
    assert "(limits.max_upstream_response_bytes)" in info.value.failure.message


async def test_a_streamed_body_that_is_no_event_stream_is_bounded_whole() -> None:
    paragraphs = b'{"text": "a"}\n\n' * 256  # blank lines, but no event stream: the whole body counts
    async with serving(endless("application/json", paragraphs)) as url:
        upstream = upstream_at(url, max_response_bytes=64 * 1024)
        try:
            with pytest.raises(GatewayError) as info:
                async with upstream.stream("POST", "/streamCall", deadline=time.monotonic() + 20) as response:
                    await response.aread()
        finally:
            await upstream.close()
    assert "(limits.max_upstream_response_bytes)" in info.value.failure.message


# ---- files: answers opened, their bodies passed on as they arrive (issue 26, item 4) ----

FILE_LIMIT = (1 << 20, "limits.max_upload_bytes")


async def test_an_opened_answer_is_bounded_by_its_own_limit_not_the_answer_limit() -> None:
    async with serving(endless("application/octet-stream", total=4 * LIMIT)) as url:
        upstream = upstream_at(url, max_response_bytes=LIMIT)
        try:
            response = await upstream.open("POST", "/download_file", limit=FILE_LIMIT, deadline=time.monotonic() + 20)
            assert not response.is_closed  # handed over with its body unread
            assert len(b"".join([chunk async for chunk in response.aiter_bytes()])) == 4 * LIMIT
            assert response.is_closed  # read to its end
        finally:
            await upstream.close()
    async with serving(endless("application/octet-stream", total=4 * FILE_LIMIT[0])) as url:
        upstream = upstream_at(url, max_response_bytes=LIMIT)
        try:
            response = await upstream.open("POST", "/download_file", limit=FILE_LIMIT, deadline=time.monotonic() + 20)
            read = 0
            with pytest.raises(GatewayError) as info:
                async for chunk in response.aiter_bytes():
                    read += len(chunk)
            await response.aclose()
        finally:
            await upstream.close()
    assert info.value.failure.message == f"Upstream 'u' answered more than {1 << 20} bytes (limits.max_upload_bytes)"
    assert read <= FILE_LIMIT[0] and upstream.breaker.failures_total == 0  # too much is no fault


async def test_a_body_that_stalls_past_the_deadline_is_a_deadline_and_one_fault() -> None:
    async def stalls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"z" * 10)
        await writer.drain()
        await asyncio.Event().wait()

    async with serving(stalls) as url:
        upstream = upstream_at(url, read_timeout_s=30)
        try:
            response = await upstream.open("POST", "/download_file", limit=FILE_LIMIT, deadline=time.monotonic() + 0.5)
            with pytest.raises(GatewayError) as info:
                await response.aread()
            await response.aclose()
        finally:
            await upstream.close()
    assert info.value.failure.kind == ErrorKind.DEADLINE
    assert upstream.breaker.failures == 1  # the head's success overruled, counted once


async def test_a_reader_that_stops_early_says_nothing_about_the_upstream() -> None:
    async with serving(endless("application/octet-stream")) as url:
        upstream = upstream_at(url, breaker_failures=1)
        try:
            for _ in range(3):  # the client went away each time: the answer is closed, nothing counted
                response = await upstream.open(
                    "POST", "/download_file", limit=FILE_LIMIT, deadline=time.monotonic() + 20
                )
                async for _chunk in response.aiter_bytes():
                    break
                await response.aclose()
            assert upstream.breaker.state == "closed" and upstream.breaker.failures_total == 0
        finally:
            await upstream.close()


def test_an_upstream_401_is_the_clients_only_when_its_credentials_were_sent() -> None:
    """With the gateway's own credentials no client can fix a 401: it is the operator's (upstream unavailable)."""
    own = failure_for_status("up", 401, {"error": "bad key"}, {})
    forwarded = failure_for_status("up", 401, "bad key", {}, client_credentials=True)
    assert own is not None and own.kind is ErrorKind.UPSTREAM_UNAVAILABLE
    assert '{"error":"bad key"}' in own.message  # an object is shown as JSON, never as a Python repr
    assert forwarded is not None and forwarded.kind is ErrorKind.UNAUTHENTICATED
    limited = failure_for_status("up", 429, "slow down", {"retry-after": "3"})
    assert limited is not None and limited.kind is ErrorKind.RATE_LIMITED and limited.retry_after_ms == 3000
    assert failure_for_status("up", 204, "", {}) is None
