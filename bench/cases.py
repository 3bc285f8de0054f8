"""What `make bench` sends: one addition, asked of each server through each front.

Every gateway case has a baseline measured in the same run: an in-process tool
(Math.Add, a Python function in the gateway) is compared with the bare Starlette
app answering the same JSON-RPC request itself; a proxied tool (Up.Add, a REST tool
of the upstream) with the upstream called directly.
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


ARGUMENTS = {"a": 10, "b": 5}

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
            Case(front.name, "gateway", front.path, body, front.shows(b"15"), BARE, "in-process", front.session)
        )
    listed.append(Case(DIRECT, "upstream", "/add", _json(ARGUMENTS), b'{"result":15}', None, "baseline"))
    for front in FRONTS:
        body = _json(front.body("Up_Add", "Up.Add@1.0.0"))
        listed.append(
            Case(
                front.name, "gateway", front.path, body, front.shows(b'{"result":15}'), DIRECT, "proxied", front.session
            )
        )
    return listed
