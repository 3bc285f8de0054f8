"""JWT claims mapped to tool globs (`auth.jwt.grants`): what a JWT caller sees and calls, in every front.

A token's `scope` (space-separated string) or `roles` (list) values each grant
globs on flat tool names; the caller may list and call the union, nothing when
no value matches, everything when `grants` is absent. Each front is checked for
its listing and its call, and for its own not-permitted answer: OpenTool 200
with code 403, OXP 400, ToolServerNode 403, JSON-RPC -32002.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest

from gateway.auth import JwtAuth, claim_values
from gateway.errors import ErrorKind, GatewayError
from gateway.model import Principal, ToolSpec, permitted
from tests.support import BUILTIN_BACKENDS, asgi_client

SECRET = "grants-test-secret-0123456789-abcdefgh"  # at least 32 bytes, as HS256 wants
ENV = "TOOLPLEX_TEST_GRANTS_SECRET"
GRANTS = """
auth:
  jwt:
    secret_env: TOOLPLEX_TEST_GRANTS_SECRET
    claim: CLAIM
    grants:
      "tools:math": ["Math_*"]
      "tools:words": ["Text_Word*", "Nothing_Here"]
      admin: ["*"]
"""
MATH = ["Math_Add", "Math_Divide", "Math_Multiply", "Math_Subtract"]
OK_CALL = ("Math_Add", {"a": 2, "b": 3}, 5)  # a math grant allows it
DENIED_CALL = ("Time_Now", {"timezone": "UTC"})  # no grant but admin allows it


@pytest.fixture(autouse=True)
def jwt_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, SECRET)


def config(claim: str = "scope", grants: bool = True) -> str:
    auth = GRANTS.replace("CLAIM", claim) if grants else f"\nauth:\n  jwt:\n    secret_env: {ENV}\n"
    return BUILTIN_BACKENDS + auth


def token(sub: str = "ada", **claims: Any) -> str:
    body = {"sub": sub, "exp": int(time.time()) + 300, **claims}
    return jwt.encode(body, SECRET, algorithm="HS256")


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


# ---- one front at a time: its listing, an allowed call, a refused call ----


async def opentool_view(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[list[str], Any, Any]:
    load = await client.get("/opentool/load", headers=headers)
    assert load.status_code == 200, load.text
    names = [function["name"] for function in load.json()["functions"]]

    async def call(tool: str, params: dict[str, Any]) -> httpx.Response:
        body = {"jsonrpc": "2.0", "method": tool, "params": params, "id": "1"}
        return await client.post("/opentool/call", json=body, headers=headers)

    allowed = await call(OK_CALL[0], OK_CALL[1])
    denied = await call(*DENIED_CALL)
    assert denied.status_code == 200 and denied.json()["error"]["code"] == 403, denied.text
    return names, allowed.json().get("result", {}).get("result"), denied.json()["error"]["message"]


async def oxp_view(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[list[str], Any, Any]:
    listing = await client.get("/tools", headers=headers)
    assert listing.status_code == 200, listing.text
    names = sorted({item["name"] for item in listing.json()["items"]})

    async def call(tool: str, params: dict[str, Any]) -> httpx.Response:
        return await client.post(
            "/tools/call", json={"tool_id": tool.replace("_", "."), "input": params}, headers=headers
        )

    allowed = await call(OK_CALL[0], OK_CALL[1])
    denied = await call(*DENIED_CALL)
    assert denied.status_code == 400, denied.text
    return names, allowed.json().get("value"), denied.json()["message"]


async def toolserver_view(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[list[str], Any, Any]:
    client.cookies.clear()
    assert (await client.post("/get_cookie", headers=headers)).status_code == 200
    listing = await client.post("/get_available_tools", headers=headers)
    assert listing.status_code == 200, listing.text
    names = listing.json()["available_tools"]
    assert [tool["name"] for tool in listing.json()["tools_json"]] == names

    async def call(tool: str, params: dict[str, Any]) -> httpx.Response:
        return await client.post("/execute_tool", json={"tool_name": tool, "arguments": params}, headers=headers)

    allowed = await call(OK_CALL[0], OK_CALL[1])
    denied = await call(*DENIED_CALL)
    assert denied.status_code == 403, denied.text
    value = allowed.json() if allowed.status_code == 200 else None
    return names, value, denied.json()["detail"]


async def jsonrpc_view(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[list[str], Any, Any]:
    listing = await client.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.list"}, headers=headers)
    names = [tool["id"] for tool in listing.json()["result"]["tools"]]

    async def call(tool: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tool.execute", "params": {"tool": tool, "parameters": params}}
        answer = await client.post("/rpc", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    allowed = await call(OK_CALL[0], OK_CALL[1])
    denied = await call(*DENIED_CALL)
    assert denied["error"]["code"] == -32002, denied
    return names, allowed.get("result", {}).get("metadata", {}).get("value"), denied["error"]["message"]


FRONTS = {"opentool": opentool_view, "oxp": oxp_view, "toolserver": toolserver_view, "jsonrpc": jsonrpc_view}


@pytest.mark.parametrize("front", FRONTS)
async def test_a_scope_sees_and_calls_only_its_tools(front: str) -> None:
    async with asgi_client(config()) as client:
        listed, value, refusal = await FRONTS[front](client, bearer(token(scope="openid tools:math")))
    assert sorted(listed) == MATH
    assert value == OK_CALL[2]
    assert "Caller 'jwt:ada' may not call tool Time_Now" in str(refusal)


@pytest.mark.parametrize("front", FRONTS)
async def test_a_roles_list_grants_the_union_of_its_values(front: str) -> None:
    async with asgi_client(config(claim="roles")) as client:
        headers = bearer(token(roles=["tools:words", "tools:math", "unknown-role"]))
        listed, value, refusal = await FRONTS[front](client, headers)
    assert sorted(listed) == sorted([*MATH, "Text_WordCount"])
    assert value == OK_CALL[2] and "may not call tool Time_Now" in str(refusal)


@pytest.mark.parametrize("front", FRONTS)
async def test_no_matching_value_means_no_tools(front: str) -> None:
    async with asgi_client(config()) as client:
        for headers in (bearer(token(scope="openid profile")), bearer(token())):  # values that match nothing; none
            listed, value, refusal = await FRONTS[front](client, headers)
            assert listed == [] and value is None, (listed, value)
            assert "may not call tool Time_Now" in str(refusal)


@pytest.mark.parametrize("front", ["opentool", "oxp", "toolserver", "jsonrpc"])
async def test_the_admin_glob_and_absent_grants_allow_everything(front: str) -> None:
    async with asgi_client(config()) as client:
        admin = await listing(client, front, bearer(token(scope="admin")))
        assert await calls_time_now(client, front, bearer(token(scope="admin")))
    async with asgi_client(config(grants=False)) as client:
        ungranted = await listing(client, front, bearer(token(scope="nothing-granted")))
        assert await calls_time_now(client, front, bearer(token()))
    assert admin == sorted([*MATH, "Demo_Fail", "Demo_Sleep", "Text_WordCount", "Time_Now"])
    assert ungranted == admin


async def listing(client: httpx.AsyncClient, front: str, headers: dict[str, str]) -> list[str]:
    if front == "opentool":
        return sorted(f["name"] for f in (await client.get("/opentool/load", headers=headers)).json()["functions"])
    if front == "oxp":
        return sorted({i["name"] for i in (await client.get("/tools", headers=headers)).json()["items"]})
    if front == "toolserver":
        await client.post("/get_cookie", headers=headers)
        return sorted((await client.post("/get_available_tools", headers=headers)).json()["available_tools"])
    body = {"jsonrpc": "2.0", "id": 1, "method": "tool.list"}
    return sorted(t["id"] for t in (await client.post("/rpc", json=body, headers=headers)).json()["result"]["tools"])


async def calls_time_now(client: httpx.AsyncClient, front: str, headers: dict[str, str]) -> bool:
    tool, params = DENIED_CALL
    if front == "opentool":
        body = {"jsonrpc": "2.0", "method": tool, "params": params, "id": "1"}
        return "iso" in (await client.post("/opentool/call", json=body, headers=headers)).json()["result"]
    if front == "oxp":
        answer = await client.post("/tools/call", json={"tool_id": "Time.Now", "input": params}, headers=headers)
        return answer.status_code == 200 and answer.json()["success"] is True
    if front == "toolserver":
        await client.post("/get_cookie", headers=headers)
        answer = await client.post("/execute_tool", json={"tool_name": tool, "arguments": params}, headers=headers)
        return answer.status_code == 200 and "iso" in answer.json()["data"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": tool, "parameters": params}}
    return "result" in (await client.post("/rpc", json=body, headers=headers)).json()


async def test_toolserver_retrieval_and_schemas_keep_to_the_grants() -> None:
    async with asgi_client(config()) as client:
        headers = bearer(token(scope="tools:math"))
        await client.post("/get_cookie", headers=headers)
        found = await client.post("/retrieving_tools", json={"question": "count the words of a text"}, headers=headers)
        schemas = await client.post(
            "/get_json_schema_for_tools", json={"tools": ["Text_WordCount", "Math_Add"]}, headers=headers
        )
    assert found.status_code == 200 and set(found.json()["retrieved_tools"]) <= set(MATH)
    assert schemas.json()["missing_tools"] == ["Text_WordCount"]
    assert [tool["name"] for tool in schemas.json()["tools_json"]] == ["Math_Add"]


# ---- a claim of the wrong shape is a 401 on every front, never "no tools" in silence ----


@pytest.mark.parametrize(
    ("claims", "shape"),
    [({"scope": 7}, "a number"), ({"scope": {"a": 1}}, "an object"), ({"scope": ["x", 1]}, "a list holding")],
)
async def test_a_claim_of_another_shape_is_refused_on_every_front(claims: dict[str, Any], shape: str) -> None:
    async with asgi_client(config()) as client:
        headers = bearer(token(**claims))
        answers = {
            "opentool": await client.get("/opentool/load", headers=headers),
            "oxp": await client.get("/tools", headers=headers),
            "toolserver": await client.post("/get_cookie", headers=headers),
            "jsonrpc": await client.post(
                "/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.list"}, headers=headers
            ),
        }
    for front, answer in answers.items():
        assert answer.status_code == 401, (front, answer.text)
        assert "JWT claim 'scope' must be a string of space-separated values or a list of strings" in answer.text
        assert shape in answer.text, (front, answer.text)


# ---- the mapping itself ----


def auth(grants: dict[str, list[str]] | None, claim: str = "scope") -> JwtAuth:
    return JwtAuth(SECRET, claim=claim, grants=grants)


def spec(flat: str) -> ToolSpec:
    toolkit, name = flat.split("_", 1)
    return ToolSpec(toolkit=toolkit, name=name, version="1.0.0", description="", input_schema={"type": "object"})


def test_the_principal_carries_the_union_of_globs_in_order_without_repeats() -> None:
    jwt_auth = auth({"a": ["Math_*", "Text_Reverse"], "b": ["Text_Reverse", "Time_*"], "c": []})
    principal = jwt_auth.authenticate(token(scope="b a c z"))
    assert principal == Principal(name="jwt:ada", tools=("Text_Reverse", "Time_*", "Math_*"))
    assert permitted(principal, spec("Math_Add")) and not permitted(principal, spec("Text_WordCount"))
    nothing = jwt_auth.authenticate(token(scope="c"))
    assert nothing is not None and nothing.tools == () and not permitted(nothing, spec("Math_Add"))


def test_without_grants_a_jwt_caller_may_call_every_tool() -> None:
    principal = auth(None).authenticate(token(scope=["not", "even", "a", "string"]))
    assert principal is not None and principal.tools is None and permitted(principal, spec("Anything_AtAll"))


def test_claim_values_read_oauth_scope_strings_and_role_lists() -> None:
    assert claim_values("openid  tools:math\ttools:text", "scope") == ["openid", "tools:math", "tools:text"]
    assert claim_values(["a b", "c"], "roles") == ["a b", "c"]  # a list's items are values as they are
    assert claim_values(None, "roles") == [] and claim_values("", "scope") == [] and claim_values([], "roles") == []
    for bad in (True, 1.5, {"x": 1}, [None]):
        with pytest.raises(GatewayError) as raised:
            claim_values(bad, "roles")
        assert raised.value.failure.kind is ErrorKind.UNAUTHENTICATED
        assert raised.value.failure.message.startswith("JWT claim 'roles' must be")


# ---- an admin by a grant of the token (`auth.admin_grants`), as `auth.admins` makes one by name ----


@pytest.mark.parametrize("claim", ["scope", "roles"])
async def test_a_token_whose_grant_claim_holds_an_admin_grant_is_an_admin(claim: str) -> None:
    gateway = "fronts:\n  console: {enabled: true}\n" + config(claim) + '  admin_grants: ["admin"]\n'

    def values(*names: str) -> str | list[str]:
        return " ".join(names) if claim == "scope" else list(names)

    async with asgi_client(gateway) as client:
        for claims, admin in (
            ({claim: values("tools:math", "admin")}, True),
            ({claim: values("tools:math")}, False),
            ({}, False),
            ({claim: values("administrator")}, False),  # a value, not a prefix or a glob
        ):
            me = await client.get("/console/api/me", headers=bearer(token("ada", **claims)))
            assert me.status_code == 200, me.text
            assert (me.json()["principal"], me.json()["admin"]) == ("jwt:ada", admin), claims
