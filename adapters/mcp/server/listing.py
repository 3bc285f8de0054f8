"""What the MCP front lists and answers: tool names, `tools/list` entries, results, cursors, the search meta-tools.

Names: a tool's MCP name is its flat name (`Toolkit_Name`), but an MCP upstream's tool keeps its own
name (`files.read`), unless routing renames it or collisions force the flat name. Results: an MCP
upstream's answer is passed on as it came (`own_result`); any other tool's value is rendered as a
`CallToolResult` (`call_result_wire`), a failure as an `isError` result the model can read
(`error_result_wire`).
"""

from __future__ import annotations

import base64
import collections
from collections.abc import Iterable
from typing import Any, Final

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import SERVER_INFO_META_KEY

from adapters.mcp import codec
from gateway.errors import ErrorKind, Failure
from gateway.model import Outcome, ToolSpec, UpstreamAnswer

SEARCH_TOOL: Final = "search_tools"
CALL_TOOL: Final = "call_tool"


def own_mcp_name(spec: ToolSpec) -> str:
    """The name MCP clients see, collisions aside: the flat name (`Toolkit_Name`, already within MCP's
    `[A-Za-z0-9_.-]{1,128}`), but an MCP upstream's tool under its own name (`files.read`, renamed by
    `rename`), or under `<toolkit>_<its name>` when the backend's `toolkit` or `prefix` says so."""
    binding = spec.binding
    if isinstance(binding, codec.McpTool):
        own = binding.name if spec.name == codec.tool_name(binding.name) else spec.name
        name = own if spec.toolkit == codec.default_toolkit(spec.backend) else f"{spec.toolkit}_{own}"
        if len(name) <= 128 and all(c.isascii() and (c.isalnum() or c in "_.-") for c in name):
            return name
    return spec.flat_name


def mcp_names(specs: Iterable[ToolSpec]) -> dict[str, ToolSpec]:
    """MCP name -> tool over the whole catalog: an own name that two tools would share, or that is another
    tool's flat name, falls back to the flat name for the MCP upstream's tools (flat names are unique)."""
    specs = list(specs)
    flat = {spec.flat_name for spec in specs}
    counts = collections.Counter(own_mcp_name(spec) for spec in specs)
    names: dict[str, ToolSpec] = {}
    for spec in specs:
        own = own_mcp_name(spec)
        clash = own != spec.flat_name and (counts[own] > 1 or own in flat)
        names[spec.flat_name if clash else own] = spec
    return names


def annotations_of(spec: ToolSpec) -> dict[str, Any]:
    """MCP behaviour hints from the canonical model: an MCP upstream's own, else from `side_effects` and tags."""
    binding = spec.binding
    if isinstance(binding, codec.McpTool) and binding.annotations:
        return {k: v for k, v in binding.annotations.items() if k != "title"}
    read_only = not spec.side_effects
    return {
        "readOnlyHint": read_only,
        "destructiveHint": not read_only and "non-destructive" not in spec.tags,
        "idempotentHint": read_only or "idempotent" in spec.tags,
    }


def object_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """An output schema MCP can list (its root must be an object), else None."""
    return schema if isinstance(schema, dict) and schema.get("type") == "object" else None


def tool_entry(spec: ToolSpec, name: str) -> types.Tool:
    """A tool as `tools/list` lists it: an MCP upstream's own entry as the server listed it (its annotations,
    title, `_meta`, schemas), under its name here; any other built from the canonical spec."""
    binding = spec.binding
    if isinstance(binding, codec.McpTool) and binding.entry:
        return types.Tool.model_validate({**binding.entry, "name": name}, by_name=False)
    wire: dict[str, Any] = {
        "name": name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "annotations": annotations_of(spec),
    }
    output = object_schema(spec.output_schema)
    if output is not None:
        wire["outputSchema"] = output
    binding = spec.binding
    if isinstance(binding, codec.McpTool) and binding.title:
        wire["title"] = binding.title
    return types.Tool.model_validate(wire, by_name=False)


def cache_hint(specs: Iterable[ToolSpec], hints: dict[str, tuple[int, str] | None], shared: bool) -> dict[str, Any]:
    """The freshness hint of a `tools/list` answer (2026-07-28) as `ListToolsResult` fields: its MCP upstreams'
    own when every tool listed is theirs (`hints`: by backend, from their last listing), the shortest time,
    public only when each says so and the listing is every caller's (`shared`); else none (the SDK's
    default: immediately stale, private), as the gateway's own tools may change at any rediscovery."""
    given = []
    for spec in specs:
        hint = hints.get(spec.backend) if isinstance(spec.binding, codec.McpTool) else None
        if hint is None:
            return {}
        given.append(hint)
    if not given:
        return {}
    public = shared and all(scope == "public" for _, scope in given)
    return {"ttl_ms": min(ttl for ttl, _ in given), "cache_scope": "public" if public else "private"}


def call_result_wire(spec: ToolSpec, value: Any) -> dict[str, Any]:
    """A successful outcome as MCP (JSON): `structuredContent` (with its JSON as text) for an object value of
    a tool that declares an object output schema or none; an MCP upstream's content blocks as they came."""
    structured = isinstance(value, dict) and (
        object_schema(spec.output_schema) is not None
        or (spec.output_schema is None and not (set(value) == {"content"} and isinstance(value["content"], list)))
    )
    return codec.result_of(value, structured=structured)


