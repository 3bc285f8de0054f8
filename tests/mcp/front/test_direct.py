"""The MCP front's direct path (adapters/mcp/server/direct.py) answers exactly as the SDK would.

A real gateway on a loopback port (uvicorn in this process, so the test can flip `direct.ENABLED`)
gets each request twice, through the direct path and through the SDK, and both answers must agree:
status, content type and the parsed body (SSE events parsed, their keep-alive pings counted apart).
A spy on the path's answering step says whether the request took it. Then the `mcp` SDK's own client
calls tools through it, a call its client abandons is cancelled, and a call that outlives the SDK's
SSE window commits to `text/event-stream` as the SDK does. The path's shortcuts are checked against
the SDK's own functions: its result shaping against `ServerRunner._serialize`, its JSON parsing
against `json.loads`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import httpx
import httpx2
import mcp_types as types
import orjson
import pytest
import pytest_asyncio
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.runner import ServerRunner
from mcp.shared.exceptions import MCPError

from adapters.mcp import sdk
from adapters.mcp.server import direct
from adapters.python import Toolkit, tool
from gateway.app import create_app
from gateway.config import parse_config
from tests.support import free_port, python_server

MODERN = "2026-07-28"
KEY = "direct-full-key"
MATH_KEY = "direct-math-key"
WAIT_S = 20.0  # bound on any one wait
PV, CAPS, INFO = (
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
)
META = {PV: MODERN, CAPS: {}}

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
in_module_loop = pytest.mark.asyncio(loop_scope="module")  # the gateway's loop, shared by this module's tests


# ---- tools for the tests, served by the gateway from this module ----

started: dict[str, asyncio.Event] = {}
cancelled: set[str] = set()


@tool(name="Wait", timeout=65, side_effects=False)
async def wait(key: Annotated[str, "Names this call for the test"]) -> dict[str, str]:
    """Wait until cancelled (at most 30 s), saying when it started and whether it was cancelled."""
    started.setdefault(key, asyncio.Event()).set()
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        cancelled.add(key)
        raise
    return {"waited": key}


@tool(name="Echo", side_effects=False)
def echo(value: Annotated[dict[str, Any], "Any object"]) -> dict[str, Any]:
    """The object, as it came: structured content of every JSON kind."""
    return value


@tool(name="Say", side_effects=False)
def say(text: Annotated[str, "What to say"]) -> str:
    """The text, as it came: a text block."""
    return text


@tool(name="Picture", side_effects=False)
def picture() -> dict[str, Any]:
    """A result of MCP content blocks (an image), not a plain text block."""
    return {"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}


probes = Toolkit("Probe", [wait, echo, say, picture], description="Tools for the direct path's tests")


# ---- the gateway ----

CONFIG = """
fronts:
  mcp:
    servers:
      mathonly: {{include: ["Math_*"], exclude: ["Math_Divide"]}}
auth:
  api_keys:
    - {{name: full, key: {key}}}
    - {{name: math-only, key: {math_key}, tools: ["Math_*"]}}
backends:
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
  - {{name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}}
  - {{name: probe, kind: python, module: "tests.mcp.front.test_direct:probes"}}
  - {{name: ref, kind: mcp, url: "http://127.0.0.1:{reference}/mcp", toolkit: Ref}}
  - name: hdr
    kind: http
    url: http://127.0.0.1:9
    toolkit: Hdr
    tools:
      - name: Region
        description: A tool whose schema mirrors an argument into a header
        method: POST
        path: /region
        input_schema:
          type: object
          properties: {{region: {{type: string, x-mcp-header: Region}}}}
          required: [region]
