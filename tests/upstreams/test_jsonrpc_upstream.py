"""A Toolplex behind a Toolplex, over OpenTool and over JSON-RPC (issue 11.7, 11.8), and upstream
HTTP statuses through the opentool, jsonrpc and arcade backends (issue 11.7); a JSON-RPC upstream's
own answers reaching a JSON-RPC caller as they came (issue 26), from a Toolplex and from a seed-002
server that is none (tests/upstreams/seed002_server.py, the opencode fork's bridge).

The upstream gateway B is a real `toolplex serve` process; the gateway A in front of it runs
in-process with one backend (kind opentool or jsonrpc) pointing at B.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from adapters.jsonrpc import codec as rpc_codec
from adapters.opentool import codec as ot_codec
from gateway.errors import ErrorKind
from tests.support import asgi_client, gateway_process, python_server

FRONT_KEY = "front-gateway-key-0123456789"
LIMITED_KEY = "limited-key-0123456789"
UPSTREAM_CONFIG = f"""
auth:
  api_keys:
    - {{name: front, key: {FRONT_KEY}}}
    - {{name: limited, key: {LIMITED_KEY}, tools: ["Math_*"]}}
authorization:
  providers:
    vault:
      url: "https://vault.example/authorize?scope={{scopes}}&tool={{tool}}"
discovery: {{interval_s: 0}}
backends:
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
  - {{name: text, kind: python, module: "adapters.python.toolkits.text:toolkit"}}
  - {{name: fidelity, kind: python, module: "tests.upstreams.fidelity_toolkit:toolkit"}}
