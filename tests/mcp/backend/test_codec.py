"""MCP <-> canonical rules: reversible names, listings, results both ways, and errors as canonical kinds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.mcp import codec
from gateway.catalog import validate_spec
from gateway.errors import ErrorKind
from gateway.model import PART_PATTERN

NAMES = [
    ("add", "add"),
    ("get_weather", "get_weather"),
    ("getWeather", "getWeather"),
    ("_private", "_private"),
    ("get-tiny-image", "get__tiny__image"),
    ("files.read", "files___2e___read"),
    ("db/query-v2", "db___2f___query__v2"),
    ("a__b", "a___5f_5f___b"),
    ("a_-b", "a___5f_2d___b"),
    ("-", "__"),
    ("héllo wörld", "h___e9___llo___20___w___f6___rld"),
]


@pytest.mark.parametrize(("mcp", "canonical"), NAMES)
def test_names_map_both_ways(mcp: str, canonical: str) -> None:
    assert codec.tool_name(mcp) == canonical
    assert PART_PATTERN.match(canonical)
    assert codec.mcp_name(canonical) == mcp


@given(st.text(min_size=1, max_size=40))
def test_every_name_maps_to_a_valid_one_and_back(name: str) -> None:
    mapped = codec.tool_name(name)
    assert PART_PATTERN.match(mapped), mapped
    assert codec.mcp_name(mapped) == name


@given(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=12))
def test_two_names_never_share_a_canonical_name(first: str, second: str) -> None:
    assert (codec.tool_name(first) == codec.tool_name(second)) == (first == second)


@pytest.mark.parametrize("text", ["a____b", "___zz___", "___2e", "a___2e__", "___", ""])
def test_text_no_name_maps_to_has_no_mcp_name(text: str) -> None:
    assert codec.mcp_name(text) is None


def test_a_listing_entry_becomes_a_spec_with_its_schemas_kept() -> None:
    schema = {
        "type": "object",
        "$defs": {"n": {"type": "integer"}},
        "properties": {"pair": {"type": "array", "prefixItems": [{"$ref": "#/$defs/n"}], "items": False}},
    }
    output = {"type": "object", "properties": {"sum": {"type": "number"}}}
    entry = {
        "name": "pair.sum",
        "title": "Pair sum",
        "inputSchema": schema,
        "outputSchema": output,
        "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
    }
    spec = codec.spec_from_tool(entry, backend="up", toolkit="up", source="test")
    assert (spec.toolkit, spec.name, spec.version) == ("up", "pair___2e___sum", "1.0.0")
    assert spec.input_schema == schema and spec.output_schema == output  # 2020-12 keywords untouched
    assert spec.description == "Pair sum"  # no description: the title says what it does
    assert spec.side_effects is False and spec.tags == ("read-only", "idempotent", "closed-world")
    assert spec.binding == codec.McpTool(
        name="pair.sum", title="Pair sum", annotations=entry["annotations"], structured=True
    )
    assert validate_spec(spec) == []


@pytest.mark.parametrize(
    ("annotations", "side_effects", "tags"),
    [
        ({}, True, ("destructive",)),  # MCP's defaults: may write, and destructively
        ({"destructiveHint": False}, True, ()),
        ({"readOnlyHint": True, "destructiveHint": True}, False, ("read-only",)),
        ({"idempotentHint": True, "destructiveHint": False}, True, ("idempotent",)),
    ],
)
def test_behaviour_hints(annotations: dict[str, Any], side_effects: bool, tags: tuple[str, ...]) -> None:
    entry = {"name": "t", "inputSchema": {"type": "object"}, "annotations": annotations}
    spec = codec.spec_from_tool(entry, backend="up", toolkit="up", source="test")
    assert (spec.side_effects, spec.tags) == (side_effects, tags)


@pytest.mark.parametrize(
    "entry",
    [{"inputSchema": {"type": "object"}}, {"name": "t"}, {"name": "t", "inputSchema": {"type": "array"}}],
)
def test_entries_that_cannot_be_tools_are_refused(entry: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        codec.spec_from_tool(entry, backend="up", toolkit="up", source="test")


IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
RESULTS = [
    # structuredContent is the value
    ({"content": [{"type": "text", "text": '{"sum": 3}'}], "structuredContent": {"sum": 3}}, True, {"sum": 3}),
    # one plain text block: its text
    ({"content": [{"type": "text", "text": "hello"}]}, False, "hello"),
    # anything else: the blocks as sent
    (
        {"content": [{"type": "text", "text": "a pixel"}, IMAGE]},
        False,
        {"content": [{"type": "text", "text": "a pixel"}, IMAGE]},
    ),
    (
        {"content": [{"type": "text", "text": "x", "annotations": {"audience": ["user"]}}]},
        False,
        {"content": [{"type": "text", "text": "x", "annotations": {"audience": ["user"]}}]},
    ),
    ({"content": []}, False, {"content": []}),
]


@pytest.mark.parametrize(("result", "structured", "value"), RESULTS)
def test_results_round_trip(result: dict[str, Any], structured: bool, value: Any) -> None:
    assert codec.value_of(result) == value
    back = codec.result_of(value, structured=structured)
    assert back["isError"] is False and codec.value_of(back) == value
    if structured:  # the structured value exactly; its text twin is that value as JSON (whatever spacing)
        assert back["structuredContent"] == result["structuredContent"]
        assert [json.loads(b["text"]) for b in back["content"]] == [json.loads(b["text"]) for b in result["content"]]
    else:  # the content blocks exactly
        assert back["content"] == result["content"] and "structuredContent" not in back


def test_is_error_is_a_tool_failure_with_its_text() -> None:
    failure = codec.failure_of_result(
        "up", "fail", {"content": [{"type": "text", "text": "it failed: disk"}, IMAGE], "isError": True}
    )
    assert failure.kind is ErrorKind.TOOL_FAILED and failure.message == "it failed: disk"
    unknown = codec.failure_of_result(
        "up", "gone", {"content": [{"type": "text", "text": "MCP error -32602: Tool gone not found"}], "isError": True}
    )
    assert unknown.kind is ErrorKind.NOT_FOUND


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        (-32602, "Unknown tool: nope", ErrorKind.NOT_FOUND),
        (-32602, "b must be a number", ErrorKind.INVALID_ARGUMENTS),
        (-32601, "Method not found", ErrorKind.NOT_FOUND),
        (-32603, "Internal server error", ErrorKind.TOOL_FAILED),
        (-32000, "the database is locked", ErrorKind.TOOL_FAILED),  # a server's own -32000
        (-32000, "Connection closed", ErrorKind.UPSTREAM_UNAVAILABLE),  # the SDK's
        (-32001, "Request 'tools/call' timed out", ErrorKind.DEADLINE),
        (-32700, "Parse error", ErrorKind.UPSTREAM_UNAVAILABLE),
        (-32600, "Invalid request", ErrorKind.UPSTREAM_UNAVAILABLE),
        (-32022, "Unsupported protocol version", ErrorKind.UPSTREAM_UNAVAILABLE),
        (7, "a code of the server's own", ErrorKind.TOOL_FAILED),
    ],
)
def test_json_rpc_errors_as_kinds(code: int, message: str, kind: ErrorKind) -> None:
    failure = codec.failure_of_error("up", code, message)
    assert failure.kind is kind
    assert str(code) in (failure.developer_message or "")


def test_url_elicitation_is_an_authorization_with_its_url() -> None:
    data = {"elicitations": [{"mode": "url", "elicitationId": "e1", "url": "https://auth.example/x", "message": "m"}]}
    failure = codec.failure_of_error("up", -32042, "Authorize first", data)
    assert failure.kind is ErrorKind.AUTHORIZATION_REQUIRED
    assert failure.details == {"authorization": [{"id": "e1", "url": "https://auth.example/x"}]}
    assert "https://auth.example/x" in failure.message


def test_default_toolkit_is_the_backend_name() -> None:
    assert codec.default_toolkit("my-server") == "my_server"
