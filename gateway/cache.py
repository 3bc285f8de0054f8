"""Opt-in result caching, per backend and per tool, keyed by tool, version and arguments.

Only successful results of tools that declare no side effects are cached: a
cached answer must be one the tool would have given anyway. Tools with
requirements (a user, an authorization, secrets) are never cached either:
their results depend on whose credentials they ran with, and one caller must
never receive another's. Each backend has
its own bounded store, so one busy backend cannot evict another's entries.
Values are kept as JSON bytes, so a caller that mutates its result cannot
change what the next caller gets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import orjson
from cachetools import TLRUCache

from gateway.model import ToolSpec
from gateway.settings import BackendSettings, CacheSettings

MISS: Any = object()
DEFAULT_MAX_ENTRIES = CacheSettings.model_fields["max_entries"].default  # the default lives in the model
_GLOB_CHARS = set("*?[")


def cacheable(spec: ToolSpec) -> str | None:
    """Why this tool's results may never be cached, or None when they may."""
    if spec.side_effects:
        return "declares side effects"
    if not spec.requirements.empty:
        return "has requirements (user, authorization or secrets), so its results depend on the caller"
    return None


def _matches(spec: ToolSpec, pattern: str) -> bool:
    """A pattern with a dot matches `Toolkit.Name`, without one the bare name (as routing does)."""
    return fnmatchcase(spec.qualified_name if "." in pattern else spec.name, pattern)


@dataclass(frozen=True)
class CacheRule:
    """One backend's `cache:` block."""

    ttl_s: float | None = None  # every tool of the backend without side effects
    tools: dict[str, float] = field(default_factory=dict)  # pattern -> TTL; 0 turns caching off
    max_entries: int = DEFAULT_MAX_ENTRIES

    @classmethod
    def from_settings(cls, settings: CacheSettings) -> CacheRule:
        return cls(
            ttl_s=settings.ttl_s,
            tools={str(k): float(v) for k, v in (settings.tools or {}).items()},
            max_entries=settings.max_entries,
        )

    def ttl_for(self, spec: ToolSpec) -> float | None:
        for pattern, ttl in self.tools.items():
            if _matches(spec, pattern):
                return ttl or None
        return self.ttl_s


def _expiry(_key: Any, entry: tuple[float, bytes], now: float) -> float:
    return now + entry[0]


class ResultCache:
    def __init__(self, rules: Mapping[str, CacheRule], timer: Callable[[], float] = time.monotonic) -> None:
        self.rules = dict(rules)
        self._stores: dict[str, TLRUCache[tuple[str, str, bytes], tuple[float, bytes]]] = {
            backend: TLRUCache(maxsize=rule.max_entries, ttu=_expiry, timer=timer)
            for backend, rule in self.rules.items()
        }

    @classmethod
    def from_backends(cls, backends: Iterable[BackendSettings]) -> ResultCache:
        return cls({b.name: CacheRule.from_settings(b.cache) for b in backends if b.cache is not None})

    def ttl_for(self, spec: ToolSpec) -> float | None:
        """Seconds to keep this tool's results, or None when they are not cached."""
        rule = self.rules.get(spec.backend)
        if rule is None or cacheable(spec) is not None:
            return None
        return rule.ttl_for(spec)

    @staticmethod
    def _key(spec: ToolSpec, arguments: Mapping[str, Any]) -> tuple[str, str, bytes] | None:
        try:
            return (spec.flat_name, spec.version, orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS))
        except TypeError:  # not plain JSON (a middleware put an object in): do not cache
            return None

    def get(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        """The cached value, or MISS."""
        if self.ttl_for(spec) is None:
            return MISS
        key = self._key(spec, arguments)
        entry = self._stores[spec.backend].get(key) if key is not None else None
        return MISS if entry is None else orjson.loads(entry[1])

    def put(self, spec: ToolSpec, arguments: Mapping[str, Any], value: Any) -> None:
        ttl = self.ttl_for(spec)
        key = self._key(spec, arguments) if ttl is not None else None
        if ttl is None or key is None:
            return
        try:
            blob = orjson.dumps(value)
        except TypeError:
            return
        self._stores[spec.backend][key] = (ttl, blob)

    def problems(self, specs: Iterable[ToolSpec], backends: Iterable[str] | None = None) -> list[str]:
        """Configuration mistakes: a pattern that matches no tool, an exact name of a tool never cached.

        `backends` limits the check to those (the ones that are up: a down backend has no tools yet).
        """
        only = None if backends is None else set(backends)
        by_backend: dict[str, list[ToolSpec]] = {}
        for spec in specs:
            by_backend.setdefault(spec.backend, []).append(spec)
        found: list[str] = []
        for backend, rule in self.rules.items():
            if only is not None and backend not in only:
                continue
            tools = by_backend.get(backend, [])
            for pattern, ttl in rule.tools.items():
                matched = [s for s in tools if _matches(s, pattern)]
                where = f"backend {backend!r}: cache.tools[{pattern!r}]"
                if not matched:
                    found.append(f"{where} matches no tool of this backend")
                elif ttl and not (_GLOB_CHARS & set(pattern)):
                    found.extend(
                        f"{where}: tool {s.qualified_name} {cacheable(s)}; its results are never cached"
                        for s in matched
                        if cacheable(s) is not None
                    )
        return found
