"""Argument validation's fast path: jsonschema-rs answers "valid?", jsonschema phrases what is wrong.

The fast path may only ever say "valid" where jsonschema says so too: every answer of
`SchemaValidator.errors` is jsonschema's own (`parameter_errors`), whichever path gave it.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import decimal
import enum
from typing import Annotated, Any, ClassVar, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import Field

from adapters.python.schema import SignatureSchemas
from adapters.python.toolkits import arithmetic, text
from gateway.validation import SchemaValidator, ValidatorCache, parameter_errors


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0


def everyday_tool(
    name: Annotated[str, "A name"],
    count: Annotated[int, Field(ge=1, le=10)] = 1,
    mode: Literal["a", "b"] = "a",
    colour: Colour | None = None,
    tags: list[str] | None = None,
    where: Point | None = None,
    scores: dict[str, float] | None = None,
    flag: bool = False,
    maybe: int | str | None = None,
    when: datetime.datetime | None = None,
) -> str:
    """A tool with the parameter types Python tools use."""
    return name


def python_schema(func: Any) -> dict[str, Any]:
    return SignatureSchemas(func, "Model").input_schema


HAND_WRITTEN = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "kind": {"enum": ["a", "b", 1, None]},
        "version": {"const": 2},
        "user": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "age": {"type": "integer", "minimum": 0},
                "emails": {"type": "array", "items": {"type": "string", "format": "email"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        "ids": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 3},
        "code": {"type": "string", "pattern": r"^[A-Z]{2}-[0-9]{3}$"},
        "slug": {"type": "string", "pattern": "^[a-z0-9_-]+$"},
        "either": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "number", "minimum": 0.5}]},
    },
    "required": ["kind"],
    "additionalProperties": False,
}
MORE_KEYWORDS = {
    "type": "object",
    "properties": {
        "one": {"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]},
        "limit": {"type": "number", "exclusiveMaximum": 10, "exclusiveMinimum": 0},
        "unique": {"type": "array", "uniqueItems": True},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        "not_null": {"not": {"type": "null"}},
        "stamp": {"type": "string", "format": "date-time"},
        "site": {"type": "string", "format": "uri"},
        "id": {"type": "string", "format": "uuid"},
        "ip": {"type": "string", "format": "ipv4"},
        "meta": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}},
    },
    "minProperties": 1,
}
SCHEMAS = {
    "Math_Add": python_schema(arithmetic.add),
    "Math_Divide": python_schema(arithmetic.divide),
    "WordCount": python_schema(text.word_count),
    "everyday": python_schema(everyday_tool),
    "hand_written": HAND_WRITTEN,
    "more_keywords": MORE_KEYWORDS,
}


def _names(schema: Any, found: set[str]) -> set[str]:
    if isinstance(schema, dict):
        found.update(schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else ())
        for value in schema.values():
            _names(value, found)
    elif isinstance(schema, list):
        for value in schema:
            _names(value, found)
    return found


NAMES = sorted(_names(SCHEMAS, set()) | {"extra", ""})
# Values near the schemas' edges: enum members, formats good and bad, pattern matches and near misses.
TEXTS = [
    "a", "b", "", "red", "blue", "x" * 4, "ann@example.org", "not an email", "AB-123", "ab-123", "AB-12",
    "AB-٣٢١", "AB-123\n", "slug_1", "Slug", "2024-01-02T03:04:05Z", "yesterday", "https://example.org/a?b=c",
    "not a uri", "12345678-1234-1234-1234-123456789abc", "127.0.0.1", "999.1.1.1",
]  # fmt: skip
CHARACTERS = "aAzZ09_-@. \n٣é"
NUMBERS = [0, 1, 2, 3, 6, 10, 11, -1, 0.5, 0.25, 1.0, 2.0, 9.999, 10.0, 1e300, 2**64, -(2**63)]

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(NUMBERS),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(TEXTS),
    st.text(alphabet=st.sampled_from(CHARACTERS), max_size=8),
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(NAMES), inner, max_size=4),
    max_leaves=12,
)


def near(schema: Any) -> st.SearchStrategy[Any]:
    """Values that mostly fit `schema`, now and then with a part replaced by any JSON value."""
    return st.one_of(_fitting(schema), _fitting(schema), _fitting(schema), json_values)


def _fitting(schema: Any) -> st.SearchStrategy[Any]:
    if not isinstance(schema, dict):
        return json_values
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return st.one_of([near(branch) for branch in branches])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fields = {name: near(sub) for name, sub in properties.items()}
        extra = schema.get("additionalProperties", True)
        others = st.dictionaries(st.sampled_from(NAMES), near(extra) if isinstance(extra, dict) else json_values)
        return st.tuples(
            st.fixed_dictionaries({k: v for k, v in fields.items() if k in required}),
            st.dictionaries(st.sampled_from(sorted(fields) or ["extra"]), json_values, max_size=2),
            st.fixed_dictionaries({}, optional={k: v for k, v in fields.items() if k not in required}),
            st.one_of(st.just({}), st.just({}), others),
            st.sets(st.sampled_from(sorted(required) or ["-"]), max_size=1),
        ).map(lambda parts: {k: v for k, v in {**parts[3], **parts[2], **parts[0]}.items() if k not in parts[4]})
    if kind == "array":
        prefix = [near(item) for item in schema.get("prefixItems", ())]
        rest = st.lists(near(schema.get("items", {})), max_size=4)
        return st.tuples(st.tuples(*prefix), rest).map(lambda parts: [*parts[0], *parts[1]])
    if kind == "string":
        return st.one_of(st.sampled_from(TEXTS), st.text(alphabet=st.sampled_from(CHARACTERS), max_size=8))
    if kind in ("integer", "number"):
        numbers = st.one_of(st.sampled_from(NUMBERS), st.integers(-20, 20))
        return numbers if kind == "number" else numbers.filter(lambda n: n == int(n))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values


# Per schema: values that mostly fit it, and objects keyed like any of the schemas.
ARGUMENTS = {
    name: st.one_of(near(schema), st.dictionaries(st.sampled_from(NAMES), json_values, max_size=6))
    for name, schema in SCHEMAS.items()
}
FAST = {name: SchemaValidator(schema) for name, schema in SCHEMAS.items()}
DETAILED = {name: Draft202012Validator(schema) for name, schema in SCHEMAS.items()}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_realistic_schemas_take_the_fast_path(name: str) -> None:
    assert SchemaValidator(SCHEMAS[name]).fast is not None  # else the property below would test nothing new


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_fast_path_answers_exactly_as_jsonschema(name: str, data: st.DataObject) -> None:
    value = data.draw(ARGUMENTS[name], label="arguments")
    assert FAST[name].errors(value) == parameter_errors(DETAILED[name], value)


def test_formats_are_annotations_on_both_paths() -> None:
    validator = SchemaValidator(HAND_WRITTEN)
    for address in ("not an email", "ann@example.org"):
        value = {"kind": "a", "email": address, "user": {"name": "n", "emails": [address]}}
        assert validator.fast.is_valid(value)
        assert validator.errors(value) == {}
    assert SchemaValidator(MORE_KEYWORDS).errors({"stamp": "yesterday", "site": "x y", "ip": "999.1.1.1"}) == {}


class _Refuses:
    """Stands in for jsonschema's validator: any question to it fails the test."""

    schema: ClassVar[dict[str, Any]] = {}

    def iter_errors(self, _value: Any) -> Any:
        raise AssertionError("jsonschema was asked about valid arguments")


