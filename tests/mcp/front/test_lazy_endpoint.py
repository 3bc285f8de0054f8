"""The MCP front's endpoint is built by its first request (`adapters/mcp/server/routes.py`), and what that
request loaded (the `mcp` SDK) is frozen out of the cyclic collector's way, as start-up's objects are
(`gateway.heap.settle_import`): left tracked, every full collection walked the SDK again, and `make bench`
showed it as p99 at c=32 about twice what it was."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import httpx
import pytest

from adapters.mcp.server.routes import place
from gateway.app import create_app
from gateway.config import parse_config

WAIT_S = 20.0


@pytest.fixture
def nothing_frozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # this worker's later tests collect as usual


async def test_the_first_mcp_request_builds_the_endpoint_and_freezes_what_it_loaded(nothing_frozen: None) -> None:
    text = "backends:\n  - {name: math, kind: python, module: 'adapters.python.toolkits.arithmetic:toolkit'}\n"
    app = create_app(parse_config(text, "lazy.yaml", env=dict(os.environ)))
    async with app.lifespan():
        main = place(app.gateway.services, "/mcp")  # the one the routes hold: one per gateway and path
        assert main.endpoint is None  # nothing built, nothing loaded for it yet
        assert gc.get_freeze_count() == 0
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=WAIT_S) as client:
            listed = await client.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"},
            )
        assert listed.status_code in (200, 400)  # answered by the endpoint, whatever it made of a sessionless list
        assert main.endpoint is not None
        frozen = gc.get_freeze_count()
        assert frozen > 0  # the SDK and the endpoint's module, frozen with everything else alive then
