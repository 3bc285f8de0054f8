"""Per-backend routing: which tools a backend exposes, and under which names.

Applied to what a backend discovered, before the catalog is built, so names
depend only on the backend's own tools and its rules: adding or removing
another backend never renames anything.
"""

from __future__ import annotations

import dataclasses
from fnmatch import fnmatchcase
from typing import Any

from gateway.model import ToolSpec
from gateway.settings import BackendSettings


def _matches(spec: ToolSpec, patterns: list[str]) -> bool:
    """A pattern with a dot matches `Toolkit.Name`; without one, the bare name."""
    for pattern in patterns:
        target = spec.qualified_name if "." in pattern else spec.name
        if fnmatchcase(target, pattern):
            return True
    return False


def apply_routing(specs: list[ToolSpec], backend: BackendSettings) -> list[ToolSpec]:
    filters = backend.ROUTING_FILTERS  # else the backend applied its include/exclude itself
    include = (backend.include if filters else None) or ["*"]
    exclude = (backend.exclude if filters else None) or []
    everything = include == ["*"] and not exclude
    rename = backend.rename or {}
    hide = backend.hide or []
    timeouts = backend.timeouts or {}
    routed = []
    for spec in specs:
        if not everything and (not _matches(spec, include) or _matches(spec, exclude)):
            continue
        changes: dict[str, Any] = {"backend": backend.name}
        if backend.renames_toolkit:
            changes["toolkit"] = backend.routed_toolkit(spec.toolkit)
        if spec.name in rename:
            changes["name"] = rename[spec.name]
        elif spec.qualified_name in rename:
            changes["name"] = rename[spec.qualified_name]
        if backend.version:
            changes["version"] = backend.version
        if hide and _matches(spec, hide):
            changes["visible"] = False
        timeout = timeouts.get(spec.name, timeouts.get(spec.qualified_name))
        if timeout is not None:
            changes["timeout"] = float(timeout)
        if all(getattr(spec, field) == value for field, value in changes.items()):
            routed.append(spec)  # nothing to change: no copy (10,000 tools start faster)
        else:
            routed.append(dataclasses.replace(spec, **changes))
    return routed
