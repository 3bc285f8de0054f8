"""JSON Schemas derived from Python signatures, through pydantic.

pydantic does the type work (Literal, Enum, dataclasses, models, Optional);
this module only collects descriptions, inlines `$defs` so every schema is
self-contained (OpenTool and ToolServerNode clients don't follow `$ref`s),
and drops pydantic's generated titles.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic_core import to_jsonable_python

from gateway.model import CallContext

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_SINGLE = ("items", "additionalProperties", "not", "contains")


def docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """Summary (text before an Args section) and per-parameter descriptions (Google style)."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    parts = re.split(r"^(?:Args|Arguments|Parameters):\s*$", text, maxsplit=1, flags=re.M)
    summary = parts[0].strip()
    params: dict[str, str] = {}
    if len(parts) > 1:
        current: str | None = None
        indent = 0
        for line in parts[1].splitlines():
            if re.match(r"^\S", line):  # a new section (Returns:, Raises:) ends Args
                break
            match = re.match(r"^\s+(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if match and (current is None or len(line) - len(line.lstrip()) <= indent):
                current, indent = match.group(1), len(line) - len(line.lstrip())
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return summary, params


def _inline(schema: Any, defs: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    if isinstance(schema, list):
        return [_inline(item, defs, seen) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            return schema  # recursive: keep the reference
        merged = {**defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}
        return _inline(merged, defs, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or key == "$defs":
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _inline(sub, defs, seen) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS or key in _SUBSCHEMA_SINGLE:
            out[key] = _inline(value, defs, seen)
        else:
            out[key] = value
    return out


def self_contained(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline `$defs`; keep them only where a type refers to itself."""
    defs = schema.get("$defs", {})
    out = _inline(schema, defs)
    if defs and '"$ref"' in repr(out).replace("'", '"'):
        out["$defs"] = {name: _inline(sub, defs, (name,)) for name, sub in defs.items()}
    return out


def _context_param(param: inspect.Parameter, hints: dict[str, Any]) -> bool:
    hint = hints.get(param.name)
    if hint is CallContext or CallContext in get_args(hint):  # also `CallContext | None`
        return True
    return param.name == "context" and hint in (None, Any)


def _annotated_description(hint: Any) -> str | None:
    """`Annotated[int, "the count"]`: the first plain string is the description."""
    if get_origin(hint) is Annotated:
        return next((item for item in get_args(hint)[1:] if isinstance(item, str)), None)
    return None


class SignatureSchemas:
    """Everything derived once from a function: schemas, the context parameter, converters."""

    def __init__(self, func: Callable[..., Any], model_name: str) -> None:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)
        summary, param_docs = docstring_parts(func.__doc__)
        self.description = summary
        self.context_param: str | None = None
        fields: dict[str, Any] = {}
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if _context_param(param, hints):
                self.context_param = param.name
                continue
            hint = hints.get(param.name, Any)
            description = _annotated_description(hint) or param_docs.get(param.name)
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hint, Field(default, description=description))
        self.model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            model_name, __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False), **fields
        )
        self.input_schema = self_contained(self.model.model_json_schema())
        self.input_schema.setdefault("properties", {})
        returned = hints.get("return", inspect.Signature.empty)
        self.output_adapter: TypeAdapter[Any] | None = None
        self.output_schema: dict[str, Any] | None = None
        if returned is not inspect.Signature.empty and returned is not type(None):
            self.output_adapter = TypeAdapter(returned)
            self.output_schema = self_contained(self.output_adapter.json_schema(mode="serialization"))

    def arguments(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments with nested objects built (dataclasses, models, enums)."""
        instance = self.model.model_validate(raw)
        return {name: getattr(instance, name) for name in type(instance).model_fields}

    def output(self, value: Any) -> Any:
        if self.output_adapter is not None:
            return self.output_adapter.dump_python(value, mode="json")
        return to_jsonable_python(value)
