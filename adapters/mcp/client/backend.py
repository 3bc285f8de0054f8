"""The `mcp` backend: an MCP server's tools in the catalog, over Streamable HTTP or stdio, either era.

The backend holds its connection (`adapters.mcp.client.link.Link`): the `mcp` SDK's `Client` in
`mode="auto"`, which probes the 2026-07-28 `server/discover` first and falls back to the `initialize`
handshake of the 2025 revisions; the era found is logged (`mcp_connected`). For a server that speaks
both, a handshake-era MCP caller's requests go on a handshake-era companion connection (era affinity,
`_link_for`). Discovery walks `tools/list` page by page (at most `max_pages`); a call is one
`tools/call` bounded by the call's deadline, its answer kept as it came beside the canonical value
(`gateway.model.UpstreamAnswer`). A request that may have reached the server is never sent twice: only
one that provably never left (the connection was refused) is retried. The MCP front's other requests
(resources, prompts, completions, tasks, subscriptions) are `PassThrough`'s.

A stdio server is a supervised child process (`adapters.mcp.client.stdio`): when it dies it is started
again after a pause that doubles with each quick death, at most `restarts_per_minute` times in any 60 s,
and `close()` stops its whole process group. `notifications/tools/list_changed` (and, in the 2026 era, a
`subscriptions/listen` event) asks the gateway to discover the backend again now.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import httpx2
import mcp_types as types
import structlog
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams
from pydantic import ValidationError

from adapters.mcp import codec, relay, tasks
from adapters.mcp.client import held
from adapters.mcp.client.failures import SDK_STATUS_MESSAGES, SendAgain, answered, error_of, refused
from adapters.mcp.client.http import EXCHANGE, Exchange, McpAuth, http_client
from adapters.mcp.client.link import MAX_BACKOFF_S, MODES, SETTLE_S, WINDOW_S, Link, calling, held_call
from adapters.mcp.client.passthrough import OPERATIONS, PassThrough
from adapters.mcp.client.settings import McpBackendSettings
from adapters.mcp.client.stdio import ServerProcess, child_env
from adapters.stdio import describe_exit
from gateway.backends import BackendContext, BaseBackend, Health
from gateway.breaker import CircuitBreaker, Permit
from gateway.catalog import distinct_specs
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import FLAT_NAME_PATTERN, Answered, CallContext, ToolSpec, UpstreamAnswer, UpstreamFailed
from gateway.observability import register_secrets
from gateway.upstream import UPSTREAMS, Credentials, failure_for_status

log = structlog.get_logger("toolplex.mcp")

DEADLINE_SLACK_S: Final = 0.05  # a cancellation this close to the deadline is the deadline passing
MIN_RETRY_AFTER_MS: Final = 1000
LEGACY_RETRY_S: Final = 60.0  # a server that would not speak the handshake era is asked again this long after
# The SDK's HTTP client logs each request's URL at INFO (and headers at DEBUG), its transport the session id:
# warnings only, as the gateway keeps httpx and httpcore.
QUIET_LOGGERS: Final = ("httpx2", "httpcore2", "mcp.client.streamable_http")


def _quiet_sdk_loggers() -> None:
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:  # an operator's explicit level stays
            logger.setLevel(logging.WARNING)


class McpBackend(PassThrough, BaseBackend):
    """One MCP server; declares no optional feature (its sessions are its own, not per caller). Besides its
    tools it serves the MCP front's pass-through requests (`operations`, through the pipeline)."""

    relays = codec.PROTOCOL  # a front of this protocol is a transparent hop (`BaseBackend.relays`)

    operations = frozenset(OPERATIONS)

    def __init__(self, settings: McpBackendSettings, context: BackendContext) -> None:
        self.name = settings.name
        self.settings = settings
        self.toolkit = codec.default_toolkit(settings.name)
        self.max_body = context.max_response_bytes
        self.credentials = Credentials.of(settings.api_key, settings, context.store)
        self.breaker = CircuitBreaker(settings.circuit_breaker.failures, settings.circuit_breaker.cooldown_s)
        self.tools_changed = asyncio.Event()  # set by every list_changed the server sends
        self.tools_said = 0  # how many times the server said its tools changed (the MCP front passes it on)
        self.rediscover = context.rediscover
        self.protocol_version: str | None = None
        # What the server advertised under `capabilities.extensions` on 2026-07-28 (the last connection's).
        self.extensions: dict[str, Any] = {}
        # What it announced of itself (the last main connection's): the MCP front announces the same for it.
        self.capabilities: types.ServerCapabilities | None = None
        self.instructions: str | None = None
        self.listing_hint: tuple[int, str] | None = None  # its tools/list's ttlMs and cacheScope (2026-07-28)
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
                auth=McpAuth(self.credentials.oauth) if self.credentials.oauth is not None else None,
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
        self.capabilities, self.instructions = client.server_capabilities, client.instructions
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
        if met.auth_error is not None:
            return met.auth_error
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

    def tools_listing_changed(self, link: Link, *, said: bool = True) -> None:
        """Discover again: the server said its tools changed (`said`), or a change may have gone unheard."""
        log.info("mcp_tools_changed", backend=self.name, era=link.era, said=said)
        if said:
            self.tools_said += 1
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
        hints: list[tuple[int, str] | None] = []
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
                    raise (failure.error if isinstance(failure, SendAgain) else failure) from None
                except ValidationError as exc:
                    self.breaker.failure()
                    raise self.unavailable(f"its tools/list answer is malformed: {exc.errors()[0]['msg']}") from None
            tools.extend(t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools)
            hints.append((page.ttl_ms, page.cache_scope) if "ttl_ms" in page.model_fields_set else None)
            cursor = page.next_cursor
            if cursor is None:
                self.listing_hint = _joined(hints)
                return tools
        log.warning("mcp_tools_list_truncated", backend=self.name, pages=self.settings.max_pages, tools=len(tools))
        return tools

    # ---- calls ----

    @contextlib.asynccontextmanager
    async def _exchange(self, context: CallContext | None) -> AsyncIterator[Exchange]:
        """An `Exchange` for the requests made inside the block (the HTTP guard writes what each met).

        With `oauth`, the request's token is had before anything is sent, so a refusal of the authorization
        server is this request's error (not a broken connection); the caller's own, with `on_behalf_of`."""
        forwarded = context is not None and self.settings.forward_authorization
        exchange = Exchange(credentials=self.credentials.for_call(context) if forwarded else None)
        oauth = self.credentials.oauth
        if oauth is not None and not forwarded:
            exchange.caller = self.credentials.caller(context)
            if exchange.caller is not None or oauth.discovered:
                await oauth.token(exchange.caller)
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
            except SendAgain as again:
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
        if caller is not None and caller.modern and relay.is_held(caller.request_state):
            try:  # a 2026-07-28 caller's answers to a question this replica's held call asked
                hold = self.holds.resume(caller, context.principal, binding.name, arguments)
            except MCPError as exc:
                raise refused(exc) from None
            round_ = hold.round(caller)
            return await self._outcome(binding, context, caller, hold.link, hold.exchange, hold.pending, round_)
        link = await self._link_for(caller, context.deadline)
        assert link.client is not None
        async with self._exchange(context) as exchange:
            if caller is not None and caller.modern and link.era == "legacy":
                if caller.request_state is not None:  # a state no hold issued (answers alone are ignored: re-asked)
                    raise refused(relay.invalid_state())
                if self.holds.limit > 0:
                    hold = held.Hold(self.holds, context.principal, binding.name, arguments, link, exchange, caller)
                    send = self._send_call(link, binding.name, arguments, None, caller, hold.pending)
                    hold.start(held_call(link, caller, hold.pending, send))
                    round_ = hold.round(caller)
                    return await self._outcome(binding, context, caller, link, exchange, hold.pending, round_)
            async with calling(link, caller) as pending:
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
            own = answered(exc, exchange)  # the server's own error: an MCP caller gets it as it came
            if pending.declined is not None and own:
                raise UpstreamFailed(self._unanswerable(binding.name, pending.declined), error_of(exc)) from None
            failure = self._request_failure(exc, exchange, link, "tools/call")
            if own and not isinstance(failure, SendAgain):
                raise UpstreamFailed(failure.failure, error_of(exc)) from None
            raise failure from None
        except (ValidationError, RuntimeError) as exc:  # a result the SDK could not read, or off its outputSchema
            self.breaker.failure()
            raise self.unavailable(f"its answer to tools/call is malformed: {exc}") from None
        if isinstance(result, tasks.CreatedTask):
            answer = tasks.wire(result)  # as it came: the caller polls the task (its front knows)
        else:
            answer = result.model_dump(by_alias=True, mode="json", exclude_unset=True)  # the members it sent
        self.breaker.success()
        upstream = UpstreamAnswer(codec.PROTOCOL, result=answer)  # for an MCP front to pass on as it is
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

    def _request_failure(self, exc: MCPError, exchange: Exchange, link: Link, method: str) -> GatewayError | SendAgain:
        """An MCPError as the caller's error; `SendAgain` when the request provably never reached the server."""
        if exchange.auth_error is not None:
            return exchange.auth_error
        if exchange.error is not None:
            self.breaker.failure()
            error = self.unavailable(exchange.error)
            return error if exchange.sent else SendAgain(error)
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
            return SendAgain(self.unavailable("its MCP session ended (HTTP 404); a new one is made"))
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
        await self.credentials.close()

    @property
    def pid(self) -> int | None:
        """The stdio server's process id while one runs (for operators and tests)."""
        link = self._link
        return link.process.pid if link is not None and link.process is not None and link.alive else None


def _answers(caller: relay.Caller | None) -> bool:
    """The request carries a 2026-07-28 caller's answers to an earlier `InputRequiredResult`."""
    return caller is not None and (caller.input_responses is not None or caller.request_state is not None)


def _joined(hints: list[tuple[int, str] | None]) -> tuple[int, str] | None:
    """One freshness hint for the pages of a listing: the shortest time, public only when every page is."""
    if not hints or None in hints:
        return None
    given = [hint for hint in hints if hint is not None]
    return min(t for t, _ in given), "public" if all(scope == "public" for _, scope in given) else "private"
