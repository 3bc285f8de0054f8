"""Issue 25, the credential findings: whose credentials go upstream, who a JWT is, what reaches clients.

- F. A client authenticated with `X-API-Key` calls OpenTool, JSON-RPC and ToolServerNode upstreams
  (`forward_authorization: true`) with the gateway's own key instead of its own credential.
- G. A JWT without `sub` is accepted as the principal `jwt` (shared by every such token); `iss` is
  never checked; the principal claim cannot be chosen.
- H. The stderr tail of a stdio MCP server, an isolated Python worker or the TypeScript sidecar
  reaches clients unredacted.
- I. docker/nginx.conf publishes the gateways' `/metrics` on its public port, without auth.

Each test fails on the code the issue was filed against, for the leak itself, and passes once fixed.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
import yaml

from tests.support import ROOT, asgi_client, gateway_process, python_server

ALICE_KEY = "alice-key-0001"
BOB_KEY = "bob-key-0002"
OWN_KEY = "gateway-own-key"
KEYS = f"""
auth:
  api_keys:
    - {{name: alice, key: "{ALICE_KEY}"}}
    - {{name: bob, key: "{BOB_KEY}"}}
"""
ALICE_BY_X_API_KEY = {"X-API-Key": ALICE_KEY}  # and no Authorization header at all


# ---- shared: one call of a tool through each front, its value read back ----


def call_on(client: httpx.Client, front: str, tool: str, arguments: dict[str, Any], headers: dict[str, str]) -> Any:
    """Call `tool` (flat name) through `front`; the tool's value, or an AssertionError naming the answer."""
    if front == "opentool":
        body = {"jsonrpc": "2.0", "method": tool, "params": arguments, "id": "c1"}
        answer = client.post("/opentool/call", json=body, headers=headers)
        assert answer.status_code == 200 and answer.json().get("error") is None, (front, answer.text)
        return answer.json()["result"]
    if front == "oxp":
        toolkit, name = tool.split("_", 1)
        answer = client.post("/tools/call", json={"tool_id": f"{toolkit}.{name}", "input": arguments}, headers=headers)
        assert answer.status_code == 200 and answer.json().get("success") is True, (front, answer.text)
        return answer.json()["value"]
    if front == "toolserver":  # no cookie: a call without a session, as the front allows
        answer = client.post("/execute_tool", json={"tool_name": tool, "arguments": arguments}, headers=headers)
        assert answer.status_code == 200, (front, answer.text)
        return answer.json()
    params = {"tool": tool, "parameters": arguments}
    answer = client.post(
        "/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": params}, headers=headers
    )
    assert answer.status_code == 200 and "result" in answer.json(), (front, answer.text)
    result = answer.json()["result"]
    # A Toolplex's canonical rendering carries the value in metadata; a JSON-RPC upstream's own result comes as
    # it came (its `output`).
    return result["metadata"].get("value", result["output"])


FRONTS = ("opentool", "oxp", "toolserver", "jsonrpc")


# ---- F. X-API-Key credentials are not forwarded ----


@dataclass(frozen=True)
class Upstream:
    """One upstream kind of the recording double: the tool to call and the paths its calls take."""

    tool: str
    arguments: dict[str, Any]
    call_paths: tuple[str, ...]  # the requests that carry a tool call (not discovery, not session set-up)


UPSTREAMS = {
    "opentool": Upstream("GeoTools_echo", {"message": "hi"}, ("/opentool/call", "/opentool/streamCall")),
    "jsonrpc": Upstream("Relay_Say", {"text": "hi"}, ("/rpc",)),
    "toolserver": Upstream("EchoEnv_echo", {"text": "hi"}, ("/tsn/execute_tool",)),
}


