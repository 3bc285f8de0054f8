"""The running gateway: backends, catalog, dispatcher, state, auth, built from one config.

Fronts receive this object and use only its public attributes; it is the
single place that knows how the pieces are wired together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import structlog

from gateway.auth import Authenticator, build_authenticator
from gateway.authorization import apply_providers
from gateway.backends import Backend, create_backend
from gateway.cache import ResultCache
from gateway.catalog import Catalog
from gateway.config import GatewayConfig
from gateway.discovery import BackendState, Discovery
from gateway.dispatch import Dispatcher
from gateway.errors import ConfigError
from gateway.limits import CallLimiter
from gateway.middleware import build_middleware
from gateway.model import ToolSpec
from gateway.runs import RunRegistry
from gateway.state import MemoryStore, StateStore
from gateway.upstream import LIMIT_KEY
from gateway.workspaces import Workspaces, WorkspaceSettings
from gateway.workspaces import install as install_workspaces
from gateway.workspaces import uninstall as uninstall_workspaces

log = structlog.get_logger("toolplex.runtime")

BACKEND_CLOSE_TIMEOUT_S = 10.0  # each backend's close (kill sidecars, release upstream sessions) at most this

try:
    GATEWAY_VERSION = version("toolplex")
except PackageNotFoundError:  # running from a source tree that was not installed
    GATEWAY_VERSION = "0.0.0"


def create_backends(config: GatewayConfig) -> dict[str, Backend]:
    # The gateway-wide bound on upstream answers reaches each upstream backend's Upstream through its settings.
    limit = {LIMIT_KEY: config.section("limits").get(LIMIT_KEY)}
    return {
        settings["name"]: create_backend({**settings, **limit} if "url" in settings else settings)
        for settings in config.data["backends"]
    }


def catalog_builder(config: GatewayConfig) -> Callable[[list[ToolSpec], set[str]], Catalog]:
    """How discovered tools become a catalog: provider URLs, consistency, cache rules that fit."""
    cache = ResultCache.from_backends(config.data["backends"])
    authorization = config.section("authorization")

    def build(specs: list[ToolSpec], up: set[str]) -> Catalog:
        catalog = Catalog(apply_providers(specs, authorization))
        problems = cache.problems(catalog.all_versions(), backends=up)
        if problems:
            raise ConfigError(problems)
        return catalog

    return build


async def discover_all(config: GatewayConfig) -> tuple[Catalog, dict[str, Backend], dict[str, BackendState]]:
    """Discover every backend once, strictly (for `toolplex check` and `toolplex tools`)."""
    backends = create_backends(config)
    published: list[Catalog] = []
    discovery = Discovery(config, backends, catalog_builder(config), published.append)
    try:
        await discovery.refresh(strict=True)
    except ConfigError:
        for backend in backends.values():
            await backend.close()
        raise
    return published[-1], backends, discovery.states


class Gateway:
    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.version = GATEWAY_VERSION
        limits = config.section("limits")
        self.max_body_bytes: int = limits["max_body_bytes"]
        self.max_json_depth: int = limits["max_json_depth"]
        self.store: StateStore = MemoryStore(max_entries=config.section("state")["max_entries"])
        self.auth: Authenticator = build_authenticator(config.section("auth"))
        self.backends: dict[str, Backend] = {}
        self.dispatcher = Dispatcher(
            Catalog([]),
            self.backends,
            default_timeout=float(limits["default_timeout_s"]),
            max_timeout=float(limits["max_timeout_s"]),
            secrets=config.data.get("secrets") or {},
            limiter=CallLimiter(limits["max_concurrent_calls"], limits["max_concurrent_calls_per_principal"]),
        )
        self.runs = RunRegistry(self.dispatcher)
        # Session workspaces: served by the ToolServerNode front, used by workspace tools (FileSystemEnv).
        self.workspaces = Workspaces(WorkspaceSettings.from_config(config.section("workspaces")))
        self.discovery: Discovery | None = None
        self.ready = False

    @property
    def catalog(self) -> Catalog:
        return self.dispatcher.catalog

    def front_settings(self, front: str) -> dict[str, Any]:
        return self.config.section("fronts", front)

    def _publish(self, catalog: Catalog) -> None:
        self.dispatcher.catalog = catalog  # one assignment: requests see the old or the new catalog, whole

    async def start(self) -> None:
        """Discover every backend; a configuration error stops the start, an unreachable upstream does not."""
        self.dispatcher.middleware = build_middleware(self.config.data.get("middleware") or [])
        self.dispatcher.cache = ResultCache.from_backends(self.config.data["backends"])
        self.backends.update(create_backends(self.config))
        install_workspaces(self.workspaces)
        self.discovery = Discovery(self.config, self.backends, catalog_builder(self.config), self._publish)
        try:
            await self.discovery.refresh(strict=True)
        except BaseException:
            await self._close_backends()
            uninstall_workspaces(self.workspaces)
            raise
        interval = float(self.config.section("discovery").get("interval_s", 30))
        if interval > 0:
            self.discovery.start_interval(interval)
        self.ready = True

    def backend_states(self) -> list[dict[str, Any]]:
        return [state.public() for state in self.discovery.states.values()] if self.discovery else []

    async def _close_backends(self) -> None:
        """Close every backend at once, each within BACKEND_CLOSE_TIMEOUT_S; one that fails or hangs stops no other."""
        await asyncio.gather(*(self._close_backend(name, b) for name, b in self.backends.items()))

    @staticmethod
    async def _close_backend(name: str, backend: Backend) -> None:
        try:
            async with asyncio.timeout(BACKEND_CLOSE_TIMEOUT_S):
                await backend.close()
        except TimeoutError:
            log.error("backend_close_timed_out", backend=name, seconds=BACKEND_CLOSE_TIMEOUT_S)
        except Exception:
            log.exception("backend_close_failed", backend=name)

    async def drain(self, grace: float) -> int:
        """Stop taking calls; wait up to `grace` s for running ones, then end the rest with an answer."""
        self.ready = False
        return await self.dispatcher.drain(grace)

    async def close(self) -> None:
        self.ready = False
        if self.discovery is not None:
            await self.discovery.stop()
        await self.runs.close()
        await self._close_backends()
        uninstall_workspaces(self.workspaces)
        self.workspaces.close()
        await self.store.close()
