"""Upstream servers for tests/e2e/test_same_protocol.py: each answers as the real servers of its protocol do,
with the result shapes a same-protocol hop must keep (strings, numbers, objects with a `result` member, nested
objects, arrays, null, unicode) beside the cases the existing test servers already have.

- `opentool`: the Dart-SDK-modelled server of `tests.upstreams.opentool_server` (its Geo tools, `$ref`s, SSE
  `/streamCall`, HTTP 200 tool failures), plus functions returning each result shape. A Dart tool returns a
  `Map<String, dynamic>`: the server sends it as the JSON-RPC `result` unchanged, whatever the function's
  `return` says, so every function here answers a map.
- `toolserver`: the ToolServerManager double of `tests.upstreams.toolserver_manager` (sessions by cookie, bare
  node routes per session), plus a `ShapeEnv` whose tools are Python functions called as XAgent's node calls
  them: `function(**arguments)`, the value wrapped by the node's rule, any exception a 500 with its traceback.
- `mcpserver`: a server written with the `mcp` SDK's `MCPServer` decorators (the FastMCP style most MCP servers
  are written in): `@server.tool() def test_simple_text() -> str`, typed returns (int, float, list, None, dict,
  a pydantic model), an unannotated return, a `ToolError`, a result with `_meta` of its own, a titled and
  annotated tool, progress, a question asked by a resolver (`Resolve(...)` -> `Elicit`, which the SDK asks in
  either era) and one asked mid-call with `ctx.elicit` (the handshake era's back-channel, as most servers ask),
  resources, a resource template and prompts; both protocol eras on one Streamable HTTP endpoint, /mcp.

    python -m tests.e2e.same_protocol_servers opentool --port P
    python -m tests.e2e.same_protocol_servers toolserver --port P
    python -m tests.e2e.same_protocol_servers mcpserver --port P
"""

from __future__ import annotations

import argparse
import json
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import mcp_types as types
import uvicorn
from mcp.server.mcpserver import AssistantMessage, Context, Elicit, MCPServer, Resolve, UserMessage
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from tests.upstreams import opentool_server, toolserver_manager, toolserver_node

# ---- OpenTool (the Dart SDK's server) ----


def _function(
    name: str, description: str, parameters: list[dict[str, Any]], returned: dict[str, Any] | None
) -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": parameters, "return": returned}


def _returns(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "schema": schema}


NAME_PARAMETER = {"name": "name", "schema": {"type": "string"}, "required": True}
COUNT_PARAMETER = {"name": "count", "description": "How many", "schema": {"type": "integer"}, "required": True}

# name -> (the map the tool returns for these params, or a JSON-RPC error object)
OPENTOOL_SHAPES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "greet": lambda p: {"greeting": f"Hello, {p.get('name')}!"},
    "wrapped": lambda p: {"result": {"x": 1}},
    "undeclared": lambda p: {"result": {"x": 1}},
    "profile": lambda p: {
        "user": {"name": "Zoë", "tags": ["a", "b"], "address": {"city": "Köln", "zip": None}, "score": 9.5}
    },
    "primes": lambda p: {"primes": [2, 3, 5, 7]},
    "nothing": lambda p: {"value": None},
    "flag": lambda p: {"ok": True},
    "pair": lambda p: {"a": 1, "b": "β"},
    "empty": lambda p: {},
}
OPENTOOL_FUNCTIONS: list[dict[str, Any]] = [
    _function("greet", "Greet someone by name", [NAME_PARAMETER], _returns("greeting", {"type": "string"})),
    _function(
        "wrapped",
        "A map whose only key is `result`, its return described loosely",
        [],
        _returns("result", {"type": "object"}),
    ),
    _function("undeclared", "A map whose only key is `result`, no return described", [], None),
    _function("profile", "A nested map", [], _returns("user", {"type": "object"})),
    _function("primes", "An array", [], _returns("primes", {"type": "array", "items": {"type": "integer"}})),
    _function("nothing", "A null value", [], _returns("value", {"type": "string"})),
    _function("flag", "A boolean", [], _returns("ok", {"type": "boolean"})),
    _function("pair", "A map of two keys", [], None),
    _function("empty", "An empty map", [], None),
    _function("strict", "Checks its own parameters", [COUNT_PARAMETER], _returns("count", {"type": "integer"})),
]
OPENTOOL_DOCUMENT: dict[str, Any] = {
    **opentool_server.DOCUMENT,
    "functions": [*opentool_server.DOCUMENT["functions"], *OPENTOOL_FUNCTIONS],
}


def _opentool_answer(body: dict[str, Any]) -> dict[str, Any]:
    """What the Dart server answers for one of the functions above (`"error": null` on success)."""
    method, params = body.get("method"), body.get("params") or {}
    if method == "strict":
        if not isinstance(params.get("count"), int) or isinstance(params.get("count"), bool):
            failure = {"code": -32602, "message": "Invalid params: 'count' must be an integer"}
            return {"jsonrpc": "2.0", "result": {}, "error": failure, "id": body["id"]}
        return {"jsonrpc": "2.0", "result": {"count": params["count"]}, "error": None, "id": body["id"]}
    return {"jsonrpc": "2.0", "result": OPENTOOL_SHAPES[str(method)](params), "error": None, "id": body["id"]}