def call_result(spec: ToolSpec, value: Any) -> types.CallToolResult:
    return types.CallToolResult.model_validate(call_result_wire(spec, value), by_name=False)


def own_result(raw: dict[str, Any]) -> dict[str, Any]:
    """An MCP upstream's answer (a result, a page, an interim result) as the front answers it: everything as
    the server gave it but its own `serverInfo` stamp (the caller talks to the gateway, whose stamp the SDK
    puts in its place)."""
    meta = raw.get("_meta")
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        raw = dict(raw)
        kept = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}
        if kept:
            raw["_meta"] = kept
        else:
            del raw["_meta"]
    return raw


def error_result_wire(failure: Failure, call_id: str | None) -> dict[str, Any]:
    """A tool-level failure the model can read (and, for invalid arguments, correct): `isError: true` (JSON)."""
    text = failure.message  # an invalid-arguments message already names each bad parameter
    if failure.additional_prompt_content:
        text += "\n" + failure.additional_prompt_content
    meta: dict[str, Any] = {"io.toolplex/kind": str(failure.kind), "io.toolplex/canRetry": failure.can_retry}
    if call_id is not None:
        meta["io.toolplex/callId"] = call_id
    if failure.retry_after_ms is not None:
        meta["io.toolplex/retryAfterMs"] = failure.retry_after_ms
    authorization = failure.details.get("authorization")
    if authorization:
        meta["io.toolplex/authorization"] = authorization
    return {"content": [{"type": "text", "text": text}], "isError": True, "_meta": meta}


def error_result(failure: Failure, call_id: str | None) -> types.CallToolResult:
    return types.CallToolResult.model_validate(error_result_wire(failure, call_id), by_name=False)


def unknown_tool(name: str) -> MCPError:
    """The protocol error for a name no tool has, or none this caller may call here."""
    return MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}", data={"name": name})


def mcp_upstream(outcome: Outcome) -> UpstreamAnswer | None:
    """An MCP upstream's own answer (a transparent hop), else None."""
    upstream = outcome.upstream
    return upstream if upstream is not None and upstream.protocol == codec.PROTOCOL else None


def call_answer(name: str, spec: ToolSpec, outcome: Outcome) -> dict[str, Any] | types.InputRequiredResult:
    """A `tools/call` outcome as MCP, but for an MCP upstream's new task (whose id the endpoint seals for the
    caller): an MCP upstream's own answer as it came (its result, `isError` result, interim result; its JSON-RPC
    error raised), else a success rendered from the canonical value, a tool error as an `isError` result (both
    as JSON), or a protocol error raised as `MCPError`. `name` is the tool as the client called it. The front
    (`Endpoint._result`) and the console (`adapters.mcp.presenter`) answer with it."""
    upstream = mcp_upstream(outcome)
    raw = upstream.result if upstream is not None and isinstance(upstream.result, dict) else None
    if upstream is not None and isinstance(upstream.error, dict):  # its own JSON-RPC error, as it came
        raise MCPError(upstream.error["code"], upstream.error["message"], upstream.error.get("data"))
    if raw is not None:
        if raw.get("resultType") == "input_required":
            return types.InputRequiredResult.model_validate(own_result(raw), by_name=False)
        return own_result(raw)  # content, structuredContent, isError, _meta: as the server gave them
    if outcome.error is None:
        return call_result_wire(outcome.spec or spec, outcome.value)
    failure = outcome.error
    if failure.kind == ErrorKind.NOT_FOUND:
        raise unknown_tool(name)
    if failure.kind in (ErrorKind.MALFORMED, ErrorKind.TOO_LARGE):
        raise MCPError(types.INVALID_PARAMS, failure.message)
    return error_result_wire(failure, outcome.call_id)


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


def decode_cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        kind, _, number = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        offset = int(number)
    except (ValueError, UnicodeDecodeError):
        offset = -1
        kind = ""
    if kind != "o" or offset < 0:
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {cursor!r}: pass a nextCursor this server gave")
    return offset


SEARCH_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "What the tool should do, in plain words"},
        "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many tools to return"},
    },
    "required": ["query"],
}
CALL_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "description": "A tool name search_tools returned"},
        "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema says"},
    },
    "required": ["name"],
}


def meta_tools() -> list[types.Tool]:
    """The two tools a `search: true` front lists instead of the catalog."""
    return [
        types.Tool.model_validate(
            {
                "name": SEARCH_TOOL,
                "description": "Find the tools for a task among every tool you may call; returns their names, "
                "descriptions and input schemas. Then call one with call_tool.",
                "inputSchema": SEARCH_SCHEMA,
                "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
            },
            by_name=False,
        ),
        types.Tool.model_validate(
            {
                "name": CALL_TOOL,
                "description": "Call a tool found with search_tools, by name, with its arguments.",
                "inputSchema": CALL_SCHEMA,
                "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False},
            },
            by_name=False,
        ),
    ]
