"""Hypothesis strategies for the MCP front at `/mcp` (Streamable HTTP), in both protocol eras.

- The handshake era (2025-06-18, 2025-11-25): `initialize`, then requests, notifications and responses
  carrying `Mcp-Session-Id` (and usually `MCP-Protocol-Version`), GET streams with `Last-Event-ID`, DELETE.
- The stateless 2026-07-28 era: `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method`, `Mcp-Name` and
  `Mcp-Param-*` headers, the `_meta` envelope (protocolVersion, clientCapabilities, clientInfo, logLevel,
  progressToken) on every request.

Most requests are what the `mcp` SDK's client sends (so they reach the front's deep code: real tool,
prompt and resource names of the fuzz configuration, the builtin Python tools and the reference server's
through a modern and a handshake-era `kind: mcp` backend); the rest are broken on purpose: fields dropped
or retyped, bytes cut or garbage, batches, unknown methods, mismatched or odd headers, non-ASCII, wrong
content types, oversized bodies.

Values only the server can give (a live session id, an SSE event id of that session, a task id, a
`requestState`, a `nextCursor`) are drawn as placeholders (`real(kind)`) and filled in when the request
is sent (`tests.fuzz.mcp_client`), from what earlier answers carried, or from a real `initialize`.
"""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.requests import NUMBER_MARK, FuzzRequest, encode, encoded, hostile_values, json_values, mutated

