"""Request bodies of the ToolServerNode endpoints, in every shape real peers send.

The seed documents `{"tool", "parameters"}` and `{"tools": [...]}`; the real
node and client use `{"tool_name", "arguments", "env_name"}`, a bare JSON
array, and once `{"tool_names": [...]}`. Each is normalised to one model and
validated with pydantic, so a bad body gets FastAPI's own 422 `detail` list.
Unknown members are refused rather than ignored.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from adapters.toolserver.codec import validation_item

MAX_TOP_K = 1000
MAX_NAMES = 1000
DEFAULT_TOP_K = 5  # the node's default


class BadRequest(Exception):
    """A body that cannot be read as the endpoint's request; `detail` is FastAPI's 422 list."""

    def __init__(self, detail: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in detail))
        self.detail = detail


def _no_bool(value: Any) -> Any:
    # pydantic's lax mode reads true as 1; a top_k of true is a mistake, not a number.
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


Name = Annotated[str, Field(min_length=1, max_length=256)]


class ExecuteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_name: Name
    arguments: dict[str, Any] = Field(default_factory=dict)
    env_name: Name | None = None


class RetrievalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: Annotated[str, Field(min_length=1, max_length=10_000)]
    top_k: Annotated[int, BeforeValidator(_no_bool), Field(ge=1, le=MAX_TOP_K)] = DEFAULT_TOP_K


class CollectArguments(BaseModel):
    """The arguments of the hidden collect tool: the handle a 450 answer carried."""

    model_config = ConfigDict(extra="forbid")
    handle: Annotated[str, Field(min_length=1, max_length=256)]


class NamesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    names: Annotated[list[Name], Field(max_length=MAX_NAMES)]


def _validate(
    model: type[BaseModel], data: Any, rename: dict[str, str] | None = None, where: tuple[str, ...] = ("body",)
) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        items = []
        for error in exc.errors(include_url=False, include_context=False):
            loc = [(rename or {}).get(str(part), part) if i == 0 else part for i, part in enumerate(error["loc"])]
            items.append(validation_item(error["type"], [*where, *loc], error["msg"], error["input"]))
        raise BadRequest(items) from None


def _missing_body() -> BadRequest:
    return BadRequest([validation_item("missing", ["body"], "Field required", None)])


def _alias(body: dict[str, Any], canonical: str, alias: str) -> tuple[dict[str, Any], str]:
    """Move `alias` to `canonical`; both at once is refused. Returns the body and the name the client used."""
    if alias not in body:
        return body, canonical
    if canonical in body:
        raise BadRequest(
            [
                validation_item(
                    "value_error",
                    ["body", alias],
                    f"Value error, give either '{canonical}' or '{alias}', not both",
                    body[alias],
                )
            ]
        )
    body = dict(body)
    body[canonical] = body.pop(alias)
    return body, alias


def execute_request(body: Any) -> ExecuteRequest:
    """`{"tool_name", "arguments", "env_name"?}` or the seed's `{"tool", "parameters"}`."""
    if body is None:
        raise _missing_body()
    rename: dict[str, str] = {}
    if isinstance(body, dict):
        body, used = _alias(body, "tool_name", "tool")
        rename["tool_name"] = used
        body, used = _alias(body, "arguments", "parameters")
        rename["arguments"] = used
    return _validate(ExecuteRequest, body, rename)


def retrieval_request(body: Any, where: str = "body") -> RetrievalRequest:
    """`{"question", "top_k"?}`; `where` is "query" when it came from a GET's query string."""
    if body is None:
        raise _missing_body()
    return _validate(RetrievalRequest, body, where=(where,))


def names_request(body: Any, keys: tuple[str, ...], where: str = "body") -> list[str]:
    """A bare array of names, or an object with one of `keys` (e.g. "tools", "tool_names") holding it."""
    if body is None:
        raise _missing_body()
    if isinstance(body, list):
        return _validate(NamesRequest, {"names": body}, {"names": keys[0]}, (where,)).names  # type: ignore[no-any-return]
    if not isinstance(body, dict):
        raise BadRequest(
            [
                validation_item(
                    "list_type", [where], f"Input should be a valid list, or an object with '{keys[0]}'", body
                )
            ]
        )
    present = [key for key in keys if key in body]
    if not present:
        raise BadRequest([validation_item("missing", [where, keys[0]], "Field required", body)])
    if len(present) > 1:
        raise BadRequest(
            [
                validation_item(
                    "value_error",
                    [where, present[1]],
                    f"Value error, give only one of {', '.join(repr(k) for k in keys)}",
                    body[present[1]],
                )
            ]
        )
    extra = {k: v for k, v in body.items() if k != present[0]}
    data = {"names": body[present[0]], **extra}
    return _validate(NamesRequest, data, {"names": present[0]}, (where,)).names  # type: ignore[no-any-return]


def validate_model(model: type[BaseModel], body: Any) -> Any:
    """Any other body model, with FastAPI's 422 list on failure."""
    return _validate(model, body)


def collect_arguments(arguments: dict[str, Any]) -> str:
    return _validate(CollectArguments, arguments, where=("body", "arguments")).handle  # type: ignore[no-any-return]
