"""What `make bench` sends: one addition, asked of each server through each front.

Every gateway case has a baseline measured in the same run: an in-process tool
(Math.Add, a Python function in the gateway) is compared with the bare Starlette
app answering the same JSON-RPC request itself; a proxied tool (Up.Add, a REST tool
of the upstream) with the upstream called directly.

MCP is asked in its stateless 2026-07-28 era: one self-contained `tools/call` (the
protocol version and client capabilities in `_meta`, mirrored in headers), which wrk
can send again and again with no session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

BARE = "bare Starlette"
DIRECT = "upstream, direct"


@dataclass(frozen=True)
class Front:
    """How one front asks for a tool (flat and versioned names), and how a correct answer shows `value`."""

    name: str
    path: str
    body: Callable[[str, str], dict[str, Any]]  # (flat name, versioned id) -> JSON body
    shows: Callable[[bytes], bytes]  # the JSON of the value -> a substring of every correct answer
    session: bool = False  # ToolServerNode: a `node_id` cookie
    headers: Callable[[str], tuple[tuple[str, str], ...]] = lambda _flat: ()  # flat name -> extra request headers


ARGUMENTS = {"a": 10, "b": 5}
MCP_VERSION = "2026-07-28"
MCP_META = {"io.modelcontextprotocol/protocolVersion": MCP_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}


def mcp_headers(flat: str) -> tuple[tuple[str, str], ...]:
    """What a 2026-07-28 request carries besides its body: the SDK checks each against the body."""
    return (
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MCP_VERSION),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", flat),
    )


def mcp_shows(value: bytes) -> bytes:
    """A number comes back as a text block; an object as `structuredContent`. Either way, not an error."""
    if value.startswith(b"{"):
        return b'"structuredContent":' + value
    return b'"content":[{"text":"' + value + b'","type":"text"}],"isError":false'


FRONTS = (
    Front(
        "OpenTool /opentool/call",
        "/opentool/call",
        lambda flat, _vid: {"jsonrpc": "2.0", "method": flat, "params": ARGUMENTS, "id": "bench"},
        lambda value: b'"result":' + value,
    ),
    Front(
        "OXP /tools/call",
        "/tools/call",
        lambda _flat, vid: {"tool_id": vid, "input": ARGUMENTS},
        lambda value: b'"success":true,"value":' + value,
    ),
    Front(
        "ToolServerNode /execute_tool",
        "/execute_tool",
        lambda flat, _vid: {"tool_name": flat, "arguments": ARGUMENTS},
        lambda value: value,
        session=True,
    ),
    Front(
        "JSON-RPC /rpc",
        "/rpc",
        lambda flat, _vid: {
            "jsonrpc": "2.0",
            "method": "tool.execute",
            "params": {"tool": flat, "parameters": ARGUMENTS},
            "id": "bench",
        },
        lambda value: b'"value":' + value,
    ),
    Front(
        "MCP /mcp",
        "/mcp",
        lambda flat, _vid: {
            "jsonrpc": "2.0",
            "id": "bench",
            "method": "tools/call",
            "params": {"name": flat, "arguments": ARGUMENTS, "_meta": MCP_META},
        },
        mcp_shows,
        headers=mcp_headers,
    ),
)


@dataclass(frozen=True)
class Case:
    name: str
    server: str  # "baseline" | "upstream" | "gateway": which process answers
    path: str
    body: bytes
    expect: bytes
    baseline: str | None  # the case this one is compared with
    group: str
    session: bool = False
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request of the case


def _json(value: Any) -> bytes:
    return orjson.dumps(value)


def cases() -> list[Case]:
    listed = [
        Case(
            BARE,
            "baseline",
            "/call",
            _json({"jsonrpc": "2.0", "method": "Math_Add", "params": ARGUMENTS, "id": "bench"}),
            b'"result":{"result":15}',
            None,
            "baseline",
        ),
    ]
    for front in FRONTS:
        body = _json(front.body("Math_Add", "Math.Add@1.0.0"))
        listed.append(
            Case(
                front.name,
                "gateway",
                front.path,
                body,
                front.shows(b"15"),
                BARE,
                "in-process",
                front.session,
                front.headers("Math_Add"),
            )
        )
    listed.append(Case(DIRECT, "upstream", "/add", _json(ARGUMENTS), b'{"result":15}', None, "baseline"))
    for front in FRONTS:
        body = _json(front.body("Up_Add", "Up.Add@1.0.0"))
        listed.append(
            Case(
                front.name,
                "gateway",
                front.path,
                body,
                front.shows(b'{"result":15}'),
                DIRECT,
                "proxied",
                front.session,
                front.headers("Up_Add"),
            )
        )
    return listed
