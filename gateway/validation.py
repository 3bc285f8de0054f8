"""Argument validation against a tool's input schema, with compiled validators cached.

Messages are phrased per parameter so that every front can name each bad one.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from threading import Lock
from typing import Any

import jsonschema_rs
import referencing
import referencing.exceptions
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


# `\d`, `\w`, `\s`, `\b` (and their negations) mean ASCII or ECMA-262's sets in jsonschema-rs and
# Unicode's in Python's `re`, so a pattern using one can accept with one and refuse with the other:
# such schemas are judged by jsonschema alone. (Seen in JSON text, the backslash itself is escaped.)
_CLASS_ESCAPE = re.compile(r"\\\\[dDwWsSbB]")
_JSON_TYPES = (str, bool, type(None))
_EXACT = 2**53  # every integer below this is exact as a float too


def _json_only(value: Any) -> bool:
    """True when `value` holds only what JSON decodes to, with numbers in the exactly representable
    range: a middleware may have put a tuple or a Decimal in the arguments, which jsonschema-rs reads
    as an array or a number and jsonschema does not, and huge numbers are judged differently."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str:
                    return False
                stack.append(inner)
        elif kind is list:
            stack.extend(item)
        elif kind is float or kind is int:
            if not -_EXACT < item < _EXACT:  # beyond exact integers the two disagree (multipleOf, integer)
                return False
        elif kind not in _JSON_TYPES:
            return False
    return True


def _never_fetch(uri: str) -> Any:
    """A schema's `$ref` to a URI outside the schema is never fetched: the schema comes from an upstream,
    and fetching would let it make the gateway request any address (its internal ones included)."""
    raise referencing.exceptions.NoSuchResource(ref=uri)


_LOCAL_ONLY = referencing.Registry(retrieve=_never_fetch)  # type: ignore[call-arg]


def _refuse_rs(uri: str) -> Any:
    raise ValueError(f"{uri}: the gateway does not fetch schemas")


class SchemaValidator:
    """One input schema compiled twice: jsonschema-rs answers "valid?" in well under a
    microsecond; only an invalid call pays for jsonschema's detailed errors, which phrase the
    answer. A schema jsonschema-rs cannot compile (or a value it cannot read) uses jsonschema alone.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        Draft202012Validator.check_schema(schema)
        self.schema = schema
        self.detailed = Draft202012Validator(schema, registry=_LOCAL_ONLY)
        self.fast: Any | None = None
        if not _CLASS_ESCAPE.search(json.dumps(schema)):  # see _CLASS_ESCAPE
            try:  # formats are annotations, as in jsonschema without a format checker
                self.fast = jsonschema_rs.Draft202012Validator(schema, validate_formats=False, retriever=_refuse_rs)
            except Exception:  # any refusal means: use the detailed validator alone
                self.fast = None

    def errors(self, arguments: Any) -> dict[str, str]:
        """Each offending top-level parameter with its message; empty when the arguments are valid."""
        if self.fast is not None and _json_only(arguments):
            try:
                if self.fast.is_valid(arguments):
                    return {}
            except Exception:  # a value jsonschema-rs cannot convert: let jsonschema judge
                pass
        try:
            return parameter_errors(self.detailed, arguments)
        except referencing.exceptions.Unresolvable as exc:
            return {"(arguments)": f"The tool's input schema refers to {exc.ref!r}, which the gateway does not fetch"}


class ValidatorCache:
    """Compiled validators keyed by schema content, bounded LRU.

    A tool's schema is one object for the life of its snapshot, so the validator is
    first looked up by that object's identity (the entry keeps the object alive, so
    the identity cannot be reused): serialising the schema is paid once, not per call.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._entries: OrderedDict[str, SchemaValidator] = OrderedDict()
        self._by_identity: OrderedDict[int, SchemaValidator] = OrderedDict()
        self._max = max_entries
        self._lock = Lock()

    def get(self, schema: dict[str, Any]) -> SchemaValidator:
        known = self._by_identity.get(id(schema))
        if known is not None and known.schema is schema:
            return known
        validator = self._by_content(schema)
        with self._lock:
            self._by_identity[id(schema)] = validator
            if len(self._by_identity) > self._max:
                self._by_identity.popitem(last=False)
        return validator

    def _by_content(self, schema: dict[str, Any]) -> SchemaValidator:
        key = json.dumps(schema, sort_keys=True, default=str)
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found.schema == schema:
                self._entries.move_to_end(key)
                return found
        validator = SchemaValidator(schema)
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
    if not problems:
        return problems
    order = {name: index for index, name in enumerate(validator.schema.get("properties", {}))}
    return dict(sorted(problems.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))