"""
KINDS = {"opentool": "", "jsonrpc": "path: /rpc"}
DEFINITION_FIELDS = ("id", "name", "description", "version", "input_schema", "output_schema")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("upstream") / "b.yaml"
    path.write_text(UPSTREAM_CONFIG)
    with gateway_process(path) as base:
        yield base


def front_config(kind: str, url: str, *, forward: bool = False) -> str:
    return textwrap.dedent(
        f"""
        discovery: {{interval_s: 0}}
        backends:
          - name: b
            kind: {kind}
            url: {url}
            api_key: {FRONT_KEY}
            forward_authorization: {str(forward).lower()}
            circuit_breaker: {{failures: 100}}
            {KINDS[kind]}
        """
    )


async def call_opentool(client: httpx.AsyncClient, tool: str, args: dict[str, Any], **kw: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "method": tool, "params": args, "id": "c1"}
    return await client.post("/opentool/call", json=body, **kw)


async def call_rpc(client: httpx.AsyncClient, tool: str, args: dict[str, Any], **kw: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": "tool.execute", "params": {"tool": tool, "parameters": args}}
    return await client.post("/rpc", json=body, **kw)


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_tools_are_listed_as_the_upstream_lists_them(upstream: str, kind: str) -> None:
    """A's OXP /tools equals B's for the same tools: ids, names, descriptions, versions, both schemas."""
    b_tools = httpx.get(f"{upstream}/tools", headers={"Authorization": f"Bearer {FRONT_KEY}"}, timeout=10).json()
    by_id = {t["id"]: t for t in b_tools["items"]}
    async with asgi_client(front_config(kind, upstream)) as client:
        a_tools = (await client.get("/tools")).json()["items"]
    assert {t["id"] for t in a_tools} == set(by_id)  # B serves one version of each tool
    for tool in a_tools:
        assert {f: tool[f] for f in DEFINITION_FIELDS} == {f: by_id[tool["id"]][f] for f in DEFINITION_FIELDS}


VALUES: list[tuple[str, dict[str, Any], Any]] = [
    ("Fidelity_Nested", {}, {"result": {"x": 1}}),
    ("Fidelity_Untyped", {"value": 5}, 5),
    ("Fidelity_Untyped", {"value": {"result": 7}}, {"result": 7}),
    ("Fidelity_Untyped", {"value": {"result": 7, "more": 1}}, {"result": 7, "more": 1}),
    ("Fidelity_Untyped", {"value": {}}, {}),
    ("Fidelity_Untyped", {"value": [1, {"result": 2}]}, [1, {"result": 2}]),
    ("Fidelity_Untyped", {"value": None}, None),
    ("Fidelity_Untyped", {"value": "text"}, "text"),
    ("Math_Add", {"a": 1, "b": 2}, 3),
]


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_values_arrive_unchanged(upstream: str, kind: str) -> None:
    async with asgi_client(front_config(kind, upstream)) as client:
        for tool, args, expected in VALUES:
            answer = (await client.post("/tools/call", json={"tool_id": tool.replace("_", "."), "input": args})).json()
            assert answer.get("success") is True and answer["value"] == expected, (tool, args, answer)
            # and the OpenTool front in front wraps it by the same reversible rule
            result = (await call_opentool(client, tool, args)).json()["result"]
            assert ot_codec.unwrap_result(result) == expected


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_tool_failures_keep_every_field(upstream: str, kind: str) -> None:
    async with asgi_client(front_config(kind, upstream)) as client:
        opentool = (await call_opentool(client, "Fidelity_Fail", {})).json()["error"]
        rpc = (await call_rpc(client, "Fidelity_Fail", {})).json()["error"]
    assert opentool == {
        "code": 500,
        "message": "it broke",
        "data": {
            "developer_message": "Fidelity.Fail always fails",
            "can_retry": True,
            "retry_after_ms": 250,
            "additional_prompt_content": "Try something else.",
        },
    }
    assert rpc["code"] == rpc_codec.TOOL_FAILED and rpc["message"] == "it broke"
    assert rpc["data"]["kind"] == "tool_failed" and rpc["data"]["retryAfterMs"] == 250


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_an_authorization_challenge_keeps_its_url(upstream: str, kind: str) -> None:
    url = "https://vault.example/authorize?scope=read&tool=Fidelity_Guarded"
    async with asgi_client(front_config(kind, upstream)) as client:
        opentool = (await call_opentool(client, "Fidelity_Guarded", {})).json()["error"]
        rpc = (await call_rpc(client, "Fidelity_Guarded", {})).json()["error"]
        oxp = await client.post("/tools/call", json={"tool_id": "Fidelity.Guarded", "input": {}})
    assert opentool["code"] == 401 and opentool["message"].endswith(f": {url}")
    assert opentool["message"].count(url) == 1
    assert opentool["data"]["authorization"] == [{"id": "vault", "url": url}]
    assert rpc["code"] == rpc_codec.PERMISSION_DENIED and rpc["data"]["url"] == url
    assert rpc["data"]["kind"] == "authorization_required"
    assert oxp.status_code == 400 and oxp.json()["missing_requirements"]["authorization"] == [
        {"id": "vault", "url": url}
    ]


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_forwarded_credentials_keep_forbidden_and_unauthenticated(upstream: str, kind: str) -> None:
    """B refuses the client's own (forwarded) key: A answers as B meant it, in each front's format."""
    async with asgi_client(front_config(kind, upstream, forward=True)) as client:
        limited = {"Authorization": f"Bearer {LIMITED_KEY}"}
        wrong = {"Authorization": "Bearer not-a-key-of-b"}
        forbidden_ot = await call_opentool(client, "Text_WordCount", {"text": "a b"}, headers=limited)
        forbidden_rpc = await call_rpc(client, "Text_WordCount", {"text": "a b"}, headers=limited)
        unknown_ot = await call_opentool(client, "Math_Add", {"a": 1, "b": 2}, headers=wrong)
        unknown_rpc = await call_rpc(client, "Math_Add", {"a": 1, "b": 2}, headers=wrong)
        allowed = await call_opentool(client, "Math_Add", {"a": 1, "b": 2}, headers=limited)
    assert forbidden_ot.status_code == 200 and forbidden_ot.json()["error"]["code"] == 403
    assert forbidden_rpc.json()["error"]["code"] == rpc_codec.PERMISSION_DENIED
    assert forbidden_rpc.json()["error"]["data"]["kind"] == "forbidden"
    assert unknown_ot.status_code == 401 and unknown_ot.json()["error"]["code"] == 401
    assert unknown_rpc.json()["error"]["data"]["kind"] == "unauthenticated"
    assert allowed.json()["result"] == {"result": 3}


# ---- upstream HTTP statuses, through the opentool, jsonrpc and arcade backends ----

STATUSES: list[tuple[int, ErrorKind]] = [
    (400, ErrorKind.INVALID_ARGUMENTS),
    (401, ErrorKind.UPSTREAM_UNAVAILABLE),  # the gateway's own credentials: no client can fix that
    (403, ErrorKind.FORBIDDEN),
    (404, ErrorKind.NOT_FOUND),
    (422, ErrorKind.INVALID_ARGUMENTS),
    (429, ErrorKind.RATE_LIMITED),
    (500, ErrorKind.UPSTREAM_UNAVAILABLE),
    (502, ErrorKind.UPSTREAM_UNAVAILABLE),
    (503, ErrorKind.UPSTREAM_UNAVAILABLE),
]
STATUS_BACKENDS = {
    "opentool": "",
    "jsonrpc": "path: /rpc",
    "arcade": "secret: status-server-secret-0123456789abcdef",
}


@pytest.fixture(scope="module")
def status_server() -> Iterator[str]:
    with python_server("tests.upstreams.status_server") as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("kind", sorted(STATUS_BACKENDS))
async def test_upstream_statuses_keep_their_meaning(status_server: str, kind: str) -> None:
    config = textwrap.dedent(
        f"""
        discovery: {{interval_s: 0}}
        backends:
          - name: up
            kind: {kind}
            url: {status_server}
            circuit_breaker: {{failures: 100}}
            {STATUS_BACKENDS[kind]}
        """
    )
    async with asgi_client(config) as client:
        for status, kind_expected in STATUSES:
            opentool = await call_opentool(client, "Status_Answer", {"status": status})
            rpc = (await call_rpc(client, "Status_Answer", {"status": status})).json()["error"]
            http_status, code = ot_codec.KIND_CODES[kind_expected]
            where = f"{kind} backend, upstream HTTP {status}"
            assert (opentool.status_code, opentool.json()["error"]["code"]) == (http_status, code), where
            assert f"answered HTTP {status}" in opentool.json()["error"]["message"], where
            assert "{'" not in opentool.json()["error"]["message"], where  # JSON, never a Python repr
            assert rpc["code"] == rpc_codec.KIND_CODES[kind_expected], where
            assert rpc["data"]["kind"] == kind_expected.value, where
            if status == 429:
                assert opentool.headers["retry-after"] == "7" and rpc["data"]["retryAfterMs"] == 7000, where
            if status == 422:
                assert '"msg":"Field required"' in rpc["message"], where


# ---- reading a seed-002 server that is not a Toolplex ----


@pytest.mark.parametrize(
    ("code", "data", "kind"),
    [
        (-32601, None, ErrorKind.NOT_FOUND),
        (-32602, {"parameter_errors": {"path": "is required"}}, ErrorKind.INVALID_ARGUMENTS),
        (-32000, {"tool": "read", "language": "python", "details": "Traceback-free details"}, ErrorKind.TOOL_FAILED),
        (-32001, None, ErrorKind.DEADLINE),
        (-32002, None, ErrorKind.FORBIDDEN),
        (-32002, {"url": "https://auth.example/go"}, ErrorKind.AUTHORIZATION_REQUIRED),
        (-32003, {"retryAfterMs": 1500}, ErrorKind.RATE_LIMITED),
        (-32603, None, ErrorKind.UPSTREAM_UNAVAILABLE),
        (-32600, None, ErrorKind.UPSTREAM_UNAVAILABLE),  # the gateway's request was refused: not the caller's fault
    ],
)
def test_seed_002_error_codes_become_their_kinds(code: int, data: dict[str, Any] | None, kind: ErrorKind) -> None:
    error: dict[str, Any] = {"code": code, "message": "upstream said so"}
    if data is not None:
        error["data"] = data
    failure = rpc_codec.failure_of(error)
    assert failure.kind == kind
    if kind == ErrorKind.INVALID_ARGUMENTS:
        assert failure.parameter_errors == {"path": "is required"}
    if kind == ErrorKind.AUTHORIZATION_REQUIRED:
        assert failure.details["authorization"] == [{"id": "authorization", "url": "https://auth.example/go"}]
    if kind == ErrorKind.RATE_LIMITED:
        assert failure.retry_after_ms == 1500 and failure.can_retry


def test_a_plain_seed_002_registration_and_result() -> None:
    registration = {
        "id": "read-file",
        "title": "Read a file",
        "version": "2.1.0",
        "description": "Read it",
        "language": "typescript",
        "schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    spec = rpc_codec.spec_from_registration(registration, backend="b", toolkit="Files")
    assert (spec.toolkit, spec.name, spec.version, spec.output_schema) == ("Files", "read_file", "2.1.0", None)
    assert spec.language == "typescript"  # the registration's language is the tool's
    assert spec.binding == rpc_codec.Registration("read-file", "typescript", "Files.read_file", "2.1.0")
    assert spec.binding.entry is registration  # listed by the JSON-RPC front as it came (its own title kept)
    assert rpc_codec.registration(spec)["title"] == "Read a file"
    request = rpc_codec.execute_request("r1", spec.binding, {"path": "/a"}, {"timeout": 900})
    assert request["params"] == {
        "tool": "read-file",
        "language": "typescript",
        "parameters": {"path": "/a"},
        "context": {"timeout": 900},
    }
    assert rpc_codec.value_of({"output": "contents", "metadata": {"title": "Read"}}) == "contents"
    assert rpc_codec.value_of({"output": "3", "metadata": {"value": 3}}) == 3


@pytest.mark.parametrize(
    ("listed", "language", "sent"),
    [("python", "python", "python"), ("remote", "remote", "remote"), ("go", "remote", "go"), (None, "remote", None)],
)
def test_the_registrations_language_is_the_tools(listed: str | None, language: str, sent: str | None) -> None:
    """A language the seed knows is the tool's (`tool.list {"language"}` and `tool.execute`'s check see it); any
    other is `remote`. Calls send the language as the registration listed it."""
    entry: dict[str, Any] = {"id": "t", "schema": {"type": "object"}}
    if listed is not None:
        entry["language"] = listed
    spec = rpc_codec.spec_from_registration(entry, backend="b", toolkit="Kit")
    assert spec.language == language
    assert rpc_codec.execute_request("r", spec.binding, {}, {})["params"].get("language") == sent


# ---- transparency (issue 26): a JSON-RPC caller gets a JSON-RPC upstream's own answer ----


@pytest.fixture(scope="module")
def bridge() -> Iterator[str]:
    """The opencode fork's seed-002 bridge (no Toolplex): tools with `metadata` and `diagnostics` of their own."""
    with python_server("tests.upstreams.seed002_server") as port:
        yield f"http://127.0.0.1:{port}"