def test_valid_arguments_are_answered_by_the_fast_path_alone() -> None:
    validator = SchemaValidator(SCHEMAS["Math_Add"])
    validator.detailed = _Refuses()  # type: ignore[assignment]
    assert validator.errors({"a": 10, "b": 5.5}) == {}


def test_invalid_arguments_are_phrased_by_jsonschema() -> None:
    validator = SchemaValidator(SCHEMAS["Math_Add"])
    assert validator.errors({"a": "ten", "c": 1}) == {
        "a": "Must be an integer or a number",
        "b": "Missing required parameter",
        "c": "Unexpected parameter",
    }


# ---- schemas jsonschema-rs refuses ----

PYTHON_ONLY_PATTERNS = {
    "end of text": r"^\w+\Z",  # \Z is Python's (ECMA-262 and Rust have no such escape)
    "named back reference": r"^(?P<first>[a-z])(?P=first)$",
}


@pytest.mark.parametrize("pattern", sorted(PYTHON_ONLY_PATTERNS.values()))
def test_a_schema_only_jsonschema_compiles_is_validated_by_jsonschema(pattern: str) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}, "required": ["x"]}
    validator = SchemaValidator(schema)
    assert validator.fast is None
    good = "aa"
    assert validator.errors({"x": good}) == {}
    assert validator.errors({"x": "a b"}) == {"x": f"{'a b'!r} does not match {pattern!r}"}
    assert validator.errors({"x": 1}) == {"x": "Must be a string"}
    assert validator.errors({}) == {"x": "Missing required parameter"}
    assert ValidatorCache().get(schema).errors({"x": good}) == {}


def test_a_schema_jsonschema_refuses_is_still_refused() -> None:
    with pytest.raises(SchemaError):
        SchemaValidator({"type": "object", "properties": {"x": {"type": "nope"}}})
    with pytest.raises(SchemaError):
        ValidatorCache().get({"type": "object", "properties": {"x": {"type": "nope"}}})


