"""One small client per front, as a real client of each protocol calls a tool and reads the answer.

Each returns an `Answer`: the value the tool produced, or the front's own error marker
(OpenTool error.code, OXP (status, can_retry), ToolServerNode status, JSON-RPC error.code).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Answer:
    ok: bool
    value: Any = None
    code: Any = None


def opentool(http: httpx.Client, tool: str, arguments: dict[str, Any]) -> Answer:
    body = http.post(
        "/opentool/call", json={"jsonrpc": "2.0", "method": tool, "params": arguments, "id": uuid.uuid4().hex}
    ).json()
    if body.get("error"):
        return Answer(False, code=body["error"]["code"])
    result = body["result"]
    return Answer(True, result["result"] if set(result) == {"result"} else result)


def oxp(http: httpx.Client, tool: str, arguments: dict[str, Any]) -> Answer:
    toolkit, _, name = tool.partition("_")
    response = http.post("/tools/call", json={"tool_id": f"{toolkit}.{name}", "input": arguments})
    body = response.json()
    if response.status_code == 200 and body["success"]:
        return Answer(True, body["value"])
    can_retry = body.get("error", {}).get("can_retry") if response.status_code == 200 else None
    return Answer(False, code=(response.status_code, can_retry))


def toolserver(http: httpx.Client, tool: str, arguments: dict[str, Any]) -> Answer:
    """XAgent's client: a node_id cookie session, then /execute_tool and its 450 loop (at most 10 rounds)."""
    if "node_id" not in http.cookies:
        http.post("/get_cookie")
    response = http.post("/execute_tool", json={"tool_name": tool, "arguments": arguments})
    for _ in range(10):
        if response.status_code != 450:
            break
        detail = response.json()["detail"]
        response = http.post(
            "/execute_tool", json={"tool_name": detail["next_calling"], "arguments": detail["arguments"]}
        )
    if response.status_code != 200:
        return Answer(False, code=response.status_code)
    value = response.json()
    if isinstance(value, dict) and value.get("type") == "simple":
        value = value["data"]
    return Answer(True, value)


def jsonrpc(http: httpx.Client, tool: str, arguments: dict[str, Any]) -> Answer:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": tool, "parameters": arguments}}
    body = http.post("/rpc", json=request).json()
    if "error" in body:
        return Answer(False, code=body["error"]["code"])
    return Answer(True, body["result"]["metadata"]["value"])


FRONTS = {"opentool": opentool, "oxp": oxp, "toolserver": toolserver, "jsonrpc": jsonrpc}

# What each front says for each canonical kind (design.md's table).
EXPECTED_CODES = {
    "deadline_exceeded": {"opentool": 504, "oxp": (200, True), "toolserver": 500, "jsonrpc": -32001},
    "upstream_unavailable": {"opentool": 503, "oxp": (400, None), "toolserver": 503, "jsonrpc": -32603},
    "tool_failed": {"opentool": 500, "oxp": (200, False), "toolserver": 500, "jsonrpc": -32000},
}
