"""All tools of all backends, every version, resolvable by name and version.

A catalog is immutable once built; a reload builds a new one and swaps it in
whole, so a request never sees half of a change. Being immutable, it sorts and
groups its tools once, and keeps what each permission view lists (a bounded
number of views): at 10,000 tools, sorting and filtering on every listing cost
more than serving it.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

import semver
import structlog

from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import FLAT_NAME_PATTERN, PART_PATTERN, VERSION_PATTERN, Principal, ToolSpec, permitted

log = structlog.get_logger("toolplex.catalog")


@functools.lru_cache(maxsize=1024)
def _semver(version: str) -> semver.Version:
    """Parsed once per version string: a catalog repeats a handful of versions thousands of times."""
    return semver.Version.parse(version)


T = TypeVar("T")
MAX_VIEWS = 64  # permission views (distinct `tools` globs of API keys and JWT grants) kept per catalog


class BoundedCache(Generic[T]):
    """A least-recently-used map bounded in entries and in total weight (bytes, tools).

    Thread-safe: listings are derived on the event loop, retrieval in worker threads.
    """

    def __init__(self, max_entries: int, max_weight: int | None = None) -> None:
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._entries: OrderedDict[Hashable, tuple[T, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T], weigh: Callable[[T], int] = lambda _: 0) -> T:
        """The value under `key`, built (outside the lock) when it is not there yet."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[0]
        value = build()
        weight = weigh(value)
        if self.max_weight is not None and weight > self.max_weight:
            return value  # bigger than the whole cache: answered, never kept
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            self._entries[key] = (value, weight)
            self._weight += weight
            while len(self._entries) > self.max_entries or (
                self.max_weight is not None and self._weight > self.max_weight
            ):
                _, (_, dropped) = self._entries.popitem(last=False)
                self._weight -= dropped
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        return self._weight


def permission_view(principal: Principal | None) -> Hashable:
    """What decides which tools a caller sees: its globs (`Principal.may_call` reads nothing else), and whether
    it is an admin (who sees quarantined tools too, `gateway.pinning`); None: every tool but quarantined ones."""
    if principal is None:
        return None
    return ("admin", principal.tools) if principal.admin else principal.tools


def listable(principal: Principal | None, spec: ToolSpec) -> bool:
    """Listed to this caller: visible, permitted, and not quarantined unless the caller is an admin."""
    return (
        spec.visible
        and permitted(principal, spec)
        and (spec.quarantine is None or (principal is not None and principal.admin))
    )


def validate_spec(spec: ToolSpec) -> list[str]:
    """Problems with a tool's names or version, each naming its source."""
    where = f" (from {spec.source or spec.backend})"
    problems = []
    for label, part in (("toolkit", spec.toolkit), ("name", spec.name)):
        if not PART_PATTERN.match(part):
            problems.append(f"tool {spec.qualified_name!r}{where}: {label} {part!r} must match [A-Za-z0-9_]+")
    if not FLAT_NAME_PATTERN.match(spec.flat_name):
        problems.append(
            f"tool {spec.qualified_name!r}{where}: flat name {spec.flat_name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$"
        )
    try:
        _semver(spec.version)
    except ValueError:
        problems.append(f"tool {spec.qualified_name!r}{where}: version {spec.version!r} is not semver x.y.z")
    return problems


