"""2026-07-28 `subscriptions/listen` on the MCP front, and what its opening announces, per caller.

Real processes: tests/mcp/reference_server.py upstream (it announces list changes and resource updates on
its own listen stream) beside the gateway's Python arithmetic tools, one `toolplex serve` in front, two API
keys: Alice may call everything, Bob only `Math_*` (so he reaches no MCP server). Raw HTTP, as the revision
sends it. A listen stream is its caller's: Bob cannot listen to a resource of a server he does not reach,
and hears none of its updates; what the front announces (`server/discover`) is what the caller reaches.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.mcp import conformance
from tests.mcp.front.modern_http import DEADLINE_S, MODERN, Caller
from tests.support import served_gateway

ALICE, BOB = secrets.token_hex(16), secrets.token_hex(16)
WATCHED = "test://watched-resource"
CONFIG = f"""
auth:
  api_keys:
    - {{name: alice, key: {ALICE}}}
    - {{name: bob, key: {BOB}, tools: ["Math_*"]}}
backends:
  - {{name: reference, kind: mcp, url: "${{UPSTREAM}}"}}
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
"""


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("mcp-listen")
    config = tmp / "gateway.yaml"
    config.write_text(CONFIG)
    with conformance.reference_server() as upstream, served_gateway(config, {"UPSTREAM": upstream}) as (base, _):
        yield f"{base}/mcp"


class Listening:
    """One open `subscriptions/listen` stream of `key`, read message by message (each read bounded)."""

    def __init__(self, client: httpx.Client, url: str, key: str, notifications: dict[str, Any]) -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "subscriptions/listen",
            "params": {"notifications": notifications, "_meta": meta},
        }
        headers = {
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen",
        }
        self._context = client.stream("POST", url, json=body, headers=headers)
        self.response = self._context.__enter__()
        self._lines = self.response.iter_lines()

    def next(self) -> dict[str, Any]:
        for line in self._lines:
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])  # type: ignore[no-any-return]
        raise AssertionError("the listen stream ended")

    def close(self) -> None:
        self._context.__exit__(None, None, None)


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(DEADLINE_S)) as http:
        yield http


def test_the_opening_announces_what_the_caller_reaches(front: str) -> None:
    alice = Caller(ALICE, {}).result(front, "server/discover", {})["capabilities"]
    bob = Caller(BOB, {}).result(front, "server/discover", {})["capabilities"]
    assert alice["resources"] == {"subscribe": True, "listChanged": True} and alice["prompts"]["listChanged"]
    assert "completions" in alice and alice["tools"]["listChanged"]
    # Bob reaches no MCP server: no resources, prompts or completions to speak of; the catalog's tools he has.
    assert not {"resources", "prompts", "completions"} & set(bob) and bob["tools"]["listChanged"]


def test_a_listen_stream_hears_only_what_its_caller_reaches(front: str, client: httpx.Client) -> None:
    wanted = {"toolsListChanged": True, "resourceSubscriptions": [WATCHED]}
    alice, bob = Listening(client, front, ALICE, wanted), Listening(client, front, BOB, wanted)
    try:
        acked = alice.next()
        assert acked["method"] == "notifications/subscriptions/acknowledged"
        assert acked["params"]["notifications"]["resourceSubscriptions"] == [WATCHED]
        bob_acked = bob.next()
        assert bob_acked["method"] == "notifications/subscriptions/acknowledged"
        assert "resourceSubscriptions" not in bob_acked["params"]["notifications"]  # not his to watch

        writer = Caller(ALICE, {})
        writer.call(front, "test_update_watched_resource", {"text": "new"})
        updated = alice.next()
        assert updated["method"] == "notifications/resources/updated" and updated["params"]["uri"] == WATCHED

        writer.call(front, "test_trigger_tool_change", {})  # the server says its tools changed: both hear that
        assert alice.next()["method"] == "notifications/tools/list_changed"
        heard = bob.next()  # the first thing Bob hears after his ack: the tool change, no resource update before it
        assert heard["method"] == "notifications/tools/list_changed", heard
    finally:
        alice.close()
        bob.close()