@pytest.fixture(scope="module")
def forwarding_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A gateway fronting the three upstream kinds of `credential_upstream`, each forwarding the caller's credential."""
    with python_server("tests.security.credential_upstream") as port:
        upstream = f"http://127.0.0.1:{port}"
        common = f"url: '{upstream}', api_key: {OWN_KEY}, forward_authorization: true, retries: 0"
        config = tmp_path_factory.mktemp("forwarding") / "gateway.yaml"
        config.write_text(
            KEYS
            + "discovery: {interval_s: 0}\n"
            + "backends:\n"
            + f"  - {{name: geo, kind: opentool, {common}}}\n"
            + f"  - {{name: relay, kind: jsonrpc, path: /rpc, {common}}}\n"
            + f"  - {{name: node, kind: toolserver, path: /tsn, {common}}}\n"
        )
        with gateway_process(config) as base:
            yield base, upstream


@pytest.mark.parametrize("kind", sorted(UPSTREAMS))
def test_x_api_key_credentials_are_forwarded_not_the_gateways_own_key(
    forwarding_gateway: tuple[str, str], kind: str
) -> None:
    """Finding F (issue 25, 7): a client that authenticated with `X-API-Key` must reach a `forward_authorization`
    upstream with its own credential, in the header it used, never with the backend's own `api_key`."""
    base, upstream = forwarding_gateway
    target = UPSTREAMS[kind]
    problems = []
    with httpx.Client(base_url=base, timeout=30) as client, httpx.Client(base_url=upstream, timeout=10) as recorder:
        for front in FRONTS:
            assert recorder.delete("/debug/credentials").status_code == 200
            call_on(client, front, target.tool, target.arguments, ALICE_BY_X_API_KEY)  # the call itself works
            seen = [r for r in recorder.get("/debug/credentials").json() if r["path"] in target.call_paths]
            assert seen, f"{kind} upstream: no call request reached it from the {front} front"
            for request in seen:
                if OWN_KEY in str(request["authorization"]) or request["x-api-key"] != ALICE_KEY:
                    problems.append(
                        f"from the {front} front: Authorization {request['authorization']!r}, "
                        f"X-API-Key {request['x-api-key']!r}"
                    )
    assert not problems, (
        f"the {kind} upstream did not get alice's X-API-Key credential (or got the gateway's own key): "
        + "; ".join(problems)
    )


# ---- G. JWTs: the principal claim is required, `iss` is checked ----

JWT_ENV = "TOOLPLEX_JWT_SECRET"
JWT_SECRET = "isolation-test-jwt-secret-0123456789abcdef"  # 32 bytes or more, as HS256 wants
ISSUER = "https://issuer.example"
GRANTS = '    grants: {"tools:math": ["Math_*"]}\n'  # a refusal then names the principal
BACKENDS = """
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
  - {name: time, kind: python, module: "adapters.python.toolkits.clock:toolkit"}
"""


def jwt_config(*lines: str) -> str:
    return f"auth:\n  jwt:\n    secret_env: {JWT_ENV}\n" + "".join(f"    {line}\n" for line in lines) + BACKENDS


def token(**claims: Any) -> dict[str, str]:
    body = {"exp": int(time.time()) + 300, **claims}
    return {"Authorization": "Bearer " + jwt.encode(body, JWT_SECRET, algorithm="HS256")}


@pytest.fixture
def jwt_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv(JWT_ENV, JWT_SECRET)
    return {JWT_ENV: JWT_SECRET}


# A 2026-07-28 (stateless) MCP request, as tests/mcp/front/modern_http.py sends one.
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/list",
}
MCP_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "isolation-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def front_answer(client: httpx.AsyncClient, front: str, headers: dict[str, str]) -> httpx.Response:
    """One authenticated request of `front` (a call where the front has one, else its session start)."""
    add = {"a": 1, "b": 2}
    if front == "opentool":
        body = {"jsonrpc": "2.0", "method": "Math_Add", "params": add, "id": "1"}
        return await client.post("/opentool/call", json=body, headers=headers)
    if front == "oxp":
        return await client.post("/tools/call", json={"tool_id": "Math.Add", "input": add}, headers=headers)
    if front == "toolserver":
        return await client.post("/get_cookie", headers=headers)
    if front == "jsonrpc":
        params = {"tool": "Math_Add", "parameters": add}
        return await client.post(
            "/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": params}, headers=headers
        )
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MCP_META}}  # stateless era
    return await client.post("/mcp", json=body, headers={**MCP_HEADERS, **headers})


