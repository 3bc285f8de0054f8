"""The running gateway: an immutable snapshot of config, catalog, backends and pipeline, swapped whole.

A `Snapshot` is everything one call needs. Discovery publishes a new snapshot
when the catalog changes; a reload (`Gateway.reload`) builds a new one from a
new configuration and swaps it in one assignment, so a call runs entirely on
the snapshot it arrived on. Backends whose settings did not change are carried
over as they are (no sidecar or upstream session restarted); the ones the new
configuration drops are closed once the calls of the old configuration ended.
Long-lived state (the store, sessions, pending runs, workspaces, the shutdown
tracking, the concurrency counters) belongs to the gateway, not to a snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import structlog

from gateway.auth import Authenticator, build_authenticator
from gateway.authorization import apply_providers
from gateway.backends import Backend, BackendContext
from gateway.background import BackgroundTasks
from gateway.cache import ResultCache
from gateway.catalog import Catalog
from gateway.config import GatewayConfig
from gateway.config_history import ConfigHistory
from gateway.console.status import publish as publish_console
from gateway.console.traffic import PUBLISH_EVERY_S as CONSOLE_PUBLISH_EVERY_S
from gateway.console.traffic import TrafficRecorder
from gateway.discovery import BackendState, Discovery
from gateway.errors import ConfigError, GatewayError
from gateway.forwarding import Forwarder
from gateway.homes import Homes
from gateway.limits import CallLimiter, RateLimiter
from gateway.middleware import build_middleware
from gateway.model import ToolSpec
from gateway.ownership import Shares
from gateway.pinning import PinAdmin, PinBook, Pinning, PinPolicy
from gateway.pipeline import Admission, CallPolicy, InFlight, Pipeline
from gateway.plugins import backend_kinds, resolve
from gateway.replicas import Replicas, advertised_url
from gateway.runs import RunRegistry
from gateway.state import MemoryStore, StateStore
from gateway.validation import ValidatorCache
from gateway.workspaces import Workspaces
from gateway.workspaces import install as install_workspaces
from gateway.workspaces import uninstall as uninstall_workspaces

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from gateway.config.models import StateSettings
    from gateway.settings import BackendSettings

log = structlog.get_logger("toolplex.runtime")

BACKEND_CLOSE_TIMEOUT_S = 10.0  # each backend's close (kill sidecars, release upstream sessions) at most this

try:
    GATEWAY_VERSION = version("toolplex")
except PackageNotFoundError:  # running from a source tree that was not installed
    GATEWAY_VERSION = "0.0.0"


STORE_WAIT_S = 10.0  # how long start-up waits for Redis to answer (it may start after the gateway)
STORE_PROBE_S = 0.5


def build_store(state: StateSettings, shares: Shares | None = None) -> StateStore:
    """The store `state.store` names; Redis only imported when used."""
    if state.store == "redis":
        from gateway.redis_store import RedisStore

        assert state.url is not None  # the settings model requires it
        return RedisStore(
            state.url, prefix=state.key_prefix, max_entries=state.max_entries, max_bytes=state.max_bytes, shares=shares
        )
    return MemoryStore(max_entries=state.max_entries, max_bytes=state.max_bytes, shares=shares)


def share_of(config: GatewayConfig) -> float:
    """One principal's share of every per-caller bound: `limits.principal_share` when callers authenticate;
    with authentication off every caller is the one anonymous principal, whose share is the whole."""
    auth = config.settings.auth
    authenticated = bool(auth.api_keys) or (auth.jwt is not None and bool(auth.jwt.secret_env))
    return config.settings.limits.principal_share if authenticated else 1.0


async def wait_for_store(store: StateStore, state: StateSettings) -> None:
    """Start-up waits a bounded time for a shared store, then refuses to start, saying where it looked."""
    ping = getattr(store, "ping", None)
    if ping is None:
        return
    deadline = asyncio.get_running_loop().time() + STORE_WAIT_S
    while True:
        try:
            await ping()
            return
        except GatewayError as exc:
            if asyncio.get_running_loop().time() >= deadline:
                raise ConfigError(
                    [
                        f"state.url: the Redis server at {shown_url(state.url or '')} did not answer within "
                        f"{STORE_WAIT_S:g} s ({exc.failure.developer_message})"
                    ]
                ) from None
        await asyncio.sleep(STORE_PROBE_S)


def shown_url(url: str) -> str:
    """A URL fit for logs: any password in it replaced."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def backend_context(
    config: GatewayConfig,
    workspaces: Workspaces | None = None,
    rediscover: Callable[[str], None] | None = None,
    shares: Shares | None = None,
    store: StateStore | None = None,
) -> BackendContext:
    return BackendContext(
        max_response_bytes=config.settings.limits.max_upstream_response_bytes,
        workspaces=workspaces,
        rediscover=rediscover,
        shares=shares if shares is not None else Shares(share_of(config)),
        store=store,
    )


