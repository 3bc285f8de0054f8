"""Keeping the catalog current: discover every backend at start and on an interval.

Each backend's last good tool list is kept: an upstream that goes down keeps its
tools in the catalog (calls to them fail fast as "upstream unavailable"), so names
stay stable and nothing else is affected. The catalog is rebuilt from what every
backend last said and swapped in whole only when it is consistent. A configuration
error (a Python import path that does not exist) stops the start; an unreachable
upstream does not: its tools appear when it comes up. An upstream's whole discovery,
retries included, is bounded by its `timeouts_s.total`, so one that accepts connections
and never answers delays the start (and each rediscovery) by that much at most.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.backends import Backend
from gateway.catalog import Catalog
from gateway.config import GatewayConfig
from gateway.errors import ConfigError, GatewayError
from gateway.model import ToolSpec
from gateway.pinning import Pinning
from gateway.routing import apply_routing
from gateway.settings import BackendSettings, UpstreamBackendSettings
from gateway.timestamps import utc_iso

log = structlog.get_logger("toolplex.discovery")


def discovery_timeout(settings: BackendSettings) -> float | None:
    """How long one discovery of this backend may take, retries included: an upstream's `timeouts_s.total`.

    Local backends (Python, TypeScript) are not bounded here: their discovery runs their own
    code, not a request to a peer that may hang.
    """
    if isinstance(settings, UpstreamBackendSettings):
        return float(settings.timeouts_s.total)
    return None


class DiscoveryTimeout(Exception):
    """A backend's discovery outlasted its bound (`discovery_timeout`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"discovery did not finish within {seconds:g} s (timeouts_s.total)")


async def _bounded_discover(backend: Backend, budget: float | None) -> list[ToolSpec]:
    """`backend.discover()` within `budget` seconds (None: unbounded); DiscoveryTimeout when it is exceeded."""
    bound = asyncio.timeout(budget)
    try:
        async with bound:
            return await backend.discover()
    except TimeoutError:
        if bound.expired():  # our bound, not a TimeoutError of the backend's own
            raise DiscoveryTimeout(budget or 0.0) from None
        raise


@dataclass
class BackendState:
    name: str
    kind: str
    state: str = "starting"  # starting | up | down
    tools: int = 0
    error: str | None = None  # why it is down now
    checked_at: str | None = None
    # The latest discovery failure and when, kept once the backend is up again (what went wrong last time).
    last_error: str | None = None
    last_error_at: str | None = None
    specs: list[ToolSpec] = field(default_factory=list, repr=False)
    routed: list[ToolSpec] = field(default_factory=list, repr=False)  # `specs` before pinning marked any

    def public(self) -> dict[str, Any]:
        """What discovery knows; readiness adds the backend's own `health()` (its breaker) to it."""
        return {
            "name": self.name,
            "kind": self.kind,
            "state": self.state,
            "tools": self.tools,
            "error": self.error,
            "checked_at": self.checked_at,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
        }


