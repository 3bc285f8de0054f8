"""The MCP front, spoken to by the `mcp` SDK's client in both eras, against a real `toolplex serve`.

`mode="auto"` probes `server/discover` and lands on the stateless 2026-07-28 era; `mode="legacy"`
runs the `initialize` handshake (2025-11-25: a session, SSE streams, notifications on them).
"""

from __future__ import annotations

import contextlib
import json
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support import served_gateway

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ERAS = [pytest.param("auto", MODERN, id="auto-2026-07-28"), pytest.param("legacy", HANDSHAKE, id="legacy-2025-11-25")]
WAIT_S = 20.0  # bound on any one wait for an answer or a notification
FULL_KEY = "mcp-front-full-key"
MATH_KEY = "mcp-front-math-key"

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

BACKENDS = """
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
  - {name: text, kind: python, module: "adapters.python.toolkits.text:toolkit"}
  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}
"""
CONFIG = f"""
fronts:
  mcp:
    page_size: 2
    progress_interval_s: 0.1
    servers:
      mathonly: {{include: ["Math_*"], exclude: ["Math_Divide"]}}
  metrics: {{enabled: true}}
middleware:
  - use: gateway.metrics:Metrics
auth:
  api_keys:
    - {{name: full, key: {FULL_KEY}}}
    - {{name: math-only, key: {MATH_KEY}, tools: ["Math_*"]}}
{BACKENDS}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = write(tmp_path_factory.mktemp("mcp-front") / "gateway.yaml", CONFIG)
    with served_gateway(config) as (url, _process):
        yield url


def client(url: str, mode: str = "auto", key: str | None = FULL_KEY) -> Client:
    """The SDK's client, with the API key as a bearer token (none: no credentials)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(WAIT_S, read=WAIT_S * 3))
    return Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=WAIT_S)  # type: ignore[arg-type]


async def all_tools(mcp: Client) -> tuple[list[types.Tool], int]:
    """Every page of tools/list, and how many pages it took (bounded)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for pages in range(1, 100):
        result = await mcp.list_tools(cursor=cursor)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if cursor is None:
            return tools, pages
    raise AssertionError("tools/list never ended")


def texts(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_list_is_paginated_and_carries_schemas_and_hints(base: str, mode: str, version: str) -> None:
    async with client(f"{base}/mcp", mode) as mcp:
        assert mcp.protocol_version == version
        tools, pages = await all_tools(mcp)
        names = [tool.name for tool in tools]
        assert len(names) == len(set(names)) and pages == (len(names) + 1) // 2  # page_size 2
        assert {"Math_Add", "Math_Divide", "Demo_Sleep", "Demo_Fail"} <= set(names)
        add = next(tool for tool in tools if tool.name == "Math_Add")
        assert add.input_schema["required"] == ["a", "b"]
        sleep = next(tool for tool in tools if tool.name == "Demo_Sleep")
        assert sleep.annotations is not None and sleep.annotations.read_only_hint is True
        fail = next(tool for tool in tools if tool.name == "Demo_Fail")
        assert fail.annotations is not None and fail.annotations.read_only_hint is False
        assert fail.annotations.destructive_hint is True
        with pytest.raises(MCPError) as bad:
            await mcp.list_tools(cursor="not-a-cursor")
        assert bad.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_calls_answer_values_tool_errors_and_protocol_errors(base: str, mode: str, version: str) -> None:
    async with client(f"{base}/mcp", mode) as mcp:
        added = await mcp.call_tool("Math_Add", {"a": 2, "b": 3.5})
        assert added.is_error is False and texts(added) == "5.5"

        slept = await mcp.call_tool("Demo_Sleep", {"seconds": 0})
        assert slept.structured_content == {"slept": 0}
        assert json.loads(texts(slept)) == {"slept": 0}

        failed = await mcp.call_tool("Demo_Fail", {"message": "on purpose"})
        assert failed.is_error is True and texts(failed).startswith("on purpose")

        invalid = await mcp.call_tool("Math_Add", {"a": "two", "b": 1})
        assert invalid.is_error is True and "a:" in texts(invalid)

        with pytest.raises(MCPError) as unknown:
            await mcp.call_tool("Nope_Nothing", {})
        assert unknown.value.code == types.INVALID_PARAMS and "Nope_Nothing" in unknown.value.message


async def test_ping_in_the_handshake_era(base: str) -> None:
    async with client(f"{base}/mcp", "legacy") as mcp:
        assert isinstance(await mcp.send_ping(), types.EmptyResult)


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_progress_notifications_while_a_call_runs(base: str, mode: str, version: str) -> None:
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with client(f"{base}/mcp", mode) as mcp:
        result = await mcp.call_tool("Demo_Sleep", {"seconds": 1}, progress_callback=progress)
    assert result.structured_content == {"slept": 1}
    assert seen and seen == sorted(seen)


async def test_cancelled_notification_ends_the_dispatch(base: str) -> None:
    """The client gives up on a long call (notifications/cancelled): the gateway's call ends with it."""
    async with client(f"{base}/mcp", "legacy") as mcp:
        async with anyio.create_task_group() as group:
            group.start_soon(mcp.call_tool, "Demo_Sleep", {"seconds": 60})
            # The gateway is running the call (so the count below can tell the call ended).
            assert await calls_in_flight(base, lambda count: count == 1) == 1
            group.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
        # The session stays usable, and the gateway is not running the abandoned call any more.
        assert texts(await mcp.call_tool("Math_Add", {"a": 1, "b": 1})) == "2"
    assert await calls_in_flight(base, lambda count: count == 0) == 0


