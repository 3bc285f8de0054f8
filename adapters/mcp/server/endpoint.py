"""The MCP front: the catalog to MCP clients over Streamable HTTP, both protocol eras on one endpoint.

The `mcp` SDK's low-level `Server` and its `StreamableHTTPSessionManager` speak the wire: the era is
chosen per request from the `MCP-Protocol-Version` header (none or a handshake version: `initialize`,
`Mcp-Session-Id`, SSE streams, `Last-Event-ID`; 2026-07-28: stateless, `server/discover`, header and
`_meta` validation). This module gives the SDK the catalog (`tools/list`, paginated, filtered by the
caller's permissions and the virtual server's globs) and the one dispatch core (`tools/call`).

What lives here and not in the SDK: authentication (the gateway's API keys and JWTs, 401 with
`WWW-Authenticate`), header values stripped of surrounding whitespace (uvicorn's httptools parser keeps
it; the SDK then rejects `Mcp-Name:  tool `), sessions owned by their principal, each with its own
bounded event log (`adapters.mcp.server.sessions`: another session's `Last-Event-ID` replays nothing), sessions
recorded in the state store under their principal so another replica forwards a session's requests to
its home (and answers 404 for one nobody holds, or someone else's), progress while a call runs,
`notifications/tools/list_changed` when the catalog changes (on 2026-07-28, on the caller's
`subscriptions/listen` stream: `adapters.mcp.server.listen`), what the opening announces
(`adapters.mcp.server.opening`: the upstreams' capabilities and instructions), and the search meta-tools.

The SDK's session manager lives as long as the process (sessions outlive a configuration reload): one
endpoint per path, kept beside the gateway's `FrontServices`; `routes()` only hands it new settings.
Origin and Host are checked by the gateway's guard before any route (server.allowed_origins; a
disallowed Origin gets 403).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import fnmatch
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import mcp_types as types
import orjson
import structlog
from mcp.server import NotificationOptions, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from adapters.mcp import codec, relay, sdk
from adapters.mcp.server import direct, held, opening, passthrough, tasks
from adapters.mcp.server.listen import Listening
from adapters.mcp.server.listing import (
    CALL_TOOL,
    SEARCH_TOOL,
    cache_hint,
    call_answer,
    decode_cursor,
    encode_cursor,
    mcp_names,
    mcp_upstream,
    meta_tools,
    tool_entry,
    unknown_tool,
)
from adapters.mcp.server.passthrough import Passthrough, progress_token
from adapters.mcp.server.sessions import OPENING, EventLogs, SessionManager
from gateway.auth import client_credentials
from gateway.errors import GatewayError
from gateway.forwarding import HomeUnreachable
from gateway.homes import Where
from gateway.http import json_response, nesting_exceeds
from gateway.model import Call, CallContext, Outcome, Principal, ToolSpec, permitted, principal_name
from gateway.oauth.scopes import listening, note_insufficient_scope, said_of

if TYPE_CHECKING:
    from adapters.mcp.server.settings import McpFrontSettings
    from gateway.services import FrontServices

FRONT: Final = "mcp"
ALL: Final = ("*",)  # include globs that take every tool
_BLANKS: Final = b" \t"  # what may surround a header value (RFC 9110 section 5.5)
SERVER_NAME: Final = "toolplex"  # the server's identity, as every result's `serverInfo` stamp carries it
SERVER_TITLE: Final = "Toolplex"
SERVER_DESCRIPTION: Final = "Every tool of the Toolplex catalog the caller may call"
SESSION_HEADER: Final = "mcp-session-id"
SESSION_HEADER_RAW: Final = SESSION_HEADER.encode()
MAX_OPENING_BYTES: Final = 16384  # an `initialize` kept with its session's record, for an adoption, at most
SESSION_SPACE: Final = "session.mcp"  # `gateway.homes` space of the sessions' homes, named "id@path"
log = structlog.get_logger("toolplex.mcp")
# The caller of the request being handled: set before the SDK sees the request, read by the schema
# lookup the SDK calls before any handler (where no request context exists yet).
_CALLER: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("mcp_caller", default=None)

Ctx = ServerRequestContext[Any, Any]


# ---- the endpoint ----


class Endpoint:
    """One MCP endpoint (the main path or a virtual server): a low-level `Server` and its session manager.

    Kept across reloads (its sessions must survive them); `configure()` gives it each new configuration.
    Tools are always read from the services at request time, so a reload shows at once.
    """

    def __init__(self, services: FrontServices, settings: McpFrontSettings, path: str) -> None:
        self.services = services
        self.path = path
        self.settings = settings
        self.include: tuple[str, ...] = ALL
        self.exclude: tuple[str, ...] = ()
        self.events = EventLogs(settings.max_events, settings.max_event_bytes, services.shares)
        # Live handshake-era sessions (by Mcp-Session-Id) for list_changed; forgotten with their session.
        self.sessions: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self.passthrough = Passthrough(self)
        self.listening = Listening(self)  # 2026-07-28 listen streams
        self._told: dict[str, int] = {}  # backend -> its `tools_said` this endpoint passed on
        services.on_rediscovered(self._server_said_tools_changed)
        # The direct path's own: its calls in flight, and per snapshot whether each tool name may take it.
        self.flights = direct.Flights()
        self.direct_tools: tuple[object, Any, Any, dict[str, tuple[bool, ToolSpec | None]]] | None = None
        self.server = self._build()
        self.manager = SessionManager(
            app=self.server,
            logs=self.events,
            shares=services.shares,
            on_discard=self._forget_session,
            retry_interval=settings.retry_ms,
            session_idle_timeout=settings.session_idle_s,
            max_sessions=settings.max_sessions,
            security_settings=None,  # the gateway's guard checks Host and Origin before any route
        )
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event | None = None
        self._listed: int | None = None  # hash of the catalog as last listed, for list_changed

    def configure(self, settings: McpFrontSettings, include: tuple[str, ...], exclude: tuple[str, ...]) -> None:
        self.settings = settings
        self.include, self.exclude = include, exclude
        self.events.configure(settings.max_events, settings.max_event_bytes)
        self.manager.max_sessions = settings.max_sessions

    def _forget_session(self, session_id: str) -> None:
        """A session ended (closed, idle, its client gone): what was kept for it goes too."""
        self.sessions.pop(session_id, None)
        self.passthrough.forget_session(session_id)

    # ---- the SDK's server ----

    def _build(self) -> Server[Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = _Server(
                SERVER_NAME,
                version=self.services.version,
                title=SERVER_TITLE,
                description=SERVER_DESCRIPTION,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                get_tool_input_schema=self._input_schema,
                on_list_resources=self._listed("resources/list", types.ListResourcesResult),
                on_list_resource_templates=self._listed("resources/templates/list", types.ListResourceTemplatesResult),
                on_read_resource=self._read_resource,
                on_subscribe_resource=self._subscribe,
                on_unsubscribe_resource=self._unsubscribe,
                on_list_prompts=self._listed("prompts/list", types.ListPromptsResult),
                on_get_prompt=self._get_prompt,
                on_completion=self._complete,
                on_set_logging_level=self.passthrough.set_logging_level,
                on_subscriptions_listen=self.listening,
            )
        server.add_notification_handler("notifications/initialized", types.NotificationParams, self._initialized)
        # The MCP backends' tasks (io.modelcontextprotocol/tasks): tasks/* relayed, advertised on 2026-07-28.
        self.passthrough.tasks.register(server, self._principal)
        server.extensions_now = lambda: self.passthrough.tasks.advertised(_CALLER.get())
        server.upstreams_now = lambda: self.passthrough.backends(_CALLER.get())
        return server

    def _principal(self, ctx: Ctx) -> Principal | None:
        """The caller of this request (authenticated again by the gateway, as every request)."""
        headers = getattr(ctx.request, "headers", None)
        try:
            return self.services.authenticate(headers if headers is not None else {})
        except GatewayError as exc:
            raise MCPError(types.INVALID_REQUEST, exc.failure.message) from None

    def _visible(self, spec: ToolSpec) -> bool:
        """This endpoint's globs (a virtual server's include/exclude) on flat and qualified names."""
        if not self.exclude and self.include == ALL:  # the main endpoint: every tool, no glob to match
            return True
        names = (spec.flat_name, spec.qualified_name, self.mcp_name(spec))
        included = any(fnmatch.fnmatchcase(n, g) for g in self.include for n in names)
        return included and not any(fnmatch.fnmatchcase(n, g) for g in self.exclude for n in names)

    def tools(self, principal: Principal | None) -> list[ToolSpec]:
        return [spec for spec in self.services.tools(principal) if self._visible(spec)]

    def _names(self) -> tuple[dict[str, ToolSpec], dict[str, str]]:
        """MCP name -> tool and flat name -> MCP name, over the whole catalog, once per snapshot."""

        def build() -> tuple[dict[str, ToolSpec], dict[str, str]]:
            names = mcp_names(self.services.tools(None))
            return names, {spec.flat_name: name for name, spec in names.items()}

        return self.services.derived("mcp-names", build)  # type: ignore[no-any-return]

    def mcp_name(self, spec: ToolSpec) -> str:
        return self._names()[1].get(spec.flat_name, spec.flat_name)

    def find(self, name: str, principal: Principal | None) -> ToolSpec | None:
        """The tool an MCP name stands for, if this caller may call it here (hidden tools are callable)."""
        listed = self._names()[0].get(name)
        spec = (
            self.services.callable_tool(listed.flat_name, principal)
            if listed is not None
            else self.services.callable_tool(name, principal)
        )
        return spec if spec is not None and self._visible(spec) else None

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's input schema for the SDK's `Mcp-Param-*` header check on 2026-07-28 `tools/call`.

        Without it the SDK runs the whole paginated `tools/list` before every call to find one schema.
        Scoped to the caller (None: nothing to validate, and the call then answers "Unknown tool").
        """
        if self.settings.search:
            return None  # the meta-tools declare no header parameters
        spec = self.find(name, _CALLER.get())
        return None if spec is None else spec.input_schema

    async def _initialized(self, ctx: Ctx, params: types.NotificationParams) -> None:
        self._remember(ctx)

    def _remember(self, ctx: Ctx) -> None:
        """Keep this session's handle for list_changed (the least recently seen dropped beyond the bound)."""
        headers = getattr(ctx.request, "headers", None)
        session_id = headers.get(SESSION_HEADER) if headers is not None else None
        if session_id is None:
            return
        self.sessions.pop(session_id, None)
        self.sessions[session_id] = ctx.session
        while len(self.sessions) > self.settings.max_sessions:
            self.sessions.popitem(last=False)

    # ---- resources, prompts, completions: the MCP backends' own, passed through ----

    def _listed(self, method: str, model: type[Any]) -> Callable[..., Awaitable[Any]]:
        async def listed(ctx: Ctx, params: types.PaginatedRequestParams | None) -> Any:
            principal = self._principal(ctx)
            self._remember(ctx)
            cursor = params.cursor if params is not None else None
            answer = await self.passthrough.listing(ctx, principal, method, cursor)
            return model.model_validate(answer, by_name=False)

        return listed

    async def _read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams) -> Any:
        answer = await self.passthrough.read(ctx, self._principal(ctx), params)
        return passthrough.result_of(lambda a: types.ReadResourceResult.model_validate(a, by_name=False), answer)

    async def _get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams) -> Any:
        answer = await self.passthrough.get_prompt(ctx, self._principal(ctx), params)
        return passthrough.result_of(lambda a: types.GetPromptResult.model_validate(a, by_name=False), answer)

    async def _complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        answer = await self.passthrough.complete(ctx, self._principal(ctx), params)
        return types.CompleteResult.model_validate(answer, by_name=False)

    async def _subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        self._remember(ctx)
        return await self.passthrough.subscribe(ctx, self._principal(ctx), str(params.uri), True)

    async def _unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        return await self.passthrough.subscribe(ctx, self._principal(ctx), str(params.uri), False)

    def live_sessions(self) -> dict[str, Any]:
        """The handshake-era sessions open here now, by id."""
        live = set(sdk.open_sessions(self.manager))
        for session_id in [s for s in self.sessions if s not in live]:
            self.sessions.pop(session_id, None)
        return dict(self.sessions)

    async def _list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        principal = self._principal(ctx)
        self._remember(ctx)
        if self.settings.search:
            return types.ListToolsResult(tools=meta_tools())
        offset = decode_cursor(params.cursor if params is not None else None)
        specs = self.tools(principal)
        size = self.settings.page_size
        page = specs[offset : offset + size]
        more = offset + size < len(specs)
        hints = {server.name: server.listing_hint for server in self.passthrough.backends(principal)}
        return types.ListToolsResult(
            tools=[tool_entry(s, self.mcp_name(s)) for s in page],
            next_cursor=encode_cursor(offset + size) if more else None,
            **cache_hint(specs, hints, shared=not self.services.auth_enabled),
        )

    async def _call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        principal = self._principal(ctx)
        self._remember(ctx)
        arguments = dict(params.arguments or {})
        if self.settings.search and params.name == SEARCH_TOOL:
            return await self._search(principal, arguments)
        if self.settings.search and params.name == CALL_TOOL:
            name, inner = arguments.get("name"), arguments.get("arguments") or {}
            if not isinstance(name, str) or not isinstance(inner, dict):
                raise MCPError(types.INVALID_PARAMS, "call_tool takes name (a string) and arguments (an object)")
            return await self._call(ctx, principal, name, inner, params)  # a retry's answers are for the inner call
        return await self._call(ctx, principal, params.name, arguments, params)

    async def _search(self, principal: Principal | None, arguments: dict[str, Any]) -> types.CallToolResult:
        query, top_k = arguments.get("query"), arguments.get("top_k", self.settings.search_top_k)
        if not isinstance(query, str) or not query.strip():
            raise MCPError(types.INVALID_PARAMS, "search_tools needs a query (a non-empty string)")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= 50:
            raise MCPError(types.INVALID_PARAMS, "search_tools' top_k is an integer from 1 to 50")
        found = [s for s in await self.services.search(query, top_k * 2, principal) if self._visible(s)][:top_k]
        listed = [
            tool_entry(s, self.mcp_name(s)).model_dump(by_alias=True, mode="json", exclude_none=True) for s in found
        ]
        value = {"tools": listed}
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": orjson.dumps(value).decode()}], "structuredContent": value},
            by_name=False,
        )

    async def _call(
        self, ctx: Ctx, principal: Principal | None, name: str, arguments: dict[str, Any], params: Any = None
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """One `tools/call` as the SDK hands it over: the caller's headers from its request, progress and the
        upstream's talk back (logs, questions) on its session."""
        with listening(said_of(ctx.request)):  # the SDK's task: a scope refusal is still this request's (OAuth)
            spec = self._callable(name, principal)
        headers = getattr(ctx.request, "headers", None)
        relayed = isinstance(spec.binding, codec.McpTool)  # the upstream talks back (logs, progress, questions)
        context = CallContext(
            front=FRONT,
            principal=principal,
            session_id=headers.get(SESSION_HEADER) if headers is not None else None,
            trace_id=None if ctx.request_id is None else str(ctx.request_id),
            client_credentials=client_credentials(headers) if headers is not None else {},
            peer=self.passthrough.caller(ctx, params) if relayed else None,  # whom the upstream talks back to
        )
        call = Call(tool=spec.flat_name, version=spec.version, arguments=arguments, context=context)
        progress = None if relayed else progress_token(ctx)
        outcome = await self._with_progress(ctx, progress, self.services.call(call))
        if relayed:
            await self._note_held(context, outcome, outcome.spec or spec)
        return await self._result(name, spec, context, outcome, wire=False)

    async def _note_held(self, context: CallContext, outcome: Outcome, spec: ToolSpec) -> None:
        """Record the replica that holds a call for its caller's answers (`held`)."""
        answer = outcome.upstream.result if outcome.upstream is not None else None
        token = answer.get("requestState") if isinstance(answer, dict) else None
        if relay.is_held(token):
            backend = self.services.backend(spec.backend)
            wait_s = getattr(getattr(backend, "settings", None), "answer_timeout_s", 0.0)
            await held.record(self, token, context.principal, wait_s)

    async def call_plain(
        self,
        principal: Principal | None,
        name: str,
        found: ToolSpec | None,
        arguments: dict[str, Any],
        request_id: str | int,
        credentials: dict[str, str],
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """`_call` for the direct path's request, which has no session, asks for no progress and names no MCP
        upstream's tool (`direct.serve` made sure), so it needs none of the SDK's request context. `found` is
        `find(name, None)` (the direct path keeps it per snapshot): what `find` gives this caller once its
        permissions allow it. A success or a tool error comes back as the result's JSON, which the direct path
        writes as it is."""
        if found is None or not permitted(principal, found):
            if found is not None and principal is not None:
                note_insufficient_scope(principal.scopes_for(found))  # the OAuth layer's 403 challenge
            raise unknown_tool(name)
        context = CallContext(
            front=FRONT, principal=principal, trace_id=str(request_id), client_credentials=credentials
        )
        call = Call(tool=found.flat_name, version=found.version, arguments=arguments, context=context)
        return await self._result(name, found, context, await self.services.call(call), wire=True)

    def _callable(self, name: str, principal: Principal | None) -> ToolSpec:
        spec = self.find(name, principal)
        if spec is None:
            raise unknown_tool(name)
        return spec

    async def _result(
        self, name: str, spec: ToolSpec, context: CallContext, outcome: Outcome, *, wire: bool
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """A call's outcome as MCP: an MCP upstream's own answer as it came (its result, `isError` result,
        interim result or JSON-RPC error: a transparent hop), else a success rendered from the canonical value
        (as JSON when `wire`), a tool error as an `isError` result (as JSON when `wire`), or a protocol error
        raised as `MCPError`."""
        upstream = mcp_upstream(outcome)
        raw = upstream.result if upstream is not None and isinstance(upstream.result, dict) else None
        own_error = upstream is not None and isinstance(upstream.error, dict)  # raised by `call_answer`
        # An upstream's new task: its id sealed for this caller.
        if raw is not None and not own_error and raw.get("resultType") == tasks.CREATED:
            return await self.passthrough.tasks.created(context.principal, (outcome.spec or spec).backend, raw)
        answer = call_answer(name, spec, outcome)  # as the console presents it too
        if wire or not isinstance(answer, dict):
            return answer
        return types.CallToolResult.model_validate(answer, by_name=False)

    async def _with_progress(self, ctx: Ctx, progress: str | int | None, work: Awaitable[Any]) -> Any:
        """Await `work`; while it runs, a progress notification every `progress_interval_s` when asked for.

        Cancelling this handler (the client's `notifications/cancelled`) cancels `work`: the dispatch ends.
        """
        if progress is None:
            return await work
        task = asyncio.ensure_future(work)
        ticks = 0
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.settings.progress_interval_s)
                if done:
                    return task.result()
                ticks += 1
                await ctx.session.report_progress(
                    ticks, None, f"Running ({ticks * self.settings.progress_interval_s:g} s)"
                )
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    # ---- list_changed ----

    def _catalog_hash(self) -> int:
        return hash(tuple((self.mcp_name(s), s.version, s.description) for s in self.tools(None)))

    async def _watch_catalog(self) -> None:
        """Tell every open session, and every listen stream that asked, when the tools this endpoint serves
        changed (reload or rediscovery).

        Woken by each snapshot swap: told at once, then once more after `list_changed_poll_s` if a burst of
        rediscoveries changed it again meanwhile; an idle gateway does no work at all.
        """
        self._listed = self._catalog_hash()
        while True:
            await self.services.snapshot_swapped()
            await self._tell_if_changed()
            await asyncio.sleep(self.settings.list_changed_poll_s)  # the burst's later swaps land in this wait
            await self._tell_if_changed()

    async def _server_said_tools_changed(self, name: str) -> None:
        """A backend was discovered again. When it is an MCP server that said its tools changed, its word is
        passed on, even when the catalog came out the same (as the server's own clients hear it)."""
        backend = self.services.backend(name)
        said = getattr(backend, "tools_said", 0) if name in self.services.backend_names("mcp") else 0
        told, self._told[name] = self._told.get(name, 0), said
        await self._tell_if_changed(said=said != told)

    async def _tell_if_changed(self, *, said: bool = False) -> None:
        current = self._catalog_hash()
        if current == self._listed and not said:
            return
        self._listed = current
        await self.listening.publish(types.ToolListChangedNotification())
        for session_id, session in self.live_sessions().items():
            try:
                await session.send_notification(types.ToolListChangedNotification())
            except Exception as exc:  # a session that just ended: nothing to tell
                log.info("list_changed_not_sent", session=session_id[:12], error=type(exc).__name__)
        log.info("tools_list_changed", path=self.path, sessions=len(self.sessions))

    # ---- HTTP ----

    async def _ensure_started(self) -> None:
        """Run the session manager (its task group lives as long as the process) on first use."""
        if self._ready is None:
            self._ready = asyncio.Event()
            ready = self._ready

            async def run() -> None:
                async with self.manager.run():
                    ready.set()
                    await self._watch_catalog()

            # A context of its own: the first request's (its trace id, its caller) is no business of every session's.
            self._task = asyncio.get_running_loop().create_task(
                run(), name=f"mcp-sessions{self.path}", context=contextvars.Context()
            )
            self.services.at_close(self._stop)
        await self._ready.wait()

    async def _stop(self) -> None:
        """At the gateway's close: end the session manager (its sessions and streams) and the catalog watch."""
        task, self._task, self._ready = self._task, None, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # RFC 9110 section 5.5: a field value's surrounding whitespace is not part of it (httptools keeps it).
        for _, value in scope["headers"]:
            if value.strip(_BLANKS) is not value:  # bytes.strip gives the very same object when nothing goes
                scope = dict(scope, headers=[(k, v.strip(_BLANKS)) for k, v in scope["headers"]])
                break
        headers = Headers(scope=scope)
        try:
            principal = self.services.authenticate(headers)
        except GatewayError as exc:
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": types.INVALID_REQUEST, "message": exc.failure.message},
            }
            await json_response(body, status=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        body = b""
        if scope["method"] == "POST":
            receive, refusal, body = await self._within_limits(scope, receive)
            if refusal is None and principal is not None and principal.grants:
                refusal = self._lacking_scope(principal, body)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self._ensure_started()
        _CALLER.set(principal)  # this request's task only: read by _input_schema
        OPENING.set(principal_name(principal))  # whose a session this request opens is (`SessionManager`)
        session_id = _first(scope["headers"], SESSION_HEADER_RAW)
        if session_id is not None:
            refusal = await self._session_route(scope, receive, session_id, principal, body)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            if session_id in self.manager.adopted and scope["method"] == "GET":
                scope = self._resumed_after_move(scope, session_id)
        else:  # the common stateless request is answered without the SDK's per-request machinery
            if (replayed := await direct.serve(self, principal, scope, receive, send)) is None:
                return
            receive = replayed
            if scope["method"] == "POST" and _first(scope["headers"], b"mcp-method") in relay.HELD_METHODS:
                # a retry answering the questions of a call another replica holds is answered there
                forwarded, receive = await held.route(self, principal, scope, receive)
                if forwarded is not None:
                    await forwarded(scope, receive, send)
                    return
        opening = _opening(body) if session_id is None else None
        await self.manager.handle_request(scope, receive, self._recording(send, session_id, principal, scope, opening))

    def _session_name(self, session_id: str) -> str:
        """A session's name among its principal's homes (`gateway.homes`, space `SESSION_SPACE`): its id at this
        endpoint (the same id at another endpoint, a virtual server, is no session there, and never reaches or
        ends this one's record)."""
        return f"{session_id}@{self.path}"

    def _lacking_scope(self, principal: Principal, body: bytes) -> Response | None:
        """A `tools/call` of a tool the caller's OAuth token lacks the scope for, refused before any session task
        answers it (whose stream would have begun with 200): the front's "Unknown tool" error, which the OAuth
        layer answers 403 `insufficient_scope` with the scopes that allow it (`gateway.oauth.challenge`)."""
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        params = message.get("params") if isinstance(message, dict) else None
        name = params.get("name") if isinstance(params, dict) and message.get("method") == "tools/call" else None
        if not isinstance(name, str) or self.find(name, principal) is not None:
            return None
        listed = self._names()[0].get(name) or self.services.callable_tool(name, None)
        scopes = principal.scopes_for(listed) if listed is not None and self._visible(listed) else ()
        if not scopes:
            return None
        note_insufficient_scope(scopes)
        error = {"code": types.INVALID_PARAMS, "message": f"Unknown tool: {name}", "data": {"name": name}}
        return json_response({"jsonrpc": "2.0", "id": message.get("id"), "error": error})

    async def _within_limits(self, scope: Scope, receive: Receive) -> tuple[Receive, Response | None, bytes]:
        """A POST body within `limits.max_body_bytes` and `limits.max_json_depth`, as every front's, read once
        and replayed to what reads it next (the direct path, the SDK), with its bytes; else the JSON-RPC error
        that refuses it (413, or 400 with -32700), before anything parses it any further."""
        limits = self.services.limits
        declared = _first(scope["headers"], b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
            return receive, _refused(413, types.INVALID_REQUEST, _too_large(limits.max_body_bytes)), b""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > limits.max_body_bytes:
                refusal = _refused(413, types.INVALID_REQUEST, _too_large(limits.max_body_bytes))
                return direct.replay(messages, receive), refusal, b""
            if not message.get("more_body", False):
                break
        replayed = direct.replay(messages, receive)
        depth = limits.max_json_depth
        body = b"".join(m.get("body", b"") for m in messages)
        # fewer bytes than twice the depth cannot nest deeper
        if size > 2 * depth and body.count(b"[") + body.count(b"{") > depth and _nests_deeper(body, depth):
            message = f"Request body nests arrays/objects more than {depth} levels deep (limits.max_json_depth)"
            return replayed, _refused(400, types.PARSE_ERROR, message), body
        return replayed, None, body

    async def _session_route(
        self, scope: Scope, receive: Receive, session_id: str, principal: Principal | None, body: bytes
    ) -> Response | None:
        """None to serve the request here; else the answer: the home replica's, or 404 for a session nobody has.
        A session whose home stopped, was lost or cannot be connected to is adopted here (`gateway.homes`)."""
        homes, owner, name = self.services.homes, principal_name(principal), self._session_name(session_id)
        record = await homes.find(SESSION_SPACE, owner, name)  # another principal's: unknown
        if record is None:
            return _not_found()
        request = Request(scope, receive)
        route = await homes.route(record.get("home"), request, movable=True)
        if route.where is Where.HERE:
            if session_id not in sdk.open_sessions(self.manager):
                await homes.forget(SESSION_SPACE, owner, name)
                return _not_found()
            await homes.touch(SESSION_SPACE, owner, name, self.settings.session_idle_s)
            return None
        if route.where is Where.GONE:
            return await self._adopt(scope, session_id, owner, record)
        try:
            return await homes.forward(request, str(route.url), body=body if scope["method"] == "POST" else None)
        except HomeUnreachable:  # nothing reached the home: the session goes on here
            return await self._adopt(scope, session_id, owner, record)
        except GatewayError as exc:
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": types.INTERNAL_ERROR, "message": exc.failure.message},
            }
            return json_response(body, status=503)

    def _resumed_after_move(self, scope: Scope, session_id: str) -> Scope:
        """A GET of an adopted session resuming after an event of its old home (which this replica never had):
        served as a new standalone stream rather than an empty replay its client would resume again and again."""
        last = _first(scope["headers"], b"last-event-id")
        if last is None or self.events.knows(session_id, last):
            return scope
        return {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"last-event-id"]}

    async def _adopt(self, scope: Scope, session_id: str, owner: str, record: dict[str, Any]) -> Response | None:
        """Open here the session whose home is gone (None: serve the request here), or 404 when it cannot be
        (it was opened before its `initialize` was kept, or this replica has no room for it)."""
        homes, name = self.services.homes, self._session_name(session_id)
        opening = record.get("opening")
        if isinstance(opening, dict) and await self.manager.adopt(session_id, owner, opening, scope):
            await homes.record(SESSION_SPACE, owner, name, self.settings.session_idle_s, opening=opening)
            log.info("mcp_session_adopted", session=session_id[:12], former_home=record.get("home"), path=self.path)
            return None
        await homes.forget(SESSION_SPACE, owner, name)
        return _not_found()

    def _recording(
        self,
        send: Send,
        session_id: str | None,
        principal: Principal | None,
        scope: Scope,
        opening: dict[str, Any] | None,
    ) -> Callable[[Message], Awaitable[None]]:
        """`send`, recording a session the answer opens (its home: this replica; its client's `initialize`
        params, `opening`, for another replica to adopt it) and forgetting one DELETEd."""
        homes, idle = self.services.homes, self.settings.session_idle_s
        owner = principal_name(principal)

        async def recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                if session_id is None and status < 400:
                    opened = Headers(raw=message.get("headers", [])).get(SESSION_HEADER)
                    if opened is not None:
                        facts = {"opening": opening} if opening is not None else {}
                        await homes.record(SESSION_SPACE, owner, self._session_name(opened), idle, **facts)
                elif session_id is not None and scope["method"] == "DELETE" and status < 400:
                    await homes.forget(SESSION_SPACE, owner, self._session_name(session_id))
                    self.sessions.pop(session_id, None)
            await send(message)

        return recording


def _opening(body: bytes) -> dict[str, Any] | None:
    """The params of an `initialize` request (kept with the session it opens), when small enough to keep."""
    if b'"initialize"' not in body or len(body) > MAX_OPENING_BYTES:
        return None
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    return params if isinstance(params, dict) else None


def _first(raw: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of a header (as Starlette's `Headers.get` gives it), read straight off the ASGI list."""
    for key, value in raw:
        if key == name:
            return value.decode("latin-1")
    return None


def _too_large(limit: int) -> str:
    return f"Request body is larger than the limit of {limit} bytes (limits.max_body_bytes)"


def _nests_deeper(body: bytes, depth: int) -> bool:
    """Arrays and objects in a JSON body nest deeper than `depth` (a body that is no JSON: the SDK says so)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return "depth limit exceeded" in str(exc)  # orjson's own bound, above any limit allowed
    return nesting_exceeds(document, depth)


def _refused(status: int, code: int, message: str) -> Response:
    return json_response({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}, status=status)


def _not_found() -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": "Session not found"}}
    return json_response(body, status=404)


class _Server(Server[Any]):
    """The low-level server, announcing in the handshake era the list changes it sends (its catalog's, and the
    prompts' and resources' its upstreams send), and otherwise what its upstreams announced (`opening`)."""

    # The MCP backends the current request's caller reaches (their resources, prompts and tasks).
    upstreams_now: Callable[[], list[relay.Server]] | None = None
    # The extensions the MCP backends bring, for this request's caller (`server/discover` on 2026-07-28 only).
    extensions_now: Callable[[], dict[str, dict[str, Any]]] | None = None

    @property  # type: ignore[override]
    def instructions(self) -> str | None:
        """The caller's upstreams' instructions, read when a client opens (`initialize`, `server/discover`)."""
        return opening.instructions(self.upstreams_now()) if self.upstreams_now is not None else None

    @instructions.setter
    def instructions(self, _value: str | None) -> None:
        """The gateway has no instructions of its own (the SDK's constructor sets None)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(
            tools_changed=True, prompts_changed=True, resources_changed=True
        )
        return super().create_initialization_options(options, experimental_capabilities, extensions or {})

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        if extensions is None and self.extensions_now is not None and protocol_version in MODERN_PROTOCOL_VERSIONS:
            extensions = {**self.extensions, **self.extensions_now()} or None
        own = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        return own if self.upstreams_now is None else opening.capabilities(own, self.upstreams_now())


def endpoint(services: FrontServices, settings: McpFrontSettings, path: str) -> Endpoint:
    """The endpoint at `path`: one per gateway, kept by its services across reloads (its sessions outlive them)."""
    return services.kept((FRONT, "endpoint", path), lambda: Endpoint(services, settings, path))  # type: ignore[no-any-return]


def routes(services: FrontServices, settings: McpFrontSettings) -> list[BaseRoute]:
    """The MCP endpoint and one per virtual server (`gateway.plugins.FrontPlugin`)."""
    main = endpoint(services, settings, settings.path)
    main.configure(settings, ("*",), ())
    served: list[BaseRoute] = [Route(settings.path, main, methods=["GET", "POST", "DELETE"])]
    for name, virtual in settings.servers.items():
        path = f"{settings.path}/{name}"
        one = endpoint(services, settings, path)
        one.configure(settings, tuple(virtual.include), tuple(virtual.exclude))
        served.append(Route(path, one, methods=["GET", "POST", "DELETE"]))
    return served
