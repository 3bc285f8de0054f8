"""The codec alone: every canonical kind has its code (design.md's table), `output` is text, an upstream's own
answer is relayed with only the gateway's own in it changed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from adapters.jsonrpc import codec
from gateway.errors import ErrorKind, Failure
from gateway.model import Outcome, ToolSpec

DESIGN_TABLE = {
    ErrorKind.MALFORMED: -32600,
    ErrorKind.TOO_LARGE: -32600,
    ErrorKind.NOT_FOUND: -32601,
    ErrorKind.INVALID_ARGUMENTS: -32602,
    ErrorKind.TOOL_FAILED: -32000,
    ErrorKind.DEADLINE: -32001,
    ErrorKind.PENDING: -32001,
    ErrorKind.UNAUTHENTICATED: -32002,
    ErrorKind.FORBIDDEN: -32002,
    ErrorKind.MISSING_REQUIREMENT: -32002,
    ErrorKind.AUTHORIZATION_REQUIRED: -32002,
    ErrorKind.UPSTREAM_UNAVAILABLE: -32603,
    ErrorKind.RATE_LIMITED: -32003,
    ErrorKind.INTERNAL: -32603,
}


def test_every_kind_has_the_code_of_the_design_table() -> None:
    assert codec.KIND_CODES == DESIGN_TABLE
    assert set(codec.KIND_CODES) == set(ErrorKind)


@pytest.mark.parametrize(
    ("value", "text"),
    [("plain", "plain"), ("", ""), (15, "15"), (2.5, "2.5"), (None, "null"), (True, "true"), ({"a": [1]}, '{"a":[1]}')],
)
def test_output_is_text(value: object, text: str) -> None:
    assert codec.output_text(value) == text


def test_upstream_unavailable_is_internal_error_with_seed_data() -> None:
    failure = Failure(kind=ErrorKind.UPSTREAM_UNAVAILABLE, message="Backend 'x' is not running")
    err = codec.failure_error(failure, "X_Y", "remote", "c1")
    assert err.code == -32603
    assert codec.error(7, err) == {
        "jsonrpc": "2.0",
        "protocol": "1.0.0",
        "id": 7,
        "error": {
            "code": -32603,
            "message": "Backend 'x' is not running",
            "data": {
                "tool": "X_Y",
                "language": "remote",
                "details": "Backend 'x' is not running",
                "kind": "upstream_unavailable",
                "callId": "c1",
            },
        },
    }


def test_notification_is_recognised_by_the_missing_id_member() -> None:
    assert codec.parse_request({"jsonrpc": "2.0", "method": "tool.list"}).notification is True
    assert codec.parse_request({"jsonrpc": "2.0", "method": "tool.list", "id": None}).notification is False


# ---- a JSON-RPC upstream's own answer, as the front relays it ----

TOOLPLEX_ENTRY = {"id": "Math_Add", "title": "Math.Add", "version": "1.0.0", "language": "python", "x-toolplex": {}}


def _routed(entry: dict[str, Any], **routing: Any) -> ToolSpec:
    """A `jsonrpc` backend's tool as the catalog has it after routing (`routing`: toolkit, name, version)."""
    return dataclasses.replace(codec.spec_from_registration(entry, backend="up", toolkit="Up"), **routing)


def _outcome(spec: ToolSpec, *, cached: bool = False) -> Outcome:
    return Outcome(call_id="gateway-call", spec=spec, value=3, duration_ms=4.5, cached=cached)


def test_a_toolplex_result_keeps_everything_but_the_gateways_own() -> None:
    spec = _routed(TOOLPLEX_ENTRY, toolkit="UpMath", name="Plus", version="2.0.0")
    own = {
        "output": "3",
        "metadata": {
            "title": "Math.Add",
            "tool": "Math_Add",
            "version": "1.0.0",
            "language": "python",
            "callId": "upstream-call",
            "durationMs": 0.5,
            "cached": False,
            "value": 3,
        },
        "diagnostics": [],
        "extra": {"kept": True},
    }
    relayed = codec.relayed_result(own, _outcome(spec))
    assert relayed == {
        **own,
        "metadata": {
            **own["metadata"],
            "title": "UpMath.Plus",
            "tool": "UpMath_Plus",
            "version": "2.0.0",
            "callId": "gateway-call",
            "durationMs": 4.5,
        },
    }
    assert own["metadata"]["tool"] == "Math_Add"  # the kept answer (cache, records) is never changed
    # whichever cache answered, the tool did not run for this call
    assert codec.relayed_result(own, _outcome(spec, cached=True))["metadata"]["cached"] is True
    upstream_cached = {**own, "metadata": {**own["metadata"], "cached": True}}
    assert codec.relayed_result(upstream_cached, _outcome(spec))["metadata"]["cached"] is True


def test_another_servers_result_is_left_as_it_came() -> None:
    """Its `metadata` is its own, whatever its members are called; no member is added."""
    spec = _routed({"id": "read", "language": "typescript"})
    own = {"output": "x", "metadata": {"title": "read", "tool": "read", "callId": "its own"}, "diagnostics": [{}]}
    assert codec.relayed_result(own, _outcome(spec)) == own
    assert codec.relayed_result("a bare string", _outcome(spec)) == "a bare string"


def test_an_upstream_error_keeps_everything_but_the_tools_name_and_a_toolplexs_call_id() -> None:
    plain = _routed({"id": "read", "language": "typescript"})
    error = {"code": -32000, "message": "Tool execution failed", "data": {"tool": "read", "callId": "c", "x": 1}}
    relayed = codec.relayed_error(error, plain, "gateway-call")
    assert codec.error(4, relayed)["error"] == {**error, "data": {**error["data"], "tool": "Up_read"}}
    toolplex = _routed(TOOLPLEX_ENTRY, toolkit="UpMath")
    error = {
        "code": -32602,
        "message": "Invalid",
        "data": {"tool": "Math_Add", "callId": "c", "kind": "invalid_arguments"},
    }
    body = codec.error(4, codec.relayed_error(error, toolplex, "gateway-call"))["error"]
    assert body == {**error, "data": {**error["data"], "tool": "UpMath_Add", "callId": "gateway-call"}}
    bare = {"code": -32601, "message": "Tool not found"}  # no data: nothing to change
    assert codec.error(None, codec.relayed_error(bare, toolplex, "gateway-call"))["error"] == bare
