"""The codec alone: every canonical kind has its code (design.md's table), `output` is text."""

from __future__ import annotations

import pytest

from adapters.jsonrpc import codec
from gateway.errors import ErrorKind, Failure

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
