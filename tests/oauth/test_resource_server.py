"""Toolplex as an OAuth 2.1 protected resource, against a real authorization server (tests/oauth/auth_server.py).

One gateway trusts the server (`auth.oauth`), with scopes mapped to tools, API keys and HS256 JWTs beside it.
Every front is asked with each kind of token: good, for another audience, expired, from an untrusted issuer,
signed by a rotated-out key, lacking a scope; and the `mcp` SDK's own OAuth client finds its way in from
nothing but the URL and its client registration.
"""

from __future__ import annotations

import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import httpx2
import jwt
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from gateway.oauth.issuers import Issuer
from tests.oauth.auth_server import DEFAULT_CLIENTS, AuthServer, missing_reason
from tests.support import free_port, served_gateway

JWT_SECRET = "an-hs256-secret-of-at-least-32-bytes!!"
API_KEY = "alpha-key-0123456789"
REDIRECT = "http://127.0.0.1:9/callback"  # never reached: the test reads the code off the redirect itself
SDK_CLIENT = {
    "client_id": "mcp-sdk",
    "redirect_uris": [REDIRECT],
    "grant_types": ["authorization_code", "refresh_token"],
}


@dataclass
class Stack:
    server: AuthServer
    base: str

    def token(self, scope: str = "math:call text:call", **claims: Any) -> str:
        return self.server.mint({"sub": "ada", "aud": self.base, "scope": scope, **claims})


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("oauth-resource")
    with AuthServer(tmp / "as", clients=[*DEFAULT_CLIENTS, SDK_CLIENT]) as server:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        config = tmp / "gateway.yaml"
        config.write_text(
            textwrap.dedent(
                f"""\
                server: {{public_url: "{base}"}}
                auth:
                  api_keys: [{{key: "{API_KEY}", name: alpha}}]
                  jwt: {{secret_env: TEST_JWT_SECRET}}
                  oauth:
                    keys_refresh_min_s: 0
                    issuers:
                      - issuer: "{server.issuer}"
                        client_id: toolplex-gateway
                        client_secret: toolplex-gateway-secret
                    grants: {{"math:call": ["Math_*"], "text:call": ["Text_*"]}}
                  admin_grants: ["toolplex:admin"]
                fronts:
                  mcp: {{servers: {{mathonly: {{include: ["Math_*"]}}}}}}
                backends:
                  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
                  - {{name: text, kind: python, module: "adapters.python.toolkits.text:toolkit"}}
                """
            )
        )
        with served_gateway(config, env={"TEST_JWT_SECRET": JWT_SECRET}, port=port) as (url, _process):
            assert url == base
            yield Stack(server, base)


# ---- one call per front, as each protocol's client makes it: (HTTP status, WWW-Authenticate, body) ----

Said = tuple[int, str | None, Any]


def _said(response: httpx.Response) -> Said:
    try:
        body = response.json()
    except ValueError:
        body = response.text
    return response.status_code, response.headers.get("www-authenticate"), body


def opentool(base: str, headers: dict[str, str], tool: str) -> Said:
    body = {"jsonrpc": "2.0", "method": tool, "params": {"a": 1, "b": 2}, "id": "1"}
    return _said(httpx.post(f"{base}/opentool/call", json=body, headers=headers))


def oxp(base: str, headers: dict[str, str], tool: str) -> Said:
    toolkit, _, name = tool.partition("_")
    body = {"tool_id": f"{toolkit}.{name}", "input": {"a": 1, "b": 2}}
    return _said(httpx.post(f"{base}/tools/call", json=body, headers=headers))


def toolserver(base: str, headers: dict[str, str], tool: str) -> Said:
    body = {"tool_name": tool, "arguments": {"a": 1, "b": 2}}
    return _said(httpx.post(f"{base}/execute_tool", json=body, headers=headers))


def jsonrpc(base: str, headers: dict[str, str], tool: str) -> Said:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tool.execute",
        "params": {"tool": tool, "parameters": {"a": 1, "b": 2}},
    }
    return _said(httpx.post(f"{base}/rpc", json=body, headers=headers))


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test-oauth", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}


