"""Read a YAML configuration, expand ${VAR}s, validate it with the settings models.

Every problem is reported with its place in the file (line and column) and
its path inside the document, all at once, so a person can fix them in one go.
Pydantic's errors are translated into the wording of the published JSON Schema
("'key' is a required property", "unknown key 'x'", "5 is less than the minimum
of 10"), with paths as a person writes them (`backends[0].module`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gateway.config.models import GatewaySettings, root_model
from gateway.errors import ConfigError
from gateway.plugins import backend_kinds

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

PathKey = tuple[str | int, ...]


@dataclass(frozen=True)
class GatewayConfig:
    """A validated configuration: the typed settings, and where each of its values was written."""

    settings: GatewaySettings
    source: str = "<memory>"
    marks: Mapping[PathKey, tuple[int, int]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # accepted, but worth telling the operator (an old key name, say)

    @cached_property
    def data(self) -> dict[str, Any]:
        """The settings as a plain mapping, defaults filled in (for code that has not moved to `settings` yet)."""
        return self.settings.model_dump(mode="json", exclude_none=True, by_alias=True)

    def section(self, *path: str) -> dict[str, Any]:
        node: Any = self.data
        for key in path:
            node = node.get(key) or {}
        return node

    def locate(self, path: PathKey) -> str:
        """`file:line:col` of the nearest node on `path` that the file holds."""
        return locate(self.source, self.marks, path)


def position(marks: Mapping[PathKey, tuple[int, int]], path: PathKey) -> tuple[int, int]:
    """(line, column) of the nearest node on `path` that the file holds."""
    probe = tuple(path)
    while probe and probe not in marks:
        probe = probe[:-1]
    return marks.get(probe, (1, 1))


def locate(source: str, marks: Mapping[PathKey, tuple[int, int]], path: PathKey) -> str:
    line, col = position(marks, path)
    return f"{source}:{line}:{col}"


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


# ---- pydantic's errors in the published schema's words ----

_JSON_TYPES = {
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "string_type": "string",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "list_type": "array",
    "tuple_type": "array",
    "set_type": "array",
}

_BOUNDS = {
    "greater_than_equal": ("ge", "is less than the minimum of"),
    "greater_than": ("gt", "is less than or equal to the minimum of"),
    "less_than_equal": ("le", "is greater than the maximum of"),
    "less_than": ("lt", "is greater than or equal to the maximum of"),
}


def _jsonable(value: Any, path: PathKey, problems: list[tuple[PathKey, str]]) -> Any:
    """The document with what JSON has no word for (dates, non-string keys) reported and left out.

    A value left out becomes null, and its path is skipped when the models' problems
    are reported, so every other problem is still found in the same pass.
    """
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            if isinstance(key, str):
                kept[key] = _jsonable(item, (*path, key), problems)
            else:
                problems.append(((*path, str(key)), f"key {key!r} is not a string (quote it)"))
        return kept
    if isinstance(value, list):
        return [_jsonable(item, (*path, index), problems) for index, item in enumerate(value)]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    problems.append((path, f"{value!r} is not a JSON value (quote it to make it a string)"))
    return None


def _place(loc: tuple[Any, ...], data: Any, tags: frozenset[str], missing: bool) -> PathKey:
    """The path a person wrote, from pydantic's location: union tags and `[key]` markers removed.

    A backend's location carries its kind as a tag (`backends.0.python.module`).
    Other tags (members of a plain union) are found by walking the document: an
    element that names no key or index of the node it stands on is one, except the
    last element of a `missing` error, the required key the mapping lacks.
    """
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        if part == "[key]" or (index == 2 and loc[0] == "backends" and part in tags):
            continue
        holds = (isinstance(node, dict) and isinstance(part, str) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        )
        if holds:
            node = node[part]
        elif not (missing and index == len(loc) - 1):
            continue  # a tag pydantic added
        path.append(part)
    return tuple(path)


def _number(value: Any) -> Any:
    """A bound as the schema writes it: 0, not 0.0."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _choices(expected: str) -> str:
    """Pydantic's "'a', 'b' or 'c'" as the schema's ['a', 'b', 'c']."""
    return "[" + ", ".join(re.split(r", | or ", expected)) + "]"


def _translate(error: Any, data: Any, kinds: list[str]) -> tuple[PathKey, str]:
    """One pydantic error as (path in the document, message in the schema's words)."""
    kind, loc, value, ctx = error["type"], tuple(error["loc"]), error.get("input"), error.get("ctx") or {}
    tags = frozenset(kinds) if len(kinds) > 1 else frozenset()  # one kind: no union, no tag
    path = _place(loc, data, tags, missing=kind == "missing")
    if kind == "missing" and path:
        return path[:-1], f"{path[-1]!r} is a required property"
    if kind == "extra_forbidden":
        return path, f"unknown key {path[-1]!r}"
    if kind == "union_tag_not_found":
        return path, "'kind' is a required property"  # backends are the only discriminated union
    if kind == "union_tag_invalid":
        return (*path, "kind"), f"{ctx.get('tag')!r} is not one of {kinds}"
    if kind == "literal_error" and len(path) == 3 and path[0] == "backends" and path[2] == "kind":
        return path, f"{value!r} is not one of {kinds}"  # one kind installed: no union, a literal
    if kind in ("literal_error", "enum"):
        return path, f"{value!r} is not one of {_choices(str(ctx.get('expected', '')))}"
    if kind in _JSON_TYPES:
        return path, f"{value!r} is not of type {_JSON_TYPES[kind]!r}"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return path, f"{value!r} {words} {_number(ctx[key])!r}"
    if kind == "string_pattern_mismatch":
        return path, f"{value!r} does not match {ctx['pattern']!r}"
    if kind in ("string_too_short", "too_short"):
        limit = ctx.get("min_length")
        return path, f"{value!r} {'should be non-empty' if limit == 1 else 'is too short'}"
    if kind in ("string_too_long", "too_long"):
        limit = ctx.get("max_length")
        return path, f"{value!r} {'is expected to be empty' if limit == 0 else 'is too long'}"
    if kind in ("value_error", "assertion_error"):
        return path, str(ctx.get("error") or error["msg"])
    return path, str(error["msg"])