# ---- values jsonschema-rs cannot read ----

UNREADABLE = {
    "type": "object",
    "properties": {
        "when": {"type": "string"},
        "tags": {"type": "array"},
        "anything": {},
        "n": {"type": "integer"},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"when": datetime.datetime(2024, 1, 2, 3, 4, 5)}, {"when": "Must be a string"}),
        ({"tags": {"b", "a"}}, {"tags": "Must be an array"}),
        ({"tags": frozenset()}, {"tags": "Must be an array"}),
        ({"when": b"bytes"}, {"when": "Must be a string"}),
        ({"anything": {1, 2}}, {}),
        ({"anything": datetime.date(2024, 1, 2), "n": 3}, {}),
        ({"n": object()}, {"n": "Must be an integer"}),
        ({1: "a non-string key"}, {1: "Unexpected parameter"}),
    ],
    ids=["datetime", "set", "frozenset", "bytes", "set-anywhere", "date-anywhere", "object", "int-key"],
)
def test_a_value_jsonschema_rs_cannot_read_is_judged_by_jsonschema(value: Any, expected: dict[Any, str]) -> None:
    validator = SchemaValidator(UNREADABLE)
    assert validator.errors(value) == expected
    assert validator.errors(value) == parameter_errors(Draft202012Validator(UNREADABLE), value)


class _CannotRead:
    def is_valid(self, _value: Any) -> bool:
        raise ValueError("Unsupported type: 'set'")


def test_any_refusal_of_the_fast_path_falls_back_to_jsonschema() -> None:
    validator = SchemaValidator(UNREADABLE)
    validator.fast = _CannotRead()
    assert validator.errors({"n": 1}) == {}
    assert validator.errors({"n": "one"}) == {"n": "Must be an integer"}


# Found while writing these tests: Python values that are not JSON, where jsonschema-rs says
# "valid" and jsonschema does not, and patterns where the two regex dialects differ. Such values
# and schemas skip the fast path, so the answer is jsonschema's.
DIVERGENCES = [
    ({"type": "array"}, (1, 2)),  # a tuple from a middleware's rewrite: jsonschema says "not an array"
    ({"type": "integer"}, decimal.Decimal(3)),  # jsonschema: a Decimal is never an integer
    ({"type": "string", "pattern": r"^\D+$"}, "٣"),  # ECMA-262 \D is ASCII-only, Python's is Unicode
    ({"type": "string", "pattern": r"^\s$"}, "\ufeff"),  # ECMA-262 \s has U+FEFF, Python's has not
    ({"type": "string", "pattern": r"^\S+$"}, "a\x1cb"),  # Python's \s has U+001C-U+001F and U+0085
]


@pytest.mark.parametrize("pattern", [r"^\d+$", r"^\w+$", r"[^\s]", r"\bword\b"])
def test_patterns_with_class_escapes_are_judged_by_jsonschema_alone(pattern: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}}
    assert SchemaValidator(schema).fast is None


@pytest.mark.parametrize(("property_schema", "value"), DIVERGENCES, ids=["tuple", "decimal", "\\D", "\\s", "\\S"])
def test_known_divergences_of_the_fast_path(property_schema: dict[str, Any], value: Any) -> None:
    schema = {"type": "object", "properties": {"v": property_schema}}
    assert SchemaValidator(schema).errors({"v": value}) == parameter_errors(Draft202012Validator(schema), {"v": value})


# ---- the cache ----


def test_the_cache_finds_a_schema_by_identity_and_by_content() -> None:
    cache = ValidatorCache()
    schema = python_schema(everyday_tool)
    first = cache.get(schema)
    assert isinstance(first, SchemaValidator)
    assert cache.get(schema) is first
    assert cache.get(copy.deepcopy(schema)) is first  # an equal copy: found by content
    changed = copy.deepcopy(schema)
    changed["required"] = ["name", "count"]
    other = cache.get(changed)
    assert other is not first
    assert other.errors({"name": "n"}) == {"count": "Missing required parameter"}
    assert first.errors({"name": "n"}) == {}
    assert cache.get(schema) is first and cache.get(changed) is other


def test_the_cache_is_bounded_in_both_indexes() -> None:
    cache = ValidatorCache(max_entries=2)
    schemas = [{"type": "object", "properties": {f"p{i}": {"type": "integer"}}} for i in range(3)]
    validators = [cache.get(schema) for schema in schemas]
    assert len(set(map(id, validators))) == 3
    assert len(cache._entries) == 2
    assert len(cache._by_identity) == 2
    assert cache.get(schemas[2]) is validators[2]  # the newest stayed
    assert cache.get(schemas[0]) is not validators[0]  # the oldest was dropped from both, so compiled again
    assert len(cache._entries) == 2 and len(cache._by_identity) == 2