def mcp(base: str, headers: dict[str, str], tool: str) -> Said:
    """A 2026-07-28 `tools/call` (stateless: one POST), as the SDK client sends it."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"a": 1, "b": 2}, "_meta": META},
    }
    sent = {**MODERN_HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": tool, **headers}
    return _said(httpx.post(f"{base}/mcp", json=body, headers=sent))


FRONTS: dict[str, Callable[[str, dict[str, str], str], Said]] = {
    "opentool": opentool,
    "oxp": oxp,
    "toolserver": toolserver,
    "jsonrpc": jsonrpc,
    "mcp": mcp,
}


def value_of(front: str, body: Any) -> Any:
    """The tool's value in each front's success answer (Math_Add of 1 and 2)."""
    if front == "opentool":
        return body["result"].get("result", body["result"])
    if front == "oxp":
        return body["value"] if body.get("success") else None
    if front == "toolserver":
        return body["data"] if isinstance(body, dict) and body.get("type") == "simple" else body
    if front == "jsonrpc":
        return body["result"]["metadata"]["value"]
    result = body.get("result")
    if not result or result.get("isError"):
        return None
    return int(result["content"][0]["text"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def challenge(header: str | None) -> dict[str, str]:
    """The parameters of a `Bearer` challenge."""
    assert header is not None and header.startswith("Bearer "), header
    params = {}
    for part in header[len("Bearer ") :].split(", "):
        key, _, value = part.partition("=")
        params[key] = value.strip('"')
    return params


@pytest.mark.parametrize("front", FRONTS)
def test_a_token_of_the_trusted_issuer_for_this_gateway_is_accepted(stack: Stack, front: str) -> None:
    status, header, body = FRONTS[front](stack.base, bearer(stack.token()), "Math_Add")
    assert status == 200 and header is None, body
    assert value_of(front, body) == 3, body


@pytest.mark.parametrize("front", FRONTS)
def test_no_credentials_get_a_401_that_says_where_to_get_a_token(stack: Stack, front: str) -> None:
    status, header, body = FRONTS[front](stack.base, {}, "Math_Add")
    assert status == 401, body
    params = challenge(header)
    path = "/mcp" if front == "mcp" else ""
    assert params["resource_metadata"] == f"{stack.base}/.well-known/oauth-protected-resource{path}"
    assert params["scope"] == "math:call text:call" and "error" not in params


BAD_TOKENS: dict[str, Callable[[Stack], str]] = {
    "another audience": lambda s: s.token(aud="http://127.0.0.1:1/elsewhere"),
    "no audience": lambda s: s.token(aud=None),
    "expired": lambda s: s.server.mint({"sub": "ada", "aud": s.base, "scope": "math:call"}, expires_in=-120),
    "not valid yet": lambda s: s.token(nbf=int(time.time()) + 600),
    "untrusted issuer": lambda s: s.token(iss="http://127.0.0.1:1/not-trusted"),
    "unknown signing key": lambda s: s.server.mint({"sub": "ada", "aud": s.base}, header={"kid": "never-published"}),
    "no subject": lambda s: s.token(sub=None),
    "HS256 with the issuer's name": lambda s: jwt.encode(
        {"sub": "ada", "aud": s.base, "iss": s.server.issuer, "exp": int(time.time()) + 60}, JWT_SECRET
    ),
    "alg none": lambda s: jwt.encode(
        {"sub": "ada", "aud": s.base, "iss": s.server.issuer, "exp": int(time.time()) + 60}, None, algorithm="none"
    ),
    "an opaque token the issuer does not know": lambda _s: "opaque-" + uuid.uuid4().hex,
}


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("case", BAD_TOKENS)
def test_a_bad_token_is_refused_with_invalid_token(stack: Stack, front: str, case: str) -> None:
    status, header, body = FRONTS[front](stack.base, bearer(BAD_TOKENS[case](stack)), "Math_Add")
    assert status == 401, body
    params = challenge(header)
    assert params["error"] == "invalid_token" and params["resource_metadata"].startswith(stack.base)
    assert "Traceback" not in str(body)


@pytest.mark.parametrize("front", FRONTS)
def test_a_token_without_the_scope_a_tool_needs_gets_403_insufficient_scope(stack: Stack, front: str) -> None:
    status, header, body = FRONTS[front](stack.base, bearer(stack.token(scope="text:call")), "Math_Add")
    assert status == 403, body
    params = challenge(header)
    assert params["error"] == "insufficient_scope" and params["scope"] == "math:call"
    assert value_of(front, body) is None if front == "mcp" else True  # the body stays the front's own refusal
    status, header, _body = FRONTS[front](stack.base, bearer(stack.token(scope="math:call")), "Math_Add")
    assert status == 200 and header is None


def test_a_token_lists_only_the_tools_its_scopes_allow(stack: Stack) -> None:
    listed = httpx.post(f"{stack.base}/get_available_tools", headers=bearer(stack.token(scope="text:call"))).json()
    assert listed["available_tools"] and all(name.startswith("Text_") for name in listed["available_tools"])
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    sent = {**MODERN_HEADERS, "Mcp-Method": "tools/list"}
    text_only = {**sent, **bearer(stack.token(scope="text:call"))}
    names = {
        tool["name"] for tool in httpx.post(f"{stack.base}/mcp", json=body, headers=text_only).json()["result"]["tools"]
    }
    assert names and all(name.startswith("Text_") for name in names), names
    none = httpx.post(f"{stack.base}/mcp", json=body, headers={**sent, **bearer(stack.token(scope="other"))}).json()
    assert none["result"]["tools"] == []


def test_the_console_takes_the_issuers_tokens_and_an_admin_grant_among_their_scopes(stack: Stack) -> None:
    """The console answers the trusted issuer's access tokens as every front does: the caller sees the tools
    its scopes grant; a scope named by `auth.admin_grants` makes it an admin."""
    for scope, admin in (("math:call", False), ("math:call toolplex:admin", True)):
        headers = bearer(stack.token(scope=scope))
        me = httpx.get(f"{stack.base}/console/api/me", headers=headers)
        assert me.status_code == 200, me.text
        assert me.json()["principal"].startswith("oauth:") and me.json()["principal"].endswith(":ada")
        assert me.json()["admin"] is admin
        tools = httpx.get(f"{stack.base}/console/api/tools", headers=headers).json()["tools"]
        assert tools and all(tool["name"].startswith("Math_") for tool in tools)
    refused = httpx.get(f"{stack.base}/console/api/me", headers=bearer("not-a-token"))
    assert refused.status_code == 401


def test_the_protected_resource_metadata_is_published_at_every_form(stack: Stack) -> None:
    for path in ("", "/mcp", "/mcp/mathonly"):
        answer = httpx.get(f"{stack.base}/.well-known/oauth-protected-resource{path}")
        assert answer.status_code == 200, answer.text
        document = answer.json()
        assert document["resource"] == stack.base
        assert document["authorization_servers"] == [stack.server.issuer]
        assert document["scopes_supported"] == ["math:call", "text:call"]
        assert document["bearer_methods_supported"] == ["header"]
    virtual = mcp(stack.base, {}, "Math_Add")  # /mcp: path-inserted; a virtual server's own path likewise
    assert challenge(virtual[1])["resource_metadata"].endswith("/oauth-protected-resource/mcp")


def test_keys_are_fetched_once_not_per_call_and_again_after_a_rotation(stack: Stack) -> None:
    oxp(stack.base, bearer(stack.token()), "Math_Add")  # the keys are known by now
    stack.server.reset_stats()
    for _ in range(10):
        assert oxp(stack.base, bearer(stack.token()), "Math_Add")[0] == 200
    assert stack.server.stats()["jwks"] == 0
    old_token = stack.token()
    assert oxp(stack.base, bearer(old_token), "Math_Add")[0] == 200
    stack.server.rotate()
    new_token = stack.token()
    assert oxp(stack.base, bearer(new_token), "Math_Add")[0] == 200  # an unknown kid: the keys fetched again
    assert stack.server.stats()["jwks"] == 1
    for front, call in FRONTS.items():  # its key rotated out: refused on every front
        status, header, body = call(stack.base, bearer(old_token), "Math_Add")
        assert status == 401 and challenge(header)["error"] == "invalid_token", (front, body)
        assert "rotated out" in str(body), (front, body)


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
def test_ec_and_eddsa_signatures_are_verified(stack: Stack, alg: str) -> None:
    token = stack.server.mint({"sub": "ada", "aud": stack.base, "scope": "math:call"}, alg=alg)
    assert oxp(stack.base, bearer(token), "Math_Add")[0] == 200


def test_an_opaque_token_is_introspected_once_for_its_lifetime(stack: Stack) -> None:
    token = stack.server.opaque({"sub": "bob", "aud": stack.base, "scope": "math:call"})
    stack.server.reset_stats()
    for _ in range(5):
        assert oxp(stack.base, bearer(token), "Math_Add")[0] == 200
    assert stack.server.stats()["introspect"] == 1
    elsewhere = stack.server.opaque({"sub": "bob", "aud": "http://127.0.0.1:1/elsewhere", "scope": "math:call"})
    status, _header, body = oxp(stack.base, bearer(elsewhere), "Math_Add")
    assert status == 401 and "not for this gateway" in body["message"]


def test_two_issuers_subjects_and_api_keys_are_different_principals(stack: Stack) -> None:
    """Each caller's state is its own: the principal is `oauth:<issuer>:<sub>`, never an API key's or a JWT's."""
    shown = httpx.post(
        f"{stack.base}/tools/call",
        json={"tool_id": "Math.Add", "input": {"a": 1, "b": 2}},
        headers=bearer(stack.token(scope="text:call")),
    ).json()
    assert f"oauth:{stack.server.issuer}:ada" in shown["message"]


