"""Opt-in result caching, per backend and per tool, keyed by tool, version and arguments.

Only successful results of tools that declare no side effects are cached: a
cached answer must be one the tool would have given anyway. Tools with
requirements (a user, an authorization, secrets) are never cached either:
their results depend on whose credentials they ran with, and one caller must
never receive another's. For the same reason, when the answer may depend on
who asked without the tool declaring it (its backend forwards the caller's own
credentials upstream, or the call carries the caller's user, secrets or
authorizations), the caller is part of the key (`caller_of`): its principal and
a digest of what it sent, so two anonymous callers with different tokens never
share an entry either.

Each backend has its own store, bounded in entries (`max_entries`) and bytes
(`max_bytes`), so one busy backend cannot evict another's entries; within it,
each entry belongs to the principal whose call made it, and each principal may
fill its share of the bounds (`gateway.ownership`): a caller asking for
endless distinct arguments pushes out only its own entries. Values are kept as
JSON bytes, so a caller that mutates its result cannot change what the next
caller gets.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import orjson

from gateway.errors import GatewayError
from gateway.model import CallContext, ToolSpec, UpstreamAnswer, principal_name
from gateway.ownership import OwnedEntries, Shares
from gateway.settings import BackendSettings, CacheSettings

MISS: Any = object()
DEFAULT_MAX_ENTRIES = CacheSettings.model_fields["max_entries"].default  # the defaults live in the model
DEFAULT_MAX_BYTES = CacheSettings.model_fields["max_bytes"].default


def _monotonic() -> float:
    return time.monotonic()


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
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def from_settings(cls, settings: CacheSettings) -> CacheRule:
        return cls(
            ttl_s=settings.ttl_s,
            tools={str(k): float(v) for k, v in (settings.tools or {}).items()},
            max_entries=settings.max_entries,
            max_bytes=settings.max_bytes,
        )

    def ttl_for(self, spec: ToolSpec) -> float | None:
        for pattern, ttl in self.tools.items():
            if _matches(spec, pattern):
                return ttl or None
        return self.ttl_s


CallerKey = str  # "" when the answer cannot depend on the caller; else a digest naming the caller
CacheKey = tuple[str, str, bytes, CallerKey]


class ResultCache:
    def __init__(
        self,
        rules: Mapping[str, CacheRule],
        timer: Callable[[], float] | None = None,
        shares: Shares | None = None,
    ) -> None:
        self.rules = dict(rules)
        self._timer = timer if timer is not None else _monotonic
        # Per backend: (key, expiry, JSON) under the principal whose call made it, and who that is per key.
        self._stores: dict[str, OwnedEntries[CacheKey, tuple[CacheKey, float, bytes]]] = {
            backend: OwnedEntries(
                max_entries=rule.max_entries, max_bytes=rule.max_bytes, shares=shares, what="cached results"
            )
            for backend, rule in self.rules.items()
        }
        self._owners: dict[str, dict[CacheKey, str]] = {backend: {} for backend in self.rules}

    @classmethod
    def from_backends(cls, backends: Iterable[BackendSettings], shares: Shares | None = None) -> ResultCache:
        return cls({b.name: CacheRule.from_settings(b.cache) for b in backends if b.cache is not None}, shares=shares)

    def ttl_for(self, spec: ToolSpec) -> float | None:
        """Seconds to keep this tool's results, or None when they are not cached."""
        rule = self.rules.get(spec.backend)
        if rule is None or cacheable(spec) is not None:
            return None
        return rule.ttl_for(spec)

    @staticmethod
    def caller_of(spec: ToolSpec, context: CallContext, settings: Any = None) -> CallerKey:
        """What of the caller the answer may depend on, as part of the key: nothing ("") for a tool whose
        backend sends nothing of the caller upstream; else a digest of its principal and of what it sent
        (its forwarded credentials, user, secrets, authorizations)."""
        forwards = bool(getattr(settings, "forward_authorization", False))
        if not (forwards or context.user_id or context.secrets or context.authorization):
            return ""
        sent = [
            principal_name(context.principal),
            context.user_id or "",
            sorted(context.client_credentials.items()) if forwards else [],
            sorted(context.secrets.items()),
            sorted(context.authorization.items()),
        ]
        return hashlib.sha256(orjson.dumps(sent)).hexdigest()

    @staticmethod
    def _key(spec: ToolSpec, arguments: Mapping[str, Any], caller: CallerKey) -> CacheKey | None:
        try:
            return (spec.flat_name, spec.version, orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS), caller)
        except TypeError:  # not plain JSON (a middleware put an object in): do not cache
            return None

    def get(self, spec: ToolSpec, arguments: Mapping[str, Any], caller: CallerKey = "") -> Any:
        """The cached (value, upstream answer), or MISS."""
        if self.ttl_for(spec) is None:
            return MISS
        key = self._key(spec, arguments, caller)
        owners = self._owners[spec.backend]
        owner = owners.get(key) if key is not None else None
        if key is None or owner is None:
            return MISS
        store = self._stores[spec.backend]
        entry = store.get(owner, key)
        if entry is None:
            owners.pop(key, None)
            return MISS
        if entry[1] <= self._timer():
            store.pop(owner, key)
            owners.pop(key, None)
            return MISS
        kept = orjson.loads(entry[2])
        upstream = kept.get("upstream")
        return kept.get("value"), UpstreamAnswer.from_dict(upstream) if upstream is not None else None

    def put(
        self,
        spec: ToolSpec,
        arguments: Mapping[str, Any],
        value: Any,
        caller: CallerKey = "",
        owner: str = "",
        upstream: UpstreamAnswer | None = None,
    ) -> None:
        """Keep `value` (and the upstream's own answer, for a front of its protocol) for `ttl_for(spec)`, as
        `owner`'s (the principal whose call made it); one that does not fit the owner's share is not kept."""
        ttl = self.ttl_for(spec)
        key = self._key(spec, arguments, caller) if ttl is not None else None
        if ttl is None or key is None:
            return
        try:
            blob = orjson.dumps({"value": value, "upstream": upstream.to_dict() if upstream is not None else None})
        except TypeError:
            return
        store, owners = self._stores[spec.backend], self._owners[spec.backend]
        previous = owners.get(key)
        if previous is not None and previous != owner:
            store.pop(previous, key)
        try:
            dropped = store.put(owner, key, (key, self._timer() + ttl, blob), size=len(blob) + len(key[2]))
        except GatewayError:  # over the owner's share, or the store is full of others' results: not kept
            owners.pop(key, None)
            return
        owners[key] = owner
        for old_key, _, _ in dropped:
            owners.pop(old_key, None)

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
