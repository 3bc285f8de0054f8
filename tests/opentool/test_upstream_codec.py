"""Reading an OpenTool upstream's answers: error codes back to kinds, the reversible result wrapping."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.opentool import codec
from gateway.errors import ErrorKind


@pytest.mark.parametrize(
    ("error", "toolplex", "kind"),
    [
        ({"code": -32601, "message": "no such tool"}, False, ErrorKind.NOT_FOUND),
        (
            {"code": -32602, "message": "bad", "data": {"parameter_errors": {"a": "x"}}},
            False,
            ErrorKind.INVALID_ARGUMENTS,
        ),
        ({"code": 500, "message": "Error: boom"}, False, ErrorKind.TOOL_FAILED),
        (
            {"code": 500, "message": '{"code":400,"message":"Invalid Arguments: {}"}'},
            False,
            ErrorKind.INVALID_ARGUMENTS,
        ),
        ({"code": 400, "message": "needs a secret"}, True, ErrorKind.MISSING_REQUIREMENT),
        ({"code": 400, "message": "bad input"}, False, ErrorKind.INVALID_ARGUMENTS),
        ({"code": 401, "message": "who are you"}, False, ErrorKind.UNAUTHENTICATED),
        ({"code": 403, "message": "no"}, True, ErrorKind.FORBIDDEN),
        ({"code": 429, "message": "slow down", "data": {"retry_after_ms": 900}}, True, ErrorKind.RATE_LIMITED),
        ({"code": 503, "message": "down"}, True, ErrorKind.UPSTREAM_UNAVAILABLE),
        ({"code": 504, "message": "late"}, True, ErrorKind.DEADLINE),
    ],
)
def test_error_codes_become_their_kinds(error: dict[str, Any], toolplex: bool, kind: ErrorKind) -> None:
    failure = codec.read_error(error, toolplex=toolplex)
    assert failure.kind == kind
    if "parameter_errors" in error.get("data", {}):
        assert failure.parameter_errors == {"a": "x"}
    if kind == ErrorKind.RATE_LIMITED:
        assert failure.retry_after_ms == 900 and failure.can_retry


def test_an_authorization_challenge_keeps_its_url_once() -> None:
    url = "https://auth.example/authorize?x=1"
    from_toolplex = codec.read_error(
        {
            "code": 401,
            "message": f"Tool T needs your authorization with p: {url}",
            "data": {"authorization": [{"id": "p", "url": url}]},
        },
        toolplex=True,
    )
    from_text = codec.read_error({"code": 401, "message": f"Authorize first at {url}"}, toolplex=False)
    assert from_toolplex.kind == from_text.kind == ErrorKind.AUTHORIZATION_REQUIRED
    assert from_toolplex.message == "Tool T needs your authorization with p"  # the front appends the URL again
    assert from_toolplex.details == {"authorization": [{"id": "p", "url": url}]}
    assert from_text.details == {"authorization": [{"id": "authorization", "url": url}]}


def test_an_error_message_that_is_an_object_is_json() -> None:
    failure = codec.read_error({"code": 500, "message": {"detail": ["x"]}}, toolplex=False)
    assert failure.message == '{"detail":["x"]}'


@pytest.mark.parametrize(
    "value", [5, "s", None, [1], {}, {"a": 1}, {"result": 1}, {"result": {"x": 1}}, {"result": 1, "b": 2}]
)
def test_result_wrapping_is_reversible(value: Any) -> None:
    wrapped = codec.wrap_result(value)
    assert isinstance(wrapped, dict) and codec.unwrap_result(wrapped) == value
