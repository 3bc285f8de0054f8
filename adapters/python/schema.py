"""JSON Schemas derived from Python signatures, through pydantic.

pydantic does the type work (Literal, Enum, dataclasses, models, Optional);
this module only collects descriptions, inlines `$defs` so every schema is
self-contained (OpenTool and ToolServerNode clients don't follow `$ref`s),
and drops pydantic's generated titles.

A catalog of thousands of tools made start-up slow: a pydantic model and two
JSON Schemas per tool cost about 2 ms each. So the common parameter types
(str, int, float, bool, None, Any, list, dict, unions, Literal, Annotated
with a description) get their schema from `fast_field_schema`, which writes
exactly what pydantic would (tests/python/test_schema_fast_path.py compares
both); the pydantic model that converts arguments is built on the first call
that needs it; and return types share one adapter and schema per type. Any
other signature goes through pydantic at decoration time, as before, so its
errors and warnings still come when the tool is declared.
"""

from __future__ import annotations

import inspect
import math
import re
import threading
import types
import typing
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic_core import to_jsonable_python

from gateway.model import CallContext

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_SINGLE = ("items", "additionalProperties", "not", "contains")
_ARGS_ONLY = re.compile(r"(?:Args|Arguments|Parameters):\s*")


def docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """Summary (text before an Args section) and per-parameter descriptions (Google style)."""
    if not doc:
        return "", {}
    if "\n" not in doc:  # one line (most tools): what cleandoc and the split below would make of it
        line = doc.expandtabs().lstrip()
        if not _ARGS_ONLY.fullmatch(line):
            return line.strip(), {}
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


def _annotated_description(hint: Any) -> str | None:
    """`Annotated[int, "the count"]`: the first plain string is the description."""
    if get_origin(hint) is Annotated:
        return next((item for item in get_args(hint)[1:] if isinstance(item, str)), None)
    return None


# ---- the fast path: pydantic's JSON Schema for the everyday types, without pydantic ----


class Unsupported(Exception):
    """A type, default or name the fast path does not cover: pydantic decides instead."""


_NONE = type(None)
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", _NONE: "null"}
_LITERAL_TYPES: dict[type, str] = {str: "string", int: "integer", bool: "boolean"}
_UNIONS = (Union, types.UnionType)
_DEFAULT_SCALARS = (str, int, float, bool, _NONE)
# pydantic warns about (or refuses) these field names: they keep pydantic's own path and its messages.
# "default" and "properties" are also where pydantic stops sorting keys.
_PYDANTIC_NAMES = frozenset(dir(BaseModel)) | {"default", "properties"}


def fast_type_schema(hint: Any) -> dict[str, Any]:
    """pydantic's validation-mode JSON Schema of `hint`, keys sorted as pydantic sorts them; Unsupported otherwise."""
    if hint is Any:
        return {}
    scalar = _SCALARS.get(hint) if isinstance(hint, type) else None
    if scalar is not None:
        return {"type": scalar}
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is Annotated:
        if not all(isinstance(extra, str) for extra in args[1:]):  # Field(...), constraints: pydantic's work
            raise Unsupported(hint)
        return fast_type_schema(args[0])
    if hint is list or origin is list:
        return {"items": fast_type_schema(args[0]) if args else {}, "type": "array"}
    if hint is dict or origin is dict:
        if args and args[0] is not str:
            raise Unsupported(hint)
        value: Any = True if not args or args[1] is Any else fast_type_schema(args[1])
        return {"additionalProperties": value, "type": "object"}
    if origin in _UNIONS:
        return _union_schema(args)
    if origin is Literal:
        return _literal_schema(args)
    raise Unsupported(hint)


