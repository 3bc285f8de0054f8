"""Argument validation against a tool's input schema, with compiled validators cached.

Messages are phrased per parameter so that every front can name each bad one.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from threading import Lock
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

_TYPE_WORDS = {
    "number": "a number",
    "integer": "an integer",
    "string": "a string",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


class ValidatorCache:
    """Compiled Draft 2020-12 validators keyed by schema content, bounded LRU."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._entries: OrderedDict[str, Draft202012Validator] = OrderedDict()
        self._max = max_entries
        self._lock = Lock()

    def get(self, schema: dict[str, Any]) -> Draft202012Validator:
        key = json.dumps(schema, sort_keys=True, default=str)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(schema)
        with self._lock:
            self._entries[key] = validator
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return validator


def _describe(error: ValidationError) -> str:
    if error.validator == "type":
        expected = error.validator_value
        names = expected if isinstance(expected, list) else [expected]
        return "Must be " + " or ".join(_TYPE_WORDS.get(n, n) for n in names)
    if error.validator == "enum":
        return "Must be one of: " + ", ".join(json.dumps(v) for v in error.validator_value)
    if error.validator in ("anyOf", "oneOf"):
        branches = error.validator_value
        types = [b.get("type") for b in branches if isinstance(b, dict) and set(b) <= {"type", "description"}]
        if len(types) == len(branches) and all(isinstance(t, str) for t in types):
            return "Must be " + " or ".join(_TYPE_WORDS.get(t, t) for t in types)
    if error.validator == "const":
        return f"Must be {json.dumps(error.validator_value)}"
    return error.message


def parameter_errors(validator: Draft202012Validator, arguments: Any) -> dict[str, str]:
    """Map each offending top-level parameter to a message; empty when valid."""
    problems: dict[str, str] = {}
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path)):
        path = list(error.absolute_path)
        if path:
            name = str(path[0])
            message = _describe(error)
            if len(path) > 1:
                inner = ".".join(str(p) for p in path[1:])
                message = f"{inner}: {message}"
            problems.setdefault(name, message)
        elif error.validator == "required":
            for missing in error.validator_value:
                if isinstance(arguments, dict) and missing not in arguments:
                    problems.setdefault(missing, "Missing required parameter")
        elif error.validator == "additionalProperties" and isinstance(arguments, dict):
            allowed = set(error.schema.get("properties", {}))
            for extra in arguments:
                if extra not in allowed:
                    problems.setdefault(extra, "Unexpected parameter")
        else:
            problems.setdefault("(arguments)", _describe(error))
    order = {name: index for index, name in enumerate(validator.schema.get("properties", {}))}
    return dict(sorted(problems.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))