def bridge_config(url: str) -> str:
    return f"discovery: {{interval_s: 0}}\nbackends:\n  - {{name: bridge, kind: jsonrpc, url: {url}}}\n"


def execute(tool: str, parameters: dict[str, Any], request_id: Any = 1, **params: Any) -> dict[str, Any]:
    body = {"tool": tool, "parameters": parameters, **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tool.execute", "params": body}


EDIT = {"filePath": "src/app.ts", "oldString": "8080", "newString": "'8080'"}


async def test_a_seed_002_servers_metadata_and_diagnostics_reach_a_jsonrpc_caller(bridge: str) -> None:
    """Its result, `metadata` and `diagnostics` its own, arrives as it came; its errors too, `data.tool` being the
    tool's name here (`Bridge_edit`: the backend's name is the toolkit of ids that name none)."""
    with httpx.Client(timeout=10) as direct:
        own = direct.post(f"{bridge}/rpc", json=execute("edit", EDIT, language="typescript")).json()
        own_error = direct.post(f"{bridge}/rpc", json=execute("read", {"filePath": 3})).json()
    async with asgi_client(bridge_config(bridge)) as client:
        answer = (await client.post("/rpc", json=execute("Bridge_edit", EDIT, language="typescript"))).json()
        error = (await client.post("/rpc", json=execute("Bridge_read", {"filePath": 3}))).json()
    assert own["result"]["diagnostics"][0]["message"] == "Type 'string' is not assignable to type 'number'."
    assert own["result"]["metadata"]["title"] == "src/app.ts" and "diff" in own["result"]["metadata"]
    assert answer == own  # nothing of it is the gateway's
    assert own_error["error"]["data"] == {
        "tool": "read",
        "language": "typescript",
        "details": "filePath: 3 is not of type 'string'",
    }
    assert error == {
        **own_error,
        "error": {**own_error["error"], "data": {**own_error["error"]["data"], "tool": "Bridge_read"}},
    }


async def test_other_fronts_read_a_seed_002_servers_answers_as_the_canonical_value(bridge: str) -> None:
    async with asgi_client(bridge_config(bridge)) as client:
        counted = await client.post("/tools/call", json={"tool_id": "Bridge.word_count", "input": {"text": "a b c"}})
        edited = (await client.post("/tools/call", json={"tool_id": "Bridge.edit", "input": EDIT})).json()
        failed = await client.post("/tools/call", json={"tool_id": "Bridge.divide", "input": {"a": 1, "b": 0}})
        denied = await call_opentool(client, "Bridge_bash", {"command": "rm -rf build"})
    assert counted.json()["value"] == "3"  # the seed's `output`: a string
    assert edited["success"] is True and edited["value"] == ""
    assert failed.json()["success"] is False
    assert failed.json()["error"]["message"] == "Tool execution failed"
    assert failed.json()["error"]["developer_message"] == "ZeroDivisionError: division by zero"
    assert denied.json()["error"]["code"] == ot_codec.KIND_CODES[ErrorKind.FORBIDDEN][1]


async def test_a_seed_002_servers_languages_and_order_are_kept(bridge: str) -> None:
    async with asgi_client(bridge_config(bridge)) as client:
        typescript = (
            await client.post(
                "/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.list", "params": {"language": "typescript"}}
            )
        ).json()
        everything = (await client.post("/rpc", json={"jsonrpc": "2.0", "id": 2, "method": "tool.list"})).json()
        ok = (await client.post("/rpc", json=execute("Bridge_word_count", {"text": "x"}, language="python"))).json()
        wrong = (
            await client.post("/rpc", json=execute("Bridge_word_count", {"text": "x"}, language="typescript"))
        ).json()
    assert [t["id"] for t in typescript["result"]["tools"]] == ["Bridge_read", "Bridge_edit", "Bridge_bash"]
    assert [t["id"] for t in everything["result"]["tools"]] == [
        "Bridge_read",
        "Bridge_edit",
        "Bridge_bash",
        "Bridge_word_count",
        "Bridge_shout",
        "Bridge_divide",
    ]  # the bridge's own order
    assert ok["result"]["output"] == "1"
    assert wrong["error"]["code"] == rpc_codec.INVALID_PARAMS
    assert "implemented in python, not typescript" in wrong["error"]["data"]["parameter_errors"]["language"]


