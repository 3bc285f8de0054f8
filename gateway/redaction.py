"""Redaction of credentials in text: the one rule for logs and for every text that reaches a client.

Secrets reach text two ways, so two layers:

- by key: a field (at any depth) whose name looks like a credential (`authorization`, `cookie`,
  `*token*`, `*secret*`, `password`, API-key names) is replaced (`is_secret_key`, `redact_value`);
- by shape: URL userinfo, query-string values, `Bearer`/`Basic` credentials, JWT-looking strings,
  `key: value` pairs with a credential-like key, and every secret value the configuration holds
  (registered with `register_secrets`) are replaced with `[redacted]` (`redact_text`).

Logs use it (`gateway.observability`), and so does every failure a client is told about
(`gateway.errors.Failure`): a stdio server's stderr tail or an upstream's error body is redacted
before it can reach any front, never per path.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
_SECRET_WORDS = (
    "secret",
    "token",
    "password",
    "passwd",
    "authorization",
    "api_key",
    "apikey",
    "api-key",
    "cookie",
    "credential",
    "private_key",
)

MAX_KNOWN_SECRETS = 1024  # configured values only: a bounded set
MIN_SECRET_LENGTH = 4  # shorter values would redact ordinary words
MAX_DEPTH = 8  # nested event values are redacted this deep; deeper ones are replaced whole

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@\"'<>]*@")
_QUERY_VALUE = re.compile(r"(?P<key>[?&][^=&\s#\"'<>]{1,100}=)[^&\s#\"'<>]+")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*")
_SCHEME_CREDENTIAL = re.compile(r"\b(?P<scheme>Bearer|Basic|Token|ApiKey)(?P<sep>\s+)[^\s\"',;)]+", re.IGNORECASE)
# `name: value` / `name=value` where the name ends like a credential header or field.
_KEY_ENDINGS = ("authorization", "cookie", "api-key", "api_key", "apikey", "password", "passwd", "secret", "token")
_KEYED = re.compile(
    r"(?P<key>[\"']?[A-Za-z0-9_\-]*(?:" + "|".join(re.escape(w) for w in _KEY_ENDINGS) + r")[\"']?"
    r"\s*[:=]\s*)(?P<quote>[\"']?)(?!\[redacted\])(?P<value>[^\"'\s,;}&)\]]+)",
    re.IGNORECASE,
)


class _KnownSecrets:
    """Literal secret values from the configuration, longest first so none is half-replaced."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: tuple[str, ...] = ()

    def add(self, values: Iterable[str]) -> None:
        fresh = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH}
        with self._lock:
            merged = set(self._values) | fresh
            self._values = tuple(sorted(merged, key=len, reverse=True)[:MAX_KNOWN_SECRETS])

    def found_in(self, text: str) -> bool:
        return any(value in text for value in self._values)

    def replace(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text


_KNOWN = _KnownSecrets()


def is_secret_key(key: Any) -> bool:
    return _is_secret_name(key) if isinstance(key, str) else _is_secret_name(str(key))


@functools.lru_cache(maxsize=4096)  # event keys are few and repeat: each is judged once
def _is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


# Every credential shape above needs one of these characters (or "eyJ", a JWT's start): text
# without them (tool names, ids, numbers: most of a call event) skips the five expressions.
_PLAIN = re.compile(r"[^\s:=?&@]*")


def cannot_hold_shapes(text: str) -> bool:
    """True when no credential shape can match: none of the characters they need, no JWT start."""
    return _PLAIN.fullmatch(text) is not None and "eyJ" not in text


def redact_text(text: str) -> str:
    """`text` with every credential-shaped part replaced."""
    text = _KNOWN.replace(text)
    return text if cannot_hold_shapes(text) else redact_shapes(text)


def redact_shapes(text: str) -> str:
    """Every credential shape in `text` replaced (known secret values are `redact_text`'s)."""
    text = _USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _QUERY_VALUE.sub(lambda m: f"{m.group('key')}{REDACTED}", text)
    text = _JWT.sub(REDACTED, text)
    text = _SCHEME_CREDENTIAL.sub(lambda m: f"{m.group('scheme')}{m.group('sep')}{REDACTED}", text)
    return _KEYED.sub(lambda m: f"{m.group('key')}{m.group('quote')}{REDACTED}", text)


def redact_value(value: Any, depth: int = 0) -> Any:
    """A copy of an event value with secret keys and credential-shaped text redacted."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if depth >= MAX_DEPTH:
        return REDACTED
    if isinstance(value, Mapping):
        return {k: (REDACTED if is_secret_key(k) and v else redact_value(v, depth + 1)) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [redact_value(v, depth + 1) for v in value]
    return redact_text(str(value))


def register_secrets(values: Iterable[str]) -> None:
    """Literal values (API keys, upstream credentials, configured secrets) never to be logged."""
    _KNOWN.add(values)
