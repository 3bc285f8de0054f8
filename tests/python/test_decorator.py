import dataclasses
import enum
from typing import Annotated, Literal

from pydantic import BaseModel

from adapters.python import CallContext, ToolError, tool
from adapters.python.decorator import camel_case, tool_of


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Address(BaseModel):
    street: str
    city: str


@tool(toolkit="Kit", version="2.0.0")
def everything(
    text: Annotated[str, "Some text"],
    count: int,
    ratio: float,
    flag: bool,
    nothing: None,
    items: list[str],
    mapping: dict[str, int],
    mode: Literal["fast", "slow"],
    colour: Colour,
    point: Point,
    address: Address,
    optional: str | None = None,
    with_default: int = 3,
    context: CallContext | None = None,
) -> dict[str, int]:
    """Exercise every supported kind of parameter.

    Args:
        count: How many times.
        ratio: A fraction
            over two lines.
    """
    return {"count": count}


def test_schema_covers_every_type() -> None:
    declared = tool_of(everything)
    assert declared is not None
    schema = declared.schemas.input_schema
    props = schema["properties"]
    assert props["text"] == {"type": "string", "description": "Some text"}
    assert props["count"] == {"type": "integer", "description": "How many times."}
    assert props["ratio"] == {"type": "number", "description": "A fraction over two lines."}
    assert props["flag"] == {"type": "boolean"}
    assert props["nothing"] == {"type": "null"}
    assert props["items"] == {"type": "array", "items": {"type": "string"}}
    assert props["mapping"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert props["colour"]["enum"] == ["red", "green"]
    assert props["point"]["type"] == "object" and props["point"]["required"] == ["x"]
    assert props["address"]["properties"] == {"street": {"type": "string"}, "city": {"type": "string"}}
    assert set(schema["required"]) == {
        "text", "count", "ratio", "flag", "nothing", "items", "mapping", "mode", "colour", "point", "address"
    }  # fmt: skip
    assert "optional" in props and "with_default" in props and props["with_default"]["default"] == 3
    assert "context" not in props  # the call context is injected, not a parameter
    assert schema["additionalProperties"] is False
    assert "$defs" not in schema and "title" not in schema
    assert declared.schemas.output_schema == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert declared.name == "Everything" and declared.version == "2.0.0"
    assert declared.description == "Exercise every supported kind of parameter."


def test_arguments_build_nested_objects() -> None:
    declared = tool_of(everything)
    assert declared is not None
    kwargs = declared.schemas.arguments(
        {
            "text": "t", "count": 1, "ratio": 0.5, "flag": True, "nothing": None, "items": [], "mapping": {},
            "mode": "fast", "colour": "green", "point": {"x": 1}, "address": {"street": "s", "city": "c"},
        }
    )  # fmt: skip
    assert kwargs["colour"] is Colour.GREEN
    assert kwargs["point"] == Point(1.0, 0.0)
    assert kwargs["address"] == Address(street="s", city="c")
    assert kwargs["optional"] is None and kwargs["with_default"] == 3


def test_decorated_function_stays_callable() -> None:
    @tool
    def double(x: int) -> int:
        return 2 * x

    assert double(4) == 8
    assert tool_of(double).name == "Double"  # type: ignore[union-attr]


def test_names() -> None:
    assert camel_case("word_count") == "WordCount"
    assert camel_case("WordCount") == "WordCount"


def test_tool_error_fields() -> None:
    error = ToolError("m", developer_message="d", can_retry=True, retry_after_ms=5, additional_prompt_content="p")
    failure = error.failure
    assert (failure.message, failure.developer_message, failure.can_retry) == ("m", "d", True)
    assert (failure.retry_after_ms, failure.additional_prompt_content) == (5, "p")
