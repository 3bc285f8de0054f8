"""The ToolServerNode front in-process: listings, both request shapes, sessions, 450 and its handles, bad input."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import gateway.state
from adapters.toolserver.front import COLLECT_TOOL
from tests.support import asgi_client

CONFIG = """
fronts:
  toolserver: {patience_s: 0.2, env_tool_cap: 2, session_idle_s: 60}
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit",
     description: "Arithmetic on two numbers"}
  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit",
     description: "Tools for trying the gateway", hide: ["Fail"]}
  - {name: text, kind: python, module: "adapters.python.toolkits.text:toolkit"}
"""


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(CONFIG) as c:
        yield c


def jar(node_id: str) -> dict[str, str]:
    return {"Cookie": f"node_id={node_id}"}


async def new_session(client: httpx.AsyncClient) -> str:
    r = await client.post("/get_cookie")
    assert r.status_code == 200
    node_id = r.cookies["node_id"]
    client.cookies.clear()  # every test names its session explicitly
    return node_id


async def execute(client: httpx.AsyncClient, node_id: str | None, body: Any) -> httpx.Response:
    return await client.post("/execute_tool", json=body, headers=jar(node_id) if node_id else None)


async def collect_until_done(client: httpx.AsyncClient, node_id: str | None, detail: dict[str, Any]) -> httpx.Response:
    """Follow 450s; each round waits at most the patience server-side, bounded in count and time."""
    deadline = time.monotonic() + 20
    for _ in range(200):
        r = await execute(client, node_id, {"tool_name": detail["next_calling"], "arguments": detail["arguments"]})
        if r.status_code != 450 or time.monotonic() > deadline:
            return r
        detail = r.json()["detail"]
    raise AssertionError("the call never finished")


# ---- sessions ----


async def test_get_cookie_sets_an_httponly_lax_session_cookie(client: httpx.AsyncClient) -> None:
    for path in ("/get_cookie", "/get_cookies"):
        r = await client.post(path)
        assert r.status_code == 200
        assert r.json() == {"message": "add cookie", "version": client.app.state.gateway.version}  # type: ignore[attr-defined]
        header = r.headers["set-cookie"]
        assert header.startswith("node_id=")
        assert "HttpOnly" in header and "SameSite=lax" in header and "Path=/" in header
        assert len(r.cookies["node_id"]) >= 22  # >= 128 bits in URL-safe base64


async def test_no_cookie_runs_without_a_session(client: httpx.AsyncClient) -> None:
    r = await execute(client, None, {"tool_name": "Math_Add", "arguments": {"a": 1, "b": 2}})
    assert (r.status_code, r.json()) == (200, 3)


@pytest.mark.parametrize("value", ["nope", "x" * 43, '"<script>alert(1)</script>"', "a%00b", "\u00e9t\u00e9" * 5])
async def test_unknown_or_odd_cookies_get_403(client: httpx.AsyncClient, value: str) -> None:
    headers = {"Cookie": f"node_id={value}".encode()}  # raw bytes: the header may carry non-ASCII
    r = await client.post("/get_available_tools", json={}, headers=headers)
    assert r.status_code == 403
    assert r.json()["detail"].startswith("invalid node_id: ")
    r = await client.post("/execute_tool", json={"tool_name": "Math_Add", "arguments": {}}, headers=headers)
    assert r.status_code == 403


async def test_idle_sessions_expire(client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    node_id = await new_session(client)
    real = time.monotonic
    monkeypatch.setattr(gateway.state, "time", type("Later", (), {"monotonic": staticmethod(lambda: real() + 61)}))
    r = await client.post("/get_available_tools", headers=jar(node_id))
    assert (r.status_code, r.json()) == (403, {"detail": f"invalid node_id: {node_id}"})


async def test_close_and_release_answer_200_for_unknown_ids(client: httpx.AsyncClient) -> None:
    for path in ("/close_session", "/release_session", "/reconnect_session"):
        r = await client.post(path, headers=jar("unknown-session-id-xyz"))
        assert (r.status_code, r.json()) == (200, "invalid node_id: unknown-session-id-xyz")
        r = await client.post(path)
        assert (r.status_code, r.json()) == (200, "invalid node_id: None")


async def test_close_cancels_running_calls_and_keeps_the_session(client: httpx.AsyncClient) -> None:
    node_id = await new_session(client)
    r = await execute(client, node_id, {"tool_name": "Demo_Sleep", "arguments": {"seconds": 30}})
    assert r.status_code == 450
    detail = r.json()["detail"]
    r = await client.post("/close_session", headers=jar(node_id))
    assert (r.status_code, r.json()) == (200, f"Close session: {node_id}")
    r = await collect_until_done(client, node_id, detail)
    assert r.status_code == 500
    assert "cancelled" in r.json()["detail"]
    r = await client.post("/reconnect_session", headers=jar(node_id))
    assert (r.status_code, r.json()) == (200, f"Reconnect session: {node_id}")


async def test_release_forgets_everything_and_later_calls_get_403(client: httpx.AsyncClient) -> None:
    gw = client.app.state.gateway  # type: ignore[attr-defined]
    node_id = await new_session(client)
    r = await execute(client, node_id, {"tool_name": "Demo_Sleep", "arguments": {"seconds": 30}})
    assert r.status_code == 450
    handle = r.json()["detail"]["arguments"]["handle"]
    record = gw.services.detached("toolserver").record_key("", handle)
    assert gw.runs.get(record) is not None and await gw.store.get(record) is not None
    r = await client.post("/release_session", headers=jar(node_id))
    assert (r.status_code, r.json()) == (200, f"Release session: {node_id}")
    assert 'node_id=""' in r.headers["set-cookie"]
    assert gw.runs.get(record) is None
    assert await gw.store.get(record) is None
    r = await execute(client, node_id, {"tool_name": COLLECT_TOOL, "arguments": {"handle": handle}})
    assert (r.status_code, r.json()) == (403, {"detail": f"invalid node_id: {node_id}"})
    r = await client.post("/get_available_tools", headers=jar(node_id))
    assert r.status_code == 403


# ---- listings ----


async def test_available_tools_lists_visible_tools_with_envs_from_configuration(client: httpx.AsyncClient) -> None:
    r = await client.post("/get_available_tools", json={})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"available_envs", "available_tools", "tools_json", "x-toolplex"}  # XAgent reads two
    assert "Demo_Fail" not in body["available_tools"]
    assert body["available_tools"] == [t["name"] for t in body["tools_json"]]
    envs = {e["name"]: e for e in body["available_envs"]}
    assert envs["Math"] == {
        "name": "Math",
        "description": "Arithmetic on two numbers",
        "total_tools": 4,
        "tools": ["Math_Add", "Math_Divide", "..."],
    }
    assert envs["Demo"] == {
        "name": "Demo",
        "description": "Tools for trying the gateway",
        "total_tools": 1,
        "tools": ["Demo_Sleep"],
    }
    assert envs["Text"]["description"].startswith("Text: ")  # no configured description: made from its tools
    add = next(t for t in body["tools_json"] if t["name"] == "Math_Add")
    assert add["parameters"]["type"] == "object"
    assert add["parameters"]["required"] == ["a", "b"]
    r = await client.get("/get_available_tools")
    assert r.json() == body


async def test_hidden_tools_stay_callable_and_describable(client: httpx.AsyncClient) -> None:
    r = await execute(client, None, {"tool_name": "Demo_Fail", "arguments": {"message": "on purpose"}})
    assert r.status_code == 500
    assert r.json()["detail"].startswith("on purpose")
    r = await client.post("/get_json_schema_for_tools", json=["Demo_Fail"])
    assert [t["name"] for t in r.json()["tools_json"]] == ["Demo_Fail"]
    r = await client.post("/retrieving_tools", json={"question": "always fail with an error message", "top_k": 50})
    assert "Demo_Fail" not in r.json()["retrieved_tools"]


async def test_schema_for_tools_in_every_shape(client: httpx.AsyncClient) -> None:
    expected = None
    for body in (["Math_Add", "Nope"], {"tools": ["Math_Add", "Nope"]}, {"tool_names": ["Math.Add", "Nope"]}):
        r = await client.post("/get_json_schema_for_tools", json=body)
        assert r.status_code == 200
        assert r.json()["missing_tools"] == ["Nope"]
        assert [t["name"] for t in r.json()["tools_json"]] == ["Math_Add"]
        expected = expected or r.json()["tools_json"]
        assert r.json()["tools_json"] == expected
    r = await client.get("/get_json_schema_for_tools", params={"tools": "Math_Add,Nope"})
    assert r.json() == {"tools_json": expected, "missing_tools": ["Nope"]}


async def test_schema_for_envs_in_every_shape(client: httpx.AsyncClient) -> None:
    for body in (["Math", "Nowhere"], {"envs": ["Math", "Nowhere"]}, {"env_names": ["Math", "Nowhere"]}):
        r = await client.post("/get_json_schema_for_envs", json=body)
        assert r.status_code == 200
        assert r.json()["missing_envs"] == ["Nowhere"]
        (math,) = r.json()["envs_json"]
        assert math["tools"] == ["Math_Add", "Math_Divide", "Math_Multiply", "Math_Subtract"]  # uncapped here
    r = await client.get("/get_json_schema_for_envs?envs=Math&envs=Nowhere")
    assert r.json()["missing_envs"] == ["Nowhere"]


async def test_retrieving_tools(client: httpx.AsyncClient) -> None:
    r = await client.post("/retrieving_tools", json={"question": "multiply two numbers together", "top_k": 2})
    assert r.status_code == 200
    body = r.json()
    assert body["retrieved_tools"][0] == "Math_Multiply"
    assert len(body["retrieved_tools"]) <= 2
    assert [t["name"] for t in body["tools_json"]] == body["retrieved_tools"]
    r = await client.get("/retrieving_tools", params={"question": "count words in a text", "top_k": "1"})
    assert r.json()["retrieved_tools"] == ["Text_WordCount"]
    r = await client.post("/retrieving_tools", json={"question": "zzzz qqqq"})
    assert r.json() == {"retrieved_tools": [], "tools_json": []}


# ---- execute ----


async def test_execute_in_both_shapes_with_env_names(client: httpx.AsyncClient) -> None:
    bodies = [
        {"tool_name": "Math_Add", "arguments": {"a": 2, "b": 3}},
        {"tool": "Math_Add", "parameters": {"a": 2, "b": 3}},
        {"tool_name": "Add", "arguments": {"a": 2, "b": 3}, "env_name": "Math"},
        {"tool_name": "Math_Add", "arguments": {"a": 2, "b": 3}, "env_name": "Math"},
        {"tool_name": "Math.Add", "arguments": {"a": 2, "b": 3}},
    ]
    for body in bodies:
        r = await execute(client, None, body)
        assert (r.status_code, r.json()) == (200, 5), body


async def test_objects_come_back_wrapped(client: httpx.AsyncClient) -> None:
    r = await execute(client, None, {"tool_name": "Demo_Sleep", "arguments": {"seconds": 0}})
    assert (r.status_code, r.json()) == (200, {"type": "simple", "data": {"slept": 0.0}})


async def test_status_mapping(client: httpx.AsyncClient) -> None:
    r = await execute(client, None, {"tool_name": "Math_Nope", "arguments": {}})
    assert (r.status_code, r.json()) == (404, {"detail": "The tool Math_Nope is not found!"})
    r = await execute(client, None, {"tool_name": "Math_Add", "arguments": {"a": "one"}})
    assert r.status_code == 422
    assert {tuple(d["loc"]) for d in r.json()["detail"]} == {("body", "arguments", "a"), ("body", "arguments", "b")}
    r = await execute(client, None, {"tool_name": "Math_Divide", "arguments": {"a": 1, "b": 0}})
    assert r.status_code == 500 and isinstance(r.json()["detail"], str)
    r = await execute(client, None, {"tool_name": "Add", "arguments": {}, "env_name": "Nowhere"})
    assert (r.status_code, r.json()) == (404, {"detail": "The env Nowhere is not found!"})
    client.app.state.gateway.runs.max_runs = 0  # type: ignore[attr-defined]
    r = await execute(client, None, {"tool_name": "Math_Add", "arguments": {"a": 1, "b": 2}})
    assert r.status_code == 503 and "Too many calls" in r.json()["detail"]


async def test_450_then_collect_once(client: httpx.AsyncClient) -> None:
    node_id = await new_session(client)
    r = await execute(client, node_id, {"tool_name": "Demo_Sleep", "arguments": {"seconds": 0.6}})
    assert r.status_code == 450
    detail = r.json()["detail"]
    assert detail["type"] == "retry" and detail["next_calling"] == COLLECT_TOOL
    assert set(detail["arguments"]) == {"handle"} and len(detail["arguments"]["handle"]) >= 22
    r = await collect_until_done(client, node_id, detail)
    assert (r.status_code, r.json()) == (200, {"type": "simple", "data": {"slept": 0.6}})
    r = await execute(client, node_id, {"tool_name": COLLECT_TOOL, "arguments": detail["arguments"]})
    assert r.status_code == 404 and "already collected" in r.json()["detail"]
    r = await client.post("/get_available_tools", headers=jar(node_id))
    assert COLLECT_TOOL not in r.json()["available_tools"]


async def test_handles_are_bound_to_their_session(client: httpx.AsyncClient) -> None:
    mine, theirs = await new_session(client), await new_session(client)
    r = await execute(client, mine, {"tool_name": "Demo_Sleep", "arguments": {"seconds": 0.5}})
    handle = r.json()["detail"]["arguments"]
    gone = f"The result handle {handle['handle']} is unknown, expired or already collected"
    for other in (theirs, None):  # another session's handle is answered exactly as one that never existed
        r = await execute(client, other, {"tool_name": COLLECT_TOOL, "arguments": handle})
        assert (r.status_code, r.json()) == (404, {"detail": gone})
    r = await collect_until_done(client, mine, {"next_calling": COLLECT_TOOL, "arguments": handle})
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("arguments", "status"),
    [
        ({"handle": "forged-but-well-formed-handle-0123456789"}, 404),
        ({"handle": "../../etc/passwd"}, 404),
        ({"handle": 42}, 422),
        ({}, 422),
        ({"handle": "x" * 43, "more": 1}, 422),
    ],
)
async def test_forged_or_malformed_handles(client: httpx.AsyncClient, arguments: dict[str, Any], status: int) -> None:
    r = await execute(client, None, {"tool_name": COLLECT_TOOL, "arguments": arguments})
    assert r.status_code == status
    if status == 422:
        assert all(d["loc"][:2] == ["body", "arguments"] for d in r.json()["detail"])


# ---- bad input over HTTP ----


@pytest.mark.parametrize(
    "path", ["/execute_tool", "/retrieving_tools", "/get_json_schema_for_tools", "/get_json_schema_for_envs"]
)
async def test_missing_wrong_type_and_broken_bodies(client: httpx.AsyncClient, path: str) -> None:
    r = await client.post(path)
    assert (r.status_code, r.json()["detail"][0]["type"]) == (422, "missing")
    r = await client.post(path, json=3.5)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][0] == "body"
    r = await client.post(path, content=b'{"tool_name": ', headers={"content-type": "application/json"})
    assert (r.status_code, r.json()["detail"][0]["type"]) == (422, "json_invalid")


@pytest.mark.parametrize("top_k", [-3, 0, 10**12, "many"])
async def test_bad_top_k_over_http(client: httpx.AsyncClient, top_k: object) -> None:
    r = await client.post("/retrieving_tools", json={"question": "add", "top_k": top_k})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "top_k"]


async def test_parameterless_endpoints_refuse_parameters(client: httpx.AsyncClient) -> None:
    r = await client.post("/get_available_tools", json={"verbose": True})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "verbose"]
    r = await client.get("/get_available_tools?verbose=1")
    assert r.status_code == 422


async def test_too_large_bodies_get_413() -> None:
    async with asgi_client(CONFIG + "limits: {max_body_bytes: 64}\n") as small:
        r = await small.post("/execute_tool", json={"tool_name": "Text_WordCount", "arguments": {"text": "x" * 100}})
        assert r.status_code == 413 and "limit" in r.json()["detail"]


async def test_prefix_and_disabling() -> None:
    prefixed = CONFIG.replace("{patience_s: 0.2,", '{prefix: "/xagent", patience_s: 0.2,')
    async with asgi_client(prefixed) as c:
        r = await c.post("/xagent/get_cookie")
        assert r.status_code == 200 and "Path=/xagent" in r.headers["set-cookie"]
        assert (await c.post("/get_cookie")).status_code == 404
    disabled = CONFIG.replace("{patience_s: 0.2,", "{enabled: false, patience_s: 0.2,")
    async with asgi_client(disabled) as c:
        assert (await c.post("/get_cookie")).status_code == 404


async def test_calls_without_a_session_collect_without_one(client: httpx.AsyncClient) -> None:
    r = await execute(client, None, {"tool": "Demo_Sleep", "parameters": {"seconds": 0.5}})
    assert r.status_code == 450
    detail = r.json()["detail"]
    node_id = await new_session(client)
    r = await execute(client, node_id, {"tool_name": COLLECT_TOOL, "arguments": detail["arguments"]})
    assert r.status_code == 404  # a session may not take a sessionless caller's result either (unknown to it)
    r = await collect_until_done(client, None, detail)
    assert (r.status_code, r.json()) == (200, {"type": "simple", "data": {"slept": 0.5}})


async def test_api_keys_apply_when_configured() -> None:
    async with asgi_client(CONFIG + "auth: {api_keys: [{key: secret-key-1}]}\n") as c:
        r = await c.post("/get_cookie")
        assert r.status_code == 401 and isinstance(r.json()["detail"], str)
        r = await c.post("/execute_tool", json={"tool_name": "Math_Add", "arguments": {"a": 1, "b": 1}})
        assert r.status_code == 401
        key = {"Authorization": "Bearer secret-key-1"}
        r = await c.post("/execute_tool", json={"tool_name": "Math_Add", "arguments": {"a": 1, "b": 1}}, headers=key)
        assert (r.status_code, r.json()) == (200, 2)


async def test_get_errors_name_the_query_string(client: httpx.AsyncClient) -> None:
    r = await client.get("/retrieving_tools", params={"question": "add", "top_k": "0"})
    assert (r.status_code, r.json()["detail"][0]["loc"]) == (422, ["query", "top_k"])
    r = await client.get("/retrieving_tools")
    assert (r.status_code, r.json()["detail"][0]["loc"]) == (422, ["query", "question"])
    r = await client.get("/get_json_schema_for_tools", params={"tools": "Math_Add", "verbose": "1"})
    assert (r.status_code, r.json()["detail"][0]["loc"]) == (422, ["query", "verbose"])


async def test_uncollected_handles_expire(client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    r = await execute(client, None, {"tool_name": "Demo_Sleep", "arguments": {"seconds": 30}})
    assert r.status_code == 450
    detail = r.json()["detail"]
    real = time.monotonic
    later = type("Later", (), {"monotonic": staticmethod(lambda: real() + 601)})  # past result_retention_s
    monkeypatch.setattr(gateway.state, "time", later)
    r = await execute(client, None, {"tool_name": COLLECT_TOOL, "arguments": detail["arguments"]})
    assert r.status_code == 404 and "expired" in r.json()["detail"]
