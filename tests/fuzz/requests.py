"""Hypothesis strategies for requests to every front: mostly almost-valid, sometimes hostile.

Each strategy draws a whole HTTP request (method, path, headers, body bytes). The bodies
start from what a real client of the protocol sends and then get fields dropped, retyped,
replaced by deep or huge values, or the bytes broken, because that is where parsers break.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import strategies as st

# Tools of the fuzz configuration worth aiming at, plus names that do not exist.
TOOL_NAMES = ["Math_Add", "Math_Divide", "Text_Reverse", "Time_Now", "Demo_Sleep", "Nope_Nothing", "", "Math"]
OXP_IDS = ["Math.Add", "Math.Add@1", "Math.Add@1.0.0", "Math.Add@1.2", "Text.Reverse", "Demo.Sleep", "X.Y@0.0.0"]
CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "",
]


@dataclass
class FuzzRequest:
    method: str
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


DEEP_MARK = "\u0001deep:"  # stands for a deeply nested value until the body is encoded (encoders recurse)
NUMBER_MARK = "\u0001num:"  # stands for a number literal no encoder would write (too big, too small)


def nested(depth: int) -> str:
    return f"{DEEP_MARK}{depth}"


def deep_json(depth: int) -> bytes:
    """`{"a":[{"a":[...1...]}]}` nested `depth` levels, written out without recursion."""
    opens = "".join('{"a":' if index % 2 == 0 else "[" for index in range(depth))
    closes = "".join("}" if index % 2 == 0 else "]" for index in reversed(range(depth)))
    return (opens + "1" + closes).encode()


def encode(body: Any) -> bytes:
    raw = orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    while (start := raw.find(b'"\\u0001deep:')) != -1:
        end = raw.index(b'"', start + 1)
        depth = int(raw[start + len(b'"\\u0001deep:') : end])
        raw = raw[:start] + deep_json(depth) + raw[end + 1 :]
    while (start := raw.find(b'"\\u0001num:')) != -1:
        end = raw.index(b'"', start + 1)
        raw = raw[:start] + raw[start + len(b'"\\u0001num:') : end] + raw[end + 1 :]
    return raw


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from(["18446744073709551616", "-1e400", "1e-400", "1.0e+999999"]).map(lambda n: f"{NUMBER_MARK}{n}"),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["", "0", "-1", "1e309", "NaN", "\u0000", "\ud7ff" * 3, "../../etc/passwd", "a" * 5000]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)
hostile_values = st.one_of(
    json_values,
    st.integers(min_value=60, max_value=1500).map(nested),
)


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> Any:
    """A valid body with a few of its fields dropped, retyped or added; sometimes not an object at all."""
    choice = draw(st.integers(min_value=0, max_value=9))
    if choice == 0:
        return draw(hostile_values)
    body = dict(base)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        action = draw(st.sampled_from(["drop", "retype", "add"]))
        keys = list(body)
        if action == "drop" and keys:
            body.pop(draw(st.sampled_from(keys)))
        elif action == "retype" and keys:
            body[draw(st.sampled_from(keys))] = draw(hostile_values)
        else:
            body[draw(st.text(min_size=1, max_size=10))] = draw(json_values)
    return body


@st.composite
def encoded(draw: st.DrawFn, body: Any) -> bytes:
    """JSON bytes, occasionally cut short, padded with junk, or not UTF-8."""
    raw = encode(body) if not isinstance(body, bytes) else body
    damage = draw(st.integers(min_value=0, max_value=12))
    if damage == 0:
        return raw[: draw(st.integers(min_value=0, max_value=max(0, len(raw) - 1)))]
    if damage == 1:
        return raw + draw(st.binary(max_size=8))
    if damage == 2:
        return draw(st.binary(max_size=64))
    if damage == 3:
        return b"[" * draw(st.integers(min_value=1, max_value=5000))
    return raw


@st.composite
def headers(draw: st.DrawFn) -> dict[str, str]:
    found: dict[str, str] = {}
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if content_type:
        found["content-type"] = content_type
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        found["authorization"] = draw(
            st.sampled_from(["Bearer", "Bearer x.y.z", "Basic Zm9vOmJhcg==", "Bearer eyJhbGciOiJub25lIn0.e30."])
        )
    if draw(st.integers(min_value=0, max_value=7)) == 0:
        found["cookie"] = "node_id=" + draw(st.sampled_from(["x", "a" * 43, "", "%00", "a" * 300]))
    return found


@st.composite
def opentool_requests(draw: st.DrawFn) -> FuzzRequest:
    base = {
        "jsonrpc": draw(st.sampled_from(["2.0", "2.0.0", "1.0"])),
        "method": draw(st.sampled_from(TOOL_NAMES)),
        "params": {"a": 1, "b": 2, "text": "x", "seconds": 0.01},
        "id": draw(st.sampled_from(["1", "call-9", 1, None])),
    }
    path = draw(st.sampled_from(["/opentool/call", "/opentool/call", "/opentool/streamCall", "/opentool/load"]))
    method = "GET" if path.endswith("/load") else "POST"
    return FuzzRequest(method, path, draw(encoded(draw(mutated(base)))), draw(headers()))


@st.composite
def oxp_requests(draw: st.DrawFn) -> FuzzRequest:
    flat = {
        "call_id": draw(st.sampled_from([None, "c-1", "", "x" * 300])),
        "tool_id": draw(st.sampled_from(OXP_IDS)),
        "input": {"a": 1, "b": 2, "text": "x", "seconds": 0.01},
        "context": {"secrets": [{"id": "s", "value": "v"}], "user_id": "u"},
    }
    body: Any = draw(mutated(flat))
    if draw(st.booleans()):
        body = {"$schema": "urn:oxp:1.0", "request": body}
    path = draw(st.sampled_from(["/tools/call", "/tools/call", "/tools", "/health"]))
    method = "POST" if path == "/tools/call" else "GET"
    return FuzzRequest(method, path, draw(encoded(body)), draw(headers()))


@st.composite
def toolserver_requests(draw: st.DrawFn) -> FuzzRequest:
    path = draw(
        st.sampled_from(
            [
                "/execute_tool",
                "/execute_tool",
                "/get_json_schema_for_tools",
                "/get_json_schema_for_envs",
                "/retrieving_tools",
                "/get_available_tools",
                "/get_cookie",
                "/close_session",
                "/release_session",
                "/get_workspace_structure",
                "/download_file",
            ]
        )
    )
    if path == "/execute_tool":
        base: Any = {"tool_name": draw(st.sampled_from(TOOL_NAMES)), "arguments": {"a": 1, "b": 2, "text": "x"}}
    elif path.startswith("/get_json_schema"):
        base = draw(st.lists(st.sampled_from([*TOOL_NAMES, "Math", "Text"]), max_size=4))
    elif path == "/retrieving_tools":
        base = {"question": draw(st.text(max_size=50)), "top_k": draw(st.integers(-5, 500))}
    elif path == "/download_file":
        base = {"file_path": draw(st.sampled_from(["a.txt", "../x", "/etc/passwd", ""])), "file_type": "text/plain"}
    else:
        base = {}
    body = draw(mutated(base)) if isinstance(base, dict) else base
    return FuzzRequest("POST", path, draw(encoded(body)), draw(headers()))


@st.composite
def jsonrpc_requests(draw: st.DrawFn) -> FuzzRequest:
    def one() -> Any:
        return draw(
            mutated(
                {
                    "jsonrpc": "2.0",
                    "id": draw(st.sampled_from([1, "a", None, 2.5, [1]])),
                    "method": draw(st.sampled_from(["tool.execute", "tool.list", "nope"])),
                    "params": {
                        "tool": draw(st.sampled_from(TOOL_NAMES)),
                        "parameters": {"a": 1, "b": 2, "text": "x"},
                        "context": {"sessionId": "s", "timeout": draw(st.sampled_from([10, -1, 10**12, "x"]))},
                    },
                }
            )
        )

    body: Any = [one() for _ in range(draw(st.integers(1, 4)))] if draw(st.booleans()) else one()
    return FuzzRequest("POST", "/rpc", draw(encoded(body)), draw(headers()))


FRONTS = {
    "opentool": opentool_requests(),
    "oxp": oxp_requests(),
    "toolserver": toolserver_requests(),
    "jsonrpc": jsonrpc_requests(),
}
