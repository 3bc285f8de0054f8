"""An MCP session begun on one `toolplex serve` continues through another sharing a real Redis.

The SDK's session lives in its home replica's memory; the other replica finds the home in the
state store (`session.mcp:<id>`) and forwards the request there. When the home is killed, its
lease runs out and the session id gets 404, the spec's answer for a session the server does not
know (a client then starts a new session).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mcp.front.modern_http import message_of
from tests.support import served_gateway

LEASE_S = 1
DEADLINE_S = 20.0  # bound on every wait here
HANDSHAKE = "2025-11-25"
CONFIG = f"""
server: {{shutdown_grace_s: 2}}
state: {{store: redis, url: "${{REDIS_URL}}", lease_s: {LEASE_S}, key_prefix: "${{KEY_PREFIX}}"}}
fronts:
  mcp: {{}}
backends:
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
  - {{name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}}
"""
ACCEPT = {"Accept": "application/json, text/event-stream"}

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture
def replicas(tmp_path: Path, redis_url: str) -> Iterator[Callable[[str], tuple[str, Any]]]:
    """Start replicas of one configuration on one Redis; all stopped at the end."""
    config = tmp_path / "gateway.yaml"
    config.write_text(CONFIG)
    env = {"REDIS_URL": redis_url, "KEY_PREFIX": f"mcp-replicas-{secrets.token_hex(4)}:"}
    with contextlib.ExitStack() as stack:

        def start(name: str) -> tuple[str, Any]:
            return stack.enter_context(served_gateway(config, env, tmp_path / f"{name}.log"))

        yield start


def rpc(
    http: httpx.Client, base: str, session_id: str, method: str, params: dict[str, Any], id_: int
) -> httpx.Response:
    headers = {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id}
    body = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
    return http.post(f"{base}/mcp", json=body, headers=headers)


def open_session(http: httpx.Client, base: str) -> str:
    """`initialize` and `notifications/initialized` on `base`: a handshake-era session homed there."""
    params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "replicas", "version": "1"}}
    opened = http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert opened.status_code == 200, opened.text
    assert message_of(opened)["result"]["protocolVersion"] == HANDSHAKE
    session_id = opened.headers["mcp-session-id"]
    headers = {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id}
    note = http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert note.status_code == 202, note.text
    return session_id


def test_a_session_begun_on_one_replica_continues_through_the_other(replicas: Callable[[str], Any]) -> None:
    a, _ = replicas("a")
    b, _ = replicas("b")
    with httpx.Client(headers=ACCEPT, timeout=DEADLINE_S) as http:
        session_id = open_session(http, a)

        listed = rpc(http, b, session_id, "tools/list", {}, 2)
        assert listed.status_code == 200 and listed.headers["mcp-session-id"] == session_id
        names = {tool["name"] for tool in message_of(listed)["result"]["tools"]}
        assert {"Math_Add", "Demo_Sleep"} <= names

        added = message_of(
            rpc(http, b, session_id, "tools/call", {"name": "Math_Add", "arguments": {"a": 2, "b": 5}}, 3)
        )
        assert added["result"]["content"][0]["text"] == "7"
        slept = message_of(
            rpc(http, b, session_id, "tools/call", {"name": "Demo_Sleep", "arguments": {"seconds": 0}}, 4)
        )
        assert slept["result"]["structuredContent"] == {"slept": 0}

        # The same session still works at home, and closing it through B closes it everywhere.
        assert message_of(rpc(http, a, session_id, "ping", {}, 5))["result"] == {}
        headers = {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id}
        assert http.delete(f"{b}/mcp", headers=headers).status_code == 200
        assert rpc(http, a, session_id, "ping", {}, 6).status_code == 404
        assert rpc(http, b, session_id, "ping", {}, 7).status_code == 404


def test_a_session_whose_home_was_lost_gets_404_after_the_lease(replicas: Callable[[str], Any]) -> None:
    a, a_process = replicas("a")
    b, _ = replicas("b")
    with httpx.Client(headers=ACCEPT, timeout=DEADLINE_S) as http:
        session_id = open_session(http, a)
        assert message_of(rpc(http, b, session_id, "ping", {}, 2))["result"] == {}
        os.kill(a_process.pid, signal.SIGKILL)  # no goodbye: its lease must run out
        a_process.wait(timeout=10)

        statuses: list[int] = []
        deadline = time.monotonic() + LEASE_S * 3 + 10
        while time.monotonic() < deadline:
            answer = rpc(http, b, session_id, "ping", {}, 3)
            statuses.append(answer.status_code)
            if answer.status_code == 404:
                break
            # Until the lease runs out B still forwards to A, which cannot be reached: retry later.
            assert answer.status_code == 503 and answer.json()["error"]["message"], answer.text
            time.sleep(0.05)
        assert statuses[-1] == 404, statuses
        assert "Session not found" in answer.json()["error"]["message"]
        # The record is gone: B answers 404 at once from now on, and a new session works on B.
        assert rpc(http, b, session_id, "ping", {}, 4).status_code == 404
        fresh = open_session(http, b)
        assert message_of(rpc(http, b, fresh, "ping", {}, 5))["result"] == {}
