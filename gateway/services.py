"""What a front may do, and nothing more: the only object a front receives.

Permission filtering and version resolution are decided here, once, for every
front. Calls run on the snapshot current when they arrive, so a reload never
changes a call midway. Pending calls (`runs`) and detached runs (`detached`: OXP's
`call_id`, ToolServerNode's 450 handles) are services too, and so is where state lives (`homes`),
so a front holds no state of its own and can be rebuilt on every reload.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from gateway.backends import Backend, Feature
from gateway.catalog import BoundedCache, permission_view
from gateway.detached import DetachedRuns
from gateway.errors import Failure, GatewayError
from gateway.forwarding import Forwarder
from gateway.homes import Homes
from gateway.model import Call, Outcome, Principal, ToolSpec, permitted
from gateway.oauth.scopes import note_insufficient_scope
from gateway.ownership import Shares
from gateway.plugins import Presenter, fronts, resolve
from gateway.replicas import Replicas
from gateway.retrieval import retrieve
from gateway.runs import RunRegistry
from gateway.sessions import SessionRegistry
from gateway.state import StateStore
from gateway.workspaces import Workspaces

if TYPE_CHECKING:
    from gateway.config import GatewayConfig
    from gateway.config.models import LimitsSettings
    from gateway.pinning import PinAdmin
    from gateway.runtime import Gateway


log = structlog.get_logger("toolplex.services")

LISTING_ENTRIES = 16  # encoded listings kept: (front, listing, variant) x permission views
LISTING_BYTES = 64 * 1024 * 1024  # ... and their total size (10,000 tools list in a few MB per front)


class FrontServices:
    """The narrow interface between fronts and the core (see `gateway.plugins.FrontPlugin`)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._sessions: dict[str, SessionRegistry] = {}
        self._detached: dict[str, DetachedRuns] = {}
        # Encoded listings of the current snapshot (see `listing`), bounded in entries and bytes.
        self._listings: BoundedCache[bytes] = BoundedCache(LISTING_ENTRIES, LISTING_BYTES)
        self._listed_for: weakref.ref[Any] | None = None
        self._derived: dict[Hashable, tuple[weakref.ref[Any], Any]] = {}
        self._kept: dict[Hashable, Any] = {}  # fronts' own long-lived objects (`kept`)
        self._building: GatewayConfig | None = None  # the configuration whose fronts are being built

    @contextlib.contextmanager
    def building(self, config: GatewayConfig) -> Iterator[None]:
        """While fronts are built for `config`, configuration answers (backends, limits) come from it."""
        self._building = config
        try:
            yield
        finally:
            self._building = None

    @property
    def _config(self) -> GatewayConfig:
        return self._building if self._building is not None else self._gateway.snapshot.config

    # ---- the gateway as a whole ----

    @property
    def version(self) -> str:
        return self._gateway.version

    @property
    def ready(self) -> bool:
        return self._gateway.ready

    @property
    def limits(self) -> LimitsSettings:
        """Request bounds a front applies while reading (body size, JSON depth, uploads)."""
        return self._config.settings.limits

    @property
    def public_url(self) -> str | None:
        """`server.public_url`: how clients reach the gateway, for the documents a front publishes."""
        return self._config.settings.server.public_url

    @property
    def auth_enabled(self) -> bool:
        """Callers are told apart (API keys or JWTs): what one is answered may not be another's."""
        return self._gateway.snapshot.authenticator.enabled

    def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """The caller named by the request's credentials; raises GatewayError (unauthenticated) when they fail."""
        return self._gateway.snapshot.authenticator.authenticate(headers)

    # ---- the catalog, as this caller may see it ----

    def tools(self, principal: Principal | None, *, latest_only: bool = True) -> list[ToolSpec]:
        """The listed tools this caller may call, sorted by name (every version when not `latest_only`)."""
        return list(self._gateway.snapshot.catalog.listed(principal, latest_only=latest_only))

    def toolkits(self, principal: Principal | None) -> dict[str, list[ToolSpec]]:
        """`tools(principal)` grouped by toolkit, in catalog order."""
        return {kit: list(specs) for kit, specs in self._gateway.snapshot.catalog.listed_toolkits(principal).items()}

    def has_toolkit(self, name: str) -> bool:
        """True when any tool (hidden ones included) is in this toolkit."""
        return self._gateway.snapshot.catalog.has_toolkit(name)

    def listing(self, key: Hashable, principal: Principal | None, build: Callable[[], Any]) -> orjson.Fragment:
        """A listing's JSON, encoded once per snapshot and permission view, then reused as it is.

        `key` names the listing and all else it depends on besides the catalog, the
        configuration and the caller's permissions (a URL, a cap, a filter); `build` makes
        it, from `tools()` and `toolkits()`, at most once per snapshot, view and key. Put
        the result where the body goes: orjson writes a Fragment's bytes as they are, so
        the response is byte for byte what encoding `build()` there would give.
        """
        snapshot = self._gateway.snapshot
        if self._listed_for is None or self._listed_for() is not snapshot:
            self._listings.clear()  # a new catalog or configuration: nothing listed before holds
            self._listed_for = weakref.ref(snapshot)
        encoded = self._listings.get(
            (key, permission_view(principal)),
            lambda: orjson.dumps(build(), option=orjson.OPT_NON_STR_KEYS),  # as gateway.http.json_response
            len,
        )
        return orjson.Fragment(encoded)

    def derived(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """A value a front derives from the whole catalog (a name index), built once per snapshot.

        Kept with the snapshot itself, so a reload or rediscovery gives a new one and the old one goes
        with its snapshot (at most one value per key per snapshot; fronts use a handful of keys).
        """
        snapshot = self._gateway.snapshot
        held = self._derived.get(key)
        if held is not None and held[0]() is snapshot:
            return held[1]
        value = build()
        self._derived[key] = (weakref.ref(snapshot), value)
        return value

    def kept(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """An object a front keeps for as long as the gateway runs, across reloads (an endpoint and its
        sessions): one per key, made by `build` on first use. A front keeps its state here, never in a
        module global, so two gateways in one process share nothing and a closed gateway's goes with it."""
        found = self._kept.get(key)
        if found is None:
            found = self._kept[key] = build()
        return found

    async def snapshot_swapped(self) -> None:
        """Return once the catalog snapshot is replaced (a reload, a rediscovery): a front that tells its
        clients about list changes waits on this rather than comparing the catalog on a timer."""
        await self._gateway.swapped()

    def on_rediscovered(self, hook: Callable[[str], Awaitable[None]]) -> None:
        """Run `hook(backend name)` when a backend whose server said its tools changed was discovered again
        (the catalog changed or not: a front that relays the server's word tells its clients then)."""
        self._gateway.on_rediscovered(hook)

    def at_close(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run `hook` when the gateway closes, before its backends do (a front's own long-lived tasks)."""
        self._gateway.at_close(hook)

    def resolve(self, tool: str, version: str | None = None) -> ToolSpec:
        """A tool by flat or qualified name and version (x.y.z, x, or None for the latest); NOT_FOUND otherwise."""
        return self._gateway.snapshot.catalog.resolve(tool, version)

    def versions_of(self, tool: str) -> list[str]:
        """Every version of a tool, newest first (empty when unknown)."""
        return self._gateway.snapshot.catalog.versions_of(tool)

    def callable_tool(self, tool: str, principal: Principal | None, version: str | None = None) -> ToolSpec | None:
        """A tool this caller may call (hidden ones too: they are callable), else None."""
        try:
            spec = self.resolve(tool, version)
        except GatewayError:
            return None
        if permitted(principal, spec):
            return spec
        if principal is not None:  # unseen by this caller: its token may lack the scope (a 403 challenge)
            note_insufficient_scope(principal.scopes_for(spec))
        return None

    async def search(self, question: str, top_k: int, principal: Principal | None) -> list[ToolSpec]:
        """Up to `top_k` tools for a question, among those the caller may call (offline retrieval)."""
        return await retrieve(self._gateway.snapshot.catalog, question, top_k, principal)

    # ---- calling ----

    async def call(self, call: Call) -> Outcome:
        """Run one call through the pipeline; failures come back inside the outcome, never raised."""
        return await self._gateway.snapshot.pipeline(call)

    def precheck(self, call: Call) -> Failure | None:
        """The checks a call would meet before running, without running it (for answers from a record)."""
        return self._gateway.snapshot.pipeline.precheck(call)

    def deadline_for(self, call: Call, spec: ToolSpec) -> float:
        return self._gateway.snapshot.pipeline.deadline_for(call, spec)

    @property
    def runs(self) -> RunRegistry:
        """Calls that outlive their request, collected later (pending calls)."""
        return self._gateway.runs

    def detached(self, namespace: str) -> DetachedRuns:
        """Calls that outlive their request in `namespace`, their outcomes recorded and collected later by key
        (OXP's `call_id`, ToolServerNode's 450 handles; `configure()` it)."""
        runs = self._detached.get(namespace)
        if runs is None:
            runs = DetachedRuns(
                self._gateway.store,
                self._gateway.runs,
                self.precheck,
                namespace=namespace,
                shares=self._gateway.shares,
                homes=self._gateway.homes,
            )
            self._detached[namespace] = runs
        return runs

    def unclaimed_runs(self) -> int:
        """Finished detached runs whose outcome nobody collected yet, in every namespace (for /metrics)."""
        return sum(runs.unclaimed for runs in self._detached.values())

    @property
    def homes(self) -> Homes:
        """Where a caller's in-process state lives (sessions, held calls), and the way there."""
        return self._gateway.homes

    # ---- sessions, state and workspaces ----

    def sessions(self, front: str, *, idle_s: float) -> SessionRegistry:
        """The sessions of one front (its own store namespace); the same registry on every reload."""
        registry = self._sessions.get(front)
        if registry is None:
            registry = SessionRegistry(self._gateway.store, front=front, idle_s=idle_s, home=self._gateway.replicas.id)
            self._sessions[front] = registry
        registry.idle_s = idle_s
        return registry

    @property
    def shares(self) -> Shares:
        """One principal's share of every per-caller bound a front keeps (`limits.principal_share`)."""
        return self._gateway.shares

    @property
    def store(self) -> StateStore:
        """The shared key-value store (records a front keeps, such as result handles)."""
        return self._gateway.store

    @property
    def replicas(self) -> Replicas:
        """This replica's id, and the others' addresses (one process: only this one)."""
        return self._gateway.replicas

    @property
    def forwarder(self) -> Forwarder:
        """Passes a request on to the replica that holds what it asks for."""
        return self._gateway.forwarder

    @property
    def workspaces(self) -> Workspaces:
        return self._gateway.workspaces

    # ---- backends, through the features they declare ----

    def backend(self, name: str) -> Backend | None:
        return self._gateway.snapshot.backends.get(name)

    def backends_with(self, feature: Feature) -> list[Backend]:
        """The running backends that declare `feature`, in configuration order."""
        return [b for b in self._gateway.snapshot.backends.values() if feature in b.features]

    def backend_description(self, name: str) -> str | None:
        """The `description` a backend was given in the configuration."""
        for settings in self._config.settings.backends:
            if settings.name == name:
                return settings.description
        return None

    def backend_names(self, kind: str | None = None) -> list[str]:
        """The configured backends (of one kind), in configuration order."""
        return [b.name for b in self._config.settings.backends if kind is None or b.kind == kind]

    # ---- for the operator's fronts (metrics) ----

    async def backend_states(self) -> list[dict[str, Any]]:
        """Discovery's view of each backend with its own health, as /readyz shows it."""
        return await self._gateway.backend_states()

    @property
    def middleware(self) -> list[Any]:
        """The configured middleware instances of the current configuration (the call log first)."""
        return list(self._gateway.snapshot.generation.middleware)

    @property
    def reloads(self) -> Mapping[str, int]:
        """Configuration reloads so far, by result: ok, failed."""
        return dict(self._gateway.reloads)

    @property
    def pin_changes(self) -> Mapping[tuple[str, str, str, str], int]:
        """Tool definitions this process found changed, by (backend, tool, mode, kind) (`gateway.pinning`)."""
        return dict(self._gateway.pin_book.changes)

    @property
    def pins(self) -> PinAdmin:
        """Tool-definition pins: list, diff, approve, reject (`gateway.pinning.PinAdmin`), for an admin console."""
        return self._gateway.pins

    # ---- for the console (`gateway.console`) ----

    def presenters(self) -> dict[str, Presenter]:
        """The enabled fronts that call tools, by name, each with how it names tools and answers calls."""
        found: dict[str, Presenter] = {}
        for name, plugin in fronts().items():
            settings = getattr(self._config.settings.fronts, name, None)
            if plugin.presenter is not None and settings is not None and settings.enabled:
                try:
                    found[name] = resolve(plugin.presenter)
                except Exception:  # a broken third-party adapter: the console shows the other fronts
                    log.exception("front_presenter_unavailable", front=name)
        return found

    def backend_kind(self, name: str) -> str | None:
        """The configured `kind` of a backend (the protocol its tools come from: python, opentool, mcp...)."""
        for settings in self._config.settings.backends:
            if settings.name == name:
                return settings.kind
        return None

    async def replica_status(self) -> dict[str, Any]:
        """This replica as the console shows it: backends, calls in flight, configuration history."""
        from gateway.console.status import status_of

        return await status_of(self._gateway)

    async def publish_traffic(self) -> None:
        """This replica's latest traffic into the store now, so a view read next includes it."""
        from gateway.console.traffic import publish_quietly

        await publish_quietly(self._gateway.traffic, self._gateway.store)

    async def session_counts(self) -> list[dict[str, Any]]:
        """Live sessions per front and owning principal, from the store (every replica's, when shared)."""
        rows = []
        for front in fronts():
            for owner, count in sorted((await self._gateway.store.owners(f"session.{front}")).items()):
                rows.append({"front": front, "principal": owner, "count": count})
        return rows

    def __repr__(self) -> str:
        return f"FrontServices(version={self.version!r})"
