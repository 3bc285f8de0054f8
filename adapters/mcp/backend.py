"""The `mcp` backend: an MCP server's tools in the catalog, over Streamable HTTP or stdio, either era.

Each backend holds one connection (`Link`): the `mcp` SDK's `Client` in `mode="auto"`,
which probes the 2026-07-28 `server/discover` first and falls back to the `initialize`
handshake of the 2025 revisions; the era found is logged (`mcp_connected`). Discovery
walks `tools/list` page by page (at most `max_pages`); a call is one `tools/call` bounded
by the call's deadline. A request that may have reached the server is never sent twice:
only one that provably never left (the connection was refused) is retried.

A stdio server is a supervised child process (`adapters.mcp.stdio`): when it dies it is
started again after a pause that doubles with each quick death, at most
`restarts_per_minute` times in any 60 s, and `close()` stops its whole process group.

`notifications/tools/list_changed` (and, in the 2026 era, a `subscriptions/listen` event)
is logged as `mcp_tools_changed` and sets `tools_changed`; the core has no hook for a
backend to ask for its own rediscovery yet, so the catalog follows at the next
discovery interval (`discovery.interval_s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx2
import mcp_types as types
import structlog
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost, ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import Implementation, PaginatedRequestParams, ToolListChangedNotification
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from adapters.mcp import codec, held, relay, tasks
from adapters.mcp.http import EXCHANGE, Exchange, http_client
from adapters.mcp.settings import McpBackendSettings
from adapters.mcp.stdio import ServerProcess, child_env, connect
from adapters.stdio import describe_exit
from gateway.backends import BackendContext, BaseBackend, Health
from gateway.breaker import CircuitBreaker, Permit
from gateway.catalog import distinct_specs
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import FLAT_NAME_PATTERN, Answered, CallContext, RequestKind, ToolSpec, Upstream, UpstreamFailed
from gateway.observability import register_secrets
from gateway.upstream import UPSTREAMS, Credentials, failure_for_status

log = structlog.get_logger("toolplex.mcp")

# What a server says of its resources and prompts, relayed to the MCP front's sessions (`McpBackend.announce`).
NOTICES = (
    types.ResourceUpdatedNotification,
    types.ResourceListChangedNotification,
    types.PromptListChangedNotification,
)
MODES = {"auto": "auto", "legacy": "legacy", "modern": LATEST_MODERN_VERSION}
# The requests other than tool calls an MCP backend relays (`McpBackend.operate`), by kind.
OPERATIONS: dict[str, tuple[str, ...]] = {
    RequestKind.LIST: ("resources/list", "resources/templates/list", "prompts/list"),
    RequestKind.READ: ("resources/read",),
    RequestKind.PROMPT: ("prompts/get",),
    RequestKind.COMPLETE: ("completion/complete",),
    RequestKind.TASK: tasks.METHODS,
    RequestKind.SUBSCRIBE: ("resources/subscribe", "resources/unsubscribe"),
}
# The SDK's stand-ins for an HTTP error answer without a JSON-RPC body: the status (in the Exchange) says more.
SDK_STATUS_MESSAGES = frozenset({"Server returned an error response", "Not Found", "Session terminated"})
WINDOW_S = 60.0  # the window of `restarts_per_minute`; a process that lived this long was no quick death
MAX_BACKOFF_S = 30.0
DEADLINE_SLACK_S = 0.05  # a cancellation this close to the deadline is the deadline passing
MIN_RETRY_AFTER_MS = 1000
CLOSE_MARGIN_S = 3.0  # what closing a link may take beyond the process's stop grace
SETTLE_S = 1.0  # how long an error waits for a dying stdio process's exit status and stderr
LISTEN_PAUSE_S = 0.5  # first pause before a `subscriptions/listen` stream that ended is opened again
LEGACY_RETRY_S = 60.0  # a server that would not speak the handshake era is asked again this long after
MAX_WATCHED = 256  # resource URIs one listen stream asks updates of (the MCP front's subscriptions), at most
# The SDK's HTTP client logs each request's URL at INFO (and headers at DEBUG), its transport the session id:
# warnings only, as the gateway keeps httpx and httpcore.
QUIET_LOGGERS = ("httpx2", "httpcore2", "mcp.client.streamable_http")


def _quiet_sdk_loggers() -> None:
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:  # an operator's explicit level stays
            logger.setLevel(logging.WARNING)


def _client_info() -> Implementation:
    from gateway.tracing import GATEWAY_VERSION

    return Implementation(name="toolplex", version=GATEWAY_VERSION)


def _unwrap(exc: BaseException) -> BaseException:
    """The first real error inside the task-group exception groups the SDK raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class Link:
    """One live MCP connection: an SDK `Client`, entered and left by one task of its own (the SDK's task
    groups must be), the era it found, and for stdio the process under it."""

    def __init__(self, backend: McpBackend, process: ServerProcess | None, mode: str | None = None) -> None:
        self.backend = backend
        self.process = process
        self.mode = mode or MODES[backend.settings.era]  # "legacy" for a handshake-era caller's companion link
        self.client: Client | None = None
        self.protocol_version: str | None = None
        self.dead = asyncio.Event()  # the connection ended: the process exited, or the link was closed
        self.closing = False
        self.handshake = Exchange()  # what the HTTP requests of the handshake met
        self.pending: dict[relay.Pending, None] = {}  # requests in flight on this connection (`_calling`)
        self.relisten = asyncio.Event()  # 2026 era: the URIs to watch changed; open the listen stream again
        self.listened = 0  # how many watch changes the open listen stream reflects (`McpBackend.watch`)
        self._listen_acked = asyncio.Condition()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.dead.is_set()

    @property
    def era(self) -> str:
        return "modern" if self.protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"

    def sole(self) -> relay.Pending | None:
        """Over stdio, the one request in flight (a message without request context is about it); else None.

        Over HTTP every message runs in its request's own context (`relay`): a message without one
        belongs to no caller, and must not be handed to whoever happens to be waiting.
        """
        if self.process is None or len(self.pending) != 1:
            return None
        return next(iter(self.pending))

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self.process is not None:
            return connect(self.process, self.dead.set)
        settings = self.backend.settings
        assert settings.url is not None
        return streamable_http_client(
            settings.url, http_client=self.backend.http(), max_sse_event_size=self.backend.max_body
        )

    async def open(self, timeout: float) -> None:
        """Connect and negotiate the era within `timeout` seconds; GatewayError when that fails."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready), name=f"mcp-link-{self.backend.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            ready.cancel()
            await self.close()
            raise self.backend.unavailable(f"it did not complete the MCP handshake within {timeout:g} s") from None
        except GatewayError:
            await self.close()  # the task is ending already: this waits for its process to be stopped
            raise
        except BaseException:
            ready.cancel()
            await self.close()
            raise

    async def _run(self, ready: asyncio.Future[None]) -> None:
        backend = self.backend
        EXCHANGE.set(self.handshake)  # the handshake's requests; this task's own context
        try:
            async with Client(
                self._transport(),
                mode=self.mode,
                cache=None,  # every discovery asks the server: a cached listing would hide changes
                message_handler=self._on_message,
                client_info=_client_info(),
                # Each question or log line is relayed to the MCP caller of the request it belongs to.
                **relay.callbacks(self.sole),
                extensions=[tasks.Relaying()],  # a tools/call may answer a task, which its caller polls
            ) as client:
                self.client = client
                self.protocol_version = client.protocol_version
                if self.era == "modern":
                    relay.stamp_caller_capabilities(client.session)
                EXCHANGE.set(None)  # what this task starts from now on is the connection's own traffic
                ready.set_result(None)
                backend.connected(self, client)
                async with anyio.create_task_group() as group:
                    if self.era == "modern" and _listens(client):
                        group.start_soon(self._listen, client)
                    await _first(self._stop, self.dead)
                    group.cancel_scope.cancel()
        except BaseException as exc:
            if not ready.done():
                if self.process is not None and not isinstance(exc, asyncio.CancelledError):
                    await self.process.settle(SETTLE_S)
                ready.set_exception(backend.connect_failure(self, _unwrap(exc)))
            elif not self.closing:
                log.warning("mcp_link_failed", backend=backend.name, error=repr(_unwrap(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.dead.set()
            if self.process is not None:
                await self.process.stop(backend.settings.stop_timeout_s)
            if not self.closing:
                backend.link_lost(self)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self.backend.tools_listing_changed(self)
        elif isinstance(message, NOTICES):
            # A list change is told by the main connection; a companion one tells the updates it subscribed to.
            if self.backend.is_main(self) or isinstance(message, types.ResourceUpdatedNotification):
                await self.backend.announce(message)
        elif isinstance(message, Exception):
            log.debug("mcp_transport_error", backend=self.backend.name, error=repr(message))

    async def _listen(self, client: Client) -> None:
        """2026 era: changes come on a `subscriptions/listen` stream: the tool, prompt and resource lists',
        and updates of the resources the MCP front's callers subscribed to (`McpBackend.watched`). One
        that ends is opened again after a pause (doubling up to 30 s, from 1 s again after a stream that
        lasted a minute) while the link lives; a change of the watched URIs opens it again at once."""
        pause = LISTEN_PAUSE_S
        reopened = False
        while not self.dead.is_set():
            opened = time.monotonic()
            wanted = self.backend.watch_changes
            self.relisten.clear()
            try:
                async with client.listen(
                    tools_list_changed=True,
                    prompts_list_changed=True,
                    resources_list_changed=True,
                    resource_subscriptions=tuple(self.backend.watched),
                ) as subscription:
                    async with self._listen_acked:
                        self.listened = wanted
                        self._listen_acked.notify_all()
                    if reopened:  # a change in the moment between the two streams would be lost: look again
                        self.backend.tools_listing_changed(self)
                    if await self._follow(subscription):
                        reopened = True
                        continue  # the watched URIs changed: the new filter at once
                reason = "the server closed it"
            except (MCPError, SubscriptionLost, TimeoutError) as exc:
                reason = str(exc) or type(exc).__name__
            reopened = False
            if self.closing:
                return
            pause = LISTEN_PAUSE_S if time.monotonic() - opened >= WINDOW_S else min(MAX_BACKOFF_S, pause * 2)
            log.info("mcp_listen_ended", backend=self.backend.name, reason=reason, again_in_s=pause)
            await anyio.sleep(pause)

    async def _follow(self, subscription: Any) -> bool:
        """Pass on the stream's events until it ends (False) or the watched URIs change (True)."""
        ended = False
        error: MCPError | SubscriptionLost | None = None
        async with anyio.create_task_group() as group:

            async def read() -> None:
                nonlocal ended, error
                try:
                    async for event in subscription:
                        await self._event(event)
                except (MCPError, SubscriptionLost) as exc:
                    error = exc
                ended = True
                group.cancel_scope.cancel()

            group.start_soon(read)
            await self.relisten.wait()
            group.cancel_scope.cancel()
        if error is not None:
            raise error
        return not ended

    async def _event(self, event: Any) -> None:
        """A listen stream's event. Its frames also reach the client's message handler (`_on_message`), which
        passes resource and prompt notices on: only a tool list change is the link's own business."""
        if isinstance(event, ToolsListChanged):
            self.backend.tools_listing_changed(self)

    async def listening(self, wanted: int, timeout: float) -> bool:
        """Wait (at most `timeout` s) until the listen stream reflects watch change number `wanted`."""
        async with self._listen_acked:
            try:
                await asyncio.wait_for(self._listen_acked.wait_for(lambda: self.listened >= wanted), timeout)
            except TimeoutError:
                return False
        return True

    async def close(self) -> None:
        """Leave the connection (stopping its process); bounded by the process's stop grace and a margin."""
        self.closing = True
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        budget = self.backend.settings.stop_timeout_s + CLOSE_MARGIN_S
        done, _ = await asyncio.wait({task}, timeout=budget)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=budget)


