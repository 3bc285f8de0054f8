"""The MCP front's long-lived work (the SDK's session manager, its sessions, the catalog watch) ends with it."""

from __future__ import annotations

import asyncio
import os
import textwrap

import httpx
import pytest

from gateway.app import create_app
from gateway.config import parse_config

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