def test_api_keys_and_shared_secret_jwts_keep_working(stack: Stack) -> None:
    assert oxp(stack.base, bearer(API_KEY), "Math_Add")[0] == 200
    hs256 = jwt.encode({"sub": "carol", "exp": int(time.time()) + 60}, JWT_SECRET)
    assert oxp(stack.base, bearer(hs256), "Math_Add")[0] == 200
    assert oxp(stack.base, bearer("not-a-key"), "Math_Add")[0] == 401


async def test_unknown_kids_flood_fetches_keys_at_most_once_per_refresh_interval(stack: Stack) -> None:
    """`keys_refresh_min_s`: made-up kids never make the gateway hammer the issuer."""

    class Settings:
        issuer = stack.server.issuer
        name = None
        algorithms = ("RS256",)
        client_id = client_secret = discovery_url = jwks_url = introspection_url = None

    issuer = Issuer(Settings(), timeout_s=5, keys_max_age_s=3600, keys_refresh_min_s=60)
    stack.server.reset_stats()
    await issuer.ensure_key(None)
    for index in range(20):
        await issuer.ensure_key(f"made-up-{index}")
    assert stack.server.stats()["jwks"] == 1 and issuer.fetches == 1


# ---- the mcp SDK's own OAuth client: from the URL alone ----