def create_backend(settings: BackendSettings, context: BackendContext) -> Backend:
    """A backend of the kind its settings name, built by the adapter that provides that kind."""
    plugin = backend_kinds()[settings.kind]
    return resolve(plugin.factory)(settings, context)  # type: ignore[no-any-return]


def catalog_builder(config: GatewayConfig, cache: ResultCache) -> Callable[[list[ToolSpec], set[str]], Catalog]:
    """How discovered tools become a catalog: provider URLs, consistency, cache rules that fit."""
    authorization = config.settings.authorization

    def build(specs: list[ToolSpec], up: set[str]) -> Catalog:
        catalog = Catalog(apply_providers(specs, authorization))
        problems = cache.problems(catalog.all_versions(), backends=up)
        if problems:
            raise ConfigError(problems)
        return catalog

    return build


async def start_backends(backends: Mapping[str, Backend]) -> None:
    """`start()` every backend at once; the first failure is raised once all have finished trying."""
    results = await asyncio.gather(*(b.start() for b in backends.values()), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def close_backends(backends: Mapping[str, Backend]) -> None:
    """Close backends at once, each within BACKEND_CLOSE_TIMEOUT_S; one that fails or hangs stops no other."""
    await asyncio.gather(*(_close_backend(name, b) for name, b in backends.items()))


async def _close_backend(name: str, backend: Backend) -> None:
    try:
        async with asyncio.timeout(BACKEND_CLOSE_TIMEOUT_S):
            await backend.close()
    except TimeoutError:
        log.error("backend_close_timed_out", backend=name, seconds=BACKEND_CLOSE_TIMEOUT_S)
    except Exception:
        log.exception("backend_close_failed", backend=name)


async def report_backends(states: Mapping[str, BackendState], backends: Mapping[str, Backend]) -> list[dict[str, Any]]:
    """Each backend's discovery state with what its own `health()` says now (its breaker; down when it says so)."""
    report = []
    for name, state in states.items():
        shown = state.public()
        health = await backends[name].health()
        shown["breaker"] = health.breaker  # closed | half-open | open, None without an upstream
        if health.state != "up" and shown["state"] == "up":
            shown["state"], shown["error"] = health.state, health.detail
        if health.warnings:
            shown["warnings"] = list(health.warnings)
        report.append(shown)
    return report


async def discover_all(
    config: GatewayConfig, pinning: Pinning | None = None
) -> tuple[Catalog, dict[str, Backend], dict[str, BackendState]]:
    """Discover every backend once, strictly (for `toolplex check`, `toolplex tools` and, with `pinning`,
    `toolplex pins` on the in-memory store)."""
    context = backend_context(config)
    backends = {s.name: create_backend(s, context) for s in config.settings.backends}
    published: list[Catalog] = []
    cache = ResultCache.from_backends(config.settings.backends)
    discovery = Discovery(config, backends, catalog_builder(config, cache), published.append, pinning=pinning)
    try:
        await start_backends(backends)
        await discovery.refresh(strict=True)
    except BaseException:
        await close_backends(backends)
        raise
    return published[-1], backends, discovery.states


@dataclass(frozen=True)
class CallParts:
    """What the pipeline's stages read per call: one catalog and the backends that serve it."""

    catalog: Catalog
    backends: Mapping[str, Backend]


@dataclass(eq=False)
class Generation:
    """What one configuration built, shared by every snapshot of that configuration."""

    config: GatewayConfig
    backends: Mapping[str, Backend]
    authenticator: Authenticator
    middleware: list[Any]
    cache: ResultCache
    policy: CallPolicy
    app: ASGIApp | None = None
    in_flight: InFlight = field(default_factory=InFlight)


@dataclass(frozen=True)
class Snapshot:
    """Everything a call needs, immutable: a reload or a rediscovery builds a new one and swaps it in."""

    generation: Generation
    catalog: Catalog
    pipeline: Pipeline

    @property
    def config(self) -> GatewayConfig:
        return self.generation.config

    @property
    def backends(self) -> Mapping[str, Backend]:
        return self.generation.backends

    @property
    def authenticator(self) -> Authenticator:
        return self.generation.authenticator

    @property
    def app(self) -> ASGIApp:
        assert self.generation.app is not None, "the fronts are built with the generation"
        return self.generation.app


AppBuilder = Callable[["Gateway", GatewayConfig], "ASGIApp"]  # the fronts' app of one configuration


class Gateway:
    def __init__(self, config: GatewayConfig, *, app_builder: AppBuilder | None = None) -> None:
        from gateway.services import FrontServices

        self.version = GATEWAY_VERSION
        # One principal's share of every per-caller bound; one object, so a reload's new fraction reaches all.
        self.shares = Shares(share_of(config))
        self.store: StateStore = build_store(config.settings.state, self.shares)
        self.replicas = Replicas(self.store, lease_s=float(config.settings.state.lease_s))
        self.pin_book = PinBook(self.store)  # tool-definition pins and the changes counted (`gateway.pinning`)
        self.forwarder = Forwarder(self.replicas, timeout_s=float(config.settings.limits.max_timeout_s) + 60)
        self.homes = Homes(self.store, self.replicas, self.forwarder)
        self.workspaces = Workspaces(config.settings.workspaces, self.shares)
        self.admission = Admission()
        limits = config.settings.limits
        self.limiter = CallLimiter(limits.max_concurrent_calls, limits.max_concurrent_calls_per_principal)
        self.validators = ValidatorCache()
        self.services = FrontServices(self)
        self.runs = RunRegistry(self._call, shares=self.shares)
        self._app_builder = app_builder
        self.discovery: Discovery | None = None
        self.ready = False
        self._leaving: asyncio.Task[None] | None = None
        self.draining = False  # a stop is on its way (`server.drain_s`): /readyz fails while requests are served
        self.reloads = {"ok": 0, "failed": 0}
        self.history = ConfigHistory(config.source)  # generations and refused reloads (the console shows them)
        self.in_flight = InFlight()  # calls running on every configuration's pipeline (the console shows it)
        self.traffic = TrafficRecorder()  # every call by principal, front, backend and tool (`gateway.console`)
        self.traffic.replica = self.replicas.id
        self._reload_lock = asyncio.Lock()
        self._retiring: dict[asyncio.Task[None], dict[str, Backend]] = {}  # task -> the backends it waits to close
        self._rediscovering: dict[str, bool] = {}  # backend -> another run wanted after the current one
        self._background = BackgroundTasks()
        self._swapped = asyncio.Event()  # set (and replaced) when the snapshot is replaced
        self._at_close: list[Callable[[], Awaitable[None]]] = []  # fronts' own shutdown work (`at_close`)
        # Fronts told when a backend whose server said its tools changed was discovered again (`on_rediscovered`).
        self._on_rediscovered: list[Callable[[str], Awaitable[None]]] = []
        generation = self._generation(config, {})
        self.snapshot = self._snapshot(generation, Catalog([]))

    # ---- what tests and the operator surfaces read ----

    @property
    def config(self) -> GatewayConfig:
        return self.snapshot.config

    @property
    def catalog(self) -> Catalog:
        return self.snapshot.catalog

    @property
    def backends(self) -> Mapping[str, Backend]:
        return self.snapshot.backends

    @property
    def pipeline(self) -> Pipeline:
        return self.snapshot.pipeline

    @property
    def running(self) -> int:
        """Calls in progress right now (in any front, or in the background)."""
        return self.admission.running

    async def backend_states(self) -> list[dict[str, Any]]:
        discovery, backends = self.discovery, self.snapshot.backends  # swapped together: read them together
        return await report_backends(discovery.states, backends) if discovery is not None else []

    @property
    def pins(self) -> PinAdmin:
        """List, diff, approve and reject tool-definition pins (`gateway.pinning`): what the console calls. A
        decision made here rediscovers the backend at once; other replicas follow at their next discovery."""
        pinning = self.discovery.pinning if self.discovery is not None else None
        policy = pinning.policy if pinning is not None else PinPolicy.from_config(self.snapshot.config)
        return PinAdmin(self.pin_book, policy, rediscover=self.rediscover, catalog=lambda: self.snapshot.catalog)

    async def _call(self, call: Any) -> Any:
        return await self.snapshot.pipeline(call)

    # ---- building ----

    def _generation(self, config: GatewayConfig, backends: Mapping[str, Backend], *, fronts: bool = True) -> Generation:
        """Everything of one configuration but its catalog; ConfigError when some part of it is wrong."""
        settings = config.settings
        generation = Generation(
            config=config,
            backends=MappingProxyType(dict(backends)),
            authenticator=build_authenticator(settings.auth, public_url=settings.server.public_url),
            middleware=build_middleware(settings.middleware, call_log=settings.logging.calls),
            cache=ResultCache.from_backends(settings.backends, self.shares),
            policy=CallPolicy(
                default_timeout=float(settings.limits.default_timeout_s),
                max_timeout=float(settings.limits.max_timeout_s),
                secrets=dict(settings.secrets),
            ),
            in_flight=InFlight(self.in_flight),
        )
        if fronts:
            self._build_fronts(generation)
        return generation

    def _build_fronts(self, generation: Generation) -> None:
        """The fronts' app of a generation (fronts may configure services: built only once all else is ready)."""
        if self._app_builder is not None:
            with self.services.building(generation.config):
                generation.app = self._app_builder(self, generation.config)

    def _snapshot(self, generation: Generation, catalog: Catalog) -> Snapshot:
        pipeline = Pipeline(
            CallParts(catalog, generation.backends),
            policy=generation.policy,
            admission=self.admission,
            limiter=self.limiter,
            middleware=generation.middleware,
            cache=generation.cache,
            validators=self.validators,
            in_flight=generation.in_flight,
            rates=RateLimiter.from_settings(generation.config.settings.limits, self.store),
            recorders=(self.traffic.record,),
        )
        return Snapshot(generation, catalog, pipeline)

    def _swap(self, snapshot: Snapshot) -> None:
        """Make `snapshot` current and wake whoever waits for the next one (`swapped`)."""
        self.snapshot = snapshot
        swapped, self._swapped = self._swapped, asyncio.Event()
        swapped.set()

    async def swapped(self) -> None:
        """Return once the current snapshot is replaced (a reload, a rediscovery, the start)."""
        await self._swapped.wait()

    def on_rediscovered(self, hook: Callable[[str], Awaitable[None]]) -> None:
        """Run `hook(backend name)` each time a backend's server said its tools changed and the backend has
        been discovered again (`rediscover`), whether or not the catalog changed."""
        self._on_rediscovered.append(hook)

    def at_close(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run `hook` at close, before the backends close (see `FrontServices.at_close`)."""
        self._at_close.append(hook)

    async def _close_hooks(self) -> None:
        """Run what fronts asked to run at close (`at_close`), newest first; one failing stops none of the others."""
        while self._at_close:
            hook = self._at_close.pop()
            try:
                await hook()
            except Exception as exc:  # a front's own shutdown trouble must not keep backends open
                log.warning("front_close_failed", error=f"{type(exc).__name__}: {exc}")

    def _publish(self, catalog: Catalog) -> None:
        """Discovery found a new catalog: the same generation, a new snapshot (one assignment)."""
        self._swap(self._snapshot(self.snapshot.generation, catalog))

    # ---- life ----

    async def start(self) -> None:
        """Start and discover every backend; a configuration error stops the start, an unreachable upstream not."""
        config = self.snapshot.config
        context = backend_context(config, self.workspaces, self.rediscover, self.shares, self.store)
        backends = {s.name: create_backend(s, context) for s in config.settings.backends}
        generation = replace(self.snapshot.generation, backends=MappingProxyType(backends))
        self._swap(self._snapshot(generation, Catalog([])))
        for warning in config.warnings:
            log.warning("config_warning", problem=warning)
        await wait_for_store(self.store, config.settings.state)
        install_workspaces(self.workspaces)
        try:
            policy = PinPolicy.from_config(config)
        except ConfigError:
            uninstall_workspaces(self.workspaces)
            raise
        self.discovery = Discovery(
            config,
            backends,
            catalog_builder(config, generation.cache),
            self._publish,
            pinning=Pinning(self.pin_book, policy),
        )
        try:
            await start_backends(backends)
            await self.discovery.refresh(strict=True)
        except BaseException:
            await close_backends(backends)
            uninstall_workspaces(self.workspaces)
            raise
        self.discovery.start_interval(config.settings.discovery.interval_s)
        self.ready = True
        self._background.spawn(self._console_loop(), name="console-publish")

    async def _console_loop(self) -> None:
        """This replica's traffic and status, in the store every few seconds: any replica's console shows all."""
        while True:
            await publish_console(self)
            await asyncio.sleep(CONSOLE_PUBLISH_EVERY_S)

    async def reload(self, config: GatewayConfig) -> bool:
        """Swap in a snapshot built from `config`; on any problem keep the running one and say why.

        Backends whose settings (and context) did not change are carried over as
        they are; new or changed ones are started and discovered before the swap;
        the ones left behind are closed once the old configuration's calls ended.
        """
        async with self._reload_lock:
            try:
                changed = await self._reload(config)
            except ConfigError as exc:
                self.reloads["failed"] += 1
                self.history.refused(config.source, "; ".join(exc.problems))
                log.error("config_reload_failed", source=config.source, problems=exc.problems)
                return False
            except Exception as exc:
                self.reloads["failed"] += 1
                self.history.refused(config.source, f"{type(exc).__name__}: {exc}")
                log.exception("config_reload_failed", source=config.source, error=f"{type(exc).__name__}: {exc}")
                return False
            self.reloads["ok"] += 1
            self.history.applied(config.source, ", ".join(f"{k}: {v}" for k, v in changed.items()))
            log.info("config_reloaded", source=config.source, **changed)
            return True

    async def _reload(self, config: GatewayConfig) -> dict[str, Any]:
        old = self.snapshot
        old_settings = {s.name: s for s in old.config.settings.backends}
        context = backend_context(config, self.workspaces, self.rediscover, self.shares, self.store)
        same_context = context == backend_context(old.config, self.workspaces, shares=self.shares)
        kept: dict[str, Backend] = {}
        fresh: dict[str, Backend] = {}
        for settings in config.settings.backends:
            current = old.backends.get(settings.name)
            if current is not None and same_context and old_settings.get(settings.name) == settings:
                kept[settings.name] = current
            else:
                fresh[settings.name] = create_backend(settings, context)
        backends = {s.name: kept.get(s.name) or fresh[s.name] for s in config.settings.backends}
        try:
            generation = self._generation(config, backends, fronts=False)
            discovery = Discovery(
                config,
                backends,
                catalog_builder(config, generation.cache),
                lambda catalog: None,
                carried={n: s for n, s in (self.discovery.states if self.discovery else {}).items() if n in kept},
                pinning=Pinning(self.pin_book, PinPolicy.from_config(config)),
            )
            await start_backends(fresh)
            catalog = await discovery.refresh(strict=True, only=set(fresh), repin=True)
            self._build_fronts(generation)  # last: nothing after it can refuse the reload
        except BaseException:
            await close_backends(fresh)
            raise
        assert catalog is not None
        restart = [
            k
            for k in ("server", "state", "workspaces")
            if getattr(old.config.settings, k) != getattr(config.settings, k)
        ]
        if restart:
            log.warning("config_reload_needs_restart", sections=restart)
        self.shares.fraction = share_of(config)
        self.limiter.max_total = config.settings.limits.max_concurrent_calls
        self.limiter.max_per_principal = config.settings.limits.max_concurrent_calls_per_principal
        discovery.publish = self._publish
        previous = self.discovery
        self.discovery = discovery
        self._swap(self._snapshot(generation, catalog))  # new calls run on the new snapshot
        if previous is not None:
            await previous.stop()
        if self.ready:
            discovery.start_interval(config.settings.discovery.interval_s)
        gone = {name: b for name, b in old.backends.items() if backends.get(name) is not b}
        if gone:
            self._retire(old.generation, gone)
        return {
            "backends_kept": sorted(kept),
            "backends_started": sorted(fresh),
            "backends_closed": sorted(gone),
            "tools": len(catalog),
        }

    def _retire(self, generation: Generation, backends: Mapping[str, Backend]) -> None:
        """Close backends the new configuration dropped, once the old configuration's calls ended (bounded)."""
        grace = float(generation.config.settings.server.shutdown_grace_s)
        waiting = dict(backends)  # emptied when the task stops waiting and starts closing them

        async def retire() -> None:
            if not await generation.in_flight.idle(grace):
                log.warning("reload_closing_busy_backends", backends=sorted(waiting), calls=generation.in_flight.count)
            closing = dict(waiting)
            waiting.clear()
            await close_backends(closing)

        task = asyncio.get_running_loop().create_task(retire(), name="retire-backends")
        self._retiring[task] = waiting
        task.add_done_callback(lambda done: self._retiring.pop(done, None))

    def leave(self) -> asyncio.Task[None]:
        """Say in the store that this replica is stopping (`Replicas.leave`): its sessions move to the others."""
        if self._leaving is None:
            self._leaving = asyncio.get_running_loop().create_task(self.replicas.leave(), name="leave")
        return self._leaving

    async def drain(self, grace: float, quiet: asyncio.Event | None = None) -> int:
        """Wait up to `grace` s for running calls (and, with `quiet`, for the server's last connections), then end
        the rest with an answer and take no new call (`Admission.drain`)."""
        self.ready = False
        return await self.admission.drain(grace, quiet=quiet)

    def hurry(self) -> None:
        self.admission.hurry()

    async def close(self) -> None:
        self.ready = False
        self._background.cancel_all()
        await self._close_hooks()
        if self.discovery is not None:
            await self.discovery.stop()
        await self.runs.close()
        retiring = list(self._retiring.items())
        for task, waiting in retiring:  # still waiting for old calls: stop waiting, close those backends here
            if waiting:
                task.cancel()
        await asyncio.gather(*(task for task, _ in retiring), return_exceptions=True)
        for _, waiting in retiring:
            await close_backends(waiting)
        await close_backends(self.snapshot.backends)
        uninstall_workspaces(self.workspaces)
        self.workspaces.close()
        await self.forwarder.close()
        await self.replicas.deregister()
        await self.store.close()

    def rediscover(self, name: str) -> None:
        """Discover one backend again soon (its server said its tools changed); at most one run queued per backend."""
        if name in self._rediscovering:
            self._rediscovering[name] = True  # a change during the run: one more run after it
            return
        self._rediscovering[name] = False

        async def run() -> None:
            try:
                while True:
                    if self.discovery is not None and self.ready:
                        await self.discovery.refresh(only={name})
                    if not self._rediscovering.get(name):
                        break
                    self._rediscovering[name] = False
                for hook in list(self._on_rediscovered):
                    await hook(name)
            except Exception:
                log.exception("rediscovery_failed", backend=name)
            finally:
                self._rediscovering.pop(name, None)

        if self._background.spawn(run(), name=f"rediscover-{name}") is None:  # no loop: the gateway is not running
            self._rediscovering.pop(name, None)

    async def store_state(self) -> dict[str, Any]:
        """The state store as readiness shows it: its kind, and whether it answers (a shared one may not)."""
        kind = self.snapshot.config.settings.state.store
        ping = getattr(self.store, "ping", None)
        if ping is None:
            return {"store": kind, "state": "up"}
        try:
            await ping()
        except GatewayError as exc:
            return {"store": kind, "state": "unreachable", "error": exc.failure.developer_message}
        return {"store": kind, "state": "up", "replica": self.replicas.id}

    async def listening(self, host: str, port: int) -> None:
        """The server is bound: register where other replicas reach this one."""
        state = self.snapshot.config.settings.state
        try:
            await self.replicas.register(advertised_url(host, port, state.advertise_url))
        except GatewayError as exc:
            log.error("replica_not_registered", error=exc.failure.message)