"""


@pytest.fixture(scope="module")
def reference() -> Iterator[int]:
    with python_server("tests.mcp.reference_server") as port:
        yield port


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def base(reference: int) -> AsyncIterator[str]:
    """The gateway served by uvicorn on a free loopback port, in this test's event loop."""
    text = CONFIG.format(key=KEY, math_key=MATH_KEY, reference=reference)
    app = create_app(parse_config(textwrap.dedent(text), "direct.yaml", env=dict(os.environ)), bind_host="127.0.0.1")
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", http="httptools", log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    deadline = time.monotonic() + WAIT_S
    while not server.started:
        assert not serving.done() and time.monotonic() < deadline, "the gateway did not start"
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, WAIT_S)


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the calls the direct path answered, from now on (a spy on its answering step)."""
    answered: list[str] = []
    answer = direct._answer
    signature = inspect.signature(answer)

    async def spy(*args: Any) -> None:
        answered.append(signature.bind(*args).arguments["name"])
        await answer(*args)

    monkeypatch.setattr(direct, "_answer", spy)
    return answered


@pytest.fixture
def enabled() -> Iterator[None]:
    yield
    direct.ENABLED = True


# ---- one request, both ways ----


def call(name: Any, arguments: Any = None, *, meta: Any = META, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    body_params: dict[str, Any] = {"name": name, "_meta": meta, **params}
    if arguments is not None:
        body_params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body_params}


def headers_of(body: dict[str, Any], key: str | None = KEY) -> dict[str, str]:
    """What a 2026-07-28 client sends with a body: the routing headers mirror it."""
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    sent["MCP-Protocol-Version"] = MODERN
    sent["Mcp-Method"] = str(body.get("method"))
    params = body.get("params")
    if isinstance(params, dict) and isinstance(params.get("name"), str):
        sent["Mcp-Name"] = params["name"]
    if key is not None:
        sent["Authorization"] = f"Bearer {key}"
    return sent


@dataclass
class Answer:
    status: int
    content_type: str | None
    body: Any  # parsed JSON; the events of an SSE stream; else the text, or None when empty
    pings: int = 0


def normalized(value: Any) -> Any:
    """The one part of an answer that differs between two calls: the gateway's call id of a tool error."""
    if isinstance(value, dict):
        return {k: "<call id>" if k == "io.toolplex/callId" else normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def parsed(response: httpx.Response) -> Answer:
    kind = response.headers.get("content-type")
    raw = response.content
    if kind == "text/event-stream":
        events, pings = [], 0
        for block in raw.decode().split("\r\n\r\n"):
            if block == ": ping":
                pings += 1
            elif block:
                lines = dict(line.split(": ", 1) for line in block.split("\r\n"))
                events.append({"event": lines["event"], "data": json.loads(lines["data"])})
        return Answer(response.status_code, kind, events, pings)
    if kind == "application/json":
        return Answer(response.status_code, kind, normalized(json.loads(raw)))
    return Answer(response.status_code, kind, raw.decode() or None)


Content = bytes | Callable[[], AsyncIterator[bytes]]


Headers = dict[str, str] | list[tuple[str, str]]


async def exchange(url: str, content: Content, headers: Headers, *, on: bool) -> Answer:
    direct.ENABLED = on
    body = content if isinstance(content, bytes) else content()
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        return parsed(await http.post(url, content=body, headers=headers))


async def both(url: str, content: Content, headers: Headers) -> tuple[Answer, Answer]:
    """The SDK's answer, then the direct path's (which may hand the request back to the SDK)."""
    return await exchange(url, content, headers, on=False), await exchange(url, content, headers, on=True)


def encoded(body: Any) -> bytes:
    return json.dumps(body).encode()


# name: (body, header changes, path, whether the direct path answers it)
CASES: dict[str, tuple[Any, dict[str, str | None], str, bool]] = {
    "a value": (call("Math_Add", {"a": 2, "b": 3.5}), {}, "/mcp", True),
    "structured content": (call("Demo_Sleep", {"seconds": 0}), {}, "/mcp", True),
    "every JSON kind, nulls and non-ASCII": (
        call("Probe_Echo", {"value": {"n": None, "f": 0.1, "i": 7, "b": True, "s": "été ☃", "l": [1, {"x": None}]}}),
        {},
        "/mcp",
        True,
    ),
    "a non-ASCII text block": (call("Probe_Say", {"text": "naïve café 🦀"}), {}, "/mcp", True),
    "content blocks, shaped by the SDK's sieve": (call("Probe_Picture", {}), {}, "/mcp", True),
    "a tool error (isError)": (call("Demo_Fail", {"message": "on purpose"}), {}, "/mcp", True),
    "invalid arguments": (call("Math_Add", {"a": "two", "b": 1}), {}, "/mcp", True),
    "no arguments at all": (call("Math_Add"), {}, "/mcp", True),
    "an unknown tool": (call("Nope_Nothing", {}), {}, "/mcp", True),
    "a tool this key may not call": (
        call("Demo_Sleep", {"seconds": 0}),
        {"Authorization": f"Bearer {MATH_KEY}"},
        "/mcp",
        True,
    ),
    "a tool outside the virtual server": (call("Math_Divide", {"a": 1, "b": 2}), {}, "/mcp/mathonly", True),
    "a tool inside the virtual server": (call("Math_Add", {"a": 1, "b": 2}), {}, "/mcp/mathonly", True),
    "a string id": (call("Math_Add", {"a": 1, "b": 2}, request_id="abc"), {}, "/mcp", True),
    "the SDK client's _meta": (
        call(
            "Math_Add", {"a": 1, "b": 2}, meta={PV: MODERN, CAPS: {"sampling": {}}, INFO: {"name": "c", "version": "1"}}
        ),
        {},
        "/mcp",
        True,
    ),
    "a log level": (
        call("Math_Add", {"a": 1, "b": 2}, meta={**META, "io.modelcontextprotocol/logLevel": "info"}),
        {},
        "/mcp",
        True,
    ),
    "trace context in _meta (the SDK's span runs)": (
        call(
            "Math_Add",
            {"a": 1, "b": 2},
            meta={**META, "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        ),
        {},
        "/mcp",
        True,
    ),
    # Everything below goes to the SDK, with the body already read replayed.
    "_meta without client capabilities": (call("Math_Add", {"a": 1, "b": 2}, meta={PV: MODERN}), {}, "/mcp", False),
    "a malformed client info": (
        call("Math_Add", {"a": 1, "b": 2}, meta={**META, INFO: {"name": 3}}),
        {},
        "/mcp",
        False,
    ),
    "a malformed log level": (
        call("Math_Add", {"a": 1, "b": 2}, meta={**META, "io.modelcontextprotocol/logLevel": "loud"}),
        {},
        "/mcp",
        False,
    ),
    "_meta not an object": (call("Math_Add", {"a": 1, "b": 2}, meta="no"), {}, "/mcp", False),
    "a progress token": (call("Demo_Sleep", {"seconds": 0}, meta={**META, "progressToken": "p1"}), {}, "/mcp", False),
    "Mcp-Name not the body's name": (call("Math_Add", {"a": 1, "b": 2}), {"Mcp-Name": "Math_Subtract"}, "/mcp", False),
    "no Mcp-Name": (call("Math_Add", {"a": 1, "b": 2}), {"Mcp-Name": None}, "/mcp", False),
    "Mcp-Method not the body's method": (
        call("Math_Add", {"a": 1, "b": 2}),
        {"Mcp-Method": "tools/list"},
        "/mcp",
        False,
    ),
    "the version header not the body's": (
        call("Math_Add", {"a": 1, "b": 2}, meta={**META, PV: "2026-01-01"}),
        {},
        "/mcp",
        False,
    ),
    "an unsupported version": (
        call("Math_Add", {"a": 1, "b": 2}, meta={**META, PV: "2099-01-01"}),
        {"MCP-Protocol-Version": "2099-01-01"},
        "/mcp",
        False,
    ),
    "a name that is not a string": (call(7, {}), {"Mcp-Name": "7"}, "/mcp", False),
    "arguments that are not an object": (call("Math_Add", [1, 2]), {}, "/mcp", False),
    "an extra params member": (call("Math_Add", {"a": 1, "b": 2}, requestState="s"), {}, "/mcp", False),
    "a boolean id": (call("Math_Add", {"a": 1, "b": 2}, request_id=True), {}, "/mcp", False),
    "a notification": (
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"Mcp-Method": "notifications/cancelled"},
        "/mcp",
        False,
    ),
    "tools/list": ({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}}, {}, "/mcp", False),
    "JSON-RPC 1.0": ({**call("Math_Add", {"a": 1, "b": 2}), "jsonrpc": "1.0"}, {}, "/mcp", False),
    "an MCP upstream's tool (its relay needs the session)": (call("Ref_test_simple_text", {}), {}, "/mcp", False),
    "an x-mcp-header parameter without its header": (call("Hdr_Region", {"region": "eu"}), {}, "/mcp", False),
    "an x-mcp-header parameter with its header": (
        call("Hdr_Region", {"region": "eu"}),
        {"Mcp-Param-Region": "eu"},
        "/mcp",
        False,
    ),
    "a text/plain body": (call("Math_Add", {"a": 1, "b": 2}), {"Content-Type": "text/plain"}, "/mcp", False),
    "an Accept without SSE": (call("Math_Add", {"a": 1, "b": 2}), {"Accept": "application/json"}, "/mcp", False),
    "a handshake-era version header": (
        call("Math_Add", {"a": 1, "b": 2}),
        {"MCP-Protocol-Version": "2025-11-25"},
        "/mcp",
        False,
    ),
    "a session id": (call("Math_Add", {"a": 1, "b": 2}), {"Mcp-Session-Id": "none-such"}, "/mcp", False),
    "no credentials": (call("Math_Add", {"a": 1, "b": 2}), {"Authorization": None}, "/mcp", False),
}


@in_module_loop
@pytest.mark.parametrize("case", list(CASES))
async def test_each_request_gets_the_sdks_answer(base: str, case: str, taken: list[str], enabled: None) -> None:
    body, changes, path, takes_path = CASES[case]
    headers = headers_of(body)
    for name, value in changes.items():
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    sdk, answered = await both(base + path, encoded(body), headers)
    assert answered == sdk
    assert bool(taken) is takes_path, f"direct path {'not ' if takes_path else ''}taken"
    assert sdk.status != 500


@in_module_loop
@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "Math_Add", "x": NaN}}',
        b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "Math_Add", "_meta": {"'
        + PV.encode()
        + b'": "2026-07-28", "'
        + CAPS.encode()
        + b'": {}}, "arguments": {"a": 123456789012345678901234, "b": 1}}}',
    ],
    ids=["not JSON", "NaN", "a batch", "a 24-digit integer"],
)
async def test_bodies_the_sdk_parses_its_own_way_get_its_answer(base: str, raw: bytes, enabled: None) -> None:
    headers = headers_of({"method": "tools/call", "params": {"name": "Math_Add"}})
    sdk, answered = await both(f"{base}/mcp", raw, headers)
    assert answered == sdk and sdk.status in (200, 400)