class Catalog:
    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        problems: list[str] = []
        by_flat: dict[str, dict[str, ToolSpec]] = defaultdict(dict)
        for spec in specs:
            found = validate_spec(spec)
            if found:
                problems.extend(found)
                continue
            versions = by_flat[spec.flat_name]
            for other in versions.values():
                if other.qualified_name != spec.qualified_name:
                    problems.append(
                        f"tools {other.qualified_name!r} (from {other.source or other.backend}) and "
                        f"{spec.qualified_name!r} (from {spec.source or spec.backend}) share the flat "
                        f"name {spec.flat_name!r}"
                    )
                    break
            else:
                if spec.version in versions:
                    other = versions[spec.version]
                    problems.append(
                        f"tool {spec.versioned_id!r} is served twice: by {other.source or other.backend} "
                        f"and by {spec.source or spec.backend}"
                    )
                else:
                    versions[spec.version] = spec
        if problems:
            raise ConfigError(problems)
        self._by_flat: dict[str, list[ToolSpec]] = _in_upstream_order(
            {
                flat: sorted(versions.values(), key=lambda s: _semver(s.version), reverse=True)
                if len(versions) > 1
                else list(versions.values())
                for flat, versions in sorted(by_flat.items())
            }
        )
        # Sorted and grouped once: the catalog never changes.
        self._every_latest = tuple(versions[0] for versions in self._by_flat.values())
        # Quarantined tools (`gateway.pinning`) are listed to admins only: never in the shared views.
        self._visible_latest = tuple(s for s in self._every_latest if s.visible and s.quarantine is None)
        self._all_versions = tuple(spec for versions in self._by_flat.values() for spec in versions)
        self._quarantined = any(s.quarantine is not None for s in self._all_versions)
        self._kits_every = _grouped(self._every_latest, by_name=True)
        self._kits_visible = _grouped(self._visible_latest, by_name=True)
        self._views: BoundedCache[tuple[ToolSpec, ...]] = BoundedCache(MAX_VIEWS)
        self._reachable: BoundedCache[frozenset[str]] = BoundedCache(MAX_VIEWS)
        self._grouped_views: BoundedCache[dict[str, tuple[ToolSpec, ...]]] = BoundedCache(MAX_VIEWS)
        self._size = len(self._all_versions)

    def __len__(self) -> int:
        return self._size

    def quarantined(self) -> list[ToolSpec]:
        """Every quarantined tool version (`gateway.pinning`), in listing order."""
        return [s for s in self._all_versions if s.quarantine is not None]

    def all_versions(self) -> list[ToolSpec]:
        return list(self._all_versions)

    def latest(self, *, visible_only: bool = True) -> list[ToolSpec]:
        """The newest version of each tool, in listing order (`_in_upstream_order`)."""
        return list(self._visible_latest if visible_only else self._every_latest)

    def toolkits(self, *, visible_only: bool = True) -> dict[str, list[ToolSpec]]:
        kits = self._kits_visible if visible_only else self._kits_every
        return {name: list(specs) for name, specs in kits.items()}

    def has_toolkit(self, name: str, *, visible_only: bool = False) -> bool:
        """True when a tool (hidden ones included, unless `visible_only`) is in this toolkit."""
        return name in (self._kits_visible if visible_only else self._kits_every)

    def listed(self, principal: Principal | None, *, latest_only: bool = True) -> tuple[ToolSpec, ...]:
        """The visible tools `principal` may call (`permitted`), in listing order; every version unless
        `latest_only`. Worked out once per permission view: every caller with the same globs sees the same."""
        view = permission_view(principal)
        sees_all = principal is None or (principal.tools is None and not (principal.admin and self._quarantined))
        if latest_only and sees_all:
            return self._visible_latest
        specs = self._every_latest if latest_only else self._all_versions

        def build() -> tuple[ToolSpec, ...]:
            return tuple(s for s in specs if listable(principal, s))

        return self._views.get((view, latest_only), build)

    def listed_toolkits(self, principal: Principal | None) -> dict[str, tuple[ToolSpec, ...]]:
        """`listed(principal)` grouped by toolkit, in the order they first appear (a shared value: never change it)."""
        return self._grouped_views.get(permission_view(principal), lambda: _grouped(self.listed(principal)))

    def reaches(self, principal: Principal | None, backend: str) -> bool:
        """May `principal` make requests of `backend` other than tool calls (its resources, prompts, files):
        it may call at least one of its tools (hidden ones included). Worked out once per permission view."""
        if principal is None or principal.tools is None:
            return True

        def build() -> frozenset[str]:
            return frozenset(s.backend for s in self._all_versions if permitted(principal, s))

        return backend in self._reachable.get(permission_view(principal), build)

    def versions_of(self, tool: str) -> list[str]:
        return [s.version for s in self._by_flat.get(self._flat(tool), [])]

    @staticmethod
    def _flat(tool: str) -> str:
        return tool.replace(".", "_", 1) if "." in tool else tool

    def resolve(self, tool: str, version: str | None = None) -> ToolSpec:
        """Find a tool by flat or qualified name; `version` is x.y.z, x (= x.0.0) or None (latest)."""
        versions = self._by_flat.get(self._flat(tool))
        if not versions:
            raise GatewayError.of(
                ErrorKind.NOT_FOUND,
                f"Tool '{self._flat(tool)}' was not found",
                developer_message=f"No tool named {tool!r} is in the catalog",
                details={"tool": tool},
            )
        if version is None:
            return versions[0]
        wanted = f"{version}.0.0" if version.isdigit() else version
        available = [s.version for s in versions]
        if VERSION_PATTERN.match(wanted):
            for spec in versions:
                if spec.version == wanted:
                    return spec
        raise GatewayError.of(
            ErrorKind.NOT_FOUND,
            f"Tool '{versions[0].flat_name}' was not found",
            developer_message=(
                f"{versions[0].qualified_name} version {wanted} is not available; "
                f"available versions: {', '.join(available)}"
            ),
            details={"tool": tool, "version": wanted, "available_versions": available},
        )


def _in_upstream_order(by_flat: dict[str, list[ToolSpec]]) -> dict[str, list[ToolSpec]]:
    """Tools sorted by flat name, except that an upstream server's tools (`ToolSpec.listed_at`) take the places
    its tools hold in that order in the order the server listed them: a client of a proxied server lists its
    tools as the server does, and every other tool stays where the name order puts it."""
    flats = list(by_flat)
    places: dict[str, list[int]] = defaultdict(list)
    for index, flat in enumerate(flats):
        if by_flat[flat][0].listed_at is not None:
            places[by_flat[flat][0].backend].append(index)
    ordered = list(flats)
    for indexes in places.values():
        upstream = sorted((flats[i] for i in indexes), key=lambda flat: by_flat[flat][0].listed_at or 0)
        for index, flat in zip(indexes, upstream, strict=True):
            ordered[index] = flat
    return {flat: by_flat[flat] for flat in ordered}


def _grouped(specs: Iterable[ToolSpec], *, by_name: bool = False) -> dict[str, tuple[ToolSpec, ...]]:
    """Tools by toolkit, each in the order given; toolkits sorted by name, or in the order they first appear."""
    kits: dict[str, list[ToolSpec]] = defaultdict(list)
    for spec in specs:
        kits[spec.toolkit].append(spec)
    return {name: tuple(kits[name]) for name in (sorted(kits) if by_name else kits)}


def distinct_specs(
    entries: Iterable[Any],
    build: Callable[[Any], ToolSpec],
    key: Callable[[ToolSpec], str],
    *,
    event: str,
    backend: str,
) -> list[ToolSpec]:
    """Tool specs built from an upstream's listing: an entry that does not build is skipped with a warning
    (one bad entry does not hide the others), and so is a second entry with the same key."""
    specs: dict[str, ToolSpec] = {}
    for index, entry in enumerate(entries):
        try:
            spec = build(entry)
        except ValueError as exc:
            log.warning(f"{event}_skipped", backend=backend, index=index, reason=str(exc))
            continue
        if key(spec) in specs:
            log.warning(f"{event}_duplicate", backend=backend, tool=key(spec))
            continue
        specs[key(spec)] = spec
    return list(specs.values())
