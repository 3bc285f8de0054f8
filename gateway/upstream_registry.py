"""Every open `gateway.upstream.Upstream` by backend name: how the core shows breaker states (/readyz,
/metrics) without knowing in which attribute each backend keeps its clients.

Apart from `gateway.upstream` so that reading the states imports no HTTP client: a gateway whose
backends have no upstream (in-process tools) never loads httpx or aiohttp.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from gateway.breaker import STATE_VALUES

if TYPE_CHECKING:
    from gateway.upstream import Upstream


class UpstreamRegistry:
    """Weak references only; an upstream leaves when closed, so the registry never outgrows the configuration."""

    def __init__(self) -> None:
        self._by_name: dict[str, list[weakref.ref[Upstream]]] = {}

    def add(self, upstream: Upstream) -> None:
        refs = [r for r in self._by_name.get(upstream.name, []) if r() is not None]
        self._by_name[upstream.name] = [*refs, weakref.ref(upstream)]

    def remove(self, upstream: Upstream) -> None:
        refs = [r for r in self._by_name.get(upstream.name, []) if r() not in (None, upstream)]
        if refs:
            self._by_name[upstream.name] = refs
        else:
            self._by_name.pop(upstream.name, None)

    def of(self, name: str) -> list[Upstream]:
        return [u for u in (r() for r in self._by_name.get(name, [])) if u is not None]

    def breaker_state(self, name: str) -> str | None:
        """The worst breaker state among the backend's upstreams; None when it has none."""
        states = [u.breaker.state for u in self.of(name)]
        return max(states, key=STATE_VALUES.__getitem__) if states else None


UPSTREAMS = UpstreamRegistry()