class Discovery:
    def __init__(
        self,
        config: GatewayConfig,
        backends: dict[str, Backend],
        build: Callable[[list[ToolSpec], set[str]], Catalog],
        publish: Callable[[Catalog], None],
        *,
        carried: Mapping[str, BackendState] | None = None,
        pinning: Pinning | None = None,
    ) -> None:
        self.config = config
        self.backends = backends
        self.build = build  # (specs, names of the backends that are up) -> Catalog, or ConfigError
        self.publish = publish
        self.pinning = pinning  # checks upstream tools' definitions against their pins (`gateway.pinning`)
        carried = carried or {}
        # A reload carries over what kept backends last said, so they need no rediscovery before the swap.
        self.states: dict[str, BackendState] = {
            b.name: carried.get(b.name) or BackendState(b.name, b.kind) for b in config.settings.backends
        }
        self._task: asyncio.Task[None] | None = None
        self._published: Catalog | None = None
        self._last: tuple[list[ToolSpec], set[str]] = ([], set())

    async def _discover_one(self, index: int, settings: BackendSettings, strict: bool) -> None:
        state = self.states[settings.name]
        backend = self.backends[settings.name]
        try:
            discovered = await _bounded_discover(backend, discovery_timeout(settings))
        except DiscoveryTimeout as exc:
            state.state, state.error = "down", str(exc)
        except ConfigError as exc:
            if strict:
                where = self.config.locate(("backends", index))
                raise ConfigError([f"{where}: {p}" for p in exc.problems]) from None
            state.state, state.error = "down", "; ".join(exc.problems)
        except GatewayError as exc:
            state.state, state.error = "down", exc.failure.message
        except Exception as exc:  # an upstream may answer anything: never let it stop the gateway
            log.exception("discovery_failed", backend=state.name)
            state.state, state.error = "down", f"{type(exc).__name__}: {exc}"
        else:
            state.routed = apply_routing(discovered, settings)
            state.specs = await self._pinned(settings, state)
            state.state, state.error, state.tools = "up", None, len(state.specs)
        state.checked_at = utc_iso()
        if state.state == "down":
            state.last_error, state.last_error_at = state.error, state.checked_at
            log.warning("backend_down", backend=state.name, error=state.error)

    async def _pinned(self, settings: BackendSettings, state: BackendState) -> list[ToolSpec]:
        """The backend's routed tools checked against their pins (quarantined ones marked), as listed."""
        backend = self.backends[settings.name]
        specs = state.routed
        if self.pinning is not None:
            specs = await self.pinning.check(settings, backend, specs)
        return _as_listed(backend, specs)

    async def _repin(self, settings: BackendSettings) -> None:
        """Check a backend's last discovered tools against the pins again, without asking the backend."""
        state = self.states[settings.name]
        if state.state == "up" and state.routed:
            state.specs = await self._pinned(settings, state)

    async def refresh(
        self, *, strict: bool = False, only: set[str] | None = None, repin: bool = False
    ) -> Catalog | None:
        """Discover every backend (or `only` those), rebuild the catalog and publish it; None when inconsistent.
        With `repin`, the others' last tools are checked against the pins again (a reload's new pin file)."""
        results = await asyncio.gather(
            *(
                self._discover_one(i, b, strict) if only is None or b.name in only else self._repin(b)
                for i, b in enumerate(self.config.settings.backends)
                if only is None or b.name in only or repin
            ),
            return_exceptions=True,
        )
        problems = [p for r in results if isinstance(r, ConfigError) for p in r.problems]
        if problems:
            raise ConfigError(problems)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        specs = [spec for state in self.states.values() for spec in state.specs]
        up = {name for name, state in self.states.items() if state.state == "up"}
        if self._published is not None and (specs, up) == self._last:
            return self._published  # nothing changed: keep the catalog (and what fronts derived from it)
        try:
            catalog = self.build(specs, up)
        except ConfigError as exc:
            if strict:
                raise
            log.error("catalog_rejected", problems=exc.problems)  # keep serving the previous catalog
            return None
        self.publish(catalog)
        self._published, self._last = catalog, (specs, up)
        return catalog

    def start_interval(self, interval_s: float) -> None:
        """Rediscover every `interval_s` seconds (0: never)."""
        if interval_s <= 0:
            return

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_s)
                started = time.monotonic()
                try:
                    await self.refresh()
                except Exception:
                    log.exception("discovery_loop_failed")
                log.debug("discovery_refreshed", seconds=round(time.monotonic() - started, 3))

        self._task = asyncio.get_running_loop().create_task(loop(), name="discovery")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


def _as_listed(backend: Backend, specs: list[ToolSpec]) -> list[ToolSpec]:
    """A backend that relays an upstream server's protocol lists its tools in the server's order
    (`ToolSpec.listed_at`, kept by the catalog); the gateway's own tools are listed by name."""
    if getattr(backend, "relays", None) is None:
        return specs
    return [dataclasses.replace(spec, listed_at=index) for index, spec in enumerate(specs)]
