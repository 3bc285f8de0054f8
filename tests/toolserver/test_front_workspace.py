"""The ToolServerNode front's own workspaces (no toolserver upstream), its listings per caller, isolation.

Requests are shaped as the real XAgent client sends them (a `file` part plus a `filename`
part; `{file_path}` for downloads), answers checked against the real node's
(protocols.md §3): raw bytes with `Content-Disposition: attachment`, a zip, a recursive tree.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support import DEFAULT_CONFIG, asgi_client

CONFIG = """
fronts:
  toolserver: {patience_s: 0.5, session_idle_s: 60}
limits: {max_body_bytes: 4096, max_upload_bytes: 3000000}
workspaces: {max_bytes_per_workspace: 5500000}
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit",
     description: "Arithmetic on two numbers"}
  - {name: files, kind: python, module: "adapters.python.toolkits.filesystem:toolkit"}
  - {name: text, kind: python, module: "adapters.python.toolkits.text:toolkit"}
"""
KEYS = """
auth:
  api_keys:
    - {key: alice-key-0001, name: alice}
    - {key: bob-key-000002, name: bob, tools: ["Math_*"]}
"""
ALICE = {"Authorization": "Bearer alice-key-0001"}
BOB = {"Authorization": "Bearer bob-key-000002"}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(CONFIG) as c:
        yield c


async def session(client: httpx.AsyncClient, headers: dict[str, str] | None = None) -> dict[str, str]:
    r = await client.post("/get_cookie", headers=headers)
    assert r.status_code == 200
    node_id = r.cookies["node_id"]
    client.cookies.clear()
    return {**(headers or {}), "Cookie": f"node_id={node_id}"}


async def upload(client: httpx.AsyncClient, headers: dict[str, str], name: str, content: bytes) -> httpx.Response:
    files = {"file": (name, content), "filename": (None, name)}  # what XAgent's client sends
    return await client.post("/upload_file", files=files, headers=headers)


async def execute(client: httpx.AsyncClient, headers: dict[str, str], tool: str, arguments: dict[str, Any]) -> Any:
    r = await client.post("/execute_tool", json={"tool_name": tool, "arguments": arguments}, headers=headers)
    return r.status_code, r.json()


def gateway_of(client: httpx.AsyncClient) -> Any:
    return client.app.state.gateway  # type: ignore[attr-defined]


async def test_upload_download_structure_and_zip_as_the_node_answers(client: httpx.AsyncClient) -> None:
    mine = await session(client)
    r = await upload(client, mine, "notes.txt", b"hello\nworld\n")
    assert (r.status_code, r.json()) == (200, {"message": "Upload Success!"})

    r = await client.post("/download_file", json={"file_path": "workspace/notes.txt"}, headers=mine)
    assert (r.status_code, r.content) == (200, b"hello\nworld\n")  # raw bytes, not JSON
    assert r.headers["content-disposition"] == 'attachment; filename="notes.txt"'

    tree = (await client.post("/get_workspace_structure", headers=mine)).json()
    assert tree == {"name": "workspace", "type": "directory", "children": [{"name": "notes.txt", "type": "file"}]}

    r = await client.post("/download_workspace", headers=mine)
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    assert zipfile.ZipFile(io.BytesIO(r.content)).read("notes.txt") == b"hello\nworld\n"


async def test_file_tools_work_in_the_same_session_workspace(client: httpx.AsyncClient) -> None:
    mine, theirs = await session(client), await session(client)
    await upload(client, mine, "notes.txt", b"hello\nworld\n")
    assert await execute(client, mine, "FileSystemEnv_read_from_file", {"filepath": "notes.txt"}) == (
        200,
        "    1: hello\n    2: world\n",
    )
    status, answer = await execute(client, theirs, "FileSystemEnv_read_from_file", {"filepath": "notes.txt"})
    assert status == 500 and "not found in workspace" in answer["detail"]  # another session, another workspace

    status, written = await execute(
        client, mine, "FileSystemEnv_write_to_file", {"filepath": "sub/plan.md", "content": "a\nc"}
    )
    assert (status, written) == (200, "    1: a\n    2: c\n")
    status, written = await execute(
        client, mine, "FileSystemEnv_write_to_file", {"filepath": "sub/plan.md", "content": "b", "line_number": 2}
    )
    assert written == "    1: a\n    2: b\n    3: c\n"
    status, tree = await execute(client, mine, "FileSystemEnv_print_filesys_struture", {"return_root": True})
    assert status == 200
    assert (
        tree == "Global Root Work Directory: /workspace\n- workspace/\n    - notes.txt\n    - sub/\n        - plan.md\n"
    )
    r = await client.post("/download_file", json={"file_path": "sub/plan.md"}, headers=mine)
    assert r.content == b"a\nb\nc\n"


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd", "..", "a\x00b"])
async def test_paths_cannot_leave_the_workspace(client: httpx.AsyncClient, path: str) -> None:
    mine = await session(client)
    r = await client.post("/download_file", json={"file_path": path}, headers=mine)
    assert r.status_code in (403, 404) and isinstance(r.json()["detail"], str)
    status, _ = await execute(client, mine, "FileSystemEnv_write_to_file", {"filepath": path, "content": "x"})
    assert status == 500 or (path == "/etc/passwd" and status == 200)  # "/etc/passwd" is <workspace>/etc/passwd
    root = gateway_of(client).workspaces.root
    assert not (root.parent / "outside.txt").exists() and not (root / "outside.txt").exists()


async def test_symlinks_are_not_followed(client: httpx.AsyncClient, tmp_path: Any) -> None:
    mine = await session(client)
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    await upload(client, mine, "x.txt", b"x")
    spaces = gateway_of(client).workspaces
    directory = next(p for p in spaces.root.iterdir() if p.name.startswith("ws-"))
    (directory / "link.txt").symlink_to(secret)
    r = await client.post("/download_file", json={"file_path": "link.txt"}, headers=mine)
    assert r.status_code == 403 and b"top secret" not in r.content
    status, _ = await execute(client, mine, "FileSystemEnv_read_from_file", {"filepath": "link.txt"})
    assert status == 500


async def test_uploads_past_the_body_cap_stream_and_the_upload_cap_holds(client: httpx.AsyncClient) -> None:
    mine = await session(client)
    big = bytes(range(256)) * 8000  # 2,048,000 bytes: far past max_body_bytes (4096), under max_upload_bytes
    r = await upload(client, mine, "big.bin", big)
    assert r.status_code == 200, r.text
    assert (await client.post("/download_file", json={"file_path": "big.bin"}, headers=mine)).content == big
    r = await upload(client, mine, "huge.bin", b"x" * 3_000_001)
    assert r.status_code == 413 and "max_upload_bytes" in r.json()["detail"]
    tree = (await client.post("/get_workspace_structure", headers=mine)).json()
    assert [c["name"] for c in tree["children"]] == ["big.bin"]  # nothing half-written is left
    r = await upload(client, mine, "second.bin", big)
    r = await upload(client, mine, "third.bin", big)  # 3 x 2,048,000 > max_bytes_per_workspace
    assert r.status_code == 413 and "max_bytes_per_workspace" in r.json()["detail"]


async def test_bad_uploads_get_a_fastapi_422(client: httpx.AsyncClient) -> None:
    mine = await session(client)
    r = await client.post("/upload_file", files={"other": ("a.txt", b"x")}, headers=mine)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "file"]
    r = await client.post("/upload_file", json={"file": "x"}, headers=mine)
    assert r.status_code == 422
    r = await client.post("/download_file", json={}, headers=mine)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "file_path"]


async def test_release_removes_the_workspace(client: httpx.AsyncClient) -> None:
    mine = await session(client)
    await upload(client, mine, "notes.txt", b"x")
    spaces = gateway_of(client).workspaces
    assert len(spaces) == 1
    assert (await client.post("/release_session", headers=mine)).status_code == 200
    assert len(spaces) == 0 and not [p for p in spaces.root.iterdir() if p.name.startswith("ws-")]


async def test_the_temporary_root_goes_at_close() -> None:
    async with asgi_client(CONFIG) as c:
        mine = await session(c)
        await upload(c, mine, "notes.txt", b"x")
        root = gateway_of(c).workspaces.root
        assert root.exists()
    assert not root.exists()


async def test_a_jsonrpc_session_id_equal_to_a_node_id_reaches_nothing_of_that_session(
    client: httpx.AsyncClient,
) -> None:
    mine = await session(client)
    node_id = mine["Cookie"].split("=", 1)[1]
    await upload(client, mine, "notes.txt", b"private")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tool.execute",
        "params": {
            "tool": "FileSystemEnv_read_from_file",
            "parameters": {"filepath": "notes.txt"},
            "context": {"sessionId": node_id},
        },
    }
    answer = (await client.post("/rpc", json=body)).json()
    assert "result" not in answer and "not found in workspace" in str(answer["error"])


async def test_another_principal_with_a_node_id_gets_what_an_unknown_id_gets() -> None:
    async with asgi_client(CONFIG + KEYS) as c:
        alice = await session(c, ALICE)
        await upload(c, alice, "notes.txt", b"alice's")
        stolen = {**BOB, "Cookie": alice["Cookie"]}
        unknown = {**BOB, "Cookie": "node_id=" + "A" * 43}
        for path in ("/download_file", "/get_workspace_structure", "/execute_tool", "/upload_file"):
            with_stolen = await c.post(path, json={"file_path": "notes.txt"}, headers=stolen)
            with_unknown = await c.post(path, json={"file_path": "notes.txt"}, headers=unknown)
            assert with_stolen.status_code == with_unknown.status_code == 403
            assert with_stolen.json()["detail"] == with_unknown.json()["detail"].replace("A" * 43, alice["Cookie"][8:])


async def test_listings_show_only_what_the_caller_may_call() -> None:
    async with asgi_client(CONFIG + KEYS) as c:
        listing = (await c.post("/get_available_tools", json={}, headers=BOB)).json()
        assert listing["available_tools"] == ["Math_Add", "Math_Divide", "Math_Multiply", "Math_Subtract"]
        assert [e["name"] for e in listing["available_envs"]] == ["Math"]
        assert {t["name"] for t in listing["tools_json"]} == set(listing["available_tools"])
        assert {t["tool_name"].split("@")[0] for t in listing["x-toolplex"]["tools"]} == set(listing["available_tools"])
        schemas = (await c.post("/get_json_schema_for_tools", json=["Math_Add", "Text_WordCount"], headers=BOB)).json()
        assert schemas["missing_tools"] == ["Text_WordCount"]
        envs = (await c.post("/get_json_schema_for_envs", json=["Math", "Text"], headers=BOB)).json()
        assert envs["missing_envs"] == ["Text"]
        question = {"question": "add numbers and count the words in a text", "top_k": 10}
        found = (await c.post("/retrieving_tools", json=question, headers=BOB)).json()
        assert found["retrieved_tools"] and all(n.startswith("Math_") for n in found["retrieved_tools"])
        theirs = (await c.post("/retrieving_tools", json=question, headers=ALICE)).json()
        assert "Text_WordCount" in theirs["retrieved_tools"]
        everything = (await c.post("/get_available_tools", json={}, headers=ALICE)).json()
        assert "Text_WordCount" in everything["available_tools"]


async def test_env_listings_carry_descriptions(client: httpx.AsyncClient) -> None:
    envs = {e["name"]: e["description"] for e in (await client.post("/get_available_tools")).json()["available_envs"]}
    assert envs["Math"] == "Arithmetic on two numbers"  # the backend's description
    assert envs["Text"].startswith("Text: ") and len(envs["Text"]) > len("Text: ")  # made from its tools
    assert all(envs.values())


async def test_a_450_handle_without_a_session_is_its_principals_only() -> None:
    config = CONFIG + '  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}\n' + KEYS
    async with asgi_client(config) as c:
        body = {"tool_name": "Demo_Sleep", "arguments": {"seconds": 1.5}}
        r = await c.post("/execute_tool", json=body, headers=ALICE)
        assert r.status_code == 450
        collect = {"tool_name": r.json()["detail"]["next_calling"], "arguments": r.json()["detail"]["arguments"]}
        bob = await c.post("/execute_tool", json=collect, headers=BOB)
        assert bob.status_code == 404 and "unknown, expired or already collected" in bob.json()["detail"]
        for _ in range(20):  # bounded: each round waits at most the patience (0.5 s) server-side
            r = await c.post("/execute_tool", json=collect, headers=ALICE)
            if r.status_code != 450:
                break
        assert (r.status_code, r.json()) == (200, {"type": "simple", "data": {"slept": 1.5}})


async def test_the_default_configuration_gets_xagent_past_its_first_steps() -> None:
    """XAgent lists the tools, then asks FileSystemEnv_print_filesys_struture for the workspace (plan_exec.py)."""
    async with asgi_client(DEFAULT_CONFIG.read_text()) as c:
        mine = await session(c)
        listing = (await c.post("/get_available_tools", json={}, headers=mine)).json()
        assert {"FileSystemEnv_read_from_file", "FileSystemEnv_write_to_file"} <= set(listing["available_tools"])
        status, tree = await execute(c, mine, "FileSystemEnv_print_filesys_struture", {"return_root": True})
        assert (status, tree) == (200, "Global Root Work Directory: /workspace\n- workspace/\n")