@in_module_loop
@pytest.mark.parametrize("header", ["Mcp-Name", "Mcp-Method", "MCP-Protocol-Version"])
async def test_a_routing_header_given_twice_gets_the_sdks_answer(
    base: str, header: str, taken: list[str], enabled: None
) -> None:
    body = call("Math_Add", {"a": 1, "b": 2})
    sent = headers_of(body)
    sdk, answered = await both(f"{base}/mcp", encoded(body), [*sent.items(), (header, sent[header])])
    assert answered == sdk and sdk.status == 400 and not taken


@in_module_loop
async def test_a_body_in_chunks_and_one_over_the_limit(base: str, taken: list[str], enabled: None) -> None:
    body = encoded(call("Math_Add", {"a": 20, "b": 22}))

    def chunks() -> AsyncIterator[bytes]:
        async def produce() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 16):
                yield body[start : start + 16]

        return produce()

    sdk, answered = await both(f"{base}/mcp", chunks, headers_of(call("Math_Add")))
    assert answered == sdk and sdk.body["result"]["content"][0]["text"] == "42"
    assert taken == ["Math_Add"]

    huge = encoded(call("Probe_Say", {"text": "x" * (4 * 1024 * 1024 + 1)}))
    headers = headers_of(call("Probe_Say"))
    sdk, answered = await both(f"{base}/mcp", huge, headers)
    assert answered == sdk and sdk.status == 413

    def huge_chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit is found while reading
        async def produce() -> AsyncIterator[bytes]:
            for start in range(0, len(huge), 1 << 20):
                yield huge[start : start + (1 << 20)]

        return produce()

    sdk, answered = await both(f"{base}/mcp", huge_chunks, headers)
    assert answered == sdk and sdk.status == 413
    assert taken == ["Math_Add"]


