"""Limits: concurrent calls (whole gateway, per principal), JSON nesting depth, request head size, keep-alive.

Concurrency and depth go through every front of an in-process app; the head
size and the keep-alive timeout are properties of the HTTP server, so they are
checked against a real `toolplex serve` over a socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.config import parse_config
from gateway.errors import ErrorKind, GatewayError
from gateway.http import parse_json
from gateway.limits import CallLimiter
from gateway.serving import uvicorn_config
from tests.support import asgi_client, gateway_process

DEMO = """
  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
"""
KEYS = {"a": "key-of-a-0001", "b": "key-of-b-0002", "c": "key-of-c-0003"}


# ---- the limiter itself ----


def test_the_limiter_admits_up_to_each_limit_and_frees_slots() -> None:
    limiter = CallLimiter(max_total=3, max_per_principal=2)
    with contextlib.ExitStack() as held:
        held.enter_context(limiter.slot("a"))
        held.enter_context(limiter.slot("a"))
        with pytest.raises(GatewayError) as raised, limiter.slot("a"):
            pass
        failure = raised.value.failure
        assert failure.kind is ErrorKind.RATE_LIMITED and failure.can_retry and failure.retry_after_ms == 1000
        assert "limit of 2 concurrent calls" in failure.message
        held.enter_context(limiter.slot("b"))
        with pytest.raises(GatewayError, match="limit of 3 concurrent calls"), limiter.slot("c"):
            pass
        assert (limiter.running, limiter.running_for("a"), limiter.running_for("b")) == (3, 2, 1)
    assert limiter.running == 0 and limiter._by_principal == {}  # nothing kept for idle principals
    with limiter.slot("c"):
        assert limiter.running_for("c") == 1


def test_a_failing_call_gives_its_slot_back() -> None:
    limiter = CallLimiter(max_total=1, max_per_principal=1)
    with pytest.raises(ValueError), limiter.slot(""):
        raise ValueError("the call failed")
    with limiter.slot(""):
        assert limiter.running == 1


def test_the_defaults_are_in_the_configuration() -> None:
    limits = parse_config("backends: []\n").section("limits")
    assert (limits["max_concurrent_calls"], limits["max_concurrent_calls_per_principal"]) == (256, 64)
    assert limits["max_json_depth"] == 64
    server = parse_config("backends: []\n").section("server")
    assert (server["keepalive_timeout_s"], server["max_header_bytes"], server["shutdown_grace_s"]) == (5, 65536, 30)


# ---- concurrency through the fronts ----


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll `condition` on the event loop, bounded."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def opentool(tool: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": tool, "params": params, "id": "1"}


@contextlib.asynccontextmanager
async def long_calls(client: httpx.AsyncClient, keys: list[str | None]) -> AsyncIterator[None]:
    """Start one 30 s Demo_Sleep per key and hold them running; cancelled (and their slots freed) on exit."""
    limiter = client.app.state.gateway.limiter  # type: ignore[attr-defined]
    before = limiter.running
    tasks = []
    for key in keys:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        body = opentool("Demo_Sleep", {"seconds": 30})
        tasks.append(asyncio.create_task(client.post("/opentool/call", json=body, headers=headers)))
        started = len(tasks)
        await until(lambda: limiter.running == before + started)  # noqa: B023 (awaited here, in this iteration)
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await until(lambda: limiter.running == before)


async def test_each_principal_and_the_whole_gateway_have_a_limit() -> None:
    keys = "\n".join(f"    - {{name: {name}, key: {key}}}" for name, key in KEYS.items())
    config = f"""
limits: {{max_concurrent_calls: 2, max_concurrent_calls_per_principal: 1}}
auth:
  api_keys:
{keys}
backends:{DEMO}"""
    async with asgi_client(config) as client:

        async def add(name: str) -> httpx.Response:
            headers = {"Authorization": f"Bearer {KEYS[name]}"}
            return await client.post("/opentool/call", json=opentool("Math_Add", {"a": 1, "b": 2}), headers=headers)

        async with long_calls(client, [KEYS["a"]]):
            refused = await add("a")  # a's one slot is taken
            assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
            assert refused.json()["error"]["code"] == 429
            assert "This caller is running its limit of 1" in refused.json()["error"]["message"]
            assert (await add("b")).json()["result"] == {"result": 3}  # another principal is not held up

            async with long_calls(client, [KEYS["b"]]):
                refused = await add("c")  # the gateway's two slots are taken
                assert refused.status_code == 429
                assert "The gateway is running its limit of 2" in refused.json()["error"]["message"]

        assert (await add("a")).json()["result"] == {"result": 3}  # every slot was given back


async def test_every_front_answers_its_busy_error_at_once() -> None:
    config = f"""