def _listens(client: Client) -> bool:
    """The server has changes to tell on a listen stream: of its lists, or of resources it lets one watch."""
    capabilities = client.server_capabilities
    lists = (capabilities.tools, capabilities.prompts, capabilities.resources)
    resources = capabilities.resources
    return any(c is not None and bool(c.list_changed) for c in lists) or bool(resources and resources.subscribe)


async def _first(*events: asyncio.Event) -> None:
    """Wait until one of `events` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class McpBackend(BaseBackend):
    """One MCP server; declares no optional feature (its sessions are its own, not per caller). Besides its
    tools it serves the MCP front's pass-through requests (`operations`, through the pipeline)."""

    operations = frozenset(OPERATIONS)

    def __init__(self, settings: McpBackendSettings, context: BackendContext) -> None:
        self.name = settings.name
        self.settings = settings
        self.toolkit = codec.default_toolkit(settings.name)
        self.max_body = context.max_response_bytes
        self.credentials = Credentials.of(settings.api_key, settings)
        self.breaker = CircuitBreaker(settings.circuit_breaker.failures, settings.circuit_breaker.cooldown_s)
        self.tools_changed = asyncio.Event()  # set by every list_changed the server sends
        self.rediscover = context.rediscover
        self.protocol_version: str | None = None
        # What the server advertised under `capabilities.extensions` on 2026-07-28 (the last connection's).
        self.extensions: dict[str, Any] = {}
        # 2026 era: resource URIs the listen stream asks updates of (the MCP front's subscriptions), oldest first.
        self.watched: dict[str, None] = {}
        self.watch_changes = 0
        # Calls held open for their 2026-07-28 callers' answers to a handshake-era server's questions.
        self.holds = held.Holds(settings.max_held_calls, settings.answer_timeout_s, self._cannot_hold, context.shares)
        self._http: httpx2.AsyncClient | None = None
        self._link: Link | None = None
        self._lock = asyncio.Lock()
        # Era affinity (HTTP, `era: auto`): a handshake-era connection of its own for handshake-era MCP callers,
        # made when the first one calls, so their questions go back on their own requests as when they call
        # the server directly. None until made; `_legacy_refused` notes a server that would not speak it.
        self._legacy: Link | None = None
        self._legacy_lock = asyncio.Lock()
        self._legacy_refused = float("-inf")
        self._closed = False
        self._restarts: deque[float] = deque()  # when each restart of a dead stdio process happened
        self._quick_deaths = 0
        self._next_start = 0.0  # monotonic time before which no new process is started
        self._last_death: str | None = None
        self._revive: asyncio.Task[None] | None = None
        # Who hears what the server says of its resources and prompts; keyed by the listener itself: a bound
        # method is a new object at each access, but equal (and of equal hash) to the others of its object.
        self._listeners: dict[Callable[[Any], Awaitable[None]], None] = {}
        if settings.transport == "stdio":
            register_secrets(settings.env.values())  # the server's credentials: never in a log line
        _quiet_sdk_loggers()
        # /metrics reads breakers from this registry; it reads only `name` and `breaker` of what it holds.
        UPSTREAMS.add(self)  # type: ignore[arg-type]

    # ---- connection ----

    def unavailable(self, message: str, **fields: Any) -> GatewayError:
        fields.setdefault("can_retry", True)
        return GatewayError.of(
            ErrorKind.UPSTREAM_UNAVAILABLE, f"Upstream {self.name!r} is unavailable: {message}", **fields
        )

    def http(self) -> httpx2.AsyncClient:
        """The backend's one HTTP client (pooled connections), made on first use."""
        if self._http is None:
            settings = self.settings
            headers = {**settings.headers, **self.credentials.own()}
            self._http = http_client(
                headers=headers,
                connect_timeout_s=settings.timeouts_s.connect,
                write_timeout_s=settings.timeouts_s.read,
                max_connections=settings.max_connections,
                max_body=self.max_body,
            )
        return self._http

    def is_main(self, link: Link) -> bool:
        """The backend's main connection (discovery, other fronts' calls), not a handshake-era companion."""
        return link is self._link or link.mode == MODES[self.settings.era]

    def connected(self, link: Link, client: Client) -> None:
        if not self.is_main(link):
            log.info("mcp_connected_companion", backend=self.name, era=link.era, purpose="handshake-era callers")
            return
        self.protocol_version = link.protocol_version
        advertised = client.server_capabilities.extensions if link.era == "modern" else None
        self.extensions = dict(advertised or {})
        server = client.server_info
        log.info(
            "mcp_connected",
            backend=self.name,
            transport=self.settings.transport,
            era=link.era,
            protocol_version=link.protocol_version,
            server=server.name if server is not None else None,
            server_version=server.version if server is not None else None,
            pid=link.process.pid if link.process is not None else None,
        )

    def connect_failure(self, link: Link, exc: BaseException) -> GatewayError:
        """Why a connection could not be made, as the error its caller raises."""
        if isinstance(exc, GatewayError):
            return exc
        process = link.process
        if process is not None and process.returncode is not None:
            return self.unavailable(
                f"its server process ended during the handshake ({describe_exit(process.returncode)})",
                developer_message=process.stderr_tail() or None,
            )
        met = link.handshake
        if met.error is not None:
            return self.unavailable(f"the MCP handshake failed: {met.error}")
        if met.status is not None and met.status >= 400:
            whose = " to the gateway's own credentials" if met.status == 401 else ""
            return self.unavailable(
                f"the MCP handshake was answered HTTP {met.status}{whose}",
                developer_message="Check the backend's url, headers and api_key",
            )
        if isinstance(exc, MCPError):
            return self.unavailable(f"the MCP handshake failed: {exc.message} (error {exc.code})")
        return self.unavailable(f"the MCP handshake failed ({type(exc).__name__}: {exc})")

    def tools_listing_changed(self, link: Link) -> None:
        log.info("mcp_tools_changed", backend=self.name, era=link.era)
        self.tools_changed.set()
        if self.rediscover is not None:  # the catalog follows now, not at the next discovery interval
            self.rediscover(self.name)

    def link_lost(self, link: Link) -> None:
        """A link ended without being closed: a stdio process died. Start another, as `_start_delay` allows."""
        if self._closed or link is not self._link:
            return
        process = link.process
        if process is None:
            return  # an HTTP connection is simply made again on the next request
        lived = time.monotonic() - process.started
        self._quick_deaths = self._quick_deaths + 1 if lived < WINDOW_S else 1
        self._next_start = time.monotonic() + min(
            MAX_BACKOFF_S, self.settings.restart_backoff_s * 2 ** (self._quick_deaths - 1)
        )
        self._last_death = f"its server process exited ({describe_exit(process.returncode)})"
        log.warning(
            "mcp_server_exited",
            backend=self.name,
            pid=process.pid,
            how=describe_exit(process.returncode),
            lived_s=round(lived, 3),
            stderr=process.stderr_tail() or None,
        )
        if self._revive is None or self._revive.done():
            self._revive = asyncio.get_running_loop().create_task(self._revive_loop(), name=f"mcp-revive-{self.name}")

    async def _revive_loop(self) -> None:
        """Restart a dead stdio server as soon as the budget allows; stops once one is up (or on close)."""
        while not self._closed:
            wait = self._start_delay()
            if wait is None:
                log.error("mcp_server_not_restarted", backend=self.name, reason="restarts_per_minute is 0")
                return
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            try:
                await self._ensure_link(None)
            except GatewayError as exc:
                log.warning("mcp_server_restart_failed", backend=self.name, error=exc.failure.message)
                continue
            return

    def _start_delay(self) -> float | None:
        """Seconds before another stdio process may start (0: now); None when restarts are off for good."""
        if self._last_death is None:
            return 0.0  # the first start
        if self.settings.restarts_per_minute == 0:
            return None
        now = time.monotonic()
        while self._restarts and now - self._restarts[0] >= WINDOW_S:
            self._restarts.popleft()
        wait = max(0.0, self._next_start - now)
        if len(self._restarts) >= self.settings.restarts_per_minute:
            wait = max(wait, self._restarts[0] + WINDOW_S - now)
        return wait

    async def _ensure_link(self, deadline: float | None) -> Link:
        """The live link, made now if there is none; `deadline` (monotonic) bounds the wait for a restart."""
        link = self._link
        if link is not None and link.alive:
            return link
        async with self._lock:
            link = self._link
            if link is not None and link.alive:
                return link
            if self._closed:
                raise self.unavailable("the backend is closed")
            if link is not None:
                self._link = None
                await link.close()
            budget = self.settings.timeouts_s.read
            if deadline is not None:
                budget = min(budget, max(0.0, deadline - time.monotonic()))
            if self.settings.transport == "stdio":
                await self._wait_for_restart(deadline)
            link = await self._open(budget)
            if self._closed:  # closed while this one was being made: it must not outlive the backend
                await link.close()
                raise self.unavailable("the backend is closed")
            self._link = link
            return link

    async def _link_for(self, caller: relay.Caller | None, deadline: float | None) -> Link:
        """The connection a caller's request goes on (era affinity): a handshake-era MCP caller's goes in its
        own era whenever the server speaks it, on a companion connection; only when the server does not is
        the cross-era bridge used (its questions held for the caller, `held`). Everything else: the main one."""
        link = await self._ensure_link(deadline)
        if caller is None or caller.modern or link.era == "legacy" or not self._affine:
            return link
        companion = await self._ensure_legacy(deadline)
        return companion if companion is not None else link

    @property
    def _affine(self) -> bool:
        """Era affinity applies: an HTTP server in `era: auto` (a stdio server is one process, one era)."""
        return self.settings.transport == "http" and self.settings.era == "auto"

    async def _ensure_legacy(self, deadline: float | None) -> Link | None:
        """The handshake-era companion connection, made now if there is none; None when the server does not
        speak the handshake era (asked again after `LEGACY_RETRY_S`)."""
        link = self._legacy
        if link is not None and link.alive:
            return link
        async with self._legacy_lock:
            link = self._legacy
            if link is not None and link.alive:
                return link
            if self._closed or time.monotonic() - self._legacy_refused < LEGACY_RETRY_S:
                return None
            if link is not None:
                self._legacy = None
                await link.close()
            budget = self.settings.timeouts_s.read
            if deadline is not None:
                budget = min(budget, max(0.0, deadline - time.monotonic()))
            link = Link(self, None, mode="legacy")
            try:
                await link.open(budget)
            except GatewayError as exc:
                self._legacy_refused = time.monotonic()
                log.info("mcp_no_handshake_era", backend=self.name, error=exc.failure.message)
                return None
            if self._closed:
                await link.close()
                return None
            self._legacy = link
            return link

    async def _wait_for_restart(self, deadline: float | None) -> None:
        wait = self._start_delay()
        if wait is None:
            raise self.unavailable(f"{self._last_death}; restarts_per_minute is 0, so it is not started again")
        if wait > 0:
            if deadline is not None and time.monotonic() + wait > deadline:
                raise self.unavailable(
                    f"{self._last_death}; it is started again in {wait:.1f} s (restarts_per_minute: "
                    f"{self.settings.restarts_per_minute})",
                    retry_after_ms=max(MIN_RETRY_AFTER_MS, int(wait * 1000)),
                )
            await asyncio.sleep(wait)
        if self._last_death is not None:
            self._restarts.append(time.monotonic())

    async def _open(self, budget: float) -> Link:
        process = None
        settings = self.settings
        if settings.transport == "stdio":
            assert settings.command is not None
            try:
                process = await ServerProcess.spawn(
                    settings.command,
                    settings.args,
                    env=child_env(settings.env),
                    cwd=settings.cwd,
                    label=self.name,
                    line_limit=self.max_body,
                )
            except OSError as exc:
                self._note_failed_start(f"its command cannot be started ({exc.strerror or exc})")
                raise self.unavailable(f"its command {settings.command!r} cannot be started: {exc}") from None
        link = Link(self, process)
        try:
            await link.open(budget)
        except GatewayError:
            if process is not None:
                self._note_failed_start(f"its server process did not start ({describe_exit(process.returncode)})")
            self.breaker.failure()
            raise
        return link

    def _note_failed_start(self, why: str) -> None:
        """A start that failed counts as a quick death: the next one waits longer."""
        self._quick_deaths += 1
        self._last_death = why
        self._next_start = time.monotonic() + min(
            MAX_BACKOFF_S, self.settings.restart_backoff_s * 2 ** (self._quick_deaths - 1)
        )

    # ---- discovery ----

    async def discover(self) -> list[ToolSpec]:
        """Every tool the server lists, page by page; retried (`retries`) as discovery may be."""
        tools = await self._discover_listing()
        self.breaker.success()  # a recovered upstream is back for calls too
        source = f"backend {self.name!r} ({self.settings.url or self.settings.command})"
        toolkit = self.settings.routed_toolkit(self.toolkit)
        return distinct_specs(
            tools,
            lambda entry: self._spec(entry, toolkit, source),
            lambda spec: spec.flat_name,
            event="mcp_tool",
            backend=self.name,
        )

    async def _discover_listing(self) -> list[dict[str, Any]]:
        attempts = 1 + self.settings.retries
        for attempt in range(attempts):
            try:
                return await self._list_tools()
            except GatewayError:
                if attempt + 1 >= attempts or self._closed:
                    raise
                await asyncio.sleep(self.settings.retry_backoff_s * (2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _spec(self, entry: dict[str, Any], toolkit: str, source: str) -> ToolSpec:
        spec = codec.spec_from_tool(entry, backend=self.name, toolkit=self.toolkit, source=source)
        rename = self.settings.rename or {}
        name = rename.get(spec.name) or rename.get(spec.qualified_name) or spec.name
        if not FLAT_NAME_PATTERN.match(f"{toolkit}_{name}"):
            raise ValueError(
                f"tool {entry.get('name')!r} would be {toolkit}_{name}, longer than a tool name may be (64); "
                f"give it a shorter name with rename: {{{spec.name}: ...}}"
            )
        return spec

    async def _list_tools(self) -> list[dict[str, Any]]:
        read_s = self.settings.timeouts_s.read
        link = await self._ensure_link(time.monotonic() + read_s)
        assert link.client is not None
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _page in range(self.settings.max_pages):
            async with self._exchange(None) as exchange:
                try:
                    async with asyncio.timeout(read_s):
                        page = await link.client.session.list_tools(params=PaginatedRequestParams(cursor=cursor))
                except TimeoutError:
                    self.breaker.failure()
                    raise self.unavailable(f"tools/list did not answer within {read_s:g} s (timeouts_s.read)") from None
                except MCPError as exc:
                    await self._settle(exc, link)
                    failure = self._request_failure(exc, exchange, link, "tools/list")
                    raise (failure.error if isinstance(failure, _SendAgain) else failure) from None
                except ValidationError as exc:
                    self.breaker.failure()
                    raise self.unavailable(f"its tools/list answer is malformed: {exc.errors()[0]['msg']}") from None
            tools.extend(t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
        log.warning("mcp_tools_list_truncated", backend=self.name, pages=self.settings.max_pages, tools=len(tools))
        return tools

    # ---- calls ----

    @contextlib.asynccontextmanager
    async def _exchange(self, context: CallContext | None) -> AsyncIterator[Exchange]:
        """An `Exchange` for the requests made inside the block (the HTTP guard writes what each met)."""
        forwarded = context is not None and self.settings.forward_authorization
        exchange = Exchange(credentials=self.credentials.for_call(context) if forwarded else None)
        token = EXCHANGE.set(exchange)
        try:
            yield exchange
        finally:
            EXCHANGE.reset(token)

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        binding = spec.binding
        if not isinstance(binding, codec.McpTool):
            raise GatewayError.of(ErrorKind.INTERNAL, f"Tool {spec.flat_name} has no MCP binding")
        attempts = 1 + self.settings.retries
        for attempt in range(attempts):
            remaining = context.remaining()
            if remaining is not None and remaining <= 0:
                raise GatewayError.of(ErrorKind.DEADLINE, f"Deadline passed before upstream {self.name!r} answered")
            permit = self._admit(remaining)
            try:
                return await self._call_once(binding, arguments, context)
            except _SendAgain as again:
                if attempt + 1 >= attempts:
                    raise again.error from None
                await self._backoff(attempt, context.deadline)
            finally:
                self.breaker.release(permit)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _admit(self, remaining: float | None) -> Permit:
        budget = remaining if remaining is not None else self.settings.timeouts_s.total
        permit = self.breaker.acquire(lease=budget + 1.0)
        if permit is None:
            wait_ms = max(MIN_RETRY_AFTER_MS, int(self.breaker.retry_after_s() * 1000))
            raise self.unavailable("circuit open after repeated failures", retry_after_ms=wait_ms)
        return permit

    async def _backoff(self, attempt: int, deadline: float | None) -> None:
        delay = self.settings.retry_backoff_s * (2**attempt) * (0.5 + random.random())
        if deadline is not None:
            delay = min(delay, max(0.0, deadline - time.monotonic()))
        await asyncio.sleep(delay)

    async def _call_once(self, binding: codec.McpTool, arguments: dict[str, Any], context: CallContext) -> Any:
        caller = relay.caller_of(context.peer)
        if caller is not None and caller.modern and held.is_held(caller.request_state):
            try:  # a 2026-07-28 caller's answers to a question this replica's held call asked
                hold = self.holds.resume(caller, context.principal, binding.name, arguments)
            except MCPError as exc:
                raise _refused(exc) from None
            round_ = hold.round(caller)
            return await self._outcome(binding, context, caller, hold.link, hold.exchange, hold.pending, round_)
        link = await self._link_for(caller, context.deadline)
        assert link.client is not None
        async with self._exchange(context) as exchange:
            if caller is not None and caller.modern and link.era == "legacy":
                if caller.request_state is not None:  # a state no hold issued (answers alone are ignored: re-asked)
                    raise _refused(held.invalid_state())
                if self.holds.limit > 0:
                    hold = held.Hold(self.holds, context.principal, binding.name, arguments, link, exchange, caller)
                    send = self._send_call(link, binding.name, arguments, None, caller, hold.pending)
                    hold.start(_held(link, caller, hold, send))
                    round_ = hold.round(caller)
                    return await self._outcome(binding, context, caller, link, exchange, hold.pending, round_)
            async with _calling(link, caller) as pending:
                work = self._send_call(link, binding.name, arguments, context.remaining(), caller, pending)
                return await self._outcome(binding, context, caller, link, exchange, pending, work)

    async def _outcome(
        self,
        binding: codec.McpTool,
        context: CallContext,
        caller: relay.Caller | None,
        link: Link,
        exchange: Exchange,
        pending: relay.Pending,
        work: Awaitable[Any],
    ) -> Any:
        """The call's value, interim result or failure, once `work` (the upstream's call on `link`, or a held
        call's round) ends within the caller's deadline."""
        try:
            async with asyncio.timeout(context.remaining()):
                result = await work
        except TimeoutError:
            self.breaker.failure()
            raise GatewayError.of(
                ErrorKind.DEADLINE, f"Upstream {self.name!r} did not answer before the deadline", can_retry=True
            ) from None
        except asyncio.CancelledError:
            if context.deadline is not None and time.monotonic() >= context.deadline - DEADLINE_SLACK_S:
                self.breaker.failure()  # the deadline passed with no answer: a fault, as for every upstream
            raise
        except MCPError as exc:
            await self._settle(exc, link)
            answered = _answered(exc, exchange)  # the server's own error: an MCP caller gets it as it came
            if pending.declined is not None and answered:
                raise UpstreamFailed(self._unanswerable(binding.name, pending.declined), _error_of(exc)) from None
            failure = self._request_failure(exc, exchange, link, "tools/call")
            if answered and not isinstance(failure, _SendAgain):
                raise UpstreamFailed(failure.failure, _error_of(exc)) from None
            raise failure from None
        except (ValidationError, RuntimeError) as exc:  # a result the SDK could not read, or off its outputSchema
            self.breaker.failure()
            raise self.unavailable(f"its answer to tools/call is malformed: {exc}") from None
        if isinstance(result, tasks.CreatedTask):
            answer = tasks.wire(result)  # as it came: the caller polls the task (its front knows)
        else:
            answer = result.model_dump(by_alias=True, mode="json", exclude_unset=True)  # the members it sent
        self.breaker.success()
        upstream = Upstream(codec.PROTOCOL, result=answer)  # the whole result, for an MCP front to pass on as it is
        interim = isinstance(result, types.InputRequiredResult | tasks.CreatedTask)  # no final result yet
        if interim or pending.asked or _answers(caller):
            context.cacheable = False  # no result yet, or one that depends on the caller's answers
        if interim:
            return Answered(answer, upstream)  # the caller answers the questions and sends the call again
        if result.is_error:
            raise UpstreamFailed(codec.failure_of_result(self.name, binding.name, answer), upstream)
        return Answered(codec.value_of(answer), upstream)

    @staticmethod
    async def _send_call(
        link: Link,
        name: str,
        arguments: dict[str, Any],
        remaining: float | None,
        caller: relay.Caller | None,
        pending: relay.Pending,
    ) -> types.CallToolResult | types.InputRequiredResult | tasks.CreatedTask:
        """One tools/call. For an MCP caller: its progress, log level and, on 2026-07-28, its answers to
        an `InputRequiredResult`; a 2026-07-28 caller gets such a result back to answer itself, any
        other caller is asked each question in turn by the SDK's input loop (through `relay`). A
        2026-07-28 caller that declared the tasks extension may get the task the server created."""
        assert link.client is not None
        if caller is None:
            return await link.client.call_tool(name, arguments, read_timeout_seconds=remaining)
        progress, meta = relay.relay_progress(pending), relay.request_meta(caller)
        if caller.modern and link.era == "modern":
            result = await link.client.session.call_tool(
                name,
                arguments,
                read_timeout_seconds=remaining,
                progress_callback=progress,
                input_responses=caller.input_responses,  # type: ignore[arg-type]  # relayed as the caller sent them
                request_state=caller.request_state,
                meta=meta,  # type: ignore[arg-type]
                allow_input_required=True,
                allow_claimed=True,
            )
            if not isinstance(result, types.CallToolResult | types.InputRequiredResult | tasks.CreatedTask):
                raise RuntimeError(f"an answer of an extension this gateway does not relay ({type(result).__name__})")
            return result
        return await link.client.call_tool(
            name,
            arguments,
            read_timeout_seconds=remaining,
            progress_callback=progress,
            meta=meta,  # type: ignore[arg-type]
        )

    # ---- resources, prompts, completions, tasks, subscriptions: relayed as they are ----

    async def operate(
        self, kind: str, operation: str, params: dict[str, Any], context: CallContext, payload: Any = None
    ) -> Any:
        """A request of the MCP front's pass-through (`OperationBackend`), after the pipeline's policy
        stages: relayed to this server under its breaker, with the caller's credentials when this backend
        forwards them. The server's own JSON-RPC error is noted for the MCP front to answer as it came
        (`UpstreamFailed`) and fails the request as its canonical kind."""
        if operation not in OPERATIONS.get(kind, ()):
            raise GatewayError.of(ErrorKind.MALFORMED, f"{operation} is not relayed as a {kind} request")
        caller = relay.caller_of(context.peer)
        permit = self._admit(context.remaining())
        try:
            if kind == RequestKind.SUBSCRIBE:
                link = await self._link_for(caller, context.deadline)
                if link.era == "modern":  # no resources/subscribe in 2026-07-28: the listen stream asks for it
                    await self.watch(str(params.get("uri")), operation == "resources/subscribe")
                    return {}
            return await self.pass_through(operation, params, caller, context)
        except MCPError as exc:  # the server's own answer: relayed as it came by the MCP front
            failure = codec.failure_of_error(self.name, exc.code, exc.message, exc.data)
            raise UpstreamFailed(failure, _error_of(exc)) from None
        finally:
            self.breaker.release(permit)

    async def pass_through(
        self, method: str, params: dict[str, Any], caller: relay.Caller | None, context: CallContext | None = None
    ) -> dict[str, Any]:
        """One request of the MCP front's pass-through (`resources/*`, `prompts/*`, `completion/complete`,
        `tasks/*`) sent to this server, its result as the server gave it (JSON, by alias).

        The server's own JSON-RPC error is raised as it came (`MCPError`); a transport failure or an
        HTTP error status as the `GatewayError` a tool call would meet. Never sent twice. A handshake-era
        server's question during `resources/read` or `prompts/get` reaches a 2026-07-28 caller as a tool
        call's does (`held`; the context's principal is whose the held request is). With
        `forward_authorization`, the context's caller's credentials go upstream in place of the backend's.
        """
        principal = context.principal if context is not None else None
        remaining = self.settings.timeouts_s.read
        if context is not None and context.remaining() is not None:
            remaining = min(remaining, context.remaining() or 0.0)
        asker = caller if caller is not None and caller.modern and method in held.METHODS else None  # may be held
        if asker is not None and held.is_held(asker.request_state):
            hold = self.holds.resume(asker, principal, *held.identity(method, params))  # its MCPError as it is
            return await self._passed(method, hold.link, hold.exchange, hold.round(asker), remaining)
        link = await self._link_for(caller, time.monotonic() + remaining)
        assert link.client is not None
        async with self._exchange(context) as exchange:
            if asker is not None and link.era == "legacy" and self.holds.limit > 0:
                caller = asker
                if caller.request_state is not None:  # a state no hold issued (answers alone are ignored: re-asked)
                    raise held.invalid_state()
                hold = held.Hold(self.holds, principal, *held.identity(method, params), link, exchange, caller)
                hold.start(_held(link, caller, hold, _relayed(link, method, params, caller)))
                return await self._passed(method, link, exchange, hold.round(caller), remaining)
            async with _calling(link, caller):
                return await self._passed(method, link, exchange, _relayed(link, method, params, caller), remaining)

    async def _passed(
        self, method: str, link: Link, exchange: Exchange, work: Awaitable[Any], remaining: float
    ) -> dict[str, Any]:
        """`pass_through`'s answer, once `work` (the request, or a held request's round) ends in `remaining`."""
        try:
            async with asyncio.timeout(remaining):
                result = await work
        except TimeoutError:
            raise GatewayError.of(
                ErrorKind.DEADLINE, f"Upstream {self.name!r} did not answer {method} within {remaining:g} s"
            ) from None
        except MCPError as exc:
            await self._settle(exc, link)
            if _answered(exc, exchange):
                raise  # the server's own answer: relayed as it is
            failure = self._request_failure(exc, exchange, link, method)
            raise (failure.error if isinstance(failure, _SendAgain) else failure) from None
        except (ValidationError, RuntimeError) as exc:
            self.breaker.failure()
            raise self.unavailable(f"its answer to {method} is malformed: {exc}") from None
        self.breaker.success()
        if isinstance(result, tasks.TaskAnswer):
            return tasks.wire(result)
        return result.model_dump(by_alias=True, mode="json", exclude_unset=True)  # type: ignore[no-any-return]

    @property
    def era(self) -> str | None:
        """The protocol era of the live connection ("modern" or "legacy"), None while there is none."""
        link = self._link
        return link.era if link is not None and link.alive else None

    async def watch(self, uri: str, on: bool) -> None:
        """2026 era: ask the listen stream for updates of `uri` (or stop); returns once the server took the
        new filter, or after the read timeout (the stream then takes it when it opens again)."""
        if on:
            self.watched.pop(uri, None)
            self.watched[uri] = None
            while len(self.watched) > MAX_WATCHED:
                del self.watched[next(iter(self.watched))]
        elif self.watched.pop(uri, False) is False:
            return
        self.watch_changes += 1
        link = self._link
        if link is None or not link.alive or link.era != "modern":
            return
        link.relisten.set()
        if not await link.listening(self.watch_changes, self.settings.timeouts_s.read):
            log.info("mcp_watch_not_acknowledged", backend=self.name, uri=uri[:200])

    def listen(self, listener: Callable[[Any], Awaitable[None]]) -> None:
        """Have `listener` hear what the server says of its resources and prompts (`NOTICES`)."""
        self._listeners[listener] = None

    async def announce(self, notice: Any) -> None:
        for listener in list(self._listeners):
            try:
                await listener(notice)
            except Exception as exc:  # one listener's failure is not the connection's
                log.warning("mcp_notice_not_relayed", backend=self.name, error=repr(exc))

    @staticmethod
    async def _settle(exc: MCPError, link: Link) -> None:
        """A stdio connection that closed: its process's exit status and last words belong in the error."""
        if exc.code == codec.CONNECTION_CLOSED and link.process is not None:
            await link.process.settle(SETTLE_S)

    def _cannot_hold(self, tool: str, capability: str) -> Failure:
        """The server asked a 2026-07-28 caller a question while `max_held_calls` calls (or this caller's share of
        them) wait for answers."""
        return Failure(
            kind=ErrorKind.RATE_LIMITED,
            message=(
                f"Tool {tool!r} of upstream {self.name!r} asked its client for {capability}, but the gateway already "
                f"holds {self.settings.max_held_calls} calls (or this caller's share of them) open for their "
                "callers' answers; try again later"
            ),
            developer_message="raise max_held_calls (or lower answer_timeout_s) of this backend",
            can_retry=True,
            retry_after_ms=1000,
        )

    def _unanswerable(self, tool: str, capability: str) -> Failure:
        """The server asked the caller a question it cannot answer, and so failed the call: the tool's
        failure for this caller, not a fault of the server (no breaker, no retry)."""
        return Failure(
            kind=ErrorKind.TOOL_FAILED,
            message=(
                f"Tool {tool!r} of upstream {self.name!r} asked its client for {capability}, which this caller "
                "cannot answer; call it through the MCP front from a client that declares that capability"
            ),
            developer_message=f"the {capability} request was declined: no MCP caller that declared it",
            can_retry=False,
        )

    def _request_failure(self, exc: MCPError, exchange: Exchange, link: Link, method: str) -> GatewayError | _SendAgain:
        """An MCPError as the caller's error; `_SendAgain` when the request provably never reached the server."""
        if exchange.error is not None:
            self.breaker.failure()
            error = self.unavailable(exchange.error)
            return error if exchange.sent else _SendAgain(error)
        if exchange.too_large:
            return GatewayError.of(
                ErrorKind.UPSTREAM_UNAVAILABLE,
                f"Upstream {self.name!r} answered more than {self.max_body} bytes (limits.max_upstream_response_bytes)",
                details={"limit_bytes": self.max_body},
            )
        status = exchange.status
        if status == 404 and exchange.session:
            # The server no longer knows the session (it restarted, or expired it): it ran nothing.
            link.dead.set()
            return _SendAgain(self.unavailable("its MCP session ended (HTTP 404); a new one is made"))
        if status == 404:
            return self.unavailable(
                f"its MCP endpoint answered HTTP 404 to {method}", developer_message="Check the backend's url"
            )
        if status is not None and status >= 400 and exc.message in SDK_STATUS_MESSAGES:
            if status >= 500:
                self.breaker.failure()
            headers = {"retry-after": exchange.retry_after} if exchange.retry_after else {}
            failure = failure_for_status(
                self.name,
                status,
                f"{method} was {'refused' if status < 500 else 'not answered'}",
                headers,
                client_credentials=exchange.credentials is not None,
            )
            assert failure is not None
            return GatewayError(failure)
        if exc.code == codec.CONNECTION_CLOSED and (link.dead.is_set() or link.process is not None):
            self.breaker.failure()
            process = link.process
            how = f" ({describe_exit(process.returncode)})" if process and process.returncode is not None else ""
            return self.unavailable(
                f"the connection ended during {method}{how}; the request is not sent again",
                developer_message=(process.stderr_tail() or None) if process else None,
            )
        failure = codec.failure_of_error(self.name, exc.code, exc.message, exc.data)
        if failure.kind in (ErrorKind.UPSTREAM_UNAVAILABLE, ErrorKind.DEADLINE):
            self.breaker.failure()
        return GatewayError(failure)

    # ---- life ----

    async def health(self) -> Health:
        """Up, unless a dead stdio server may not be started again now; with the backend's breaker."""
        link = self._link
        if self.settings.transport == "stdio" and (link is None or not link.alive) and self._last_death:
            wait = self._start_delay()
            if wait is None or wait > 0:
                note = "not restarted (restarts_per_minute: 0)" if wait is None else f"restarting in {wait:.1f} s"
                return Health(state="down", detail=f"{self._last_death}; {note}", breaker=self.breaker.state)
        return Health(breaker=self.breaker.state)

    async def close(self) -> None:
        self._closed = True
        UPSTREAMS.remove(self)  # type: ignore[arg-type]
        self.holds.close()
        if self._revive is not None:
            self._revive.cancel()
            await asyncio.gather(self._revive, return_exceptions=True)
        link, self._link = self._link, None
        if link is not None:
            await link.close()
        companion, self._legacy = self._legacy, None
        if companion is not None:
            await companion.close()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    @property
    def pid(self) -> int | None:
        """The stdio server's process id while one runs (for operators and tests)."""
        link = self._link
        return link.process.pid if link is not None and link.process is not None and link.alive else None


def _answered(exc: MCPError, exchange: Exchange) -> bool:
    """The error is the server's own JSON-RPC answer, not the SDK's word for a transport or HTTP failure."""
    # A 2026-07-28 server answers an error with HTTP 400 and the JSON-RPC error as the body: still its answer.
    transported = exchange.error is None and not exchange.too_large
    return transported and exc.code != codec.CONNECTION_CLOSED and exc.message not in SDK_STATUS_MESSAGES


@contextlib.asynccontextmanager
async def _calling(
    link: Link, caller: relay.Caller | None, pending: relay.Pending | None = None
) -> AsyncIterator[relay.Pending]:
    """The requests sent inside the block are in flight for `caller` (as `pending`, else a new one): what the
    server says back reaches it."""
    pending = relay.Pending(caller) if pending is None else pending
    token, pending_token = relay.CALLER.set(caller), relay.PENDING.set(pending)
    link.pending[pending] = None
    try:
        yield pending
    finally:
        link.pending.pop(pending, None)
        relay.PENDING.reset(pending_token)
        relay.CALLER.reset(token)


async def _held(link: Link, caller: relay.Caller, hold: held.Hold, send: Awaitable[Any]) -> Any:
    """A held request, in flight on the connection until it ends (not just for one round): its questions
    reach `hold`, its logs and progress the caller of the round under way. Its rounds bound it."""
    async with _calling(link, caller, hold.pending):
        return await send


def _error_of(exc: MCPError) -> Upstream:
    """A JSON-RPC error as the MCP front answers its caller with it, as it is."""
    return Upstream(codec.PROTOCOL, error={"code": exc.code, "message": exc.message, "data": exc.data})


def _refused(exc: MCPError) -> UpstreamFailed:
    """A 2026-07-28 retry the gateway itself refuses (its requestState names no call held for it): the MCP
    front answers the JSON-RPC error as it is (the SDK's own refusal), as it would an upstream's."""
    return UpstreamFailed(Failure(kind=ErrorKind.MALFORMED, message=exc.message), _error_of(exc))


def _answers(caller: relay.Caller | None) -> bool:
    """The request carries a 2026-07-28 caller's answers to an earlier `InputRequiredResult`."""
    return caller is not None and (caller.input_responses is not None or caller.request_state is not None)


async def _relayed(link: Link, method: str, params: dict[str, Any], caller: relay.Caller | None) -> Any:
    """`method` sent through the SDK session's typed request (it validates the answer for the era)."""
    session = link.client.session if link.client is not None else None
    assert session is not None
    meta = relay.request_meta(caller)
    answers = caller is not None and caller.modern and link.era == "modern"
    page = types.PaginatedRequestParams(cursor=params.get("cursor"))
    if method == "resources/list":
        return await session.list_resources(params=page)
    if method == "resources/templates/list":
        return await session.list_resource_templates(params=page)
    if method == "prompts/list":
        return await session.list_prompts(params=page)
    if method == "resources/read":
        return await session.read_resource(
            params["uri"],
            input_responses=params.get("inputResponses"),
            request_state=params.get("requestState"),
            meta=meta,  # type: ignore[arg-type]
            allow_input_required=answers,
        )
    if method == "prompts/get":
        return await session.get_prompt(
            params["name"],
            params.get("arguments"),
            input_responses=params.get("inputResponses"),
            request_state=params.get("requestState"),
            meta=meta,  # type: ignore[arg-type]
            allow_input_required=answers,
        )
    if method == "completion/complete":
        request = types.CompleteRequestParams.model_validate(params, by_name=False)
        context = request.context.arguments if request.context is not None else None
        return await session.complete(request.ref, request.argument.model_dump(), context_arguments=context)
    if method in tasks.METHODS:
        if not answers:
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data=method)  # no tasks off 2026-07-28
        request = tasks.TaskRequest(method=method, params=tasks.TaskParams.model_validate(params, by_name=False))
        if meta:
            request.params.meta = {**(request.params.meta or {}), **meta}  # type: ignore[typeddict-item]
        return await session.send_request(request, tasks.TaskAnswer)
    if method in ("resources/subscribe", "resources/unsubscribe"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if method == "resources/subscribe":
                return await session.subscribe_resource(params["uri"])
            return await session.unsubscribe_resource(params["uri"])
    raise ValueError(f"{method} is not relayed")


class _SendAgain(Exception):
    """The request provably never reached the server (or it refused it unrun): it may be sent once more."""

    def __init__(self, error: GatewayError) -> None:
        super().__init__(error.failure.message)
        self.error = error
