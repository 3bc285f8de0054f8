"""All tools of all backends, every version, resolvable by name and version.

A catalog is immutable once built; a reload builds a new one and swaps it in
whole, so a request never sees half of a change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import semver
import structlog

from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import FLAT_NAME_PATTERN, PART_PATTERN, VERSION_PATTERN, ToolSpec

log = structlog.get_logger("toolplex.catalog")


def _semver(version: str) -> semver.Version:
    return semver.Version.parse(version)


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
        self._by_flat: dict[str, list[ToolSpec]] = {
            flat: sorted(versions.values(), key=lambda s: _semver(s.version), reverse=True)
            for flat, versions in by_flat.items()
        }

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_flat.values())

    def all_versions(self) -> list[ToolSpec]:
        return [spec for flat in sorted(self._by_flat) for spec in self._by_flat[flat]]

    def latest(self, *, visible_only: bool = True) -> list[ToolSpec]:
        """The newest version of each tool, sorted by flat name."""
        out = [versions[0] for _, versions in sorted(self._by_flat.items())]
        return [s for s in out if s.visible] if visible_only else out

    def toolkits(self, *, visible_only: bool = True) -> dict[str, list[ToolSpec]]:
        kits: dict[str, list[ToolSpec]] = defaultdict(list)
        for spec in self.latest(visible_only=visible_only):
            kits[spec.toolkit].append(spec)
        return dict(sorted(kits.items()))

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
