"""The OXP codec on its own: tool ids, version header, body shapes, and every encoder against its decoder."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.oxp import codec
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import AuthorizationRequirement, Requirements, ToolSpec


@pytest.mark.parametrize(
    ("text", "toolkit", "name", "version", "wanted"),
    [
        ("Calculator.Add", "Calculator", "Add", None, None),
        ("Calculator.Add@1", "Calculator", "Add", "1", "1.0.0"),
        ("Calculator.Add@1.0.0", "Calculator", "Add", "1.0.0", "1.0.0"),
        ("my_kit.tool_2@10.20.30", "my_kit", "tool_2", "10.20.30", "10.20.30"),
    ],
)
def test_valid_tool_ids(text: str, toolkit: str, name: str, version: str | None, wanted: str | None) -> None:
    parsed = codec.parse_tool_id(text)
    assert (parsed.toolkit, parsed.name, parsed.version, parsed.wanted_version) == (toolkit, name, version, wanted)
    assert str(parsed) == text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Calculator.Add@1.2", "neither x.y.z nor x"),
        ("Calculator.Add@1.0.0-beta", "no pre-release"),
        ("Calculator.Add@1.0.0+build.5", "no pre-release or build"),
        ("Calculator.Add@latest", "neither x.y.z nor x"),
        ("Calculator.Add@", "neither x.y.z nor x"),
        ("calculatoradd", "no dot"),
        ("Calculator", "no dot"),
        ("Calcu-lator.Add", "letters, digits and underscores"),
        ("Calculator.Add.More", "letters, digits and underscores"),
    ],
)
def test_invalid_tool_ids_say_why(text: str, why: str) -> None:
    with pytest.raises(GatewayError) as caught:
        codec.parse_tool_id(text)
    failure = caught.value.failure
    assert failure.kind is ErrorKind.MALFORMED
    assert failure.message == f"Invalid tool_id {text!r}"
    assert why in (failure.developer_message or "")


@pytest.mark.parametrize("value", [None, "", 5, ["Calculator.Add"]])
def test_missing_or_non_string_tool_id(value: Any) -> None:
    with pytest.raises(GatewayError, match="'tool_id' is required"):
        codec.parse_tool_id(value)


@pytest.mark.parametrize("header", [None, "1", "1.0", "1.7", " 1.0 ", "1.0.0"])
def test_accepted_version_headers(header: str | None) -> None:
    codec.check_version_header(header)


@pytest.mark.parametrize("header", ["2", "2.0", "0.9", "abc", "", "1.x"])
def test_refused_version_headers_name_the_supported_one(header: str) -> None:
    with pytest.raises(GatewayError) as caught:
        codec.check_version_header(header)
    assert caught.value.failure.message == f"OXP version {header!r} is not supported"
    assert "OXP 1.0" in (caught.value.failure.developer_message or "")


def test_unwrap_flat_and_wrapped() -> None:
    flat = {"tool_id": "A.B"}
    assert codec.unwrap(flat) == (codec.Shape.FLAT, flat)
    assert codec.unwrap({"$schema": "urn:oxp:1.0", "request": flat}) == (codec.Shape.WRAPPED, flat)
    assert codec.unwrap({"request": flat}) == (codec.Shape.WRAPPED, flat)  # what PyPI `oxp` sends


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1, 2], "not a JSON array"),
        ("text", "not a JSON string"),
        ({"request": {"tool_id": "A.B"}, "extra": 1}, "Unknown field(s) next to 'request': extra"),
        ({"$schema": "urn:oxp:2.0", "request": {}}, "'$schema' 'urn:oxp:2.0' is not supported"),
        ({"request": [1]}, "'request' must be an object, not a JSON array"),
    ],
)
def test_unwrap_refuses(body: Any, message: str) -> None:
    with pytest.raises(GatewayError) as caught:
        codec.unwrap(body)
    assert message in caught.value.failure.message


def test_parse_full_request() -> None:
    request = codec.parse_call_request(
        {
            "call_id": "c1",
            "trace_id": "t1",
            "tool_id": "Calculator.Add@1",
            "input": {"a": 1},
            "context": {
                "authorization": [{"id": "google", "token": "tok"}],
                "secrets": [{"id": "KEY", "value": "v"}],
                "user_id": "u1",
            },
        }
    )
    assert request.tool_id == codec.ToolId("Calculator", "Add", "1")
    assert (request.call_id, request.trace_id, request.user_id) == ("c1", "t1", "u1")
    assert request.input == {"a": 1}
    assert request.secrets == {"KEY": "v"}
    assert request.authorization == {"google": "tok"}


@pytest.mark.parametrize("missing", [{}, {"input": None}])
def test_missing_input_means_empty(missing: dict[str, Any]) -> None:
    assert codec.parse_call_request({"tool_id": "A.B", **missing}).input == {}


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        ({"tool_id": "A.B", "input": [1]}, "'input' must be an object keyed by parameter name, not a JSON array"),
        ({"tool_id": "A.B", "input": "x"}, "not a JSON string"),
        ({"tool_id": "A.B", "tool": "x", "args": {}}, "Unknown field(s) in the call request: tool, args"),
        ({"tool_id": "A.B", "call_id": 7}, "'call_id' must be a non-empty string, got a JSON number"),
        ({"tool_id": "A.B", "call_id": ""}, "'call_id' must be a non-empty string"),
        ({"tool_id": "A.B", "call_id": "x" * 257}, "'call_id' is longer than 256 characters"),
        ({"tool_id": "A.B", "context": []}, "'context' must be an object"),
        ({"tool_id": "A.B", "context": {"user_info": {}}}, "Unknown field(s) in 'context': user_info"),
        ({"tool_id": "A.B", "context": {"secrets": {"K": "v"}}}, "'context.secrets' must be an array"),
        ({"tool_id": "A.B", "context": {"secrets": [{"id": "K"}]}}, "'context.secrets[0].value' must be a string"),
        (
            {"tool_id": "A.B", "context": {"authorization": [{"id": "g", "token": "t", "scope": "x"}]}},
            "Unknown field(s) in 'context.authorization[0]': scope",
        ),
        (
            {"tool_id": "A.B", "context": {"secrets": [{"id": "K", "value": "1"}, {"id": "K", "value": "2"}]}},
            "'context.secrets' names 'K' twice",
        ),
        ({"tool_id": "A.B", "context": {"user_id": 3}}, "'context.user_id' must be a non-empty string"),
    ],
)
def test_parse_refuses(request_body: dict[str, Any], message: str) -> None:
    with pytest.raises(GatewayError) as caught:
        codec.parse_call_request(request_body)
    assert caught.value.failure.kind is ErrorKind.MALFORMED
    assert message in caught.value.failure.message


@pytest.mark.parametrize("shape", list(codec.Shape))
def test_encode_request_round_trips(shape: codec.Shape) -> None:
    original = codec.CallRequest(
        tool_id=codec.ToolId("Calculator", "Add", "1.0.0"),
        raw_tool_id="Calculator.Add@1.0.0",
        input={"a": 1, "b": 2},
        call_id="c",
        trace_id="t",
        user_id="u",
        secrets={"S": "v"},
        authorization={"p": "tok"},
    )
    body = codec.encode_call_request(original, shape)
    parsed_shape, inner = codec.unwrap(body)
    assert parsed_shape is shape
    assert codec.parse_call_request(inner) == original


def test_tool_error_keeps_every_field_in_the_seed_order() -> None:
    failure = Failure(
        kind=ErrorKind.TOOL_FAILED,
        message="m",
        developer_message="d",
        can_retry=True,
        retry_after_ms=500,
        additional_prompt_content="p",
    )
    assert list(codec.tool_error(failure).items()) == [
        ("message", "m"),
        ("developer_message", "d"),
        ("can_retry", True),
        ("additional_prompt_content", "p"),
        ("retry_after_ms", 500),
    ]
    assert codec.tool_error(Failure(kind=ErrorKind.TOOL_FAILED, message="m")) == {"message": "m", "can_retry": False}


@pytest.mark.parametrize("shape", list(codec.Shape))
def test_call_results_decode_back(shape: codec.Shape) -> None:
    ok = codec.wrap(shape, codec.call_result("c", 2.5, value=[1, {"x": None}]))
    assert codec.decode_call_result(ok) == ("c", 2.5, [1, {"x": None}], None)
    failure = Failure(kind=ErrorKind.TOOL_FAILED, message="m", developer_message="d", can_retry=True, retry_after_ms=9)
    failed = codec.wrap(shape, codec.call_result("c", 1.0, failure=failure))
    assert codec.decode_call_result(failed) == ("c", 1.0, None, failure)


def test_decode_call_result_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="boolean 'success'"):
        codec.decode_call_result({"result": {"value": 1}})
    with pytest.raises(ValueError, match="error with a message"):
        codec.decode_call_result({"success": False})


@pytest.mark.parametrize(
    "failure",
    [
        Failure(kind=ErrorKind.NOT_FOUND, message="Tool 'A_B' was not found", developer_message="versions: 1.0.0"),
        Failure(kind=ErrorKind.INVALID_ARGUMENTS, message="x", parameter_errors={"b": "Must be a number"}),
        Failure(kind=ErrorKind.UNAUTHENTICATED, message="JWT has expired"),
        Failure(kind=ErrorKind.MISSING_REQUIREMENT, message="m", details={"secrets": ["K"]}),
        Failure(kind=ErrorKind.MISSING_REQUIREMENT, message="m", details={"user_id": True}),
        Failure(
            kind=ErrorKind.AUTHORIZATION_REQUIRED,
            message="m",
            details={"authorization": [{"id": "g", "url": "https://a/x", "check_url": "https://a/c"}]},
        ),
    ],
)
def test_error_bodies_decode_back_to_their_kind(failure: Failure) -> None:
    status = codec.status_of(failure)
    assert status != 200
    decoded = codec.decode_error(status, codec.error_body(failure))
    assert decoded.kind is (ErrorKind.MALFORMED if failure.kind is ErrorKind.NOT_FOUND else failure.kind)
    assert decoded.parameter_errors == failure.parameter_errors or decoded.kind is not ErrorKind.INVALID_ARGUMENTS
    if failure.kind is ErrorKind.AUTHORIZATION_REQUIRED:
        assert decoded.details == failure.details
    if failure.kind is ErrorKind.MISSING_REQUIREMENT:
        assert decoded.details == failure.details


def test_validation_error_is_the_seed_body() -> None:
    failure = Failure(kind=ErrorKind.INVALID_ARGUMENTS, message="long", parameter_errors={"b": "Must be a number"})
    assert codec.error_body(failure) == {
        "message": "Some input parameters are invalid",
        "parameter_errors": {"b": "Must be a number"},
    }


def test_tool_definition_has_the_published_fields_and_reads_back() -> None:
    spec = ToolSpec(
        toolkit="Mail",
        name="Send",
        version="2.1.0",
        description="Send mail",
        input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
        output_schema=None,
        requirements=Requirements(
            authorization=(AuthorizationRequirement(id="google", scopes=("mail.send",)),),
            secrets=("SMTP",),
            user_id=True,
        ),
        backend="x",
    )
    definition = codec.tool_definition(spec)
    assert list(definition) == [
        "id",
        "name",
        "description",
        "version",
        "input_schema",
        "output_schema",
        "requirements",
    ]
    assert definition["id"] == "Mail.Send@2.1.0"
    assert definition["name"] == "Mail_Send"
    assert definition["requirements"] == {
        "authorization": [{"id": "google", "oauth2": {"scopes": ["mail.send"]}}],
        "secrets": [{"id": "SMTP"}],
        "user_id": True,
    }
    back = codec.spec_from_definition(definition, backend="x")
    assert (back.versioned_id, back.requirements, back.input_schema, back.output_schema) == (
        spec.versioned_id,
        spec.requirements,
        spec.input_schema,
        None,
    )


def test_spec_from_definition_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="valid 'id'"):
        codec.spec_from_definition({"name": "x"}, backend="b")
    with pytest.raises(ValueError, match="valid 'id'"):
        codec.spec_from_definition({"id": "no-dot@1.2"}, backend="b")
    with pytest.raises(ValueError, match="must be an object"):
        codec.spec_from_definition([1], backend="b")