HANDSHAKE = ("2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
# Versions no era serves, or serves only by a handshake the front does not speak at that version.
ODD_VERSIONS = ("2024-11-05", "2025-03-26", "2026-07-29", "2099-01-01", "", "latest", "2026-07-28,2025-11-25")
SSE_AND_JSON = "application/json, text/event-stream"
ACCEPTS = [
    "application/json",
    "text/event-stream",
    "*/*",
    "application/*, text/*",
    "text/event-stream;q=0, application/json",
    "application/json;q=0.5, text/event-stream;q=0.1",
    "text/html",
    "",
]
CONTENT_TYPES = [
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    "application/json, text/plain",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "",
]
# The main endpoint, the `math` virtual server, and paths beside them (a redirect, no route).
PATHS = ["/mcp"] * 26 + ["/mcp/math"] * 5 + ["/mcp/", "/mcp/nope", "/mcp/math/x"]

REAL_MARK = "\u0001real:"  # a value filled in at send time: see the module docstring


def real(kind: str) -> str:
    """A placeholder for a value the server gave: `session:<version>`, `session:dead`, `event`, `event:other`,
    `task`, `state`, `cursor` (any listing's), `cursor:<method>`; `|b64` wraps it in the `=?base64?` sentinel."""
    return REAL_MARK + kind


def sentinel(value: str) -> str:
    """`Mcp-Name` as the SDK's client writes a value that is not plain ASCII (`encode_header_value`)."""
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


# ---- names ----

# The fuzz configuration's Python tools (tests/support.py BUILTIN_BACKENDS) and good arguments for each.
BUILTIN_TOOLS: dict[str, list[dict[str, Any]]] = {
    "Math_Add": [{"a": 1, "b": 2}, {"a": 1e308, "b": 1e308}],
    "Math_Divide": [{"a": 1, "b": 2}, {"a": 1, "b": 0}],
    "Math_Subtract": [{"a": 5, "b": 3}],
    "Math_Multiply": [{"a": 2, "b": 2**62}],
    "Text_WordCount": [{"text": "a b c"}, {"text": "\u00e9t\u00e9 \U0001f600 \u0000"}],
    "Time_Now": [{}, {"timezone": "Europe/Paris"}, {"timezone": "../../etc/passwd"}],
    "Demo_Sleep": [{"seconds": 0.01}, {"seconds": 5}],
    "Demo_Fail": [{"message": "on purpose"}],
}
# The reference server's tools (tests/mcp/reference_server.py) and arguments; each is served twice: under its
# own name by a 2026-07-28 backend, and as `Legacy_<name>` by a backend held to the handshake era.
UPSTREAM_TOOLS: dict[str, list[dict[str, Any]]] = {
    "test_simple_text": [{}],
    "test_image_content": [{}],
    "test_audio_content": [{}],
    "test_embedded_resource": [{}],
    "test_multiple_content_types": [{}],
    "test_tool_with_logging": [{}],
    "test_logging_tool": [{}],
    "test_error_handling": [{}],
    "test_tool_with_progress": [{}],
    "test_sampling": [{"prompt": "a question"}],
    "test_elicitation": [{"message": "your name?"}],
    "test_elicitation_sep1034_defaults": [{}],
    "test_elicitation_sep1330_enums": [{}],
    "test_streaming_elicitation": [{}],
    "test_missing_capability": [{}],
    "test_reconnection": [{}],
    "test_trigger_tool_change": [{}],
    "test_trigger_prompt_change": [{}],
    "test_update_watched_resource": [{"text": "new content"}],
    "test_structured_content": [{"a": 1, "b": 2}, {"a": "x", "b": None}],
    "test_x_mcp_header": [{"region": "eu-west"}, {"region": "\u00e9t\u00e9"}, {"region": 7}],
    "json_schema_2020_12_tool": [{}, {"name": "x", "address": {"street": "s", "city": "c"}}],
    "test_input_required_result_elicitation": [{}],
    "test_input_required_result_sampling": [{}],
    "test_input_required_result_list_roots": [{}],
    "test_input_required_result_request_state": [{}],
    "test_input_required_result_multiple_inputs": [{}],
    "test_input_required_result_multi_round": [{}],
    "test_input_required_result_tampered_state": [{}],
    "test_input_required_result_capabilities": [{}],
    "greet": [{"name": "Ada"}],
    "slow_compute": [{"seconds": 0.05, "label": "fuzz"}, {"seconds": 30}],
    "failing_job": [{}],
    "protocol_error_job": [{}],
    "confirm_delete": [{"filename": "a.txt"}],
    "multi_input": [{}],
    "test_tool_with_task": [{}],
}
LEGACY = "Legacy_"  # the handshake-era backend's toolkit: its tools are `Legacy_<name>`
ODD_TOOLS = ["Nope_Nothing", "", "Math", "math_add", "Math.Add", "Math.Add@1.0.0", "test_dynamic_tool", "\u00e9t\u00e9"]
PROMPTS: dict[str, list[dict[str, Any]]] = {
    "test_simple_prompt": [{}],
    "test_prompt_with_arguments": [{"arg1": "one", "arg2": "two"}, {"arg1": "one"}],
    "test_prompt_with_embedded_resource": [{"resourceUri": "test://static-text"}],
    "test_prompt_with_image": [{}],
    "test_input_required_result_prompt": [{}],
    "Legacy_test_simple_prompt": [{}],
    "Legacy_test_prompt_with_arguments": [{"arg1": "one", "arg2": "two"}],
    "Legacy_test_input_required_result_prompt": [{}],
    "nope": [{}],
}
URIS = [
    "test://static-text",
    "test://static-binary",
    "test://watched-resource",
    "test://template/42/data",
    "test://template/%2e%2e/data",
    "test://template//data",
    "test://no-such-thing",
    "file:///etc/passwd",
    "not a uri",
    "",
    "test://" + "a" * 9000,
]
TEMPLATES = ["test://template/{id}/data", "test://template/{id", "test://nope/{x}", "{" * 300]
LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency", "loud", ""]
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES = [
    {},
    {},
    {"extensions": {TASKS_EXTENSION: {}}},
    {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}},
    {"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": True}},
    {"extensions": {TASKS_EXTENSION: {}}, "sampling": {}, "roots": {}},
    {"experimental": {"x": {}}, "extensions": {"io.example/nope": {"a": 1}}},
]
REQUEST_IDS = [1, 2, "a", "req-\u00e9", 0, -1, 2**53, "", "x" * 300]
ODD_IDS = [None, 2.5, True, [1], {"a": 1}, f"{NUMBER_MARK}18446744073709551616", f"{NUMBER_MARK}-1e400"]


def chance(draw: st.DrawFn, percent: int) -> bool:
    """True `percent` times in a hundred."""
    return draw(st.integers(0, 99)) < percent


