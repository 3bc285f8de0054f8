"""OpenTool 1.1 description documents (seed 001): parse one into ToolSpecs, build one from them.

Parsing checks every field the specification marks required and resolves
`{"$ref": "#/schemas/Name"}` (the only reference form the spec has), so an
upstream's document either becomes tools or an error that names the place.

What OpenTool cannot say (a tool's toolkit, name and version, and JSON Schemas
that its Schema Objects would simplify) travels in an extension member of each
function, `x-toolplex`, which other OpenTool clients ignore: a Toolplex fronting
a Toolplex over OpenTool then keeps every tool exactly as it was.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gateway.model import FLAT_NAME_PATTERN, PART_PATTERN, VERSION_PATTERN, ToolSpec

OPENTOOL_VERSION = "1.1.0"
SCHEMA_TYPES = {"boolean", "integer", "number", "string", "array", "object"}
RETURN_NAME = "result"  # key a non-object value is wrapped under in /call results
EXTENSION = "x-toolplex"  # per function: {toolkit, name, version, input_schema, output_schema}
_REF = re.compile(r"^#/schemas/([^/]+)$")


class DocumentError(ValueError):
    """An OpenTool document that does not follow seed 001; `path` says where."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True)
class Function:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    return_name: str | None
    # The `x-toolplex` member: present when the document comes from a Toolplex.
    extension: dict[str, Any] | None = None
    # The function as the upstream described it (its `$ref`s inlined): what `/load` serves again for it.
    entry: dict[str, Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Document:
    opentool: str
    title: str
    version: str
    description: str
    server_url: str | None
    functions: tuple[Function, ...]


def _require(node: dict[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    if key not in node:
        raise DocumentError(path, f"required field {key!r} is missing")
    value = node[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DocumentError(f"{path}.{key}", f"must be {names}, got {type(value).__name__}")
    return value


class _Resolver:
    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas

    def schema(self, node: Any, path: str, stack: tuple[str, ...] = ()) -> dict[str, Any]:
        """An OpenTool Schema Object as a self-contained JSON Schema."""
        if not isinstance(node, dict):
            raise DocumentError(path, "a schema must be an object")
        if "$ref" in node:
            ref = node["$ref"]
            match = _REF.match(ref) if isinstance(ref, str) else None
            if not match:
                raise DocumentError(path, f"unsupported reference {ref!r}; only '#/schemas/Name' is allowed")
            name = match.group(1)
            if name not in self.schemas:
                raise DocumentError(path, f"reference {ref!r} names no entry of 'schemas'")
            if name in stack:
                raise DocumentError(path, f"schema {name!r} refers to itself; recursive schemas are not supported")
            return self.schema(self.schemas[name], f"schemas.{name}", (*stack, name))
        kind = _require(node, "type", str, path)
        if kind not in SCHEMA_TYPES:
            raise DocumentError(f"{path}.type", f"{kind!r} is not one of {', '.join(sorted(SCHEMA_TYPES))}")
        out: dict[str, Any] = {k: v for k, v in node.items() if k not in ("properties", "items")}
        if kind == "object" and "properties" in node:
            props = _require(node, "properties", dict, path)
            out["properties"] = {
                name: self.schema(sub, f"{path}.properties.{name}", stack) for name, sub in props.items()
            }
        if kind == "array":
            out["items"] = self.schema(_require(node, "items", dict, path), f"{path}.items", stack)
        if "enum" in node and not isinstance(node["enum"], list):
            raise DocumentError(f"{path}.enum", "must be a list")
        if "required" in node and not (
            isinstance(node["required"], list) and all(isinstance(r, str) for r in node["required"])
        ):
            raise DocumentError(f"{path}.required", "must be a list of strings")
        return out


def parse_document(doc: Any) -> Document:
    if not isinstance(doc, dict):
        raise DocumentError("(document)", "an OpenTool document must be a JSON object")
    opentool = _require(doc, "opentool", str, "(document)")
    info = _require(doc, "info", dict, "(document)")
    title = _require(info, "title", str, "info")
    version = _require(info, "version", str, "info")
    server = doc.get("server")
    server_url = None
    if server is not None:
        if not isinstance(server, dict):
            raise DocumentError("server", "must be an object")
        server_url = _require(server, "url", str, "server")
    schemas = doc.get("schemas") or {}
    if not isinstance(schemas, dict):
        raise DocumentError("schemas", "must be an object of named schemas")
    resolver = _Resolver(schemas)
    functions = []
    for index, fn in enumerate(_require(doc, "functions", list, "(document)")):
        path = f"functions[{index}]"
        if not isinstance(fn, dict):
            raise DocumentError(path, "a function must be an object")
        name = _require(fn, "name", str, path)
        if not FLAT_NAME_PATTERN.match(name):
            raise DocumentError(f"{path}.name", f"{name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        description = _require(fn, "description", str, path)
        properties: dict[str, Any] = {}
        required: list[str] = []
        entry = {k: v for k, v in fn.items() if k != EXTENSION}
        entry_parameters: list[Any] = []
        for p_index, param in enumerate(_require(fn, "parameters", list, path)):
            p_path = f"{path}.parameters[{p_index}]"
            if not isinstance(param, dict):
                raise DocumentError(p_path, "a parameter must be an object")
            p_name = _require(param, "name", str, p_path)
            schema = resolver.schema(_require(param, "schema", dict, p_path), f"{p_path}.schema")
            entry_parameters.append({**param, "schema": copy.deepcopy(schema)})
            if param.get("description") and "description" not in schema:
                schema["description"] = param["description"]
            if _require(param, "required", bool, p_path):
                required.append(p_name)
            properties[p_name] = schema
        input_schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            input_schema["required"] = required
        output_schema = None
        return_name = None
        returned = fn.get("return")
        if returned is not None:
            r_path = f"{path}.return"
            if not isinstance(returned, dict):
                raise DocumentError(r_path, "must be an object or null")
            return_name = _require(returned, "name", str, r_path)
            output_schema = resolver.schema(_require(returned, "schema", dict, r_path), f"{r_path}.schema")
            entry["return"] = {**returned, "schema": copy.deepcopy(output_schema)}
        entry["parameters"] = entry_parameters
        extension = _extension(fn.get(EXTENSION), f"{path}.{EXTENSION}") if EXTENSION in fn else None
        functions.append(Function(name, description, input_schema, output_schema, return_name, extension, entry))
    return Document(
        opentool=opentool,
        title=title,
        version=version,
        description=info.get("description") or "",
        server_url=server_url,
        functions=tuple(functions),
    )


def _extension(node: Any, path: str) -> dict[str, Any]:
    """A function's `x-toolplex` member, checked: it names the tool exactly, so it must be right."""
    if not isinstance(node, dict):
        raise DocumentError(path, "must be an object")
    for key in ("toolkit", "name"):
        value = _require(node, key, str, path)
        if not PART_PATTERN.match(value):
            raise DocumentError(f"{path}.{key}", f"{value!r} must match ^[A-Za-z0-9_]+$")
    if not VERSION_PATTERN.match(_require(node, "version", str, path)):
        raise DocumentError(f"{path}.version", f"{node['version']!r} is not a version x.y.z")
    if "input_schema" in node and not isinstance(node["input_schema"], dict):
        raise DocumentError(f"{path}.input_schema", "must be a JSON Schema object")
    if node.get("output_schema") is not None and not isinstance(node["output_schema"], dict):
        raise DocumentError(f"{path}.output_schema", "must be a JSON Schema object or null")
    return node


def load_description(path: str | Path) -> Document:
    """An OpenTool description from a local file (JSON, or YAML for .yaml / .yml), parsed and checked.

    Raises DocumentError naming the file and the place; for upstreams whose `/load`
    serves no description (the TypeScript SDK's example server, servers without `/load`).
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DocumentError(where, f"cannot be read ({exc.strerror or exc})") from None
    is_yaml = where.endswith((".yaml", ".yml"))
    try:
        data = yaml.safe_load(text) if is_yaml else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise DocumentError(where, f"is not valid {'YAML' if is_yaml else 'JSON'}: {exc}") from None
    try:
        return parse_document(data)
    except DocumentError as exc:
        raise DocumentError(f"{where}: {exc.path}", str(exc).removeprefix(f"{exc.path}: ")) from None


def toolkit_name(title: str) -> str:
    """A toolkit name from a document title: 'Weather tools' -> 'WeatherTools'."""
    words = re.findall(r"[A-Za-z0-9]+", title)
    return "".join(w[:1].upper() + w[1:] for w in words) or "OpenTool"


def document_specs(
    document: Document, *, toolkit: str | None, backend: str, source: str, language: str = "remote"
) -> list[ToolSpec]:
    """One ToolSpec per function; the function name becomes the tool name inside `toolkit`.

    A function with `x-toolplex` keeps its own toolkit (unless `toolkit` is given),
    name, version and exact schemas.
    """
    kit = toolkit or toolkit_name(document.title)
    version = document.version if re.match(r"^\d+\.\d+\.\d+$", document.version) else "1.0.0"
    specs = []
    for fn in document.functions:
        ext = fn.extension or {}
        specs.append(
            ToolSpec(
                toolkit=toolkit or ext.get("toolkit") or kit,
                name=ext.get("name") or fn.name.replace("-", "_"),
                version=ext.get("version") or version,
                description=fn.description,
                input_schema=ext.get("input_schema") or fn.input_schema,
                output_schema=ext.get("output_schema", fn.output_schema),
                backend=backend,
                source=source,
                language=language,
                binding=fn.name,
            )
        )
    return specs


# ---- building a document from the catalog (GET /load) ----


def schema_object(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A JSON Schema in the shape of seed 001's Schema Object (which requires `type`)."""
    if not isinstance(schema, dict):
        return {"type": "object"}
    variants = schema.get("anyOf") or schema.get("oneOf")
    if variants:
        non_null = [v for v in variants if not (isinstance(v, dict) and v.get("type") == "null")]
        if len(non_null) == 1:
            base = schema_object(non_null[0])
        elif all(isinstance(v, dict) and v.get("type") in ("integer", "number") for v in non_null):
            base = {"type": "number"}
        else:
            base = {"type": "object"}
        extra = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
        return {**base, **extra}
    out = {k: v for k, v in schema.items() if k not in ("properties", "items", "$defs", "$schema")}
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "object")
    if kind not in SCHEMA_TYPES:
        kind = (
            "object"
            if "properties" in schema
            else "array"
            if "items" in schema
            else "string"
            if "enum" in schema
            else "object"
        )
    out["type"] = kind
    if kind == "object" and isinstance(schema.get("properties"), dict):
        out["properties"] = {name: schema_object(sub) for name, sub in schema["properties"].items()}
    if kind == "array":
        out["items"] = schema_object(schema.get("items") if isinstance(schema.get("items"), dict) else None)
    return out


def function_name(spec: ToolSpec) -> str:
    """The name `/load` lists a tool under and a `/call` names it by (the flat name, a valid OpenAI function
    name): one rule for the listing and the console's view of it (`adapters.opentool.presenter`)."""
    return spec.flat_name


def function_of(spec: ToolSpec) -> dict[str, Any]:
    """A tool as a `/load` function: an OpenTool upstream's own as it described it (under the gateway's name for
    it: a transparent hop), any other built from the canonical spec."""
    extension = {
        "toolkit": spec.toolkit,
        "name": spec.name,
        "version": spec.version,
        "input_schema": spec.input_schema,
        "output_schema": spec.output_schema,
    }
    own = spec.binding.entry if isinstance(spec.binding, Function) else None
    if own is not None:
        return {**own, "name": function_name(spec), EXTENSION: extension}
    properties: dict[str, Any] = spec.input_schema.get("properties", {})
    required = set(spec.input_schema.get("required", []))
    parameters = []
    for name, sub in properties.items():
        converted = schema_object(sub)
        parameters.append(
            {
                "name": name,
                "description": converted.get("description", ""),
                "schema": converted,
                "required": name in required,
            }
        )
    returned = None
    if spec.output_schema is not None:
        converted = schema_object(spec.output_schema)
        returned = {"name": RETURN_NAME, "description": converted.get("description", ""), "schema": converted}
    return {
        "name": function_name(spec),
        "description": spec.description,
        "parameters": parameters,
        "return": returned,
        EXTENSION: extension,
    }


def build_document(
    specs: list[ToolSpec], *, title: str, version: str, description: str, server_url: str
) -> dict[str, Any]:
    return {
        "opentool": OPENTOOL_VERSION,
        "info": {"title": title, "description": description, "version": version},
        "server": {"url": server_url, "description": "Toolplex gateway"},
        "functions": [function_of(spec) for spec in specs],
    }