limits: {{max_concurrent_calls: 1}}
backends:{DEMO}"""
    async with asgi_client(config) as client, long_calls(client, [None]):
        answer = await client.post("/opentool/call", json=opentool("Math_Add", {"a": 1, "b": 2}))
        assert answer.status_code == 429 and answer.headers["Retry-After"] == "1"
        assert answer.json()["error"]["code"] == 429

        answer = await client.post("/tools/call", json={"tool_id": "Math.Add", "input": {"a": 1, "b": 2}})
        assert answer.status_code == 429 and answer.headers["Retry-After"] == "1"
        assert answer.json()["retry_after_ms"] == 1000 and "limit of 1" in answer.json()["message"]

        await client.post("/get_cookie")
        answer = await client.post("/execute_tool", json={"tool_name": "Math_Add", "arguments": {"a": 1, "b": 2}})
        assert answer.status_code == 429 and answer.headers["Retry-After"] == "1"

        rpc = {
            "jsonrpc": "2.0",
            "method": "tool.execute",
            "params": {"tool": "Math_Add", "parameters": {}},
            "id": 1,
        }
        error = (await client.post("/rpc", json=rpc)).json()["error"]
        assert error["code"] == -32003 and error["data"]["retryAfterMs"] == 1000


# ---- JSON nesting depth ----


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


@pytest.mark.parametrize("depth", [65, 1000, 1025, 5000])
def test_parse_json_refuses_documents_nested_too_deep(depth: int) -> None:
    with pytest.raises(GatewayError) as raised:
        parse_json(nested(depth).encode())
    assert raised.value.failure.kind is ErrorKind.MALFORMED
    assert raised.value.failure.message == (
        "Request body nests arrays/objects more than 64 levels deep (limits.max_json_depth)"
    )


def test_parse_json_accepts_the_limit_and_counts_objects_too() -> None:
    assert parse_json(nested(64).encode()) is not None
    deep_object = '{"a":' * 9 + "1" + "}" * 9
    assert parse_json(deep_object.encode(), max_depth=9)["a"]["a"]
    with pytest.raises(GatewayError, match="more than 8 levels"):
        parse_json(deep_object.encode(), max_depth=8)
    assert parse_json(b'"just a string"', max_depth=1) == "just a string"


FRONT_BODIES = {  # DEEP stands for the nested value; the document adds `levels` levels around it
    "/opentool/call": ('{"jsonrpc":"2.0","method":"Math_Add","params":{"a":1,"b":DEEP},"id":"1"}', 2),
    "/tools/call": ('{"tool_id":"Math.Add","input":{"a":1,"b":DEEP}}', 2),
    "/execute_tool": ('{"tool_name":"Math_Add","arguments":{"a":1,"b":DEEP}}', 2),
    "/get_json_schema_for_tools": ('{"tools":DEEP}', 1),
    "/rpc": (
        '{"jsonrpc":"2.0","id":1,"method":"tool.execute","params":{"tool":"Math_Add","parameters":{"a":1,"b":DEEP}}}',
        3,
    ),
}


def front_requests(depth: int) -> dict[str, str]:
    """A body per front nested `depth` levels deep in all."""
    bodies = {}
    for path, (template, levels) in FRONT_BODIES.items():
        leaf = '"Math_Add"' if path == "/get_json_schema_for_tools" else "1"
        bodies[path] = template.replace("DEEP", nested(depth - levels, leaf))
    return bodies


def invalid_request(path: str, answer: httpx.Response) -> str | None:
    """The front's invalid-request error message, or None when the request was not refused as such."""
    body = answer.json()
    if path == "/opentool/call" and answer.status_code == 400:
        return str(body["error"]["message"])
    if path == "/tools/call" and answer.status_code == 400:
        return str(body["message"])
    if path in ("/execute_tool", "/get_json_schema_for_tools") and answer.status_code == 422:
        return str(body["detail"][0]["msg"])
    if path == "/rpc" and answer.status_code == 200 and body.get("error", {}).get("code") == -32700:
        return str(body["error"]["message"])
    return None