# Every name once (one flat list: Hypothesis spreads its draws over it evenly), the odd ones a few times.
TOOL_NAMES = [*BUILTIN_TOOLS, *UPSTREAM_TOOLS, *(LEGACY + name for name in UPSTREAM_TOOLS), *ODD_TOOLS * 2]
# Tools that run as tasks when the caller declares the extension (the 2026-07-28 backend's; the handshake-era
# one runs them inline), and tools that ask the caller something (InputRequiredResult, or a held call).
TASK_TOOLS = [
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
    "Legacy_slow_compute",
]
QUESTION_TOOLS = [
    *(name for name in UPSTREAM_TOOLS if name.startswith("test_input_required_result_")),
    "test_elicitation",
    "test_sampling",
    "test_streaming_elicitation",
    "test_elicitation_sep1034_defaults",
    "confirm_delete",
    "multi_input",
    *(LEGACY + name for name in ("test_elicitation", "test_sampling", "test_elicitation_sep1330_enums")),
    *(LEGACY + name for name in ("test_streaming_elicitation", "test_input_required_result_multi_round")),
]
ASKABLE = {"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": True}}


def arguments_for(draw: st.DrawFn, tool: str) -> Any:
    known = BUILTIN_TOOLS.get(tool) or UPSTREAM_TOOLS.get(tool.removeprefix(LEGACY))
    if known and not chance(draw, 12):
        return dict(draw(st.sampled_from(known)))
    if draw(st.booleans()):
        return draw(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
    return draw(hostile_values)


# ---- params, per method ----


@st.composite
def input_responses(draw: st.DrawFn) -> dict[str, Any]:
    """Answers to an InputRequiredResult's questions (`q0`, ... are the gateway's keys for a held call)."""
    answers = [
        {"action": "accept", "content": {"name": "Ada", "confirm": True, "context": "c"}},
        {"action": "decline"},
        {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"},
        {"roots": [{"uri": "file:///tmp", "name": "tmp"}]},
        {"nonsense": True},
    ]
    keys = ["q0", "q1", "user_name", "confirmation", "user_context", "elicitation", "sampling", "roots", "x"]
    return draw(st.dictionaries(st.sampled_from(keys), st.sampled_from(answers), max_size=3))


def cursor(draw: st.DrawFn, method: str) -> str:
    return draw(
        st.sampled_from(
            [
                real(f"cursor:{method}"),
                real(f"cursor:{method}"),
                real("cursor"),
                "bm9wZQ==",
                "cDo5OTk6",
                "bzotMQ==",
                "!!",
                "",
                "\u00e9",
                "o:1",
                base64.urlsafe_b64encode(b"p:0:" + b"x" * 200).decode(),
            ]
        )
    )


@st.composite
def params_for(draw: st.DrawFn, method: str, modern: bool) -> dict[str, Any]:
    """Params as the SDK's client writes them for `method` (the `_meta` envelope is added by the caller)."""
    params: dict[str, Any] = {}
    if method == "tools/call":
        tool = draw(st.sampled_from(TOOL_NAMES))
        params["name"] = tool
        if not chance(draw, 5):
            params["arguments"] = arguments_for(draw, tool)
        if modern and chance(draw, 20):  # a retry answering an InputRequiredResult
            params["inputResponses"] = draw(input_responses())
            if not chance(draw, 25):
                params["requestState"] = draw(st.sampled_from([real("state"), real("state"), "toolplex-held.x", "x"]))
    elif method in ("tools/list", "resources/list", "resources/templates/list", "prompts/list"):
        if draw(st.booleans()):
            params["cursor"] = cursor(draw, method)
    elif method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
        params["uri"] = draw(st.sampled_from(URIS))
    elif method == "prompts/get":
        name = draw(st.sampled_from(sorted(PROMPTS)))
        params["name"] = name
        if not chance(draw, 20):
            params["arguments"] = dict(draw(st.sampled_from(PROMPTS[name])))
        if modern and chance(draw, 25):
            params["inputResponses"] = draw(input_responses())
            params["requestState"] = draw(st.sampled_from([real("state"), "toolplex-held.x"]))
    elif method == "completion/complete":
        if draw(st.booleans()):
            prompt = draw(st.sampled_from(sorted(PROMPTS)))
            params["ref"] = {"type": "ref/prompt", "name": prompt}
            argument = draw(st.sampled_from(["arg1", "arg2", "resourceUri", "nope"]))
        else:
            params["ref"] = {"type": "ref/resource", "uri": draw(st.sampled_from(TEMPLATES))}
            argument = draw(st.sampled_from(["id", "nope"]))
        params["argument"] = {"name": argument, "value": draw(st.sampled_from(["", "p", "te", "\u00e9", "x" * 500]))}
        if draw(st.booleans()):
            params["context"] = {"arguments": {"arg1": "paris"}}
    elif method == "logging/setLevel":
        params["level"] = draw(st.sampled_from(LOG_LEVELS))
    elif method in ("tasks/get", "tasks/cancel", "tasks/update"):
        params["taskId"] = draw(st.sampled_from([real("task"), real("task"), real("task"), "nope", "", "x" * 400]))
        if method == "tasks/update":
            params["inputResponses"] = draw(input_responses())
    elif method == "subscriptions/listen":
        params["notifications"] = draw(
            st.sampled_from(
                [
                    {"toolsListChanged": True},
                    {"resourceSubscriptions": ["test://watched-resource"], "promptsListChanged": True},
                    {},
                    {"toolsListChanged": "yes"},
                ]
            )
        )
    elif method == "initialize":
        params.update(
            {
                "protocolVersion": draw(st.sampled_from([*HANDSHAKE, *HANDSHAKE, MODERN, *ODD_VERSIONS])),
                "capabilities": draw(st.sampled_from(CAPABILITIES)),
                "clientInfo": {"name": "toolplex-fuzz", "version": "1"},
            }
        )
    elif method == "notifications/cancelled":
        params["requestId"] = draw(st.sampled_from(REQUEST_IDS))
        params["reason"] = "fuzz"
    elif method == "notifications/progress":
        params.update({"progressToken": draw(st.sampled_from(["p", 1])), "progress": 1, "total": 2})
    return params


# ---- the 2026-07-28 era ----

MODERN_METHODS = [
    *["tools/call"] * 10,
    *["tools/list"] * 3,
    "server/discover",
    "server/discover",
    "resources/list",
    "resources/templates/list",
    *["resources/read"] * 2,
    "prompts/list",
    *["prompts/get"] * 2,
    *["completion/complete"] * 2,
    *["tasks/get"] * 2,
    "tasks/update",
    "tasks/cancel",
    "subscriptions/listen",
    "resources/subscribe",
    "logging/setLevel",
    "ping",
    "initialize",
    "nope/nothing",
    "",
    "tools/call/",
    "rpc.discover",
]
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
NOTIFICATIONS = [
    "notifications/cancelled",
    "notifications/initialized",
    "notifications/progress",
    "notifications/roots/list_changed",
    "notifications/nope",
]


@st.composite
def envelope(draw: st.DrawFn, capabilities: dict[str, Any] | None = None) -> Any:
    """The 2026-07-28 `_meta`: protocol version and client capabilities (required), the rest optional."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": (
            capabilities if capabilities is not None else draw(st.sampled_from(CAPABILITIES))
        ),
    }
    if draw(st.booleans()):
        meta["io.modelcontextprotocol/clientInfo"] = {"name": "toolplex-fuzz", "version": "1"}
    if chance(draw, 25):
        meta["io.modelcontextprotocol/logLevel"] = draw(st.sampled_from(LOG_LEVELS))
    if chance(draw, 25):
        meta["progressToken"] = draw(st.sampled_from(["p-1", 7, "", 2.5]))
    if chance(draw, 10):
        meta["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    if chance(draw, 8):
        meta = draw(mutated(meta))  # a key dropped (a required one, often), retyped, or added
    return meta


def name_header(draw: st.DrawFn, method: str, params: dict[str, Any]) -> str | None:
    """`Mcp-Name` as the SDK's client writes it (the name, URI or task id, a sentinel when not plain ASCII);
    sometimes another value, odd bytes or none."""
    key = "taskId" if method.startswith("tasks/") else NAME_PARAM.get(method)
    value = params.get(key) if key else None
    choice = draw(st.integers(0, 99))
    if isinstance(value, str) and choice < 90:
        if value.startswith(REAL_MARK):
            return value if choice < 75 else value + "|b64"
        plain = value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?")
        return value if plain and choice < 75 else sentinel(value)
    return draw(
        st.sampled_from(
            [None, "Math_Add", "test_simple_text", sentinel("Math_Add"), "=?base64?!!?=", "=?base64?QQ?=", "\u00e9"]
        )
    )


@st.composite
def modern_request(draw: st.DrawFn) -> FuzzRequest:
    """Mostly one method with its params; now and then a call that makes a task, one that asks the caller
    something, or the retry answering such a question (the answered call's own name and arguments)."""
    scenario = draw(st.sampled_from(["method"] * 13 + ["task"] * 2 + ["question"] * 2 + ["retry"] * 3))
    notification = scenario == "method" and chance(draw, 7)
    method = draw(st.sampled_from(NOTIFICATIONS if notification else MODERN_METHODS))
    capabilities = None
    if scenario == "method":
        params = draw(params_for(method, modern=True))
        if method.startswith("tasks/") and not chance(draw, 15):
            capabilities = {"extensions": {TASKS_EXTENSION: {}}}
    elif scenario == "retry":
        method = "tools/call"
        # the name, arguments and requestState of an InputRequiredResult the server gave, and answers to it
        params = {part: real(f"retry:{part}") for part in ("name", "arguments", "inputResponses", "requestState")}
        capabilities = ASKABLE
        if chance(draw, 15):
            params["inputResponses"] = draw(input_responses())
    else:
        method = "tools/call"
        tool = draw(st.sampled_from(TASK_TOOLS if scenario == "task" else QUESTION_TOOLS))
        params = {"name": tool, "arguments": dict(draw(st.sampled_from(UPSTREAM_TOOLS[tool.removeprefix(LEGACY)])))}
        declared = {"extensions": {TASKS_EXTENSION: {}}} if scenario == "task" else {}
        capabilities = {**declared, **(ASKABLE if scenario == "question" or chance(draw, 50) else {})}
    if not chance(draw, 5):
        params["_meta"] = draw(envelope(capabilities))
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not notification:
        body["id"] = draw(st.sampled_from(ODD_IDS if chance(draw, 5) else REQUEST_IDS))
    headers = {"accept": SSE_AND_JSON, "content-type": "application/json", "mcp-protocol-version": MODERN}
    headers["mcp-method"] = draw(st.sampled_from(["tools/list", "", "x"])) if chance(draw, 5) else method
    name = real("retry:name") if scenario == "retry" else name_header(draw, method, params)
    if name is not None:
        headers["mcp-name"] = name
    arguments = params.get("arguments")
    if isinstance(arguments, dict) and "region" in arguments and not chance(draw, 15):
        region = arguments["region"]  # test_x_mcp_header's x-mcp-header parameter, mirrored as the SDK does
        text = ("true" if region else "false") if isinstance(region, bool) else str(region)
        plain = text.isascii() and text.isprintable() and text == text.strip()
        headers["mcp-param-region"] = text if plain and not chance(draw, 15) else sentinel(text)
    if chance(draw, 6):
        headers[draw(st.sampled_from(["mcp-param-region", "mcp-param-x", "Mcp-Param-", "mcp-param-a"]))] = draw(
            st.sampled_from(["eu", "", "=?base64?ZXU=?=", "=?base64?%%?=", "1" * 500])
        )
    if chance(draw, 4):  # a handshake-era session id on a stateless request
        headers["mcp-session-id"] = draw(st.sampled_from([real("session:2025-11-25"), real("session:dead"), "x"]))
    payload: Any = body
    if chance(draw, 4):  # a batch: the 2026-07-28 entry takes one message per POST
        payload = [body, *[{**body, "id": n} for n in range(draw(st.integers(0, 3)))]]
    return FuzzRequest("POST", draw(st.sampled_from(PATHS)), draw(body_bytes(payload)), draw(odd_headers(headers)))


# ---- the handshake era ----

HANDSHAKE_METHODS = [
    *["tools/call"] * 8,
    *["tools/list"] * 3,
    "ping",
    "ping",
    "resources/list",
    "resources/templates/list",
    *["resources/read"] * 2,
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    *["prompts/get"] * 2,
    *["completion/complete"] * 2,
    "logging/setLevel",
    "logging/setLevel",
    "initialize",
    "server/discover",
    "tasks/get",
    "subscriptions/listen",
    "nope/nothing",
]


def session_header(draw: st.DrawFn, version: str) -> str | None:
    other = HANDSHAKE[1 - HANDSHAKE.index(version)]
    return draw(
        st.sampled_from(
            [
                *[real(f"session:{version}")] * 40,
                real(f"session:{other}"),
                real(f"session:{version}@/mcp"),  # a session of another endpoint, when the path is /mcp/math
                real(f"session:{version}@/mcp/math"),
                real("session:dead"),
                real("session:dead"),
                None,
                "0" * 32,
                "",
                "\u00e9",
                "x" * 8000,
            ]
        )
    )


@st.composite
def handshake_request(draw: st.DrawFn) -> FuzzRequest:
    version = draw(st.sampled_from(HANDSHAKE))
    kinds = ["initialize"] * 3 + ["request"] * 14 + ["notification"] * 2 + ["response", "delete"] + ["get"] * 3
    kinds += ["question"] * 2  # a tool that asks the client (on the call's stream: the fuzz client answers)
    kind = draw(st.sampled_from(kinds))
    headers = {"accept": SSE_AND_JSON, "content-type": "application/json"}
    version_header = draw(
        st.sampled_from([version] * 8 + [None, HANDSHAKE[1 - HANDSHAKE.index(version)], MODERN, *ODD_VERSIONS[:3]])
    )
    if version_header is not None and kind != "initialize":
        headers["mcp-protocol-version"] = version_header
    session = None if kind == "initialize" and not chance(draw, 12) else session_header(draw, version)
    if session is not None:
        headers["mcp-session-id"] = session
    path = draw(st.sampled_from(PATHS))
    if kind in ("get", "delete"):
        if kind == "get":
            headers["accept"] = draw(st.sampled_from(["text/event-stream"] * 6 + ACCEPTS))
            del headers["content-type"]
            last = draw(
                st.sampled_from([None, None, real("event"), real("event"), real("event:other"), "nope", "", "1"])
            )
            if last is not None:
                headers["last-event-id"] = last
        body = draw(body_bytes({"jsonrpc": "2.0", "method": "ping", "id": 1})) if chance(draw, 12) else b""
        return FuzzRequest(kind.upper(), path, body, draw(odd_headers(headers)))
    payload: Any
    if kind == "initialize":
        params = draw(params_for("initialize", modern=False))
        if not chance(draw, 20):
            params["protocolVersion"] = version
        payload = {"jsonrpc": "2.0", "id": draw(st.sampled_from(REQUEST_IDS)), "method": "initialize", "params": params}
    elif kind in ("request", "question"):
        method = "tools/call" if kind == "question" else draw(st.sampled_from(HANDSHAKE_METHODS))
        params = draw(params_for(method, modern=False))
        if kind == "question":
            params["name"] = tool = draw(st.sampled_from(QUESTION_TOOLS))
            params["arguments"] = dict(draw(st.sampled_from(UPSTREAM_TOOLS[tool.removeprefix(LEGACY)])))
        if chance(draw, 20):
            params["_meta"] = {"progressToken": draw(st.sampled_from(["p-1", 7]))}
        elif chance(draw, 8):
            params["_meta"] = draw(envelope())  # the other era's envelope on a session request
        payload = {"jsonrpc": "2.0", "id": draw(st.sampled_from(REQUEST_IDS)), "method": method}
        if params or draw(st.booleans()):
            payload["params"] = params
    elif kind == "notification":
        method = draw(st.sampled_from(NOTIFICATIONS))
        payload = {"jsonrpc": "2.0", "method": method, "params": draw(params_for(method, modern=False))}
    else:  # the client answering a request of the server's (sampling, elicitation, roots) it never made
        answer = draw(st.sampled_from([{"result": {}}, {"error": {"code": -1, "message": "no"}}, {"result": None}]))
        payload = {"jsonrpc": "2.0", "id": draw(st.sampled_from([0, 1, "srv-1"])), **answer}
    if chance(draw, 5):  # a batch (2025-06-18 removed them)
        payload = [payload, {"jsonrpc": "2.0", "id": 99, "method": "ping"}]
    return FuzzRequest("POST", path, draw(body_bytes(payload)), draw(odd_headers(headers)))


# ---- what either era can get wrong ----


@st.composite
def body_bytes(draw: st.DrawFn, payload: Any) -> bytes:
    """Mostly the message as the SDK writes it; else mutated, broken, or far too large."""
    choice = draw(st.integers(0, 99))
    if choice < 80:
        return encode(payload)
    if choice < 92:
        return draw(encoded(draw(mutated(payload)) if isinstance(payload, dict) else payload))
    if choice < 94:  # a string argument of a few MiB: past limits.max_body_bytes (1 MiB) or the SDK's 4 MiB
        size = draw(st.sampled_from([1_100_000, 4 * 1024 * 1024 + 10]))
        return encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "s": "a" * size}})
    return draw(st.sampled_from(["\u00e9t\u00e9".encode("latin-1"), b"\xff\xfe{}", b"null", b"{}", b"[]", b"1"]))


