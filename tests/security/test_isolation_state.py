"""Issue 25, the state findings: one principal deletes, evicts, reads or probes another principal's state.

Two API keys, alice and bob. In each test bob floods, guesses or reaches for what alice holds:

- A. Workspaces: bob's fresh JSON-RPC `sessionId`s evict alice's workspace (`max_workspaces`), and its files.
- B. `/get_cookie` floods evict alice's upstream node session (`toolserver` backend, `max_sessions`).
- C. The same flood evicts alice's ToolServerNode session from the state store (`state.max_entries`).
- D. Without a `node_id` cookie, `/upload_file` and `/download_file` share one upstream node between callers.
- E. A 450 result handle of alice's, collected by bob, is answered differently from an unknown handle.

Each test fails on the code the issue was filed against, for the leak itself, and passes once fixed.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import asgi_client, gateway_process, python_server

ALICE_KEY = "alice-key-0001"
BOB_KEY = "bob-key-0002"
KEYS = f"""
auth:
  api_keys:
    - {{name: alice, key: "{ALICE_KEY}"}}
    - {{name: bob, key: "{BOB_KEY}"}}
"""
ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
BOB = {"Authorization": f"Bearer {BOB_KEY}"}
REFUSED_FLOOD = (429, 503)  # what a bounded store may answer a flood with, instead of evicting others


def with_session(headers: dict[str, str], node_id: str) -> dict[str, str]:
    return {**headers, "Cookie": f"node_id={node_id}"}


# ---- A. one caller deletes another's files (workspaces) ----

WORKSPACES = (
    KEYS
    + """
workspaces: {max_workspaces: 8}
backends:
  - {name: filesystem, kind: python, module: "adapters.python.toolkits.filesystem:toolkit"}
"""
)


async def rpc_execute(
    client: httpx.AsyncClient, headers: dict[str, str], tool: str, parameters: dict[str, Any], session: str
) -> dict[str, Any]:
    params = {"tool": tool, "parameters": parameters, "context": {"sessionId": session}}
    answer = await client.post(
        "/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": params}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def test_a_flood_of_sessions_does_not_delete_another_callers_workspace() -> None:
    """Finding A (issue 25, 4): `max_workspaces` evicts the least recently used workspace whoever owns it, so
    bob's 30 fresh JSON-RPC sessionIds remove alice's workspace and her file. Alice's file must survive."""
    async with asgi_client(WORKSPACES) as client:
        written = await rpc_execute(
            client,
            ALICE,
            "FileSystemEnv_write_to_file",
            {"filepath": "notes.txt", "content": "alice's notes"},
            "alice-session-1",
        )
        assert "result" in written, written
        for index in range(30):  # each may succeed or be refused; alice's data must survive either way
            params = {"tool": "FileSystemEnv_print_filesys_struture", "context": {"sessionId": f"bob-session-{index}"}}
            body = {"jsonrpc": "2.0", "id": index, "method": "tool.execute", "params": params}
            await client.post("/rpc", json=body, headers=BOB)
        read = await rpc_execute(
            client, ALICE, "FileSystemEnv_read_from_file", {"filepath": "notes.txt"}, "alice-session-1"
        )
    assert "result" in read, f"alice's file is gone after bob's flood of sessions: {read.get('error')}"
    assert "alice's notes" in read["result"]["output"], read


# ---- B, D: a `toolserver` backend in front of a ToolServerManager double ----


@pytest.fixture(scope="module")
def node_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway whose ToolServerNode front passes files through to a Manager double (a node per session)."""
    with python_server("tests.upstreams.toolserver_manager") as port:
        config = tmp_path_factory.mktemp("nodes") / "gateway.yaml"
        config.write_text(
            KEYS
            + "discovery: {interval_s: 0}\n"
            + "backends:\n"
            + f"  - {{name: node, kind: toolserver, url: 'http://127.0.0.1:{port}', max_sessions: 4, retries: 0}}\n"
            + "fronts:\n  toolserver: {workspace_backend: node}\n"
        )
        with gateway_process(config) as base:
            yield base


def get_cookie(client: httpx.Client, headers: dict[str, str]) -> httpx.Response:
    answer = client.post("/get_cookie", headers=headers)
    client.cookies.clear()  # every request names its session explicitly
    return answer


def upload(client: httpx.Client, headers: dict[str, str], name: str, content: bytes) -> httpx.Response:
    return client.post("/upload_file", files={"file": (name, content), "filename": (None, name)}, headers=headers)


def download(client: httpx.Client, headers: dict[str, str], name: str) -> httpx.Response:
    return client.post("/download_file", json={"file_path": name}, headers=headers)


def test_a_get_cookie_flood_does_not_evict_another_callers_upstream_session(node_gateway: str) -> None:
    """Finding B (issue 25, 4): `max_sessions` of a `toolserver` backend releases the least recently used upstream
    node session whoever owns it, so bob's 20 sessions release alice's node and her uploaded file with it."""
    with httpx.Client(base_url=node_gateway, timeout=30) as client:
        cookie = get_cookie(client, ALICE)
        assert cookie.status_code == 200, cookie.text
        alice = with_session(ALICE, cookie.cookies["node_id"])
        assert upload(client, alice, "alice-notes.txt", b"alice's upstream notes").status_code == 200
        assert download(client, alice, "alice-notes.txt").content == b"alice's upstream notes"  # her node has it
        for _ in range(20):  # each may succeed or be refused; alice's node must survive either way
            answer = get_cookie(client, BOB)
            if answer.status_code == 200:
                bob = with_session(BOB, answer.cookies["node_id"])
                client.post(
                    "/execute_tool", json={"tool_name": "EchoEnv_echo", "arguments": {"text": "x"}}, headers=bob
                )
            else:
                assert answer.status_code in REFUSED_FLOOD, answer.text
        after = download(client, alice, "alice-notes.txt")
    assert (after.status_code, after.content) == (200, b"alice's upstream notes"), (
        f"alice's upstream node session was released by bob's flood: her file now answers "
        f"HTTP {after.status_code} {after.text[:100]!r}"
    )


def test_without_a_cookie_callers_do_not_share_one_upstream_node(node_gateway: str) -> None:
    """Finding D (issue 25, 5): `/upload_file` and `/download_file` without a `node_id` cookie go to one upstream
    node shared by every caller, so bob downloads the file alice uploaded. Bob must not get alice's bytes."""
    secret = b"alice's private upload " + secrets.token_hex(8).encode()
    with httpx.Client(base_url=node_gateway, timeout=30) as client:
        uploaded = upload(client, ALICE, "shared-notes.txt", secret)
        if uploaded.status_code == 200:  # an upload without a session is allowed: alice reads it back
            assert download(client, ALICE, "shared-notes.txt").content == secret
        stolen = download(client, BOB, "shared-notes.txt")
    assert secret not in stolen.content, (
        f"bob downloaded alice's file without a session (HTTP {stolen.status_code}): one upstream node is shared"
    )