# ---- the SDK's own client ----


def sdk_client(url: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=httpx2.Timeout(WAIT_S))
    return Client(streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=WAIT_S)  # type: ignore[arg-type]


@in_module_loop
async def test_the_sdk_client_calls_through_the_direct_path(base: str, taken: list[str]) -> None:
    async with sdk_client(f"{base}/mcp") as mcp:
        assert mcp.protocol_version == MODERN
        added = await mcp.call_tool("Math_Add", {"a": 2, "b": 3.5})
        assert added.is_error is False and added.content[0].text == "5.5"  # type: ignore[union-attr]
        slept = await mcp.call_tool("Demo_Sleep", {"seconds": 0})
        assert slept.structured_content == {"slept": 0}
        failed = await mcp.call_tool("Demo_Fail", {"message": "on purpose"})
        assert failed.is_error is True and failed.content[0].text.startswith("on purpose")  # type: ignore[union-attr]
        with pytest.raises(MCPError) as unknown:
            await mcp.call_tool("Nope_Nothing", {})
        assert unknown.value.code == types.INVALID_PARAMS
        relayed = await mcp.call_tool("Ref_test_simple_text", {})  # an MCP upstream's: through the SDK
        assert relayed.is_error is False
        assert "Math_Add" in {t.name for t in (await mcp.list_tools()).tools}
    assert taken == ["Math_Add", "Demo_Sleep", "Demo_Fail", "Nope_Nothing"]


