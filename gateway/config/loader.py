"""Read a YAML configuration, expand ${VAR}s, validate it against the published schema.

Every problem is reported with its place in the file (line and column) and
its path inside the document, all at once, so a person can fix them in one go.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from gateway.errors import ConfigError

SCHEMA_PATH = Path(__file__).with_name("schema.json")
_SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
_VALIDATOR = Draft202012Validator(_SCHEMA)
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

PathKey = tuple[str | int, ...]


@dataclass
class GatewayConfig:
    data: dict[str, Any]
    source: str = "<memory>"
    marks: dict[PathKey, tuple[int, int]] = field(default_factory=dict)

    def section(self, *path: str) -> dict[str, Any]:
        node: Any = self.data
        for key in path:
            node = node.get(key) or {}
        return node

    def locate(self, path: PathKey) -> str:
        """`file:line:col` of the nearest node on `path` that the file holds."""
        probe = tuple(path)
        while probe and probe not in self.marks:
            probe = probe[:-1]
        line, col = self.marks.get(probe, (1, 1))
        return f"{self.source}:{line}:{col}"


def format_path(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _marks(node: yaml.Node | None, path: PathKey, out: dict[PathKey, tuple[int, int]]) -> None:
    if node is None:
        return
    out[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _marks(value_node, (*path, key), out)
            out[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _marks(item, (*path, index), out)


def _expand(value: Any, path: PathKey, env: dict[str, str], problems: list[tuple[PathKey, str]]) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, (*path, k), env, problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, (*path, i), env, problems) for i, v in enumerate(value)]
    if not isinstance(value, str) or "$" not in value:
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        problems.append((path, f"environment variable {name} is not set (write ${{{name}:-default}} to allow that)"))
        return ""

    expanded = _VAR.sub(substitute, value)
    if _VAR.fullmatch(value) and value != "$$":
        # `port: ${PORT:-8080}` is a number, as if the value had been written in the file.
        try:
            typed = yaml.safe_load(expanded)
        except yaml.YAMLError:
            return expanded
        return typed if isinstance(typed, (int, float, bool)) else expanded
    return expanded


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    if not ref.startswith("#/"):
        return schema
    node: Any = _SCHEMA
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _unknown_keys(error: Any) -> list[str]:
    """Keys no branch of the schema declares, so a key a failed branch knows is not called unknown."""
    schema = error.schema
    known = set(schema.get("properties", {}))
    for branch in schema.get("allOf", []):
        then = branch.get("then", {})
        condition = Draft202012Validator(branch.get("if", {}))
        if condition.is_valid(error.instance):
            known |= set(then.get("properties", {}))
            for part in then.get("allOf", []):  # shared key sets, e.g. {"$ref": "#/$defs/upstream"}
                known |= set(_resolve(part).get("properties", {}))
    return [k for k in error.instance if k not in known]


def _fill_defaults(schema: dict[str, Any], node: dict[str, Any]) -> None:
    """Apply the schema's defaults to objects, creating optional sections so defaults reach them."""
    for key, sub in schema.get("properties", {}).items():
        if "default" in sub and key not in node:
            node[key] = copy.deepcopy(sub["default"])
        if sub.get("type") == "object" and "properties" in sub:
            if key not in node or node[key] is None:
                node[key] = {}
            if isinstance(node[key], dict):
                _fill_defaults(sub, node[key])


def parse_config(text: str, source: str = "<memory>", env: dict[str, str] | None = None) -> GatewayConfig:
    env = dict(os.environ) if env is None else env
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: invalid YAML: {problem}"]) from None
    marks: dict[PathKey, tuple[int, int]] = {}
    _marks(node, (), marks)
    config = GatewayConfig(data={}, source=source, marks=marks)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([f"{config.locate(())}: the configuration must be a mapping of sections"])
    expand_problems: list[tuple[PathKey, str]] = []
    data = _expand(data, (), env, expand_problems)
    problems = [f"{config.locate(p)}: {format_path(p)}: {m}" for p, m in expand_problems]
    for error in sorted(_VALIDATOR.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        path = tuple(error.absolute_path)
        if any(path == p for p, _ in expand_problems):
            continue  # already reported: the variable is missing, not the value wrong
        if error.validator in ("additionalProperties", "unevaluatedProperties"):
            for key in _unknown_keys(error):
                where = (*path, key)
                problems.append(f"{config.locate(where)}: {format_path(where)}: unknown key {key!r}")
            continue
        problems.append(f"{config.locate(path)}: {format_path(path)}: {error.message}")
    names = [b.get("name") for b in data.get("backends") or [] if isinstance(b, dict)]
    for index, name in enumerate(names):
        if name is not None and names.index(name) != index:
            path = ("backends", index, "name")
            problems.append(f"{config.locate(path)}: {format_path(path)}: backend name {name!r} is used twice")
    if problems:
        raise ConfigError(problems)
    _fill_defaults(_SCHEMA, data)
    data.setdefault("backends", [])
    config.data = data
    return config


def load_config(path: str | Path, env: dict[str, str] | None = None) -> GatewayConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the configuration: {exc.strerror}"]) from None
    return parse_config(text, str(path), env)