# ---- C. a /get_cookie flood evicts sessions in the state store ----

STORE = (
    KEYS
    + """
state: {max_entries: 20}
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
"""
)


async def test_a_get_cookie_flood_does_not_evict_another_callers_session_from_the_store() -> None:
    """Finding C (issue 25, 4): the state store's bound (`state.max_entries`, per namespace) evicts the oldest
    sessions whoever owns them, so bob's 60 `/get_cookie`s invalidate alice's cookie. Her session must survive."""
    async with asgi_client(STORE) as client:
        cookie = await client.post("/get_cookie", headers=ALICE)
        assert cookie.status_code == 200, cookie.text
        alice = with_session(ALICE, cookie.cookies["node_id"])
        client.cookies.clear()
        for _ in range(60):  # bob's later ones may be refused, or evict bob's own older sessions
            flood = await client.post("/get_cookie", headers=BOB)
            client.cookies.clear()
            assert flood.status_code == 200 or flood.status_code in REFUSED_FLOOD, flood.text
        answer = await client.post(
            "/execute_tool", json={"tool_name": "Math_Add", "arguments": {"a": 1, "b": 2}}, headers=alice
        )
    assert (answer.status_code, answer.json()) == (200, 3), (
        f"alice's session was evicted by bob's /get_cookie flood: HTTP {answer.status_code} {answer.text}"
    )


# ---- E. 450 handles of another session ----

HANDLES = (
    KEYS
    + """
fronts:
  toolserver: {patience_s: 0.2}
backends:
  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}
"""
)
COLLECT = "Toolplex_collect_result"


def shape(answer: httpx.Response, handle: str) -> tuple[int, Any]:
    """Status and detail, with the handle itself taken out: what must not tell a known handle from an unknown one."""
    detail = answer.json().get("detail")
    return answer.status_code, re.sub(re.escape(handle), "<handle>", detail) if isinstance(detail, str) else detail


async def test_another_principals_450_handle_is_answered_as_an_unknown_one() -> None:
    """Finding E (issue 25, ownership): a result handle collected by another principal must be answered exactly
    as an unknown handle (same status, same detail), so that it says nothing of the call it names."""
    async with asgi_client(HANDLES) as client:
        alice = with_session(ALICE, (await client.post("/get_cookie", headers=ALICE)).cookies["node_id"])
        bob_session = with_session(BOB, (await client.post("/get_cookie", headers=BOB)).cookies["node_id"])
        client.cookies.clear()
        started = await client.post(
            "/execute_tool", json={"tool_name": "Demo_Sleep", "arguments": {"seconds": 30}}, headers=alice
        )
        assert started.status_code == 450, started.text  # still running after the patience: a handle
        handle = started.json()["detail"]["arguments"]["handle"]
        unknown = secrets.token_urlsafe(32)

        async def collect(headers: dict[str, str], which: str) -> httpx.Response:
            body = {"tool_name": COLLECT, "arguments": {"handle": which}}
            return await client.post("/execute_tool", json=body, headers=headers)

        answers = {}
        for who, headers in (("bob in his session", bob_session), ("bob without a session", BOB)):
            answers[who] = (await collect(headers, handle), await collect(headers, unknown))
        still_hers = await collect(alice, handle)  # bob's attempts took nothing from alice
        await client.post("/release_session", headers=alice)  # cancels the sleeping call
    for who, (theirs, random) in answers.items():
        assert shape(theirs, handle) == shape(random, unknown), (
            f"{who}: alice's handle answers {theirs.status_code} {theirs.json()}, "
            f"an unknown one {random.status_code} {random.json()}"
        )
    assert still_hers.status_code == 450 and still_hers.json()["detail"]["arguments"]["handle"] == handle