@pytest.mark.parametrize("front", [*FRONTS, "mcp"])
async def test_a_jwt_without_sub_is_refused_on_every_front(jwt_env: dict[str, str], front: str) -> None:
    """Finding G (issue 25, 7): a valid JWT without its principal claim (`sub`) must be refused with 401,
    not accepted as the principal `jwt` that every such token would share (workspaces, sessions, buckets)."""
    async with asgi_client(jwt_config(), env=jwt_env) as client:
        with_sub = await front_answer(client, front, token(sub="ada"))
        client.cookies.clear()
        without_sub = await front_answer(client, front, token(scope="tools:math"))
    assert with_sub.status_code == 200, (front, with_sub.status_code, with_sub.text)  # the request itself is fine
    assert without_sub.status_code == 401, (
        f"{front}: a JWT without `sub` was accepted (HTTP {without_sub.status_code}: {without_sub.text[:200]})"
    )


async def test_the_configured_issuer_is_required(jwt_env: dict[str, str]) -> None:
    """Finding G (issue 25, 7): with `auth.jwt.issuer`, a token of another issuer, or of none, is refused (401);
    one of that issuer is accepted. (Before the fix `issuer` is an unknown key: the configuration is refused.)"""
    async with asgi_client(jwt_config(f"issuer: {ISSUER}"), env=jwt_env) as client:
        answers = {
            name: await front_answer(client, "oxp", token(sub="ada", **claims))
            for name, claims in {
                "right": {"iss": ISSUER},
                "other": {"iss": "https://elsewhere.example"},
                "none": {},
            }.items()
        }
    assert answers["right"].status_code == 200 and answers["right"].json()["value"] == 3, answers["right"].text
    assert answers["other"].status_code == 401, f"a token of another issuer was accepted: {answers['other'].text}"
    assert answers["none"].status_code == 401, f"a token without iss was accepted: {answers['none'].text}"


async def test_the_principal_comes_from_the_configured_claim(jwt_env: dict[str, str]) -> None:
    """Finding G (issue 25, 7): with `auth.jwt.principal_claim: email` the principal is the token's `email`
    (not its `sub`), and a token without `email` is refused (401). (Before the fix the key is refused.)"""
    config = jwt_config("principal_claim: email", GRANTS.strip())
    claims = {"sub": "ada", "scope": "tools:math"}
    async with asgi_client(config, env=jwt_env) as client:
        allowed = await front_answer(client, "oxp", token(email="ada@example.com", **claims))
        refusal = await client.post(
            "/tools/call",
            json={"tool_id": "Time.Now", "input": {"timezone": "UTC"}},
            headers=token(email="ada@example.com", **claims),
        )
        without_email = await front_answer(client, "oxp", token(**claims))
    assert allowed.status_code == 200 and allowed.json()["value"] == 3, allowed.text
    assert refusal.status_code == 400 and "may not call tool Time_Now" in refusal.text, refusal.text
    message = refusal.json()["message"]
    assert "ada@example.com" in message and "'jwt:ada'" not in message, f"principal not taken from email: {message}"
    assert without_email.status_code == 401, f"a token without the principal claim was accepted: {without_email.text}"


# ---- H. stderr tails reach clients unredacted ----

LEAKED_SECRETS = ("sk-live-abcdef123456", "hunter2secret")
SPILL = (
    "import sys\n"
    "print('Authorization: Bearer sk-live-abcdef123456', file=sys.stderr, flush=True)\n"
    "print('password=hunter2secret', file=sys.stderr, flush=True)\n"
)
# The test MCP server (tests/mcp/backend/mcp_server.py) after spilling: its `crash` tool ends the process.
SPILL_THEN_SERVE = SPILL + (
    "import runpy\nsys.argv = ['mcp_server']\nrunpy.run_module('tests.mcp.backend.mcp_server', run_name='__main__')\n"
)