# ---- long calls ----


async def until(condition: Callable[[], bool]) -> None:
    """Until `condition` holds; bounded."""
    deadline = time.monotonic() + WAIT_S / 2
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.02)


@in_module_loop
@pytest.mark.parametrize("on", [False, True], ids=["sdk", "direct"])
async def test_a_call_its_client_abandons_is_cancelled(base: str, on: bool, taken: list[str], enabled: None) -> None:
    key = f"abandoned-{on}"
    direct.ENABLED = on
    body = encoded(call("Probe_Wait", {"key": key}))
    head = "".join(f"{k}: {v}\r\n" for k, v in headers_of(call("Probe_Wait")).items())
    port = int(base.rsplit(":", 1)[1])
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body
    )
    await writer.drain()
    await until(lambda: key in started and started[key].is_set())
    writer.close()
    await writer.wait_closed()
    await until(lambda: key in cancelled)  # within WAIT_S / 2, where the call would wait 30 s
    assert taken == (["Probe_Wait"] if on else [])


@in_module_loop
@pytest.mark.parametrize("on", [False, True], ids=["sdk", "direct"])
async def test_a_call_outliving_the_sse_window_is_streamed(
    base: str, on: bool, monkeypatch: pytest.MonkeyPatch, taken: list[str], enabled: None
) -> None:
    monkeypatch.setattr(sdk._modern, "_SSE_PING_INTERVAL", 0.3)
    body = call("Demo_Sleep", {"seconds": 1.5})  # five windows: the SDK's, and the path's, commit well before
    answer = await exchange(f"{base}/mcp", encoded(body), headers_of(body), on=on)
    assert answer.status == 200 and answer.content_type == "text/event-stream"
    assert answer.pings >= 1 and taken == (["Demo_Sleep"] if on else [])
    assert answer.body == [
        {
            "event": "message",
            "data": {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "content": [{"text": '{"slept":1.5}', "type": "text"}],
                    "isError": False,
                    "resultType": "complete",
                    "structuredContent": {"slept": 1.5},
                    "_meta": answer.body[0]["data"]["result"]["_meta"],
                },
            },
        }
    ]
    assert answer.body[0]["data"]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "toolplex"


