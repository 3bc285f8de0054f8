"""An MCP session begun on one `toolplex serve` continues through another sharing a real Redis.

The SDK's session lives in its home replica's memory; the other replica finds the home in the
state store (`session.mcp:<id>`) and forwards the request there. When the home stops (drains) or
is killed, the session moves: the next replica its requests reach opens it again under the same
id with the client's own `initialize` (kept in the store), and the client goes on without an
error or a new handshake.
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


def headers_of(session_id: str) -> dict[str, str]:
    return {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id}


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


def test_a_session_whose_home_was_killed_goes_on_through_the_other_at_once(replicas: Callable[[str], Any]) -> None:
    a, a_process = replicas("a")
    b, _ = replicas("b")
    with httpx.Client(headers=ACCEPT, timeout=DEADLINE_S) as http:
        session_id = open_session(http, a)
        assert message_of(rpc(http, b, session_id, "ping", {}, 2))["result"] == {}
        pinged = rpc(http, a, session_id, "ping", {}, 3)  # answered on an SSE stream of A's: its events have ids
        old_event = next(line for line in pinged.text.splitlines() if line.startswith("id:")).split(":", 1)[1].strip()
        os.kill(a_process.pid, signal.SIGKILL)  # no goodbye: its lease is still held
        a_process.wait(timeout=10)

        # A cannot be connected to: B adopts the session on its first request, long before A's lease runs out.
        started = time.monotonic()
        added = rpc(http, b, session_id, "tools/call", {"name": "Math_Add", "arguments": {"a": 2, "b": 5}}, 3)
        assert added.status_code == 200, added.text
        assert added.headers["mcp-session-id"] == session_id
        assert message_of(added)["result"]["content"][0]["text"] == "7"
        assert time.monotonic() - started < 5
        assert message_of(rpc(http, b, session_id, "ping", {}, 4))["result"] == {}
        # A GET resuming after an event of the old home opens the session's standalone stream here (never an
        # empty replay its client would resume again and again): while it is open, another GET is refused.
        resumed = {**headers_of(session_id), "Last-Event-ID": old_event, **ACCEPT}
        with http.stream("GET", f"{b}/mcp", headers=resumed) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            with http.stream("GET", f"{b}/mcp", headers={**headers_of(session_id), **ACCEPT}) as second:
                assert second.status_code == 409  # "Only one SSE stream is allowed per session"
        # Another id is still unknown; the session still ends when its client ends it.
        assert rpc(http, b, secrets.token_hex(16), "ping", {}, 5).status_code == 404
        headers = {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id}
        assert http.delete(f"{b}/mcp", headers=headers).status_code == 200
        assert rpc(http, b, session_id, "ping", {}, 6).status_code == 404


def test_a_session_moves_off_a_draining_replica_and_is_served_from_both(
    tmp_path: Path, redis_url: str, replicas: Callable[[str], Any]
) -> None:
    config = tmp_path / "draining.yaml"
    config.write_text(CONFIG.replace("{shutdown_grace_s: 2}", "{shutdown_grace_s: 2, drain_s: 30}"))
    env = {"REDIS_URL": redis_url, "KEY_PREFIX": f"mcp-drain-{secrets.token_hex(4)}:"}
    with contextlib.ExitStack() as stack:
        a, a_process = stack.enter_context(served_gateway(config, env, tmp_path / "a.log"))
        b, _ = stack.enter_context(served_gateway(config, env, tmp_path / "b.log"))
        with httpx.Client(headers=ACCEPT, timeout=DEADLINE_S) as http:
            session_id = open_session(http, a)
            a_process.send_signal(signal.SIGTERM)  # A drains 30 s: /readyz fails, requests are still served
            deadline = time.monotonic() + DEADLINE_S
            while http.get(f"{a}/readyz").status_code != 503:
                assert time.monotonic() < deadline, "A never said it was draining"
                time.sleep(0.02)
            # A is stopping: B opens the session itself rather than forward to A, and A now sends it to B.
            listed = rpc(http, b, session_id, "tools/list", {}, 2)
            assert listed.status_code == 200 and listed.headers["mcp-session-id"] == session_id, listed.text
            log_b = (tmp_path / "b.log").read_text()
            assert "mcp_session_adopted" in log_b, log_b[-2000:]
            through_a = rpc(http, a, session_id, "tools/call", {"name": "Math_Add", "arguments": {"a": 1, "b": 1}}, 3)
            assert through_a.status_code == 200, through_a.text
            assert through_a.headers["connection"] == "close"  # a draining replica keeps no idle connection
            assert message_of(through_a)["result"]["content"][0]["text"] == "2"
            a_process.send_signal(signal.SIGTERM)  # a second signal ends the drain
            assert a_process.wait(timeout=DEADLINE_S) == 0
            assert message_of(rpc(http, b, session_id, "ping", {}, 4))["result"] == {}