HEADER_VALUES = [  # (h11, the client's HTTP/1.1, cannot send a value with surrounding whitespace)
    "",
    "\u00e9t\u00e9",  # sent as UTF-8 bytes (obs-text)
    "a" * 8000,
    "a" * 60_000,  # the head just under server.max_header_bytes (64 KiB)
    "=?base64?" + "A" * 100 + "?=",
]


@st.composite
def odd_headers(draw: st.DrawFn, headers: dict[str, str]) -> dict[str, str]:
    """The SDK client's headers, now and then with a value replaced, a header dropped or one added."""
    found = dict(headers)
    for _ in range(draw(st.integers(1, 2)) if chance(draw, 18) else 0):
        action = draw(st.integers(0, 5))
        if action == 0 and found:
            found.pop(draw(st.sampled_from(sorted(found))))
        elif action == 1:
            found["accept"] = draw(st.sampled_from(ACCEPTS))
        elif action == 2:
            found["content-type"] = draw(st.sampled_from(CONTENT_TYPES))
        elif action == 3 and found:
            found[draw(st.sampled_from(sorted(found)))] = draw(st.sampled_from(HEADER_VALUES))
        elif action == 4:
            found[draw(st.sampled_from(["origin", "host", "authorization", "x-api-key", "last-event-id"]))] = draw(
                st.sampled_from(["http://evil.example", "evil.example", "Bearer x.y.z", "127.0.0.1", "\u00e9"])
            )
        else:
            found[draw(st.sampled_from(["x-fuzz", "mcp-name", "mcp-method", "mcp-protocol-version"]))] = draw(
                st.sampled_from(HEADER_VALUES)
            )
    return found