def unredacted(text: str) -> list[str]:
    return [secret for secret in LEAKED_SECRETS if secret in text]


def backend_yaml(entry: dict[str, Any]) -> str:
    return yaml.safe_dump({"discovery": {"interval_s": 0}, "backends": [entry]}, sort_keys=False)


async def oxp_call(client: httpx.AsyncClient, tool_id: str) -> httpx.Response:
    return await client.post("/tools/call", json={"tool_id": tool_id, "input": {}})


def answered_text(answer: httpx.Response) -> str:
    """Everything a client can read of an answer: status line reason, headers and body."""
    return f"{answer.status_code} {answer.headers} {answer.text}"


async def test_a_stdio_mcp_servers_stderr_tail_reaches_no_client_unredacted() -> None:
    """Finding H (issue 25, 7): a stdio MCP server that wrote credentials to stderr and then died during a call:
    the error every client reads (message, developer_message, data) must not hold them in clear."""
    entry = {
        "name": "spill",
        "kind": "mcp",
        "command": sys.executable,
        "args": ["-c", SPILL_THEN_SERVE],
        "cwd": str(ROOT),
        "era": "legacy",
        "restart_backoff_s": 0.1,
    }
    async with asgi_client(backend_yaml(entry)) as client:
        oxp = await oxp_call(client, "spill.crash")
        rpc_body = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": "spill_crash"}}
        rpc = await client.post("/rpc", json=rpc_body)
    # The call failed because the server died (OXP: 400 upstream unavailable), and the client was told so.
    assert oxp.status_code == 400 and "exit status 3" in oxp.json()["message"], oxp.text
    for front, answer in (("oxp", oxp), ("jsonrpc", rpc)):
        assert not unredacted(answered_text(answer)), f"{front} answer holds stderr secrets in clear: {answer.text}"


async def test_an_isolated_python_workers_stderr_tail_reaches_no_client_unredacted() -> None:
    """Finding H (issue 25, 7): a tool in an isolated Python worker writes credentials to stderr and ends the
    worker (os._exit): the failure's developer_message must not hold them in clear."""
    entry = {"name": "leaky", "kind": "python", "module": "tests.security.leaky_tools:toolkit", "isolation": "process"}
    async with asgi_client(backend_yaml(entry)) as client:
        answer = await oxp_call(client, "Leaky.Spill")
    assert answer.status_code == 200 and answer.json()["success"] is False, answer.text
    assert "exit status 3" in answer.text, answer.text  # the worker died, as planned
    assert not unredacted(answered_text(answer)), f"the worker's stderr reached the client in clear: {answer.text}"


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
async def test_the_typescript_sidecars_stderr_tail_reaches_no_client_unredacted() -> None:
    """Finding H (issue 25, 7): a TypeScript tool writes credentials to stderr and ends the sidecar:
    the failure's developer_message must not hold them in clear."""
    module = ROOT / "tests" / "security" / "leaky_tool.mjs"
    entry = {"name": "leakyts", "kind": "typescript", "modules": [str(module)], "pool_size": 1}
    async with asgi_client(backend_yaml(entry)) as client:
        answer = await oxp_call(client, "LeakyTool.Spill")  # a plain module's toolkit is named after its file
    assert answer.status_code == 200 and answer.json()["success"] is False, answer.text
    assert "exit status 3" in answer.text, answer.text
    assert not unredacted(answered_text(answer)), f"the sidecar's stderr reached the client in clear: {answer.text}"


# ---- I. /metrics published through nginx without auth ----

DOCKER = ROOT / "docker"


@dataclass
class Directive:
    name: str
    args: list[str]
    block: list[Directive] | None = None

    def all(self, name: str) -> list[Directive]:
        return [d for d in self.block or [] if d.name == name]