def opentool_app() -> Callable[[Scope, Receive, Send], Any]:
    """The Dart-modelled server, `/load` listing the shape functions too and `/call`, `/streamCall` answering them;
    every other request goes to `tests.upstreams.opentool_server` as it is."""
    inner = opentool_server.build_app(None, omit_error=False)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path not in ("/opentool/load", "/opentool/call", "/opentool/streamCall"):
            await inner(scope, receive, send)
            return
        if path == "/opentool/load":
            await JSONResponse(OPENTOOL_DOCUMENT)(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if (
            isinstance(body, dict)
            and isinstance(body.get("id"), str)
            and body.get("method") in {f["name"] for f in OPENTOOL_FUNCTIONS}
        ):
            await _opentool_extra(path, body)(scope, receive, send)
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        await inner(scope, replay, send)

    return app


def _opentool_extra(path: str, body: dict[str, Any]) -> Response:
    answer = _opentool_answer(body)
    if path == "/opentool/call":
        return JSONResponse(answer)
    method = body["method"]

    async def events() -> Any:  # the Dart SDK's /streamCall: start, one data (or error), done
        yield f"event:start\ndata:{json.dumps({'start': method})}\n\n"
        if answer.get("error"):
            yield f"event:error\ndata:{json.dumps(answer)}\n\n"
            return
        yield f"event:data\ndata:{json.dumps(answer)}\n\n"
        yield f"event:done\ndata:{json.dumps({'done': method})}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


# ---- ToolServerNode (XAgent's Manager and nodes) ----


def _shape_text(text: str) -> str:
    return f"Héllo, {text} ✓"


def _shape_ratio(a: float, b: float) -> float:
    return a / b


def _shape_flag() -> bool:
    return True


def _shape_items() -> list[Any]:
    return [{"id": 1}, {"id": 2, "tags": ["x", "ÿ"]}, None]


def _shape_nothing() -> None:
    return None


def _shape_profile() -> dict[str, Any]:
    return {"user": {"name": "Zoë", "address": {"city": "Köln", "zip": None}}, "scores": [1, 2.5]}


def _shape_tagged() -> dict[str, Any]:
    return {"type": "simple", "data": {"k": 1}}  # an object that looks like the node's own wrapping


def _shape_strict(count: int) -> int:
    return len(range(count))


def _shape_rows(rows: int) -> int:
    """Fails naming every row it could not read: a traceback as long as real tools' often are (a few KB)."""
    raise ValueError("could not read rows " + ", ".join(f"#{i} (checksum mismatch)" for i in range(rows)))


SHAPE_TOOLS: dict[str, tuple[Callable[..., Any], str, dict[str, Any]]] = {
    "ShapeEnv_text": (_shape_text, "Greet a text, in unicode", toolserver_node.schema({"text": "string"})),
    "ShapeEnv_ratio": (_shape_ratio, "Divide a by b", toolserver_node.schema({"a": "number", "b": "number"})),
    "ShapeEnv_flag": (_shape_flag, "A boolean", toolserver_node.schema({})),
    "ShapeEnv_items": (_shape_items, "A list of objects", toolserver_node.schema({})),
    "ShapeEnv_nothing": (_shape_nothing, "Nothing (null)", toolserver_node.schema({})),
    "ShapeEnv_profile": (_shape_profile, "A nested object", toolserver_node.schema({})),
    "ShapeEnv_tagged": (_shape_tagged, "An object shaped like a wrapped result", toolserver_node.schema({})),
    "ShapeEnv_strict": (_shape_strict, "Count to count", toolserver_node.schema({"count": "integer"})),
    "ShapeEnv_rows": (_shape_rows, "Fails with a long message", toolserver_node.schema({"rows": "integer"})),
}


def _install_shape_env() -> None:
    """Add ShapeEnv to the node double's registry (this process only)."""
    for name, (_function, description, parameters) in SHAPE_TOOLS.items():
        toolserver_node.TOOLS[name] = {"description": description, "parameters": parameters}
    toolserver_node.ENV_DESCRIPTIONS["ShapeEnv"] = "Values of every shape"
    node_tool = toolserver_node.run_tool

    def run_tool(node: toolserver_node.Node, name: str, arguments: dict[str, Any]) -> Response:
        if name not in SHAPE_TOOLS:
            return node_tool(node, name, arguments)
        try:  # as XAgent's node runs a tool: its function with the arguments, any exception a 500 with the trace
            value = SHAPE_TOOLS[name][0](**arguments)
        except Exception:
            return JSONResponse({"detail": traceback.format_exc()}, status_code=500)
        return JSONResponse(toolserver_node.wrap(value))

    toolserver_node.run_tool = run_tool  # type: ignore[assignment]  # execute_tool looks it up at call time


# ---- MCP: a server written with MCPServer's decorators ----

MCPSERVER_NAME = "same-protocol-mcpserver"
SIMPLE_TEXT = "This is a simple text response for testing."


class Day(BaseModel):
    date: str
    high_c: float
    summary: str


class Forecast(BaseModel):
    city: str
    days: list[Day]


class Name(BaseModel):
    name: str


class Color(BaseModel):
    color: str


async def ask_name(ctx: Context) -> Elicit[Name]:
    """The resolver of `elicit_name`: ask the client's user (module level, as annotations name it)."""
    return Elicit("What is your name?", Name)


def mcpserver_app() -> Any:
    server = MCPServer(MCPSERVER_NAME, version="1.2.3", instructions="Shapes for the same-protocol matrix test")

    @server.tool()
    def test_simple_text() -> str:
        """Tests simple text content response"""
        return SIMPLE_TEXT

    @server.tool()
    def greet(name: str) -> str:
        """Greet someone, in unicode"""
        return f"Grüß dich, {name}! 👋"

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers"""
        return a + b

    @server.tool()
    def ratio(a: float, b: float) -> float:
        """Divide a by b"""
        return a / b

    @server.tool()
    def primes(n: int) -> list[int]:
        """The first primes, up to n of them"""
        return [2, 3, 5, 7, 11][:n]

    @server.tool()
    def nothing() -> None:
        """Returns nothing at all"""
        return None

    @server.tool()
    def wrapped() -> dict[str, Any]:
        """An object whose only member is `result`"""
        return {"result": {"x": 1}}

    @server.tool()
    def settings() -> dict[str, Any]:
        """A nested object"""
        return {"theme": {"name": "Solarisé", "colors": ["#fff", "#000"]}, "beta": None, "level": 3}

    @server.tool()
    def forecast(city: str) -> Forecast:
        """A typed (pydantic) result with an output schema"""
        return Forecast(city=city, days=[Day(date="2026-11-28", high_c=7.5, summary="Nuageux")])

    @server.tool()
    def untyped(value: Any):  # type: ignore[no-untyped-def]  # no return annotation: unstructured, on purpose
        """Whatever it is given, with no declared return"""
        return value

    @server.tool(
        title="Look up a key",
        annotations=types.ToolAnnotations(title="Lookup", read_only_hint=True, open_world_hint=False),
    )
    def lookup(key: str) -> str:
        """A read-only tool with a title and annotations"""
        return f"value of {key}"

    @server.tool(meta={"io.example/owner": "tests"})
    def with_meta() -> types.CallToolResult:
        """A result with `_meta` of its own, built by hand"""
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="with meta", _meta={"io.example/block": 1})],
            structured_content={"answer": 42},
            _meta={"io.example/trace": "abc-123"},
        )

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the reason given (a ToolError: isError)"""
        raise ToolError(f"Failed on purpose: {reason}")

    @server.tool()
    async def progress(ctx: Context) -> str:
        """Reports progress twice"""
        await ctx.report_progress(1, 2, "half")
        await ctx.report_progress(2, 2, "done")
        return "progressed"

    @server.tool()
    def elicit_name(who: Annotated[Name, Resolve(ask_name)]) -> str:
        """Asks the client's user for a name (elicitation), in either era"""
        return f"Hello, {who.name}"

    @server.tool()
    async def favourite_color(ctx: Context) -> str:
        """Asks the user mid-call with `ctx.elicit`, on the call's own session (the handshake era's back-channel)"""
        answer = await ctx.elicit("What is your favourite colour?", Color)
        if answer.action == "accept":
            return f"Favourite colour: {answer.data.color}"
        return f"No colour ({answer.action})"

    @server.resource("info://server", mime_type="text/plain", description="What this server is")
    def info() -> str:
        return "Shapes server: ünïcode included"

    @server.resource("data://items/{item_id}", mime_type="application/json", description="One item")
    def item(item_id: str) -> str:
        return json.dumps({"id": item_id, "name": f"Item {item_id}"})

    @server.prompt(description="Review some code")
    def review(code: str, language: str = "python") -> str:
        return f"Please review this {language} code:\n{code}"

    @server.prompt(title="Greeting prompt")
    def hello() -> list[Any]:
        return [UserMessage("Hello!"), AssistantMessage("Hi — how can I help?")]

    return server.streamable_http_app(host="127.0.0.1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("opentool", "toolserver", "mcpserver"))
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if args.kind == "opentool":
        uvicorn.run(opentool_app(), host="127.0.0.1", port=args.port, log_level="warning")
    elif args.kind == "toolserver":
        _install_shape_env()
        with tempfile.TemporaryDirectory(prefix="same-protocol-tsn-") as scratch:
            app = toolserver_manager.app(Path(scratch))
            uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    else:
        # h11, as tests/mcp/reference_server.py: httptools keeps a header value's surrounding whitespace.
        uvicorn.run(mcpserver_app(), host="127.0.0.1", port=args.port, log_level="warning", http="h11")


if __name__ == "__main__":
    main()
