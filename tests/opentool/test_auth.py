"""API keys on the OpenTool front: every route needs one when keys are configured."""

from __future__ import annotations

import pytest

from tests.support import BUILTIN_BACKENDS, asgi_client

KEYS = """
auth:
  api_keys:
    - {name: full, key: full-access-key}
    - {name: math-only, key: math-only-key, tools: ["Math_*"]}
"""
CALL = {"jsonrpc": "2.0", "method": "Text_WordCount", "params": {"text": "a b"}, "id": "1"}


@pytest.mark.parametrize(("method", "path"), [("GET", "/version"), ("GET", "/load"), ("POST", "/call")])
async def test_every_route_needs_a_key(method: str, path: str) -> None:
    async with asgi_client(BUILTIN_BACKENDS + KEYS) as client:
        kwargs = {"json": CALL} if method == "POST" else {}
        missing = await client.request(method, f"/opentool{path}", **kwargs)
        wrong = await client.request(
            method, f"/opentool{path}", headers={"Authorization": "Bearer nope-nope"}, **kwargs
        )
        bearer = await client.request(
            method, f"/opentool{path}", headers={"Authorization": "Bearer full-access-key"}, **kwargs
        )
        bare = await client.request(method, f"/opentool{path}", headers={"Authorization": "full-access-key"}, **kwargs)
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.json()["error"]["code"] == 401 and missing.json()["result"] == {}
    assert wrong.json()["error"]["message"] == "Invalid credentials"
    assert bearer.status_code == 200 and bare.status_code == 200


async def test_a_key_limited_to_some_tools_gets_403_for_others() -> None:
    async with asgi_client(BUILTIN_BACKENDS + KEYS) as client:
        headers = {"Authorization": "Bearer math-only-key"}
        denied = await client.post("/opentool/call", json=CALL, headers=headers)
        allowed = await client.post(
            "/opentool/call",
            json={"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": 1, "b": 1}, "id": "2"},
            headers=headers,
        )
    assert denied.status_code == 200
    assert denied.json()["error"] == {"code": 403, "message": "Caller 'math-only' may not call tool Text_WordCount"}
    assert allowed.json()["result"] == {"result": 2}


async def test_healthz_needs_no_key() -> None:
    async with asgi_client(BUILTIN_BACKENDS + KEYS) as client:
        r = await client.get("/healthz")
    assert (r.status_code, r.json()) == (200, {"status": "ok"})


async def test_listings_show_a_restricted_key_only_what_it_may_call() -> None:
    """Issue 11.9: OpenTool /load and JSON-RPC tool.list are filtered by the caller's tool globs."""
    async with asgi_client(BUILTIN_BACKENDS + KEYS) as client:
        listings = {}
        for key in ("math-only-key", "full-access-key"):
            headers = {"Authorization": f"Bearer {key}"}
            load = (await client.get("/opentool/load", headers=headers)).json()
            rpc = await client.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.list"}, headers=headers)
            listings[key] = ([f["name"] for f in load["functions"]], [t["id"] for t in rpc.json()["result"]["tools"]])
    restricted_load, restricted_rpc = listings["math-only-key"]
    full_load, full_rpc = listings["full-access-key"]
    assert restricted_load == restricted_rpc == ["Math_Add", "Math_Divide", "Math_Multiply", "Math_Subtract"]
    assert "Text_WordCount" in full_load and full_load == full_rpc
