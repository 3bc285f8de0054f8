"""MCP <-> canonical: tool names, listings, results and errors.

Shared by the `kind: mcp` backend and, later, the MCP front, so both read one
set of rules; nothing here does I/O.

**Names.** MCP names may hold characters a canonical toolkit or tool name may not
(`[A-Za-z0-9_]+`): `get-weather`, `files.read`, `db/query`. `tool_name` maps them
reversibly (`mcp_name` is its inverse): letters, digits and a lone `_` stay; a lone
`-` becomes `__`; any other run of characters outside `[A-Za-z0-9]` becomes
`___<hex code points joined by _>___` (`files.read` -> `files___2e___read`). No two
MCP names share a canonical name, and the upstream's own name is kept with the tool
(`McpTool.name`), so calls always address the exact upstream tool.

**Results.** `value_of` reads a `CallToolResult`: its `structuredContent` when there
is one; else the text of a single plain text block; else `{"content": [blocks]}`,
every block as the server sent it. `result_of` is the inverse a front uses, so a value
travels MCP -> canonical -> MCP unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import ErrorKind, Failure
from gateway.model import ToolSpec

PROTOCOL = "mcp"
DEFAULT_VERSION = "1.0.0"  # MCP tools carry no version of their own; `version:` pins another

# JSON-RPC and MCP error codes (mcp_types names them; repeated here so this module imports nothing of the SDK).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
CONNECTION_CLOSED = -32000  # the SDK's own: the connection ended before the answer
REQUEST_TIMEOUT = -32001  # the SDK's own: no answer within the request's timeout
RESOURCE_NOT_FOUND = -32002
URL_ELICITATION_REQUIRED = -32042
# Codes that say the two sides disagree about the protocol: no caller can fix them.
PROTOCOL_MISMATCH = frozenset({PARSE_ERROR, INVALID_REQUEST, -32020, -32022})
MISSING_CLIENT_CAPABILITY = -32021  # the caller's client lacks what the tool asks of it (sampling, elicitation)

_ALNUM = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]+")
_NOT_FOUND_WORDS = ("unknown tool", "not found", "no such tool", "does not exist", "not available")
# How the TypeScript SDK (and so server-everything) answers a call of a tool it does not list: isError, this text.
_TS_SDK_NO_TOOL = re.compile(r"^MCP error -32602: Tool (?P<name>.+) not found$")


# ---- names ----


def tool_name(mcp_name: str) -> str:
    """The canonical tool name of an MCP tool name (see the module docstring); never empty."""
    if not mcp_name:
        raise ValueError("an MCP tool name is never empty")
    out: list[str] = []
    for run in _ALNUM.findall(mcp_name):
        if run[0].isascii() and run[0].isalnum():
            out.append(run)
        elif run == "_":
            out.append("_")
        elif run == "-":
            out.append("__")
        else:
            out.append("___" + "_".join(format(ord(c), "x") for c in run) + "___")
    return "".join(out)


def mcp_name(name: str) -> str | None:
    """The MCP name `tool_name` mapped to `name`; None when `name` is no output of `tool_name`."""
    out: list[str] = []
    i, n = 0, len(name)
    while i < n:
        if name[i] != "_":
            j = i
            while j < n and name[j] != "_":
                j += 1
            out.append(name[i:j])
            i = j
            continue
        run = 0
        while i + run < n and name[i + run] == "_":
            run += 1
        if run in (1, 2):
            out.append("_" if run == 1 else "-")
            i += run
            continue
        if run != 3:
            return None
        end = name.find("___", i + 3)
        if end < 0:
            return None
        try:
            out.append("".join(chr(int(code, 16)) for code in name[i + 3 : end].split("_")))
        except ValueError:
            return None
        i = end + 3
    decoded = "".join(out)
    return decoded if decoded and tool_name(decoded) == name else None


def default_toolkit(backend: str) -> str:
    """The toolkit of a backend's tools when `toolkit:` says none: the backend's name (`-` -> `_`)."""
    return backend.replace("-", "_")


# ---- listings ----


@dataclass(frozen=True)
class McpTool:
    """A spec's `binding`: the upstream's own name, and what MCP says of the tool beyond the canonical model."""

    name: str
    title: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    structured: bool = False  # declares an outputSchema: its value is the structuredContent
    # The `tools/list` entry as the server gave it: what the MCP front lists for it (under its name there).
    entry: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def spec_from_tool(tool: dict[str, Any], *, backend: str, toolkit: str, source: str) -> ToolSpec:
    """A canonical spec from one `tools/list` entry (as JSON, by alias); ValueError when it cannot be one."""
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a tool without a name")
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(f"tool {name!r}: inputSchema is not a JSON Schema of type object")
    output = tool.get("outputSchema")
    if output is not None and not isinstance(output, dict):
        raise ValueError(f"tool {name!r}: outputSchema is not a JSON Schema")
    annotations = tool.get("annotations") or {}
    if not isinstance(annotations, dict):
        annotations = {}
    title = tool.get("title") or annotations.get("title")
    description = tool.get("description") or (title if isinstance(title, str) else "") or ""
    return ToolSpec(
        toolkit=toolkit,
        name=tool_name(name),
        version=DEFAULT_VERSION,
        description=description,
        input_schema=schema,  # as listed: a 2020-12 schema stays one ($defs, prefixItems, ...)
        output_schema=output,
        backend=backend,
        language="remote",
        # MCP's defaults: readOnlyHint false. Only a read-only tool is free of side effects (and so cacheable).
        side_effects=annotations.get("readOnlyHint") is not True,
        tags=hint_tags(annotations),
        source=source,
        binding=McpTool(
            name=name,
            title=title if isinstance(title, str) else None,
            annotations=dict(annotations),
            structured=output is not None,
            entry=dict(tool),
        ),
    )


def hint_tags(annotations: dict[str, Any]) -> tuple[str, ...]:
    """The behaviour hints the canonical model has no field for, as tags (`idempotent`, `destructive`, ...)."""
    tags = []
    if annotations.get("readOnlyHint") is True:
        tags.append("read-only")
    elif annotations.get("destructiveHint") is not False:  # MCP's default for a tool that writes: destructive
        tags.append("destructive")
    if annotations.get("idempotentHint") is True:
        tags.append("idempotent")
    if annotations.get("openWorldHint") is False:
        tags.append("closed-world")
    return tuple(tags)


# ---- results ----


def _plain_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and set(block) == {"type", "text"}


def value_of(result: dict[str, Any]) -> Any:
    """The canonical value of a successful `CallToolResult` (JSON, by alias); see the module docstring."""
    structured = result.get("structuredContent")
    if structured is not None:
        return structured
    content = result.get("content") or []
    if len(content) == 1 and _plain_text(content[0]):
        return content[0]["text"]
    return {"content": content}


def result_of(value: Any, *, structured: bool) -> dict[str, Any]:
    """The `CallToolResult` (JSON) of a canonical value; the inverse of `value_of` for a tool that declares
    an output schema (`structured`) or not. A value of any other tool is sent as JSON text."""
    if structured and isinstance(value, dict):
        return {"content": [_text(orjson.dumps(value).decode())], "structuredContent": value, "isError": False}
    if isinstance(value, str):
        return {"content": [_text(value)], "isError": False}
    if isinstance(value, dict) and set(value) == {"content"} and isinstance(value["content"], list):
        return {"content": value["content"], "isError": False}
    return {"content": [_text(orjson.dumps(value).decode())], "isError": False}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def text_of(content: Any) -> str:
    """The text blocks of a result, one per line (what a caller can read of an error)."""
    if not isinstance(content, list):
        return ""
    return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))


def failure_of_result(backend: str, tool: str, result: dict[str, Any]) -> Failure:
    """A `CallToolResult` with `isError: true`: the tool failed, and said why in its text."""
    message = text_of(result.get("content")) or f"Tool {tool!r} of upstream {backend!r} failed without a message"
    match = _TS_SDK_NO_TOOL.match(message)
    if match is not None:
        return Failure(
            kind=ErrorKind.NOT_FOUND,
            message=f"Tool {tool!r} was not found upstream",
            developer_message=f"Upstream {backend!r} answered: {message}",
        )
    return Failure(kind=ErrorKind.TOOL_FAILED, message=message, developer_message=f"isError from upstream {backend!r}")


def failure_of_error(backend: str, code: int, message: str, data: Any = None) -> Failure:
    """A JSON-RPC error answer to `tools/call` as the canonical kind it stands for."""
    developer = f"MCP error {code} from upstream {backend!r}" + (
        f": {orjson.dumps(data).decode()}" if data is not None else ""
    )
    lowered = message.lower()
    if code in (INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND) and (
        code != INVALID_PARAMS or any(word in lowered for word in _NOT_FOUND_WORDS)
    ):
        return Failure(kind=ErrorKind.NOT_FOUND, message=message or "not found", developer_message=developer)
    if code == INVALID_PARAMS:
        return Failure(
            kind=ErrorKind.INVALID_ARGUMENTS,
            message=f"Upstream {backend!r} refused the arguments: {message}",
            developer_message=developer,
        )
    if code == URL_ELICITATION_REQUIRED:
        return _authorization_required(backend, message, data, developer)
    if code == REQUEST_TIMEOUT:
        return Failure(
            kind=ErrorKind.DEADLINE,
            message=f"Upstream {backend!r} did not answer before the deadline",
            developer_message=developer,
            can_retry=True,
        )
    if code == MISSING_CLIENT_CAPABILITY:
        return Failure(
            kind=ErrorKind.TOOL_FAILED,
            message=f"Upstream {backend!r} needs the caller's client to answer questions it cannot: {message}",
            developer_message=developer,
        )
    if code in PROTOCOL_MISMATCH or (code == CONNECTION_CLOSED and _sdk_connection_message(message)):
        return Failure(
            kind=ErrorKind.UPSTREAM_UNAVAILABLE,
            message=f"Upstream {backend!r} is unavailable: {message}",
            developer_message=developer,
            can_retry=True,
        )
    # -32603 (a tool handler raised) and every server-defined code: the tool failed.
    return Failure(kind=ErrorKind.TOOL_FAILED, message=message or f"MCP error {code}", developer_message=developer)


def _sdk_connection_message(message: str) -> bool:
    """The SDK's own words for a connection that ended, as opposed to a server's -32000 application error."""
    return message == "Connection closed" or message.startswith("SSE stream")


def _authorization_required(backend: str, message: str, data: Any, developer: str) -> Failure:
    """-32042: the user must open a URL first (an OAuth consent, say); each URL becomes an authorization."""
    challenges = []
    elicitations = data.get("elicitations") if isinstance(data, dict) else None
    for index, item in enumerate(elicitations if isinstance(elicitations, list) else []):
        if isinstance(item, dict) and isinstance(item.get("url"), str):
            challenges.append({"id": str(item.get("elicitationId") or f"{backend}-{index}"), "url": item["url"]})
    text = message or "The user must complete an authorization first"
    if challenges:
        text = f"{text} (open {challenges[0]['url']})"
    return Failure(
        kind=ErrorKind.AUTHORIZATION_REQUIRED,
        message=text,
        developer_message=developer,
        details={"authorization": challenges},
    )


# ---- the gateway's own refusals, as an MCP client reads them ----

INVALID_PARAMS_CODE = -32602
INTERNAL_ERROR_CODE = -32603
PARAMS_KINDS = frozenset({ErrorKind.MALFORMED, ErrorKind.TOO_LARGE, ErrorKind.INVALID_ARGUMENTS})


def error_of(failure: Failure) -> Any:
    """A failure of the gateway's (not the upstream's own JSON-RPC error, relayed as it came) as the JSON-RPC
    error of a request that is no tool call: bad parameters -32602, anything else -32603, with the canonical
    kind (and when to retry) in `data`, as the MCP front's tool results carry them in `_meta`."""
    from mcp.shared.exceptions import MCPError

    data: dict[str, Any] = {"kind": str(failure.kind)}
    if failure.retry_after_ms is not None:
        data["retryAfterMs"] = failure.retry_after_ms
    code = INVALID_PARAMS_CODE if failure.kind in PARAMS_KINDS else INTERNAL_ERROR_CODE
    return MCPError(code, failure.message, data)
