"""Bad envelopes: each gets its JSON-RPC error (HTTP 200), never a traceback or an HTML page."""

from __future__ import annotations

import pytest

from tests.jsonrpc.conftest import CONFIG, execute
from tests.support import asgi_client

JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b'{"jsonrpc": "2.0", "id": 1,', b"", b"   ", b"\xff\xfe{}", b"[1, 2"],
    ids=["garbage", "truncated", "empty", "blank", "not-utf8", "open-batch"],
)
async def test_not_json_is_32700(raw: bytes) -> None:
    async with asgi_client(CONFIG) as client:
        r = await client.post("/rpc", content=raw, headers=JSON)
    assert r.status_code == 200
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32700


@pytest.mark.parametrize("raw", [b"42", b'"tool.execute"', b"true", b"null"])
async def test_json_scalar_is_32600(raw: bytes) -> None:
    async with asgi_client(CONFIG) as client:
        r = await client.post("/rpc", content=raw, headers=JSON)
    assert r.status_code == 200
    assert r.json()["error"]["code"] == -32600 and r.json()["id"] is None


@pytest.mark.parametrize(
    ("body", "echo", "needle"),
    [
        ({"jsonrpc": "1.0", "id": 1, "method": "tool.list"}, 1, "'jsonrpc' must be"),
        ({"id": 1, "method": "tool.list"}, 1, "'jsonrpc' must be"),
        ({"jsonrpc": 2.0, "id": "a", "method": "tool.list"}, "a", "'jsonrpc' must be"),
        ({"jsonrpc": "2.0", "id": 1}, 1, "'method' is required"),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, 1, "'method' is required"),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tool.list"}, None, "'id' must be"),
        ({"jsonrpc": "2.0", "id": True, "method": "tool.list"}, None, "'id' must be"),
        ({"jsonrpc": "2.0", "id": 1, "method": "tool.list", "params": "x"}, 1, "'params' must be an object"),
        ({"jsonrpc": "2.0", "id": 1, "method": "tool.list", "extra": 1}, 1, "Unknown request member(s) extra"),
    ],
    ids=[
        "wrong-version",
        "no-jsonrpc",
        "number-version",
        "no-method",
        "method-number",
        "object-id",
        "bool-id",
        "params-string",
        "unknown-member",
    ],
)
async def test_invalid_request_is_32600(body: dict[str, object], echo: object, needle: str) -> None:
    async with asgi_client(CONFIG) as client:
        r = await client.post("/rpc", json=body)
    assert r.status_code == 200
    answer = r.json()
    assert answer["error"]["code"] == -32600
    assert needle in answer["error"]["message"]
    assert answer["id"] == echo


async def test_body_over_the_limit_is_413_with_a_jsonrpc_error() -> None:
    config = CONFIG + "limits:\n  max_body_bytes: 200\n"
    async with asgi_client(config) as client:
        r = await client.post("/rpc", json=execute("Probe_Greet", {"name": "x" * 500}))
    assert r.status_code == 413
    assert r.json()["error"]["code"] == -32600 and "200 bytes" in r.json()["error"]["message"]


async def test_form_content_type_is_415_and_missing_content_type_is_accepted() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"method":"tool.execute","params":{"tool":"Math_Add","parameters":{"a":1,"b":2}}}'
    async with asgi_client(CONFIG) as client:
        form = await client.post("/rpc", content=raw, headers={"Content-Type": "application/x-www-form-urlencoded"})
        bare = await client.post("/rpc", content=raw)
        legacy = await client.post("/rpc", content=raw, headers={"Content-Type": "application/json-rpc; charset=utf-8"})
    assert form.status_code == 415
    assert form.json()["error"]["code"] == -32600 and "application/json" in form.json()["error"]["message"]
    assert bare.status_code == 200 and bare.json()["result"]["output"] == "3"
    assert legacy.status_code == 200 and legacy.json()["result"]["output"] == "3"


async def test_get_is_405_json() -> None:
    async with asgi_client(CONFIG) as client:
        r = await client.get("/rpc")
    assert r.status_code == 405 and r.headers["content-type"] == "application/json"


async def test_path_is_configurable_and_the_front_can_be_disabled() -> None:
    async with asgi_client(CONFIG + "fronts:\n  jsonrpc:\n    path: /bridge/v1\n") as client:
        moved = await client.post("/bridge/v1", json=execute("Math_Add", {"a": 1, "b": 2}))
        old = await client.post("/rpc", json=execute("Math_Add", {"a": 1, "b": 2}))
    assert moved.json()["result"]["output"] == "3" and old.status_code == 404
    async with asgi_client(CONFIG + "fronts:\n  jsonrpc:\n    enabled: false\n") as client:
        off = await client.post("/rpc", json=execute("Math_Add", {"a": 1, "b": 2}))
    assert off.status_code == 404