def _merge_type_errors(problems: list[tuple[PathKey, str]]) -> list[tuple[PathKey, str]]:
    """Members of a union refusing one value's type: one message naming every type, as the schema says it."""
    out: list[tuple[PathKey, str]] = []
    seen: dict[PathKey, tuple[int, list[str]]] = {}  # path -> (its message in `out`, the types named)
    for path, message in problems:
        head, sep, type_name = message.rpartition(" is not of type ")
        if sep and path in seen:
            index, names = seen[path]
            names.append(type_name)
            out[index] = (path, f"{head}{sep}{', '.join(names)}")
            continue
        if sep:
            seen[path] = (len(out), [type_name])
        out.append((path, message))
    return out


def _validate(
    data: dict[str, Any], source: str, marks: Mapping[PathKey, tuple[int, int]], skip: set[PathKey]
) -> tuple[GatewaySettings | None, list[str]]:
    """The typed settings, or every problem with its place (problems at paths in `skip` are already reported).

    Validation runs on the JSON text of the document in strict mode, as a JSON
    Schema validator would: "8080" is not a port, 1 is not a string.
    """
    found: list[tuple[PathKey, str]] = []
    data = _jsonable(data, (), found)
    skip = skip | {path for path, _ in found}
    settings = None
    try:
        settings = root_model().model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        kinds = sorted(backend_kinds())
        found += [
            (p, m) for p, m in (_translate(e, data, kinds) for e in exc.errors(include_url=False)) if p not in skip
        ]
    found = _merge_type_errors(list(dict.fromkeys(found)))
    found.sort(key=lambda problem: (position(marks, problem[0]), [str(part) for part in problem[0]]))
    return settings, [f"{locate(source, marks, p)}: {format_path(p)}: {m}" for p, m in found]


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
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([f"{locate(source, marks, ())}: the configuration must be a mapping of sections"])
    expand_problems: list[tuple[PathKey, str]] = []
    data = _expand(data, (), env, expand_problems)
    warnings = _renamed_keys(data, source, marks)
    problems = [f"{locate(source, marks, p)}: {format_path(p)}: {m}" for p, m in expand_problems]
    settings, invalid = _validate(data, source, marks, {p for p, _ in expand_problems})
    problems += invalid
    names = [b.get("name") for b in data.get("backends") or [] if isinstance(b, dict)]
    for index, name in enumerate(names):
        if name is not None and names.index(name) != index:
            path = ("backends", index, "name")
            problems.append(f"{locate(source, marks, path)}: {format_path(path)}: backend name {name!r} is used twice")
    if settings is not None and settings.server.workers > 1 and settings.state.store == "memory":
        path = ("server", "workers")
        problems.append(
            f"{locate(source, marks, path)}: {format_path(path)}: {settings.server.workers} workers need a state store "
            "shared by processes; with state.store: memory each process would keep its own sessions, pending calls "
            "and idempotency records, and a client's next request could reach one that knows nothing of them. "
            "Use workers: 1, or state.store: redis"
        )
    if settings is not None and settings.server.workers > 1 and settings.state.advertise_url:
        path = ("state", "advertise_url")
        problems.append(
            f"{locate(source, marks, path)}: {format_path(path)}: one address cannot name "
            f"{settings.server.workers} workers: leave it unset, and each worker registers its own private port"
        )
    if problems or settings is None:
        raise ConfigError(problems)
    return GatewayConfig(settings=settings, source=source, marks=marks, warnings=tuple(warnings))


RENAMED_KEYS: dict[tuple[str, str], str] = {("state", "kind"): "store"}  # (section, old key) -> new key


def _renamed_keys(data: dict[str, Any], source: str, marks: Mapping[PathKey, tuple[int, int]]) -> list[str]:
    """Move keys written under an old name to the new one (in place); one warning per key moved."""
    warnings: list[str] = []
    for (section, old), new in RENAMED_KEYS.items():
        block = data.get(section)
        if not isinstance(block, dict) or old not in block:
            continue
        where = f"{locate(source, marks, (section, old))}: {section}.{old}"
        if new in block:
            warnings.append(f"{where} is the old name of {section}.{new}, which is given too: the old key is ignored")
            del block[old]
        else:
            block[new] = block.pop(old)
            warnings.append(f"{where} is now called {section}.{new}; the old name still works for now")
    return warnings


def load_config(path: str | Path, env: dict[str, str] | None = None) -> GatewayConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the configuration: {exc.strerror}"]) from None
    return parse_config(text, str(path), env)