# ---- the shortcuts, against the SDK's own functions ----

RESULTS = [
    {"content": [{"type": "text", "text": "15"}], "isError": False},
    {"content": [{"type": "text", "text": "é"}, {"type": "text", "text": ""}], "isError": False},
    {"content": [], "isError": True},
    {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"a": None, "b": [1.5, {"c": None}]}},
    {"content": [{"type": "text", "text": "x"}], "isError": True, "_meta": {"io.toolplex/kind": "tool_failed"}},
    {"content": [{"type": "text", "text": "x"}], "_meta": {"k": None}},
    {"content": [{"type": "text", "text": "x"}], "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "own"}}},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 0.5}}]},
    {"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]},
    {"content": [{"type": "text", "text": "x"}], "structuredContent": {"when": float("inf")}},
    {"content": [{"type": "text", "text": "x"}], "structuredContent": {1: "int key"}},
    {"content": [{"type": "text", "text": "x"}], "structuredContent": [1, 2]},
]


PLAIN = {0, 1, 2, 3, 4, 6, 11}  # text blocks, plain JSON structured content, a _meta of plain JSON without nulls


@pytest.mark.parametrize(("index", "wire"), list(enumerate(RESULTS)), ids=[str(i) for i in range(len(RESULTS))])
def test_result_shaping_is_the_sdks(index: int, wire: dict[str, Any]) -> None:
    from adapters.mcp.server.endpoint import _Server

    server = _Server("toolplex", version="1.2.3", title="Toolplex")
    result = types.CallToolResult.model_validate(wire, by_name=False)
    runner = ServerRunner(server, None, None)  # type: ignore[arg-type]  # only its result shaping is used
    try:
        expected: Any = orjson.dumps(runner._serialize("tools/call", MODERN, result))
    except MCPError as exc:
        expected = exc.error
    try:
        shaped: Any = orjson.dumps(direct._shape(server, MODERN, result))
    except MCPError as exc:
        shaped = exc.error
    assert shaped == expected  # byte for byte: the same keys in the same order
    plain = direct._plain(wire, server)  # from the JSON, as the direct path has it
    assert (plain is not None) is (index in PLAIN)  # the common forms take the shortcut
    if plain is not None:
        assert orjson.dumps(plain) == expected


BODIES = [
    b'{"a": 1, "a": 2, "b": 1.0, "c": -0, "d": -0.0, "e": 1E5, "f": 5e-324, "g": 2.4e-324}',
    b'{"x": 18446744073709551615, "y": -9223372036854775808, "z": 0.1e1}',
    b'{"x": 18446744073709551616}',
    b'{"x": -9223372036854775809}',
    b'{"x": 1e400}',
    b'{"x": NaN, "y": Infinity}',
    b'\xef\xbb\xbf{"bom": 1}',
    b'{"s": "\\ud800"}',
    b'{"s": "\\ud83e\\udd80 \\u00e9 \\"\\\\\\/\\b\\f\\n\\r\\t"}',
    b'{"s": "\xed\xa0\x80"}',
    b' \t\n{"ws": true} \r\n',
    b'{"deep": ' + b"[" * 600 + b"]" * 600 + b"}",
    b'{"deep": ' + b"[" * 2000 + b"]" * 2000 + b"}",
    b'{"a": 1}x',
    b"",
]


@pytest.mark.parametrize("raw", BODIES, ids=[str(i) for i in range(len(BODIES))])
def test_decoding_is_json_loads_or_nothing(raw: bytes) -> None:
    decoded = direct._decode(raw)
    if decoded is None:
        return
    assert repr(decoded) == repr(json.loads(raw))  # the same values, types and key order