class Storage:
    """The SDK's token storage, holding the client's pre-registered identity at the authorization server."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client = OAuthClientInformationFull(
            client_id=SDK_CLIENT["client_id"],
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """What a user's browser does at an authorization server that approves at once: follow to the redirect."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.visited: list[str] = []

    async def open(self, url: str) -> None:
        self.visited.append(url)
        async with httpx.AsyncClient() as http:
            answer = await http.get(url)
        location = answer.headers["location"]
        assert location.startswith(REDIRECT), location
        query = parse_qs(urlsplit(location).query)
        self.result = AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


@pytest.mark.parametrize(("mode", "path"), [("auto", "/mcp"), ("legacy", "/mcp"), ("auto", "/mcp/mathonly")])
async def test_the_mcp_sdk_client_reaches_a_tool_by_oauth_discovery_alone(stack: Stack, mode: str, path: str) -> None:
    browser = Browser()
    provider = OAuthClientProvider(
        server_url=f"{stack.base}{path}",
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT], scope="math:call"),
        storage=Storage(),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30))
    with anyio.fail_after(60):
        async with Client(streamable_http_client(f"{stack.base}{path}", http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            tools = (await client.list_tools()).tools
            assert "Math_Add" in {tool.name for tool in tools}
            result = await client.call_tool("Math_Add", {"a": 2, "b": 5})
            assert not result.is_error and [block.text for block in result.content] == ["7"], result
    assert len(browser.visited) == 1
    authorize = parse_qs(urlsplit(browser.visited[0]).query)
    assert authorize["resource"] == [f"{stack.base}/"] or authorize["resource"] == [stack.base]
    assert isinstance(types.CallToolResult, type)


def test_a_handshake_era_session_is_told_the_scope_it_lacks(stack: Stack) -> None:
    """2025-11-25 over a session (the SDK's session manager answers from its own task)."""
    token = stack.token(scope="text:call")
    headers = {"Accept": "application/json, text/event-stream", **bearer(token)}
    opening = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    with httpx.Client(base_url=stack.base, headers=headers, timeout=20) as http:
        opened = http.post("/mcp", json=opening)
        assert opened.status_code == 200, opened.text
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "Math_Add", "arguments": {}}}
        refused = http.post("/mcp", json=call, headers=session)
        assert refused.status_code == 403, refused.text
        assert challenge(refused.headers.get("www-authenticate")) == {
            "error": "insufficient_scope",
            "scope": "math:call",
            "resource_metadata": f"{stack.base}/.well-known/oauth-protected-resource/mcp",
        }
        call["params"] = {"name": "Text_WordCount", "arguments": {"text": "a b"}}
        assert http.post("/mcp", json=call, headers=session).status_code == 200