def parse_nginx(text: str) -> list[Directive]:
    """nginx's configuration grammar: `name args;` and `name args { ... }`, `#` comments, quoted strings."""
    tokens = re.findall(r"#[^\n]*|\"(?:\\.|[^\"])*\"|'(?:\\.|[^'])*'|[{};]|[^\s{};]+", text)
    stack: list[list[Directive]] = [[]]
    words: list[str] = []
    for raw in tokens:
        if raw.startswith("#"):
            continue
        if raw in (";", "{"):
            directive = Directive(words[0], words[1:], [] if raw == "{" else None)
            stack[-1].append(directive)
            if directive.block is not None:
                stack.append(directive.block)
            words = []
        elif raw == "}":
            stack.pop()
        else:
            words.append(raw[1:-1] if raw[:1] in "\"'" and raw[-1:] == raw[:1] else raw)
    assert len(stack) == 1 and not words, "unbalanced nginx.conf"
    return stack[0]


def location_for(server: Directive, path: str) -> Directive | None:
    """The `location` nginx picks for `path`: `=` exact, else the longest prefix (final with `^~`),
    else the first matching regex (`~`, `~*`), else that longest prefix; None when nothing matches."""
    prefixes: list[tuple[str, Directive, bool]] = []
    regexes: list[tuple[re.Pattern[str], Directive]] = []
    for location in server.all("location"):
        args = location.args
        if args[0] == "=" and args[1] == path:
            return location
        if args[0] in ("~", "~*"):
            regexes.append((re.compile(args[1], re.IGNORECASE if args[0] == "~*" else 0), location))
        elif args[0] == "^~":
            prefixes.append((args[1], location, True))
        elif args[0] != "=" and not args[0].startswith("@"):
            prefixes.append((args[0], location, False))
    matching = sorted((p for p in prefixes if path.startswith(p[0])), key=lambda p: len(p[0]), reverse=True)
    if matching and matching[0][2]:
        return matching[0][1]
    for pattern, location in regexes:
        if pattern.search(path):
            return location
    return matching[0][1] if matching else None


def closed(location: Directive) -> bool:
    """The location answers without reaching a gateway, or asks for credentials first."""
    for directive in location.block or []:
        if directive.name == "return" and directive.args[:1] and directive.args[0].isdigit():
            return int(directive.args[0]) >= 400  # `return 404` refuses; `return 301 ...` sends elsewhere
        if directive.name == "deny" and directive.args == ["all"]:
            return True
        if directive.name == "internal":
            return True
        if directive.name in ("auth_basic", "auth_request") and directive.args != ["off"]:
            return True
    return not any(d.name == "proxy_pass" for d in location.block or [])


def test_nginx_does_not_publish_metrics_without_auth() -> None:
    """Finding I (issue 25, 7): the compose stack's nginx (the only published port) must not proxy the gateways'
    `/metrics` to anyone: either its location for that path refuses (or authenticates), or the gateways do not
    serve metrics on the port nginx proxies to."""
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    gateway_config = yaml.safe_load((DOCKER / "gateway.yaml").read_text())
    metrics = (gateway_config.get("fronts") or {}).get("metrics") or {}
    served_on_main_port = bool(metrics.get("enabled")) and not any(k in metrics for k in ("port", "listen", "host"))
    if not served_on_main_port:
        return  # the gateways themselves do not answer it where nginx proxies
    path = metrics.get("path", "/metrics")
    published = {str(port).rsplit(":", 1)[1].split("/")[0] for port in compose["services"]["nginx"].get("ports", [])}
    (http,) = [d for d in parse_nginx((DOCKER / "nginx.conf").read_text()) if d.name == "http"]
    public = [s for s in http.all("server") if any(a.args[0].rsplit(":", 1)[-1] in published for a in s.all("listen"))]
    assert public, f"no nginx server listens on the published port(s) {sorted(published)}"
    for server in public:
        location = location_for(server, path)
        if location is None:
            continue  # nothing matches: nginx serves its own 404, never a gateway's answer
        proxied = [d.args for d in location.block or [] if d.name == "proxy_pass"]
        assert closed(location), (
            f"nginx's public port {sorted(published)} proxies GET {path} to the gateways unauthenticated: "
            f"`location {' '.join(location.args)}` has proxy_pass {proxied} and no refusal or auth"
        )
