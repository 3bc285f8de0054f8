"""OpenAPI Schema Objects as JSON Schema (2020-12), the dialect the gateway validates arguments with.

3.1 schemas are JSON Schema already; 3.0 ones differ in a few words, rewritten here: `nullable: true`
adds `null` to the type (or an `anyOf` with null where there is no type, e.g. beside a `$ref`), boolean
`exclusiveMinimum`/`exclusiveMaximum` become numbers, `example` becomes `examples`. Annotations that
mean nothing to a validator (`discriminator`, `xml`, `externalDocs`, `x-` extensions) are left out.

Each `$ref` to a schema becomes `{"$ref": "#/$defs/<key>"}`, and the schema it names is converted once
per document, under that key: a tool's schema carries the `$defs` its own refs reach (`bundle`), shared
objects, never copies. That keeps a thousand tools over one set of components cheap to build and
small to list, and lets recursive schemas stay recursive.
"""

from __future__ import annotations

import re
from typing import Any

from adapters.openapi.document import DocumentError, Documents, escape

SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
SCHEMA_ONE = frozenset(
    {
        "items",
        "additionalProperties",
        "additionalItems",
        "not",
        "contains",
        "if",
        "then",
        "else",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
DROPPED = frozenset({"discriminator", "xml", "externalDocs", "nullable", "example", "$schema", "$id", "$comment"})
_KEY = re.compile(r"[^A-Za-z0-9_.-]+")


class Schemas:
    """One document's schemas as JSON Schema: `$defs` by key, each converted once, and what each refers to."""

    def __init__(self, documents: Documents, version: str) -> None:
        self.documents = documents
        self.v30 = version == "3.0"
        self.defs: dict[str, Any] = {}  # key -> converted schema
        self.refs: dict[str, frozenset[str]] = {}  # key -> the keys its schema refers to directly
        self._keys: dict[str, str] = {}  # target `uri#pointer` -> key

    def convert(self, node: Any, base: str, pointer: str, refs: set[str]) -> Any:
        """`node` (found at `pointer` of document `base`) as JSON Schema; the `$defs` keys it uses go into `refs`."""
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise DocumentError(base, pointer, f"a schema must be an object, not {type(node).__name__}")
        ref = node.get("$ref")
        if isinstance(ref, str):
            key = self.define(ref, base, pointer)
            refs.add(key)
            out: dict[str, Any] = {"$ref": f"#/$defs/{key}"}
            if not self.v30:  # 3.1: a $ref's siblings apply too
                rest = {k: v for k, v in node.items() if k != "$ref"}
                if rest:
                    out.update(self._object(rest, base, pointer, refs))
            elif isinstance(node.get("description"), str):
                out["description"] = node["description"]
            if self.v30 and node.get("nullable") is True:
                return {"anyOf": [out, {"type": "null"}]}
            return out
        return self._object(node, base, pointer, refs)

    def _object(self, node: dict[str, Any], base: str, pointer: str, refs: set[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {
                    name: self.convert(inner, base, f"{pointer}/{key}/{escape(str(name))}", refs)
                    for name, inner in value.items()
                }
            elif key in SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.convert(inner, base, f"{pointer}/{key}/{i}", refs) for i, inner in enumerate(value)]
            elif key in SCHEMA_ONE:
                if isinstance(value, list):  # draft 4 tuple `items`
                    out["prefixItems" if key == "items" else key] = [
                        self.convert(inner, base, f"{pointer}/{key}/{i}", refs) for i, inner in enumerate(value)
                    ]
                else:
                    out[key] = self.convert(value, base, f"{pointer}/{key}", refs)
            elif key in DROPPED or key.startswith("x-"):
                continue
            else:
                out[key] = value
        if "example" in node and "examples" not in node:
            out["examples"] = [node["example"]]
        # Boolean bounds (3.0, or a 3.1 schema that declares draft 4) are numbers in JSON Schema 2020-12.
        for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            flag = node.get(bound)
            if isinstance(flag, bool):
                del out[bound]
                if flag and limit in node:
                    out[bound] = out.pop(limit)
        if self.v30:
            self._nullable(node, out)
        return out

    @staticmethod
    def _nullable(node: dict[str, Any], out: dict[str, Any]) -> None:
        """3.0's `nullable: true`: null is one more type (or one more value of an enum)."""
        if node.get("nullable") is True:
            kind = out.get("type")
            if isinstance(kind, str):
                out["type"] = [kind, "null"]
            elif isinstance(kind, list):
                out["type"] = [*kind, "null"] if "null" not in kind else kind
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
            if kind is None:
                inner = dict(out)
                out.clear()
                out["anyOf"] = [inner, {"type": "null"}]

    def define(self, ref: str, base: str, pointer: str) -> str:
        """The `$defs` key of the schema `ref` names, converting it the first time it is named."""
        uri, target = self.documents.target(ref, base, pointer)
        key = self._keys.get(uri)
        if key is not None:
            return key
        key = self._key_for(uri)
        self._keys[uri] = key
        self.defs[key] = {}  # a placeholder while converting: a recursive schema refers to its own key
        document, _, where = uri.partition("#")
        found: set[str] = set()
        try:
            self.defs[key] = self.convert(target, document, where, found)
        except BaseException:
            del self._keys[uri], self.defs[key]  # a schema that failed is not half-defined for the next operation
            raise
        self.refs[key] = frozenset(found)
        return key

    def _key_for(self, uri: str) -> str:
        """A readable key: the schema's own name (`Pet`), made unique (`Pet_2`) when another has it."""
        document, _, pointer = uri.partition("#")
        last = pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~") if pointer else ""
        if not last:
            last = document.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        stem = _KEY.sub("_", last).strip("_") or "schema"
        key, n = stem, 1
        while key in self.defs:
            n += 1
            key = f"{stem}_{n}"
        return key

    def bundle(self, schema: Any, refs: set[str]) -> Any:
        """`schema` with the `$defs` its refs reach (transitively); a root that is only a `$ref` is inlined (the
        named schema stays in `$defs` when it refers to itself), so a tool's schema says `type: object` at its
        root where the named schema does."""
        if isinstance(schema, dict) and set(schema) == {"$ref"} and refs:
            key = schema["$ref"].rsplit("/", 1)[-1]
            target = self.defs.get(key)
            if isinstance(target, dict):  # a shallow copy; a recursive schema's own refs still reach its $defs entry
                schema = dict(target)
                refs = set(self.refs.get(key, frozenset()))
        if not refs or not isinstance(schema, dict):
            return schema
        reached = self.reach(refs)
        return {**schema, "$defs": {key: self.defs[key] for key in sorted(reached)}}

    def reach(self, keys: set[str] | frozenset[str]) -> set[str]:
        """Every key reachable from `keys`."""
        seen: set[str] = set()
        stack = list(keys)
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            stack.extend(self.refs.get(key, ()))
        return seen

    def resolved(self, schema: Any) -> Any:
        """A converted schema with `$ref`s at its root followed (for looking at its type, its properties)."""
        for _ in range(32):
            if isinstance(schema, dict) and "$ref" in schema and isinstance(schema["$ref"], str):
                schema = self.defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
            else:
                break
        return schema

    def shape(self, schema: Any) -> str:
        """`array`, `object` or `primitive`: how a parameter of this schema is serialised."""
        schema = self.resolved(schema)
        if not isinstance(schema, dict):
            return "primitive"
        kind = schema.get("type")
        kinds = set(kind) if isinstance(kind, list) else {kind}
        if "array" in kinds or "items" in schema or "prefixItems" in schema:
            return "array"
        if "object" in kinds or "properties" in schema or "additionalProperties" in schema:
            return "object"
        for branch in schema.get("allOf") or schema.get("oneOf") or schema.get("anyOf") or ():
            found = self.shape(branch)
            if found != "primitive":
                return found
        return "primitive"
