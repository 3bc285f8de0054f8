"""The MCP front's long-lived work (the SDK's session manager, its sessions, the catalog watch) ends with it; a stop
answers the session requests in flight and ends the session streams that never end by themselves."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from gateway.app import create_app
from gateway.config import parse_config
from tests.support import served_gateway

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

CONFIG = """
fronts:
  mcp: {}
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
"""
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def front_tasks() -> set[asyncio.Task[object]]:
    return {task for task in asyncio.all_tasks() if task.get_name().startswith("mcp-sessions")}


async def test_closing_the_gateway_ends_the_session_manager_and_its_sessions() -> None:
    app = create_app(parse_config(textwrap.dedent(CONFIG), "mcp.yaml", env=dict(os.environ)))
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            opened = await http.post("/mcp", json=INITIALIZE, headers={"Accept": ACCEPT})
            assert opened.status_code == 200 and opened.headers.get("mcp-session-id")
        running = front_tasks()
        assert len(running) == 1 and not any(task.done() for task in running)
    assert all(task.done() for task in running)  # ended by the gateway's close, not left to the loop's end
    assert not front_tasks()


# ---- a real `toolplex serve` stopped with handshake-era requests and streams open ----

SERVED = """
logging: {level: info}
fronts:
  mcp: {}
backends:
  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}
"""
HANDSHAKE = "2025-11-25"
CALL_S = 2.0  # a call still running well after the stop began


def _session(client: httpx.Client) -> dict[str, str]:
    """Open a handshake-era session; the headers its requests carry."""
    opened = client.post("/mcp", json=INITIALIZE, headers={"Accept": ACCEPT})
    assert opened.status_code == 200, opened.text
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    initialized = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert initialized.status_code == 202, initialized.text
    return headers


def test_a_session_call_in_flight_when_the_gateway_stops_gets_its_answer(tmp_path: Path) -> None:
    """The call's answer is an SSE stream the SDK opens before it runs the call: the stop lets it finish (within
    the grace) and end, rather than cutting the stream when the server's exit begins."""
    config = tmp_path / "gateway.yaml"
    config.write_text(SERVED)
    with served_gateway(config) as (base, process), httpx.Client(base_url=base, timeout=30) as client:
        headers = _session(client)
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "Demo_Sleep", "arguments": {"seconds": CALL_S}},
        }
        with client.stream("POST", "/mcp", json=body, headers=headers) as answer:
            assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
            events = answer.iter_lines()
            assert next(events).startswith("id: ")  # the stream's priming event: the call is on its way
            process.send_signal(signal.SIGTERM)
            rest = "\n".join(events)  # raises on a stream cut short
        result = json.loads(next(line for line in rest.splitlines() if line.startswith("data: {"))[6:])
        assert result["result"]["structuredContent"] == {"slept": CALL_S}, result
        assert process.wait(timeout=30) == 0


def test_an_open_session_stream_ends_cleanly_when_the_gateway_stops(tmp_path: Path) -> None:
    """A session's GET stream (server-sent notifications) never ends by itself: the stop ends it, as a whole
    chunked answer, so its client opens it again elsewhere; it does not hold the stop for the grace."""
    config = tmp_path / "gateway.yaml"
    config.write_text(SERVED)
    with served_gateway(config) as (base, process), httpx.Client(base_url=base, timeout=30) as client:
        headers = _session(client)
        with client.stream("GET", "/mcp", headers=headers) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            stopped = time.monotonic()
            process.send_signal(signal.SIGTERM)
            assert b"".join(stream.iter_raw()) == b""  # ended, not cut (a cut raises RemoteProtocolError)
        assert process.wait(timeout=30) == 0
        assert time.monotonic() - stopped < 10  # not the grace (30 s) and the answer margin