@pytest.mark.parametrize("depth", [65, 1000])
async def test_every_front_refuses_bodies_nested_too_deep(depth: int) -> None:
    async with asgi_client(f"backends:{DEMO}") as client:
        await client.post("/get_cookie")
        for path, body in front_requests(depth).items():
            answer = await client.post(path, content=body, headers={"content-type": "application/json"})
            message = invalid_request(path, answer)
            assert message is not None, (path, answer.status_code, answer.text[:300])
            assert "more than 64 levels deep" in message, (path, message)


async def test_a_body_at_the_depth_limit_is_accepted_by_every_front() -> None:
    async with asgi_client(f"backends:{DEMO}") as client:
        await client.post("/get_cookie")
        for path, body in front_requests(64).items():
            answer = await client.post(path, content=body, headers={"content-type": "application/json"})
            assert answer.status_code < 500, (path, answer.text[:300])
            assert "levels deep" not in answer.text, path  # parsed; refused later for what it says, if at all


async def test_the_fronts_use_the_configured_depth() -> None:
    async with asgi_client(f"limits: {{max_json_depth: 8}}\nbackends:{DEMO}") as client:
        await client.post("/get_cookie")
        for path, body in front_requests(9).items():
            answer = await client.post(path, content=body, headers={"content-type": "application/json"})
            message = invalid_request(path, answer)
            assert message is not None and "more than 8 levels deep" in message, (path, answer.text[:300])


# ---- the HTTP server: request head size, keep-alive ----


def test_server_settings_reach_uvicorn() -> None:
    server = parse_config("server: {keepalive_timeout_s: 2.5, max_header_bytes: 4096, shutdown_grace_s: 3}\n")
    settings = uvicorn_config(None, server.settings.server, "127.0.0.1", 0)
    assert settings.timeout_keep_alive == 2.5
    assert settings.h11_max_incomplete_event_size == 4096
    assert settings.timeout_graceful_shutdown >= 3  # uvicorn waits longer than the gateway's grace
    assert getattr(settings.http, "max_head", None) == 4096  # the bounded httptools protocol


def raw_request(port: int, head: bytes, chunk: int = 65536) -> bytes:
    """Send `head` (in chunks, as a slow client would) and read the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the server may stop reading early
            for start in range(0, len(head), chunk):
                sock.sendall(head[start : start + chunk])
        received = b""
        with contextlib.suppress(ConnectionResetError):
            while piece := sock.recv(65536):
                received += piece
        return received


def head_with(header_bytes: int) -> bytes:
    return (
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: " + b"a" * header_bytes + b"\r\n\r\n"
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    config = Path(tmp_path_factory.mktemp("limits")) / "gateway.yaml"
    config.write_text("server: {max_header_bytes: 16384, keepalive_timeout_s: 1}\nbackends: []\n")
    with gateway_process(config) as base:
        yield int(base.rsplit(":", 1)[1])


def test_a_request_head_over_the_limit_gets_431(served: int) -> None:
    answer = raw_request(served, head_with(20_000))
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"larger than the limit of 16384 bytes" in answer


def test_a_huge_header_is_refused_before_it_is_all_sent(served: int) -> None:
    answer = raw_request(served, head_with(8 * 1024 * 1024))  # never completes a head the server would keep
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def test_a_request_head_within_the_limit_is_served(served: int) -> None:
    answer = raw_request(served, head_with(12_000))
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_an_idle_keep_alive_connection_is_closed_by_the_server(served: int) -> None:
    with socket.create_connection(("127.0.0.1", served), timeout=15) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # keep-alive (HTTP/1.1 default)
        received = b""
        while b'"ok"' not in received:
            piece = sock.recv(65536)
            assert piece, "closed before answering"
            received += piece
        assert received.startswith(b"HTTP/1.1 200 ")
        assert sock.recv(65536) == b""  # closed by the server after the idle timeout, not by the 15 s read timeout
