"""The wire pieces: result wrapping as the node does it, tool and env JSON, statuses, request shapes."""

from __future__ import annotations

import pytest

from adapters.toolserver import codec, shapes
from gateway.errors import ErrorKind, Failure
from gateway.model import ToolSpec
from tests.toolserver.xagent import unwrap_tool_response


@pytest.mark.parametrize("value", ["text", 3, 2.5, True, [1, {"a": 2}], None])
def test_scalars_and_lists_travel_raw(value: object) -> None:
    assert codec.wrap_result(value) == value


def test_objects_are_wrapped_as_simple_and_unwrap_back() -> None:
    value = {"slept": 1.0, "type": "not a wrapper"}
    wrapped = codec.wrap_result(value)
    assert wrapped == {"type": "simple", "data": value}
    assert unwrap_tool_response(wrapped) == value


def test_already_wrapped_bytes_and_tuples() -> None:
    assert codec.wrap_result({"type": "simple", "data": 1}) == {"type": "simple", "data": 1}
    assert codec.wrap_result(b"\x00\x01") == {"type": "binary", "media_type": "bytes", "name": None, "data": "AAE="}
    assert codec.wrap_result(({"a": 1}, 2)) == {"type": "composite", "data": [{"type": "simple", "data": {"a": 1}}, 2]}
    assert unwrap_tool_response(codec.wrap_result(({"a": 1}, 2))) == [{"a": 1}, 2]


def test_every_kind_has_a_status() -> None:
    assert set(codec.KIND_STATUS) == set(ErrorKind)
    expected = {
        ErrorKind.NOT_FOUND: 404,
        ErrorKind.INVALID_ARGUMENTS: 422,
        ErrorKind.TOOL_FAILED: 500,
        ErrorKind.PENDING: 450,
        ErrorKind.FORBIDDEN: 403,
        ErrorKind.UPSTREAM_UNAVAILABLE: 503,
        ErrorKind.UNAUTHENTICATED: 401,
    }
    for kind, status in expected.items():
        assert codec.status_of(Failure(kind=kind, message="x")) == status


def test_invalid_arguments_become_a_fastapi_detail_list() -> None:
    failure = Failure(
        kind=ErrorKind.INVALID_ARGUMENTS,
        message="bad",
        parameter_errors={"a": "Must be a number", "b": "Missing required parameter"},
    )
    assert codec.failure_detail(failure, {"a": "x"}) == [
        {"type": "value_error", "loc": ["body", "arguments", "a"], "msg": "Must be a number", "input": "x"},
        {"type": "missing", "loc": ["body", "arguments", "b"], "msg": "Missing required parameter", "input": None},
    ]


def test_authorization_url_reaches_the_message() -> None:
    failure = Failure(
        kind=ErrorKind.AUTHORIZATION_REQUIRED,
        message="Needs GitHub",
        details={"authorization": [{"id": "github", "url": "https://auth.example/go"}]},
    )
    assert codec.failure_detail(failure) == "Needs GitHub: https://auth.example/go"


def _spec(name: str, schema: dict[str, object] | None = None) -> ToolSpec:
    return ToolSpec(toolkit="Kit", name=name, version="1.0.0", description="d" * 2000, input_schema=schema or {})


def test_tool_json_is_an_openai_function() -> None:
    out = codec.tool_json(_spec("Go", {"properties": {"x": {"type": "string"}}}))
    assert out["name"] == "Kit_Go"
    assert len(out["description"]) == 1024
    assert out["parameters"] == {"type": "object", "properties": {"x": {"type": "string"}}, "required": []}


def test_env_json_caps_with_an_ellipsis() -> None:
    tools = [_spec(f"T{i}") for i in range(4)]
    assert codec.env_json("Kit", "desc", tools, 2) == {
        "name": "Kit",
        "description": "desc",
        "total_tools": 4,
        "tools": ["Kit_T0", "Kit_T1", "..."],
    }
    assert codec.env_json("Kit", "desc", tools, None)["tools"] == [f"Kit_T{i}" for i in range(4)]
    assert codec.env_json("Kit", "desc", tools, 4)["tools"] == [f"Kit_T{i}" for i in range(4)]


def test_both_execute_shapes() -> None:
    real = shapes.execute_request({"tool_name": "Math_Add", "arguments": {"a": 1}, "env_name": "Math"})
    seed = shapes.execute_request({"tool": "Math_Add", "parameters": {"a": 1}})
    assert (real.tool_name, real.arguments, real.env_name) == ("Math_Add", {"a": 1}, "Math")
    assert (seed.tool_name, seed.arguments, seed.env_name) == ("Math_Add", {"a": 1}, None)
    assert shapes.execute_request({"tool_name": "Time_Now"}).arguments == {}


@pytest.mark.parametrize(
    ("body", "loc", "kind"),
    [
        (None, ["body"], "missing"),
        ([1, 2], ["body"], "model_type"),
        ("Math_Add", ["body"], "model_type"),
        ({"arguments": {}}, ["body", "tool_name"], "missing"),
        ({"tool": 3}, ["body", "tool"], "string_type"),
        ({"tool": "A", "parameters": "a=1"}, ["body", "parameters"], "dict_type"),
        ({"tool": "A", "tool_name": "B"}, ["body", "tool"], "value_error"),
        ({"tool_name": "A", "hash_id": "x"}, ["body", "hash_id"], "extra_forbidden"),
    ],
)
def test_bad_execute_bodies_name_the_place(body: object, loc: list[str], kind: str) -> None:
    with pytest.raises(shapes.BadRequest) as caught:
        shapes.execute_request(body)
    assert caught.value.detail[0]["loc"] == loc
    assert caught.value.detail[0]["type"] == kind
    assert set(caught.value.detail[0]) == {"type", "loc", "msg", "input"}


def test_name_lists_in_every_shape() -> None:
    keys = ("tools", "tool_names")
    assert shapes.names_request(["a", "b"], keys) == ["a", "b"]
    assert shapes.names_request({"tools": ["a"]}, keys) == ["a"]
    assert shapes.names_request({"tool_names": ["a"]}, keys) == ["a"]
    for bad in (None, "a", 3, {"tools": "a"}, {"tools": [1]}, {"other": []}, {"tools": [], "tool_names": []}):
        with pytest.raises(shapes.BadRequest):
            shapes.names_request(bad, keys)


@pytest.mark.parametrize("top_k", [-1, 0, 10**9, "five", True, 2.5])
def test_bad_top_k(top_k: object) -> None:
    with pytest.raises(shapes.BadRequest) as caught:
        shapes.retrieval_request({"question": "q", "top_k": top_k})
    assert caught.value.detail[0]["loc"] == ["body", "top_k"]


def test_top_k_defaults_to_five_and_reads_numeric_strings() -> None:
    assert shapes.retrieval_request({"question": "q"}).top_k == 5
    assert shapes.retrieval_request({"question": "q", "top_k": "3"}).top_k == 3
