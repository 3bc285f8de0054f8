"""The configuration reference (docs/configuration-reference.md), generated from the settings models.

It reads the same JSON Schema `toolplex schema` prints, so the reference, the
schema and what the loader accepts say one thing. Each mapping gets a table
(key, type, default, constraints, description); a nested mapping gets its own
table right after its parent's. Backend kinds list only the keys they add to
the keys every backend (or every upstream backend) accepts, which are listed once.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from gateway.config.schema import Generator, json_schema
from gateway.plugins import backend_kinds
from gateway.settings import BackendSettings, UpstreamBackendSettings

HEADER = """\
# Configuration reference

<!-- Generated from the settings models by `toolplex schema --markdown`; `make schema` rewrites this file
     and config/schema.json. Do not edit it by hand: change the models' descriptions instead. -->

One YAML file configures the gateway; every section may be left out, and every key
not given takes the default shown here. `${VAR}` and `${VAR:-default}` are expanded
from the environment (`$$` is a literal `$`). The file is checked against these
models before anything starts, and every problem is reported with its line and key.
The same rules, as JSON Schema (Draft 2020-12), are in `config/schema.json`
(`toolplex schema` prints them).
"""

COLUMNS = "| Key | Type | Default | Constraints | Description |\n| --- | --- | --- | --- | --- |"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


class Reference:
    """Renders tables from one JSON Schema, following `$ref`s into sections of their own."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = schema.get("$defs", {})
        self.out: list[str] = []

    # ---- reading the schema ----

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref", "")
        return self.defs[ref.rsplit("/", 1)[-1]] if ref else node

    @staticmethod
    def present(node: dict[str, Any]) -> dict[str, Any]:
        """`X | None` as X: a key set to null means the key left out."""
        branches = [b for b in node.get("anyOf", []) if b.get("type") != "null"]
        return branches[0] if len(branches) == 1 else node

    def type_of(self, node: dict[str, Any]) -> str:
        node = self.present(node)
        if "$ref" in node:
            return "mapping"
        if "const" in node:
            return _code(node["const"])
        if "enum" in node:
            return " or ".join(_code(v) for v in node["enum"])
        for union in ("anyOf", "oneOf"):
            if union in node:
                return " or ".join(dict.fromkeys(self.type_of(b) for b in node[union]))
        kind = node.get("type")
        if kind == "array":
            return f"list of {self.type_of(node.get('items', {}))}"
        if kind == "object" and isinstance(node.get("additionalProperties"), dict):
            return f"map of {self.type_of(node['additionalProperties'])}"
        if kind == "object":
            return "mapping"
        return {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean"}.get(kind, "any")

    def constraints_of(self, node: dict[str, Any]) -> list[str]:
        node = self.present(node)
        found = [f"{word} {node[key]}" for key, word in BOUNDS if key in node]
        if "minLength" in node:
            found.append("non-empty" if node["minLength"] == 1 else f"at least {node['minLength']} characters")
        if "maxLength" in node:
            found.append(f"at most {node['maxLength']} characters")
        if "minItems" in node:
            found.append("at least one item" if node["minItems"] == 1 else f"at least {node['minItems']} items")
        if "maxItems" in node:
            found.append(f"at most {node['maxItems']} items")
        if "pattern" in node:
            found.append(f"matches `{node['pattern']}`")
        if "pattern" in node.get("propertyNames", {}):
            found.append(f"keys match `{node['propertyNames']['pattern']}`")
        for key, label in (("items", "each item"), ("additionalProperties", "each value")):
            if isinstance(node.get(key), dict) and "$ref" not in node[key]:
                found += [f"{label}: {c}" for c in self.constraints_of(node[key])]
        return found

    def nested(self, node: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """The mapping a key holds, with the suffix its heading gets: `x`, `x[]` or `x.<name>`."""
        node = self.present(node)
        for suffix, inner in (("", node), ("[]", node.get("items")), (".<name>", node.get("additionalProperties"))):
            if isinstance(inner, dict) and "$ref" in inner:
                return suffix, self.resolve(inner)
        return None

    # ---- writing ----

    def heading(self, level: int, title: str, description: str = "") -> None:
        self.out += [f"{'#' * level} {title}", ""]
        if description:
            self.out += [description, ""]

    def table(self, prefix: str, node: dict[str, Any], *, recurse: bool = True) -> None:
        """The keys of one mapping, then (one level down) a table for each mapping inside it."""
        required = set(node.get("required", []))
        rows, inner = [], []
        for key, prop in node.get("properties", {}).items():
            default = "required" if key in required else _code(prop["default"]) if "default" in prop else ""
            if default == "`null`":
                default = ""
            held = self.nested(prop)
            description = prop.get("description") or (held[1].get("description", "") if held else "")
            cells = [f"`{key}`", self.type_of(prop), default, ", ".join(self.constraints_of(prop)), description]
            rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
            if held:
                inner.append((f"{prefix}.{key}{held[0]}" if prefix else f"{key}{held[0]}", held[1]))
        if rows:
            self.out += [COLUMNS, *rows, ""]
        else:
            self.out += ["No keys of its own.", ""]
        for title, section in inner if recurse else []:
            self.heading(3, f"`{title}`", section.get("description", ""))
            self.table(title, section)


BOUNDS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"))


def _model_schema(model: type[BaseModel], defs: dict[str, Any]) -> dict[str, Any]:
    """A base model's schema (not itself in the root schema), its nested models added to `defs`."""
    schema = model.model_json_schema(schema_generator=Generator)
    for name, definition in schema.pop("$defs", {}).items():
        defs.setdefault(name, definition)
    return schema


def reference_markdown() -> str:
    """docs/configuration-reference.md, for the adapters installed here."""
    schema = json_schema()
    doc = Reference(schema)
    doc.out.append(HEADER)
    doc.heading(2, "Sections")
    doc.table("", schema, recurse=False)
    for key, prop in schema["properties"].items():
        held = doc.nested(prop)
        if key == "backends":
            _backends(doc, prop)
        elif key == "fronts" and held:
            doc.heading(2, "`fronts`", held[1].get("description", ""))
            for name, front in held[1]["properties"].items():
                section = doc.resolve(front)
                doc.heading(3, f"`fronts.{name}`", section.get("description", ""))
                doc.table(f"fronts.{name}", section)
        elif held:
            doc.heading(2, f"`{key}{held[0]}`", prop.get("description") or held[1].get("description", ""))
            doc.table(f"{key}{held[0]}", held[1])
    return "\n".join(doc.out).rstrip("\n") + "\n"


def _without(node: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    """`node` without `kind` and the keys it shares, unchanged, with a base (`keys`)."""
    kept = {k: v for k, v in node.get("properties", {}).items() if k != "kind" and keys.get(k) != v}
    return {**node, "properties": kept}


def _backends(doc: Reference, prop: dict[str, Any]) -> None:
    doc.heading(2, "`backends[]`", prop.get("description", ""))
    common = _model_schema(BackendSettings, doc.defs)
    upstream = _model_schema(UpstreamBackendSettings, doc.defs)
    doc.heading(3, "Keys of every backend", "`kind` names the adapter that serves the backend (below).")
    doc.table("backends[]", _without(common, {}))
    doc.heading(3, "Keys of every upstream backend", "Kinds that reach a remote server accept these as well.")
    doc.table("backends[]", _without(upstream, common["properties"]))
    items = prop["items"]
    refs = items.get("discriminator", {}).get("mapping") or {items["$ref"].rsplit("/", 1)[-1]: items["$ref"]}
    kinds = backend_kinds()
    for kind, ref in sorted(refs.items()):
        upstream_kind = kind in kinds and issubclass(kinds[kind].settings, UpstreamBackendSettings)
        base = upstream if upstream_kind else common
        section = doc.resolve({"$ref": ref})
        note = "Also the keys of every upstream backend." if upstream_kind else ""
        doc.heading(3, f"`kind: {kind}`", " ".join(filter(None, [section.get("description", ""), note])))
        doc.table(f"backends[] (kind: {kind})", _without(section, base["properties"]))