def _union_schema(members: tuple[Any, ...]) -> dict[str, Any]:
    """`A | B | None` as pydantic writes it: the union of the others, then made nullable (`null` last)."""
    schemas = [fast_type_schema(member) for member in members if member is not _NONE]
    if not schemas:
        raise Unsupported(members)
    inner = schemas[0] if len(schemas) == 1 else _any_of(schemas)
    if _NONE not in members or inner == _NULL:
        return inner
    return _any_of([inner, {"type": "null"}])


_NULL = {"type": "null"}


def _any_of(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """pydantic's `get_flattened_anyof`: a member that is only an anyOf is spliced in, repeats dropped."""
    members: list[dict[str, Any]] = []
    for schema in schemas:
        members.extend(schema["anyOf"] if len(schema) == 1 and "anyOf" in schema else [schema])
    distinct = list({_hashable(member): member for member in members}.values())
    return distinct[0] if len(distinct) == 1 else {"anyOf": distinct}


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((key, _hashable(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    return value


def _literal_schema(values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {type(value) for value in values}
    kind = _LITERAL_TYPES.get(kinds.pop()) if len(kinds) == 1 else None
    if kind is None or not values:
        raise Unsupported(values)
    if len(values) == 1:
        return {"const": values[0], "type": kind}
    return {"enum": list(values), "type": kind}


def _fast_default(value: Any) -> Any:
    """A default as pydantic writes it into a schema; Unsupported beyond JSON scalars and flat lists/dicts."""
    kind = type(value)
    if kind in _DEFAULT_SCALARS:
        if kind is float and not math.isfinite(value):
            raise Unsupported(value)
        return value
    if kind in (list, tuple) and all(type(item) in _DEFAULT_SCALARS and type(item) is not float for item in value):
        return list(value)
    if kind is dict and all(
        type(k) is str and type(v) in _DEFAULT_SCALARS and type(v) is not float for k, v in value.items()
    ):
        return dict(value)  # pydantic keeps a default's own key order
    raise Unsupported(value)


# Made anew wherever they are written (`dict[str, Any]`, `int | None`), unlike typing's own forms.
_FRESH_EACH_TIME = (types.GenericAlias, types.UnionType)


def _memo_key(hint: Any) -> Any:
    """A hint's identity, or for a form made anew each time, its kind, origin and arguments' keys, in order.

    Never equality: typing calls `int | str` equal to `str | int`, and `Literal[1, 2]` to
    `Literal[2, 1]`, yet pydantic writes their members in the order given.
    """
    if type(hint) in _FRESH_EACH_TIME:
        return (type(hint), getattr(hint, "__origin__", None), tuple(_memo_key(arg) for arg in hint.__args__))
    return id(hint)


class _Memo:
    """A bounded memo of what is worked out from a type hint, keyed by `_memo_key`.

    Each entry holds its hint, and so every object whose identity its key names: an identity
    in a key cannot be another object's while the entry lives. Identity finds what typing
    makes once (`Annotated[...]`, `Optional[...]`, `Literal[...]`), the parts find
    `dict[str, Any]` again, a new object wherever it is written.
    """

    def __init__(self, compute: Callable[[Any], Any], max_entries: int) -> None:
        self._compute = compute
        self._max = max_entries
        self._entries: OrderedDict[Any, tuple[Any, Any]] = OrderedDict()

    def __call__(self, hint: Any) -> Any:
        key = _memo_key(hint) if type(hint) in _FRESH_EACH_TIME else id(hint)  # (the common case inline)
        hit = self._entries.get(key)
        if hit is not None:
            return hit[1]
        value = self._compute(hint)
        if len(self._entries) >= self._max:
            self._entries.popitem(last=False)  # the oldest
        self._entries[key] = (hint, value)
        return value


@dataclass(frozen=True, slots=True)
class HintFacts:
    """What a parameter's type hint says, worked out once per hint object."""

    plain: bool  # holds no string or forward reference: typing has nothing to evaluate
    description: str | None  # `Annotated[..., "text"]`
    schema: dict[str, Any] | None  # the fast path's type schema (a template: copy it); None: pydantic's work
    context: bool  # `CallContext`, or a union holding it: the parameter receives the call's context


def _plain_annotation(hint: Any) -> bool:
    if isinstance(hint, (str, typing.ForwardRef)):
        return False
    if isinstance(hint, (list, tuple)):  # Callable[[int, str], bool] holds a list
        return all(_plain_annotation(arg) for arg in hint)
    origin = get_origin(hint)
    if origin is Literal:  # its arguments are values, strings included
        return True
    args = get_args(hint)
    if origin is Annotated:  # its extras are metadata, strings included
        args = args[:1]
    return all(_plain_annotation(arg) for arg in args)


def _hint_facts(hint: Any) -> HintFacts:
    try:
        plain = _plain_annotation(hint)
    except TypeError:  # an annotation typing cannot take apart: typing.get_type_hints will say so
        plain = False
    try:
        schema: dict[str, Any] | None = fast_type_schema(hint)
    except Unsupported:
        schema = None
    context = hint is CallContext or CallContext in get_args(hint)
    return HintFacts(plain, _annotated_description(hint), schema, context)


hint_facts = _Memo(_hint_facts, max_entries=4096)


def _field_schema(facts: HintFacts, default: Any, description: str | None) -> dict[str, Any]:
    if facts.schema is None:
        raise Unsupported(facts)
    schema = dict(facts.schema)
    if default is not ...:
        schema["default"] = _fast_default(default)
    if description is not None:
        schema["description"] = description
    return dict(sorted(schema.items())) if len(schema) > 1 else schema


def fast_field_schema(hint: Any, default: Any, description: str | None) -> dict[str, Any]:
    """One property of an arguments schema (`default` is `...` when required), as pydantic writes it."""
    return _field_schema(hint_facts(hint), default, description)


def _schema_of(fields: dict[str, tuple[HintFacts, Any, str | None]]) -> dict[str, Any]:
    properties = {}
    required = []
    for name, (facts, default, description) in fields.items():
        if name.startswith("_") or name.startswith("model_") or name in _PYDANTIC_NAMES:
            raise Unsupported(name)
        properties[name] = _field_schema(facts, default, description)
        if default is ...:
            required.append(name)
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema["type"] = "object"
    return schema


def fast_input_schema(fields: dict[str, tuple[Any, Any, str | None]]) -> dict[str, Any]:
    """The arguments schema of a model with these fields (name: (hint, default, description)) and extra="forbid"."""
    return _schema_of({name: (hint_facts(hint), default, text) for name, (hint, default, text) in fields.items()})


def type_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """`typing.get_type_hints(func, include_extras=True)`, read directly when nothing needs evaluating."""
    annotations = getattr(func, "__annotations__", None)
    if isinstance(annotations, dict) and not isinstance(func, type):
        hints = {name: _NONE if hint is None else hint for name, hint in annotations.items()}
        if all(hint_facts(hint).plain for hint in hints.values()):
            return hints
    return typing.get_type_hints(func, include_extras=True)


_EMPTY = inspect.Parameter.empty


def parameters(func: Callable[..., Any]) -> list[tuple[str, Any]]:
    """(name, default or `inspect.Parameter.empty`) of each named parameter, as `inspect.signature` has them.

    A plain function's are read from its code object (a tenth of the time); anything else
    (wrapped, with `__signature__`, a method, a callable object) goes through inspect.
    """
    if type(func) is not types.FunctionType or "__wrapped__" in func.__dict__ or "__signature__" in func.__dict__:
        return [
            (p.name, p.default)
            for p in inspect.signature(func).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    code = func.__code__
    positional = code.co_varnames[: code.co_argcount]
    keyword_only = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    defaults = func.__defaults__ or ()
    first_default = len(positional) - len(defaults)
    named = [(name, defaults[i - first_default] if i >= first_default else _EMPTY) for i, name in enumerate(positional)]
    keyword_defaults = func.__kwdefaults__ or {}
    named.extend((name, keyword_defaults.get(name, _EMPTY)) for name in keyword_only)
    return named


def _output(returned: Any) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    adapter: TypeAdapter[Any] = TypeAdapter(returned)
    return adapter, self_contained(adapter.json_schema(mode="serialization"))


# One adapter and serialization schema per return type: thousands of tools return the same few types.
output_of = _Memo(_output, max_entries=512)


_MODEL_LOCK = threading.Lock()  # arguments models are built rarely (a tool's first call): one lock for all


def _fields(
    func: Callable[..., Any], hints: dict[str, Any], param_docs: dict[str, str]
) -> tuple[str | None, dict[str, tuple[Any, HintFacts, Any, str | None]]]:
    """(the context parameter, {name: (hint, facts, default or ..., description)}) of the other parameters."""
    context_param = None
    fields = {}
    for name, declared_default in parameters(func):
        hint = hints.get(name)
        facts = hint_facts(Any if hint is None else hint)
        if facts.context or (name == "context" and hint in (None, Any)):
            context_param = name
            continue
        default = ... if declared_default is _EMPTY else declared_default
        fields[name] = (Any if hint is None else hint, facts, default, facts.description or param_docs.get(name))
    return context_param, fields


class SignatureSchemas:
    """Everything derived once from a function: schemas, the context parameter, converters.

    The pydantic model behind `arguments` is built when first needed, unless the schema
    itself needed pydantic (then it is built at once, as the schema comes from it).
    The output schema may be shared between tools with the same return type: read it, never change it.
    Slots, and nothing kept that the function can give again: a catalog holds thousands.
    """

    __slots__ = (
        "_func",
        "_model",
        "_model_name",
        "context_param",
        "description",
        "input_schema",
        "output_adapter",
        "output_schema",
    )

    def __init__(self, func: Callable[..., Any], model_name: str) -> None:
        self._func = func
        self._model_name = model_name
        self._model: type[BaseModel] | None = None
        hints = type_hints(func)
        self.description, param_docs = docstring_parts(func.__doc__)
        self.context_param, fields = _fields(func, hints, param_docs)
        try:
            self.input_schema = _schema_of({name: entry[1:] for name, entry in fields.items()})
        except Unsupported:
            self.input_schema = self_contained(self._build_model(fields).model_json_schema())
            self.input_schema.setdefault("properties", {})
        returned = hints.get("return", inspect.Signature.empty)
        self.output_adapter: TypeAdapter[Any] | None = None
        self.output_schema: dict[str, Any] | None = None
        if returned is not inspect.Signature.empty and returned is not _NONE:
            self.output_adapter, self.output_schema = output_of(returned)

    def _build_model(self, fields: dict[str, tuple[Any, HintFacts, Any, str | None]]) -> type[BaseModel]:
        with _MODEL_LOCK:
            if self._model is None:
                self._model = create_model(  # type: ignore[call-overload]
                    self._model_name,
                    __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                    **{
                        name: (hint, Field(default, description=text))
                        for name, (hint, _, default, text) in fields.items()
                    },
                )
            return self._model  # type: ignore[return-value]

    @property
    def model(self) -> type[BaseModel]:
        """The arguments model (extra="forbid"), built on first use from the function again."""
        model = self._model
        if model is None:
            _, param_docs = docstring_parts(self._func.__doc__)
            model = self._build_model(_fields(self._func, type_hints(self._func), param_docs)[1])
        return model

    def arguments(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments with nested objects built (dataclasses, models, enums)."""
        instance = self.model.model_validate(raw)
        return {name: getattr(instance, name) for name in type(instance).model_fields}

    def output(self, value: Any) -> Any:
        if self.output_adapter is not None:
            return self.output_adapter.dump_python(value, mode="json")
        return to_jsonable_python(value)
