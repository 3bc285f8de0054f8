"""Upstream cookies stay with the request that earned them: the gateway's pooled client per backend
serves every caller, so a `Set-Cookie` from an upstream must never ride on a later caller's request.
A request that carries its own `Cookie` header (the ToolServerNode backend's per-session `node_id`)
still sends exactly that header.

The upstream is a real Toolplex (every protocol front) behind `tests.upstreams.cookie_server`, which
sets `trap=<caller>` on every answer and records the `Cookie` header of every request it receives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.upstream import CookielessClient, Upstream, UpstreamSettings
from tests.support import asgi_client, python_server

ALICE = "alice-key-0123456789"
BOB = "bob-key-0123456789"
CALLERS = {"alice": ALICE, "bob": BOB}
CONFIG = """
auth:
  api_keys:
    - {{name: alice, key: {alice}}}
    - {{name: bob, key: {bob}}}
discovery: {{interval_s: 0}}
backends:
  - name: up
    kind: {kind}
    url: http://127.0.0.1:{port}
    forward_authorization: true
{extra}
"""
HTTP_TOOLS = """\
    toolkit: Math
    tools:
      - {name: Add, method: POST, path: /opentool/call, input_schema: {type: object}}
"""
# kind -> the backend's extra settings
KINDS = {"opentool": "", "oxp": "", "jsonrpc": "    path: /rpc\n", "http": HTTP_TOOLS}


@pytest.fixture(scope="module")
def trap() -> Iterator[str]:
    with python_server("tests.upstreams.cookie_server") as port:
        yield f"http://127.0.0.1:{port}"


async def seen(trap: str, *, clear: bool = False) -> list[dict[str, Any]]:
    """What the upstream received so far (and forget it, with `clear`)."""
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.request("DELETE" if clear else "GET", f"{trap}/_seen")
    response.raise_for_status()
    records: list[dict[str, Any]] = response.json()
    return records


def config(kind: str, trap: str) -> str:
    port = trap.rsplit(":", 1)[1]
    return CONFIG.format(alice=ALICE, bob=BOB, kind=kind, port=port, extra=KINDS.get(kind, ""))


def add(call_id: str, a: int, b: int) -> dict[str, Any]:
    """An OpenTool request for Math_Add."""
    return {"jsonrpc": "2.0", "id": call_id, "method": "Math_Add", "params": {"a": a, "b": b}}


def bearer(caller: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {CALLERS[caller]}"}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_one_callers_upstream_cookie_never_reaches_another_caller(trap: str, kind: str) -> None:
    await seen(trap, clear=True)
    async with asgi_client(config(kind, trap)) as client:
        for caller, (a, b) in (("alice", (1, 2)), ("bob", (3, 4)), ("alice", (5, 6))):
            # the http backend posts the arguments as they are: there, an OpenTool request of its own
            arguments = add("1", a, b) if kind == "http" else {"a": a, "b": b}
            body = {**add(caller, a, b), "params": arguments}
            answer = await client.post("/opentool/call", json=body, headers=bearer(caller))
            assert answer.status_code == 200, answer.text
            value = answer.json()["result"]
            assert (value["result"] if kind == "http" else value) == {"result": a + b}, answer.text
    records = await seen(trap)
    callers = [r["caller"] for r in records if r["caller"] != "gateway"]
    assert callers == ["alice", "bob", "alice"], records  # each call reached the upstream as its caller
    assert [r["cookie"] for r in records] == [None] * len(records), records


async def test_toolserver_sessions_send_their_own_node_id_and_nothing_else(trap: str) -> None:
    """Three front sessions (two callers), three upstream node sessions: each request carries exactly its own
    `node_id`, and nothing else."""
    await seen(trap, clear=True)
    yaml = config("toolserver", trap) + "fronts:\n  toolserver: {prefix: /node}\n"
    async with asgi_client(yaml) as client:
        for caller in ("alice", "bob", "alice"):
            session = await client.post("/node/get_cookie", headers=bearer(caller))
            assert session.status_code == 200, session.text
            node_id = session.cookies["node_id"]
            client.cookies.clear()
            call = {"tool_name": "Math_Add", "arguments": {"a": 20, "b": 22}}
            headers = {**bearer(caller), "Cookie": f"node_id={node_id}"}
            answer = await client.post("/node/execute_tool", json=call, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json() == 42
    records = await seen(trap)
    issued: list[str] = []
    calls = []
    for record in records:
        cookie = record["cookie"]
        assert cookie is None or (cookie.startswith("node_id=") and cookie.removeprefix("node_id=") in issued), record
        if record["path"] == "/execute_tool":
            calls.append((record["caller"], cookie))
        issued += record["node_ids_set"]
    assert [caller for caller, _ in calls] == ["alice", "bob", "alice"], records
    assert len({cookie for _, cookie in calls}) == 3, calls  # three front sessions, three node sessions


async def test_a_request_cookie_header_is_sent_unchanged(trap: str) -> None:
    """What the ToolServerNode backend relies on: the header a request sets is the one that arrives."""
    await seen(trap, clear=True)
    upstream = Upstream("trap", UpstreamSettings(url=trap))
    try:
        for cookie in ("node_id=first", None, "node_id=second; other=x"):
            headers = {"Cookie": cookie} if cookie else {}
            response = await upstream.request("GET", "/healthz", idempotent=True, headers=headers)
            assert response.status_code == 200 and "trap=gateway" in response.headers["set-cookie"]
        assert [r["cookie"] for r in await seen(trap)] == ["node_id=first", None, "node_id=second; other=x"]
    finally:
        await upstream.close()


async def test_the_client_refuses_cookies_it_would_send_to_everyone() -> None:
    upstream = Upstream("nowhere", UpstreamSettings(url="http://127.0.0.1:9"))
    try:
        assert isinstance(upstream.client, CookielessClient)
        with pytest.raises(ValueError, match="keeps no cookies"):
            upstream.client.cookies = {"session": "shared"}
        upstream.client.cookies = httpx.Cookies()  # an empty store: nothing changes
        upstream.client.cookies.set("session", "by-hand")
        request = upstream.client.build_request("GET", "/")
        assert "cookie" not in request.headers and not upstream.client.cookies  # nothing enters, even by hand
    finally:
        await upstream.close()
    with pytest.raises(ValueError, match="keeps no cookies"):
        CookielessClient(cookies={"a": "b"})
