"""A small MCP server written with the `mcp` SDK, for the `kind: mcp` backend's tests.

The low-level `Server`, so that every byte of the listing and of each result is
the test's: its listing comes in pages of two (cursor pagination), `add` declares
an output schema and answers `structuredContent`, `fail` answers `isError: true`,
`get-env` echoes the environment it was started with, `slow` holds a call open and
`count` says how many calls a tool received (never twice for one call), `grow` adds a
tool and says so (`notifications/tools/list_changed`, or a `subscriptions/listen`
event in the 2026 era), `crash` ends the process (stdio supervision), `whoami` says
which Authorization header the HTTP request carried.

    python -m tests.mcp.backend.mcp_server --transport http --port 9000 [--legacy-only] [--require-token T]
    python -m tests.mcp.backend.mcp_server --transport stdio

`--legacy-only` refuses `server/discover` as a server of the handshake era does, so a
client must fall back to `initialize`; without it the SDK serves both eras on one endpoint.
`--require-token T` answers HTTP 401 to a POST without `Authorization: Bearer T`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
from collections import Counter
from typing import Any

import anyio
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    CallToolResult,
    ContentBlock,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    RequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

PAGE_SIZE = 2
# A 1x1 PNG: the smallest real image an `image` content block can carry.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4f60000000049454e44ae426082"
    )
).decode()


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


TOOLS: list[Tool] = [
    Tool(
        name="add",
        title="Add two numbers",
        description="Add two numbers; the sum comes back as structured content.",
        input_schema=_object({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"]),
        output_schema=_object({"sum": {"type": "number"}}, ["sum"]),
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    ),
    Tool(
        name="echo-text",
        description="Say the text back as one text block.",
        input_schema=_object({"text": {"type": "string"}}, ["text"]),
        annotations=ToolAnnotations(read_only_hint=True),
    ),
    Tool(
        name="fail",
        description="Fail as a tool does: isError with the reason as text.",
        input_schema=_object({"reason": {"type": "string"}}, ["reason"]),
    ),
    Tool(
        name="get-env",
        description="The value of one environment variable of this server process.",
        input_schema=_object({"name": {"type": "string"}}, ["name"]),
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False),
    ),
    Tool(
        name="slow",
        description="Answer after some seconds.",
        input_schema=_object({"seconds": {"type": "number", "minimum": 0, "maximum": 60}}, ["seconds"]),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    ),
    Tool(
        name="count",
        description="How many calls a tool has received.",
        input_schema=_object({"tool": {"type": "string"}}, ["tool"]),
        annotations=ToolAnnotations(read_only_hint=True),
    ),
    Tool(
        name="picture",
        description="A caption and a 1x1 image: two content blocks.",
        input_schema=_object({}, []),
    ),
    Tool(
        name="pair.sum",
        description="Sum of a pair, with a 2020-12 schema (prefixItems, $defs).",
        input_schema={
            "type": "object",
            "$defs": {"n": {"type": "integer"}},
            "properties": {
                "pair": {
                    "type": "array",
                    "prefixItems": [{"$ref": "#/$defs/n"}, {"$ref": "#/$defs/n"}],
                    "items": False,
                    "minItems": 2,
                }
            },
            "required": ["pair"],
        },
    ),
    Tool(name="grow", description="Add the tool `grown` to the listing.", input_schema=_object({}, [])),
    Tool(
        name="whoami",
        description="The Authorization header of this HTTP request, or none.",
        input_schema=_object({}, []),
        annotations=ToolAnnotations(read_only_hint=True),
    ),
    Tool(name="crash", description="End this server process at once.", input_schema=_object({}, [])),
]
GROWN = Tool(name="grown", description="Listed once `grow` ran.", input_schema=_object({}, []))

bus = InMemorySubscriptionBus()
calls: Counter[str] = Counter()
state = {"grown": False}
seen: dict[str, str | None] = {"authorization": None}  # of the POST being served (the tests send one at a time)


def listing() -> list[Tool]:
    return [*TOOLS, GROWN] if state["grown"] else list(TOOLS)


async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
    tools = listing()
    start = 0 if params is None or params.cursor is None else int(params.cursor)
    end = start + PAGE_SIZE
    return ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)


def text(value: str) -> list[ContentBlock]:
    return [TextContent(type="text", text=value)]


async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
    name, args = params.name, params.arguments or {}
    if name not in {t.name for t in listing()}:
        raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
    calls[name] += 1
    if name == "add":
        total = args["a"] + args["b"]
        return CallToolResult(content=text(json.dumps({"sum": total})), structured_content={"sum": total})
    if name == "echo-text":
        return CallToolResult(content=text(args["text"]))
    if name == "fail":
        return CallToolResult(content=text(f"it failed: {args['reason']}"), is_error=True)
    if name == "get-env":
        value = os.environ.get(args["name"])
        if value is None:
            return CallToolResult(content=text(f"{args['name']} is not set"), is_error=True)
        return CallToolResult(content=text(value))
    if name == "slow":
        await anyio.sleep(float(args["seconds"]))
        return CallToolResult(content=text(f"slept {args['seconds']} s"))
    if name == "count":
        return CallToolResult(content=text(str(calls[args["tool"]])))
    if name == "picture":
        return CallToolResult(
            content=[
                TextContent(type="text", text="one pixel"),
                ImageContent(type="image", data=PIXEL, mime_type="image/png"),
            ]
        )
    if name == "pair.sum":
        return CallToolResult(content=text(str(sum(args["pair"]))))
    if name == "grow":
        state["grown"] = True
        await bus.publish(ToolsListChanged())  # 2026 era: every subscriptions/listen stream
        if ctx.session is not None:  # handshake era: the session's notification
            try:
                await ctx.session.send_tool_list_changed()
            except Exception as exc:  # a 2026 connection has no session channel to push on
                print(f"no session channel for list_changed: {exc}", file=sys.stderr)
        return CallToolResult(content=text("grown"))
    if name == "whoami":
        return CallToolResult(content=text(seen["authorization"] or "none"))
    if name == "grown":
        return CallToolResult(content=text("hello from grown"))
    if name == "crash":
        print("crashing on request", file=sys.stderr, flush=True)
        os._exit(3)
    raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")


def build(*, legacy_only: bool = False) -> Server[Any]:
    server: Server[Any] = Server(
        "toolplex-test-mcp",
        version="1.4.2",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(bus),
    )
    if legacy_only:

        async def no_discover(ctx: ServerRequestContext[Any], params: RequestParams) -> dict[str, Any]:
            raise MCPError(METHOD_NOT_FOUND, "Method not found")

        server.add_request_handler("server/discover", RequestParams, no_discover)
    return server


class Gate:
    """ASGI middleware: note each POST's Authorization header; with a token, answer 401 to any other."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = dict(scope["headers"])
            authorization = headers.get(b"authorization", b"").decode() or None
            seen["authorization"] = authorization
            if self.token is not None and authorization != f"Bearer {self.token}":
                await send(
                    {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]}
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self.app(scope, receive, send)


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["http", "stdio"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--legacy-only", action="store_true")
    parser.add_argument("--require-token")
    options = parser.parse_args()
    server = build(legacy_only=options.legacy_only)
    print(f"test MCP server up ({options.transport}, pid {os.getpid()})", file=sys.stderr, flush=True)
    if options.transport == "stdio":
        anyio.run(serve_stdio, server)
        return
    app = Gate(server.streamable_http_app(), options.require_token)
    asyncio.run(
        uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=options.port, log_level="warning", timeout_graceful_shutdown=1)
        ).serve()
    )


if __name__ == "__main__":
    main()
