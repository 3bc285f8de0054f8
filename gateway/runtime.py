"""The running gateway: backends, catalog, dispatcher, state, auth, built from one config.

Fronts receive this object and use only its public attributes; it is the
single place that knows how the pieces are wired together.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from gateway.auth import Authenticator, build_authenticator
from gateway.backends import Backend, create_backend
from gateway.catalog import Catalog
from gateway.config import GatewayConfig
from gateway.dispatch import Dispatcher
from gateway.errors import ConfigError
from gateway.model import ToolSpec
from gateway.routing import apply_routing
from gateway.runs import RunRegistry
from gateway.state import MemoryStore, StateStore

try:
    GATEWAY_VERSION = version("toolplex")
except PackageNotFoundError:  # running from a source tree that was not installed
    GATEWAY_VERSION = "0.0.0"


async def discover_all(config: GatewayConfig) -> tuple[Catalog, dict[str, Backend]]:
    """Create every backend, discover its tools, route them, build the catalog."""
    backends: dict[str, Backend] = {}
    specs: list[ToolSpec] = []
    problems: list[str] = []
    for index, settings in enumerate(config.data["backends"]):
        backend = create_backend(settings)
        backends[settings["name"]] = backend
        try:
            discovered = await backend.discover()
        except ConfigError as exc:
            where = config.locate(("backends", index))
            problems.extend(f"{where}: {p}" for p in exc.problems)
            continue
        specs.extend(apply_routing(discovered, settings))
    if problems:
        for backend in backends.values():
            await backend.close()
        raise ConfigError(problems)
    try:
        return Catalog(specs), backends
    except ConfigError:
        for backend in backends.values():
            await backend.close()
        raise


class Gateway:
    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.version = GATEWAY_VERSION
        limits = config.section("limits")
        self.max_body_bytes: int = limits["max_body_bytes"]
        self.store: StateStore = MemoryStore(max_entries=config.section("state")["max_entries"])
        self.auth: Authenticator = build_authenticator(config.section("auth"))
        self.backends: dict[str, Backend] = {}
        self.dispatcher = Dispatcher(
            Catalog([]),
            self.backends,
            default_timeout=float(limits["default_timeout_s"]),
            max_timeout=float(limits["max_timeout_s"]),
            secrets=config.data.get("secrets") or {},
        )
        self.runs = RunRegistry(self.dispatcher)
        self.ready = False

    @property
    def catalog(self) -> Catalog:
        return self.dispatcher.catalog

    def front_settings(self, front: str) -> dict[str, Any]:
        return self.config.section("fronts", front)

    async def start(self) -> None:
        catalog, backends = await discover_all(self.config)
        self.backends.update(backends)
        self.dispatcher.catalog = catalog
        self.ready = True

    async def close(self) -> None:
        self.ready = False
        await self.runs.close()
        for backend in self.backends.values():
            await backend.close()
        await self.store.close()
