"""The schema fast path writes exactly what pydantic writes, or steps aside for pydantic.

`SignatureSchemas` derives the everyday parameter types' JSON Schema without building a
pydantic model (a model and two schemas per tool made 10,000 tools start in 20 s). Every
schema here is compared with the one the pydantic-only path makes (`pydantic_schema`,
the code the fast path replaced), as encoded bytes: the same keys in the same order,
since listings are served byte for byte.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import inspect
import json
import math
import typing
import warnings
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ConfigDict, Field, create_model
from pydantic.errors import PydanticSchemaGenerationError

from adapters.python import tool
from adapters.python.decorator import tool_of
from adapters.python.schema import (
    SignatureSchemas,
    Unsupported,
    docstring_parts,
    fast_input_schema,
    parameters,
    self_contained,
)
from gateway.model import CallContext


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int


class Opaque:
    """Not a type pydantic knows."""


def pydantic_schema(func: Any) -> dict[str, Any]:
    """The arguments schema as it was made before the fast path: a pydantic model, always."""
    signature = inspect.signature(func)
    hints = typing.get_type_hints(func, include_extras=True)
    _, docs = docstring_parts(func.__doc__)
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = hints.get(param.name, Any)
        if hint is CallContext or CallContext in typing.get_args(hint):
            continue
        described = None
        if typing.get_origin(hint) is Annotated:
            described = next((x for x in typing.get_args(hint)[1:] if isinstance(x, str)), None)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hint, Field(default, description=described or docs.get(param.name)))
    model = create_model("Model", __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False), **fields)
    schema = self_contained(model.model_json_schema())
    schema.setdefault("properties", {})
    return schema


def encoded(schema: dict[str, Any]) -> str:
    return json.dumps(schema)  # key order counts: listings are compared byte for byte (json: any int, NaN)


def function(params: list[tuple[str, Any, Any]], doc: str | None = None, returns: Any = dict[str, Any]) -> Any:
    """A real `def` (not a closure with a made-up signature) with these keyword-only parameters."""
    namespace: dict[str, Any] = {"returns": returns}
    written = []
    for i, (name, hint, default) in enumerate(params):
        namespace[f"h{i}"] = hint
        if default is inspect.Parameter.empty:
            written.append(f"{name}: h{i}")
        else:
            namespace[f"d{i}"] = default
            written.append(f"{name}: h{i} = d{i}")
    star = "*, " if written else ""
    exec(f"def generated({star}{', '.join(written)}) -> returns:\n    pass\n", namespace)
    generated = namespace["generated"]
    generated.__doc__ = doc
    return generated


SCALARS = [str, int, float, bool, type(None), Any]
ELSEWHERE = [bytes, datetime.datetime, Colour, Point, dict[int, str], tuple[int, str], set[str]]  # pydantic's work


def hints() -> st.SearchStrategy[Any]:
    base = st.sampled_from(SCALARS + ELSEWHERE)
    literal = st.one_of(
        st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
        st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3, unique=True),
        st.lists(st.sampled_from([True, False]), min_size=1, max_size=2, unique=True),
        st.just([1, "a"]),
        st.just(["a", None]),
        st.just([Colour.RED]),
    ).map(lambda values: Literal[tuple(values)])  # type: ignore[misc]

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        pair = st.tuples(inner, inner)
        return st.one_of(
            inner.map(lambda h: list[h]),  # type: ignore[valid-type]
            inner.map(lambda h: typing.List[h]),  # noqa: UP006
            inner.map(lambda h: dict[str, h]),  # type: ignore[valid-type]
            inner.map(lambda h: Optional[h]),  # noqa: UP045
            pair.map(lambda p: Union[p[0], p[1]]),  # noqa: UP007
            pair.map(lambda p: _union_type(p[0], p[1])),
            inner.map(lambda h: Annotated[h, "described"]),
            inner.map(lambda h: Annotated[h, Field(description="by Field")]),
            st.sampled_from([list, dict, typing.List, typing.Dict]),  # noqa: UP006
        )

    return st.recursive(st.one_of(base, literal), extend, max_leaves=5)


def _union_type(a: Any, b: Any) -> Any:
    try:
        return a | b
    except TypeError:  # `|` is only for classes and typing forms
        return Union[a, b]  # noqa: UP007


DEFAULTS = st.one_of(
    st.just(inspect.Parameter.empty),
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.one_of(st.integers(), st.text(max_size=3), st.floats(allow_nan=False)), max_size=3),
    st.tuples(st.integers(), st.text(max_size=3)),
    st.dictionaries(st.text(max_size=3), st.one_of(st.integers(), st.none(), st.text(max_size=3)), max_size=3),
    st.just({"nested": {"z": 1, "a": 2}}),
    st.just(Colour.RED),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(hints(), DEFAULTS, st.sampled_from([None, "", "text"])), max_size=4))
def test_any_signature_gets_pydantics_schema_byte_for_byte(fields: list[tuple[Any, Any, str | None]]) -> None:
    names = ["alpha", "beta", "gamma", "delta"]
    doc_lines = [f"    {names[i]}: {text}" for i, (_, _, text) in enumerate(fields) if text is not None]
    doc = "Summary.\n\nArgs:\n" + "\n".join(doc_lines) if doc_lines else "Summary."
    func = function([(names[i], hint, default) for i, (hint, default, _) in enumerate(fields)], doc)
    try:
        expected = pydantic_schema(func)
    except Exception as exc:  # pydantic refuses the signature: the tool must be refused as before
        with pytest.raises(type(exc)):
            SignatureSchemas(func, "Model")
        return
    assert encoded(SignatureSchemas(func, "Model").input_schema) == encoded(expected)


def everyday_hints() -> st.SearchStrategy[Any]:
    """Only what the fast path covers (so most examples exercise it, not the fallback)."""
    literal = st.one_of(
        st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
        st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3, unique=True),
    ).map(lambda values: Literal[tuple(values)])  # type: ignore[misc]

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            inner.map(lambda h: list[h]),  # type: ignore[valid-type]
            inner.map(lambda h: dict[str, h]),  # type: ignore[valid-type]
            inner.map(lambda h: Optional[h]),  # noqa: UP045
            st.tuples(inner, inner).map(lambda p: Union[p[0], p[1]]),  # noqa: UP007
            inner.map(lambda h: Annotated[h, "described"]),
        )

    return st.recursive(st.one_of(st.sampled_from([str, int, float, bool, type(None)]), literal), extend, max_leaves=4)


EVERYDAY_DEFAULTS = st.one_of(
    st.just(inspect.Parameter.empty),
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=3)), max_size=3),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(everyday_hints(), EVERYDAY_DEFAULTS, st.sampled_from([None, "", "text"]))
def test_an_everyday_parameter_gets_pydantics_schema_byte_for_byte(hint: Any, default: Any, text: str | None) -> None:
    doc = "Summary." if text is None else f"Summary.\n\nArgs:\n    value: {text}"
    func = function([("value", hint, default)], doc)
    assert encoded(SignatureSchemas(func, "Model").input_schema) == encoded(pydantic_schema(func))


@pytest.mark.parametrize(
    "hint",
    [
        str,
        int | None,
        Optional[Literal["a", "b"]],  # noqa: UP045
        Union[None, int, str],  # noqa: UP007
        list[dict[str, list[int | None]]],
        Annotated[list[str] | None, "tags"],
        Literal["only"],
        Literal[True, False],
        dict,
        Any,
    ],
)
def test_the_everyday_types_take_the_fast_path(hint: Any) -> None:
    func = function([("value", hint, inspect.Parameter.empty)])
    schemas = SignatureSchemas(func, "Model")
    assert schemas._model is None  # no pydantic model was needed for the schema
    assert encoded(schemas.input_schema) == encoded(pydantic_schema(func))


@pytest.mark.parametrize(
    ("name", "hint", "default"),
    [
        ("when", datetime.datetime, inspect.Parameter.empty),  # a format pydantic knows
        ("count", Annotated[int, Field(ge=1)], 1),  # constraints
        ("json", str, inspect.Parameter.empty),  # shadows a BaseModel attribute: pydantic says so
        ("default", int, 0),  # a name where pydantic stops sorting keys
        ("ratio", float, math.inf),  # not JSON
        ("nested", dict, {"b": {"z": 1, "a": 2}}),  # pydantic sorts a nested default's keys
    ],
)
def test_what_the_fast_path_does_not_cover_goes_to_pydantic_at_once(name: str, hint: Any, default: Any) -> None:
    func = function([(name, hint, default)])
    with pytest.raises(Unsupported):
        fast_input_schema({name: (hint, ... if default is inspect.Parameter.empty else default, None)})
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        schemas = SignatureSchemas(func, "Model")
        expected = pydantic_schema(func)
    assert any("shadows an attribute" in str(w.message) for w in said) == (name == "json")  # pydantic still says so
    assert schemas._model is not None  # built while declaring, as before
    assert encoded(schemas.input_schema) == encoded(expected)


def test_a_type_pydantic_cannot_handle_still_fails_when_the_tool_is_declared() -> None:
    def broken(thing: Opaque) -> None:
        """Takes something pydantic does not know."""

    with pytest.raises(PydanticSchemaGenerationError):
        tool(broken, toolkit="Kit")


def test_the_arguments_model_is_built_on_the_first_call_and_kept() -> None:
    @tool(toolkit="Kit")
    def add(a: int, b: Annotated[int, "second"] = 2, context: CallContext | None = None) -> int:
        """Add."""
        return a + b

    schemas = tool_of(add).schemas  # type: ignore[union-attr]
    assert schemas._model is None and schemas.context_param == "context"
    assert schemas.arguments({"a": "3"}) == {"a": 3, "b": 2}  # pydantic's lax conversion, as before
    model = schemas._model
    assert model is not None and schemas.model is model
    with pytest.raises(Exception, match="extra"):
        schemas.arguments({"a": 1, "c": 2})
    assert schemas.model.model_json_schema()["properties"]["b"]["description"] == "second"


def test_string_annotations_are_evaluated_as_typing_does() -> None:
    namespace: dict[str, Any] = {}
    source = (
        "from typing import Annotated\ndef f(a: 'Annotated[int, \"count\"]', b: 'list[str] | None' = None) -> 'int':\n"
    )
    exec(source + "    return a\n", namespace)
    func = namespace["f"]
    schemas = SignatureSchemas(func, "Model")
    assert encoded(schemas.input_schema) == encoded(pydantic_schema(func))
    assert schemas.output_schema == {"type": "integer"}


def test_return_types_share_one_schema_but_keep_their_order() -> None:
    first = SignatureSchemas(function([], returns=dict[str, Any]), "A")
    second = SignatureSchemas(function([], returns=dict[str, Any]), "B")
    assert first.output_schema is second.output_schema  # one per type: read it, never change it
    left = SignatureSchemas(function([], returns=int | str), "C").output_schema
    right = SignatureSchemas(function([], returns=str | int), "D").output_schema  # equal to int | str for typing
    assert left == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert right == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    ordered = SignatureSchemas(function([("v", Literal[2, 1], inspect.Parameter.empty)]), "E").input_schema
    assert ordered["properties"]["v"]["enum"] == [2, 1]


def _plain(a, /, b, c=3, *args, d, e=5, **kwargs):  # type: ignore[no-untyped-def]
    pass


def _decorated(func: Any) -> Any:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


class _Methods:
    def method(self, x: int, y: int = 2) -> int:
        return x + y


@pytest.mark.parametrize(
    "func",
    [_plain, _decorated(_plain), _Methods().method, lambda q, r=1: None, function([("k", int, 4)])],
    ids=["plain", "wrapped", "bound-method", "lambda", "keyword-only"],
)
def test_parameters_are_the_signatures(func: Any) -> None:
    expected = [
        (p.name, p.default)
        for p in inspect.signature(func).parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    assert parameters(func) == expected


@given(st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=40))
def test_a_one_line_docstring_reads_as_the_general_path_reads_it(line: str) -> None:
    assert docstring_parts(line) == docstring_parts(line + "\n")  # the second takes the general path