async def calls_in_flight(base: str, settled: Callable[[float], bool]) -> float:
    """The MCP front's count of calls in flight (the gateway's metrics), once `settled` says so; bounded."""
    deadline = time.monotonic() + WAIT_S
    value = -1.0
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {FULL_KEY}"}) as http:
        while time.monotonic() < deadline:
            text = (await http.get(f"{base}/metrics")).text
            prefix = 'toolplex_calls_in_flight{front="mcp"} '
            lines = [line for line in text.splitlines() if line.startswith(prefix)]
            value = float(lines[0].removeprefix(prefix)) if lines else 0.0
            if settled(value):
                return value
            await anyio.sleep(0.05)
    return value


async def test_credentials_are_required_and_permissions_apply(base: str) -> None:
    async with httpx.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        refused = await http.post(f"{base}/mcp", json=body, headers={"Accept": "application/json, text/event-stream"})
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert refused.json()["error"]["code"] == types.INVALID_REQUEST

    async with client(f"{base}/mcp", "auto", MATH_KEY) as mcp:
        names = {tool.name for tool in (await all_tools(mcp))[0]}
        assert names and all(name.startswith("Math_") for name in names)
        with pytest.raises(MCPError) as hidden:
            await mcp.call_tool("Demo_Sleep", {"seconds": 0})
        assert hidden.value.code == types.INVALID_PARAMS


async def test_a_disallowed_origin_is_refused(base: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {FULL_KEY}",
        "Origin": "http://evil.example",
        "MCP-Protocol-Version": MODERN,
    }
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{base}/mcp", json=body, headers=headers)
    assert answer.status_code == 403


async def test_header_values_with_surrounding_whitespace_are_accepted(base: str) -> None:
    """uvicorn's httptools keeps a header's surrounding spaces; the front strips them before the SDK looks."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "Math_Add", "arguments": {"a": 1, "b": 2}, "_meta": meta},
    }
    payload = json.dumps(body).encode()
    host, port = base.removeprefix("http://").split(":")
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {FULL_KEY}\r\n"
        f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method:  tools/call \r\nMcp-Name:  Math_Add \r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with anyio.fail_after(WAIT_S):
        stream = await anyio.connect_tcp(host, int(port))
        async with stream:
            await stream.send(head + payload)
            answer = b""
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                while True:
                    answer += await stream.receive()
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 200 " in status_line, answer[:300]
    assert b'"text":"3"' in rest


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_a_virtual_server_serves_only_its_tools(base: str, mode: str, version: str) -> None:
    async with client(f"{base}/mcp/mathonly", mode) as mcp:
        names = {tool.name for tool in (await all_tools(mcp))[0]}
        assert names and all(name.startswith("Math_") for name in names) and "Math_Divide" not in names
        assert texts(await mcp.call_tool("Math_Add", {"a": 1, "b": 2})) == "3"
        with pytest.raises(MCPError):
            await mcp.call_tool("Math_Divide", {"a": 1, "b": 2})
        with pytest.raises(MCPError):
            await mcp.call_tool("Demo_Sleep", {"seconds": 0})


async def test_an_unknown_session_gets_404(base: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {FULL_KEY}",
        "MCP-Protocol-Version": HANDSHAKE,
        "Mcp-Session-Id": "0123456789abcdef0123456789abcdef",
    }
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{base}/mcp", json=body, headers=headers)
    assert answer.status_code == 404


async def test_a_session_of_one_key_is_not_another_keys(base: str) -> None:
    """A session id is no credential: another caller presenting it is told it does not exist."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(headers=accept) as http:
        opened = await http.post(f"{base}/mcp", json=init, headers={"Authorization": f"Bearer {FULL_KEY}"})
        session_id = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        common = {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id}
        other = await http.post(f"{base}/mcp", json=listing, headers={**common, "Authorization": f"Bearer {MATH_KEY}"})
        own = await http.post(f"{base}/mcp", json=listing, headers={**common, "Authorization": f"Bearer {FULL_KEY}"})
        closed = await http.delete(f"{base}/mcp", headers={**common, "Authorization": f"Bearer {FULL_KEY}"})
        after = await http.post(f"{base}/mcp", json=listing, headers={**common, "Authorization": f"Bearer {FULL_KEY}"})
    assert opened.status_code == 200
    assert other.status_code == 404
    assert own.status_code == 200 and "Demo_Fail" in own.text
    assert closed.status_code == 200
    assert after.status_code == 404