@st.composite
def other_request(draw: st.DrawFn) -> FuzzRequest:
    """HTTP methods the endpoint does not serve, and era-less requests."""
    method = draw(st.sampled_from(["PUT", "PATCH", "OPTIONS", "HEAD", "GET", "DELETE", "POST"]))
    headers: dict[str, str] = {}
    if draw(st.booleans()):
        headers["mcp-protocol-version"] = draw(st.sampled_from([MODERN, *HANDSHAKE, *ODD_VERSIONS]))
    if draw(st.booleans()):
        headers["accept"] = draw(st.sampled_from([SSE_AND_JSON, *ACCEPTS]))
    if draw(st.booleans()):
        headers["content-type"] = draw(st.sampled_from(["application/json", *CONTENT_TYPES]))
    body = draw(body_bytes({"jsonrpc": "2.0", "id": 1, "method": draw(st.sampled_from(MODERN_METHODS)), "params": {}}))
    return FuzzRequest(method, draw(st.sampled_from(PATHS)), body, draw(odd_headers(headers)))


def mcp_requests(era: str) -> st.SearchStrategy[FuzzRequest]:
    """Requests of one era (`handshake` or `modern`), with a few of the other kinds mixed in."""
    main = handshake_request() if era == "handshake" else modern_request()
    other = modern_request() if era == "handshake" else handshake_request()
    return st.integers(0, 19).flatmap(lambda n: main if n < 17 else other if n < 19 else other_request())


MCP_ERAS = {"mcp-handshake": mcp_requests("handshake"), "mcp-modern": mcp_requests("modern")}