def renamed_config(url: str) -> str:
    return textwrap.dedent(
        f"""
        discovery: {{interval_s: 0}}
        backends:
          - name: b
            kind: jsonrpc
            url: {url}
            api_key: {FRONT_KEY}
            prefix: Up
            rename: {{Add: Plus}}
            version: 2.0.0
        """
    )


async def test_a_toolplex_upstreams_answer_names_the_tool_as_the_gateway_lists_it(
    upstream: str, events: list[dict[str, Any]]
) -> None:
    """Through routing renames, a Toolplex upstream's answer is its own but for the gateway's own in it: the tool's
    name, title and version as the gateway lists them, and the call id (this hop's, found in its call log)."""
    async with asgi_client(renamed_config(upstream)) as client:
        added = (await client.post("/rpc", json=execute("UpMath_Plus", {"a": 1, "b": 2}, language="python"))).json()
        failed = (await client.post("/rpc", json=execute("UpMath.Divide@2.0.0", {"a": 1, "b": 0}))).json()
        invalid = (await client.post("/rpc", json=execute("UpMath_Plus", {"a": "x"}))).json()
        listed = (await client.post("/rpc", json={"jsonrpc": "2.0", "id": 9, "method": "tool.list"})).json()
    calls = [(e["tool"], e["call_id"]) for e in events if e["event"] == "call"]  # in the order they were made
    meta = added["result"]["metadata"]
    assert (meta["tool"], meta["title"], meta["version"], meta["language"]) == (
        "UpMath_Plus",
        "UpMath.Plus",
        "2.0.0",
        "python",
    )
    assert meta["value"] == 3 and added["result"]["output"] == "3" and added["result"]["diagnostics"] == []
    assert calls[0] == ("UpMath_Plus", meta["callId"])
    data = failed["error"]["data"]
    assert (failed["error"]["code"], data["tool"], data["kind"]) == (
        rpc_codec.TOOL_FAILED,
        "UpMath_Divide",
        "tool_failed",
    )
    assert calls[1] == ("UpMath_Divide", data["callId"])
    # the upstream judged the arguments (a same-protocol hop), in its own words, which name its own tool
    assert invalid["error"]["code"] == rpc_codec.INVALID_PARAMS and invalid["error"]["data"]["tool"] == "UpMath_Plus"
    assert invalid["error"]["message"].startswith("Invalid arguments for Math_Add")
    entry = next(t for t in listed["result"]["tools"] if t["id"] == "UpMath_Plus")
    assert (entry["title"], entry["version"], entry["language"]) == ("UpMath.Plus", "2.0.0", "python")
    assert entry["x-toolplex"]["toolkit"] == "UpMath" and entry["x-toolplex"]["name"] == "Plus"
