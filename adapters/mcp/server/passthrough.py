"""The MCP front's pass-through: the resources, resource templates, prompts and completions of `kind: mcp`
backends, served under their own names and URIs, and the caller an upstream talks back to during a request.

The canonical model knows tools only: these stay MCP's own, relayed from the MCP front to the MCP
backend that owns them and back unchanged (results and the server's JSON-RPC errors as they came).

- Lists (`resources/list`, `resources/templates/list`, `prompts/list`) walk the backends the caller
  may see, one upstream page per answer; the cursor names the backend and its own cursor.
- A prompt's name is its own unless the backend's routing keys rename it (`rename`) or put it under a
  toolkit (`toolkit`, `prefix`: then `<toolkit>_<name>`, as tools are named). A resource keeps its URI.
- `resources/read` and `resources/subscribe` go to the backend that listed the URI, else whose
  template matches it, else (one backend) to that one; `prompts/get` to the backend that listed the name,
  else (one backend whose names are unchanged) to that one; completion goes to the prompt's or template's
  owner.
- A caller sees the resources and prompts of a backend when it may call one of its tools here (or
  may call every tool, on the main endpoint).
- The tasks a backend's tools create (`io.modelcontextprotocol/tasks`, 2026-07-28) are relayed by
  `adapters.mcp.tasks`: `tasks/*` goes to the backend that created the task.
- Handshake-era subscriptions are the front's own: a URI is subscribed upstream for the first
  session that asks, and the server's `notifications/resources/updated` reaches every session
  that subscribed to it; list changes reach every open session.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, cast

import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.uri_template import UriTemplate
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from adapters.mcp import codec, relay
from adapters.mcp.relay import Server
from adapters.mcp.server import held
from adapters.mcp.server.listing import own_result
from adapters.mcp.server.tasks import Tasks
from gateway.auth import client_credentials
from gateway.errors import ErrorKind, GatewayError
from gateway.model import Call, CallContext, Principal, RequestKind, principal_name
from gateway.ownership import OwnedEntries

if TYPE_CHECKING:
    from adapters.mcp.server.endpoint import Ctx, Endpoint

log = structlog.get_logger("toolplex.mcp")

DEFAULT_LOG_LEVEL: Final = "debug"  # a handshake-era session that never set one hears everything, as directly
MAX_SUBSCRIPTIONS: Final = 10_000  # (uri, session) pairs kept per endpoint, each principal its share
OWNERS_REFRESH_S: Final = 5.0  # how often an unknown prompt name or URI may list the upstreams again
LISTED: Final = {
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


# ---- the caller ----


class FrontCaller(relay.CallerBase):
    """One request's MCP client, as the backend relays to it (`relay.Caller`)."""

    def __init__(self, ctx: Ctx, log_level: str | None, params: Any = None) -> None:
        self.ctx = ctx
        self._log_level = log_level
        self.params = params

    @property
    def modern(self) -> bool:
        return self.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def capabilities(self) -> dict[str, Any]:
        declared = self.ctx.session.client_capabilities
        return {} if declared is None else declared.model_dump(by_alias=True, mode="json", exclude_none=True)

    @property
    def log_level(self) -> str | None:
        return self._log_level

    @property
    def progress_token(self) -> str | int | None:
        return progress_token(self.ctx)

    @property
    def input_responses(self) -> dict[str, Any] | None:
        return getattr(self.params, "input_responses", None)

    @property
    def request_state(self) -> str | None:
        return getattr(self.params, "request_state", None)

    async def notify(self, notification: types.ServerNotification) -> None:
        await self.ctx.session.send_notification(notification, related_request_id=self.ctx.request_id)

    async def ask(self, request: types.ServerRequest, result_type: type[Any]) -> Any:
        if self.modern:
            raise MCPError(types.INVALID_REQUEST, "A 2026-07-28 client is asked by InputRequiredResult only")
        metadata = ServerMessageMetadata(related_request_id=self.ctx.request_id)
        return await self.ctx.session.send_request(request, result_type, metadata=metadata)  # type: ignore[arg-type]


def progress_token(ctx: Ctx) -> str | int | None:
    """The request's `_meta.progressToken` (as parsed by the SDK, else as sent)."""
    meta = ctx.meta or {}
    token = meta.get("progressToken")
    if token is None and isinstance(ctx.params, dict):
        sent = ctx.params.get("_meta")
        token = sent.get("progressToken") if isinstance(sent, dict) else None
    return token if isinstance(token, str | int) else None


# ---- names ----


def front_toolkit(backend: Server) -> str | None:
    """The toolkit the routing keys put a backend's prompts under (None: their own names)."""
    settings = backend.settings
    return settings.routed_toolkit(backend.toolkit) if settings.renames_toolkit else None


def prompt_name(backend: Server, own: str) -> str:
    rename = backend.settings.rename or {}
    name = rename.get(own, own)
    toolkit = front_toolkit(backend)
    return name if toolkit is None else f"{toolkit}_{name}"


def encode_cursor(index: int, upstream: str | None) -> str:
    return base64.urlsafe_b64encode(f"p:{index}:{upstream or ''}".encode()).decode()


def decode_cursor(cursor: str | None) -> tuple[int, str | None]:
    if cursor is None:
        return 0, None
    try:
        kind, index, upstream = base64.urlsafe_b64decode(cursor.encode()).decode().split(":", 2)
        if kind != "p" or int(index) < 0:
            raise ValueError(kind)
    except (ValueError, UnicodeDecodeError):
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor {cursor!r}: pass a nextCursor this server gave") from None
    return int(index), upstream or None


def _unavailable(exc: GatewayError) -> MCPError:
    return codec.error_of(exc.failure)


CALLER_KINDS: Final = frozenset(
    {ErrorKind.RATE_LIMITED, ErrorKind.FORBIDDEN, ErrorKind.UNAUTHENTICATED, ErrorKind.MALFORMED, ErrorKind.TOO_LARGE}
)  # the caller's own to fix: never read as "this backend is down" by a listing over several


# ---- the pass-through ----


class Passthrough:
    """The pass-through of one MCP endpoint (see the module docstring)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.prompts: dict[str, tuple[str, str]] = {}  # front name -> (backend, the server's own name)
        self.resources: dict[str, str] = {}  # uri -> backend
        self.templates: dict[str, tuple[str, UriTemplate]] = {}  # template -> (backend, parsed)
        self.log_levels: dict[str, str] = {}  # session id -> level (forgotten with the session)
        # (uri, session id) a session subscribed to, owned by the session's principal (its share of the bound).
        self.subscribed: OwnedEntries[tuple[str, str], tuple[str, str]] = OwnedEntries(
            max_entries=MAX_SUBSCRIPTIONS, shares=endpoint.services.shares, what="resource subscriptions"
        )
        self._walked: dict[tuple[str, tuple[str, ...]], float] = {}  # (method, backends) -> when last listed whole
        self.tasks = Tasks(self)  # the backends' tasks (io.modelcontextprotocol/tasks), relayed

    # ---- which backends ----

    def backends(self, principal: Principal | None) -> list[Server]:
        """The `kind: mcp` backends whose resources and prompts this caller sees here, in configuration order."""
        services = self.endpoint.services
        shown = {spec.backend for spec in self.endpoint.tools(principal)}
        everything = (principal is None or principal.tools is None) and self.endpoint.include == ("*",)
        found = []
        for name in services.backend_names("mcp"):
            backend = services.backend(name)
            if backend is not None and (everything or name in shown):
                server = cast(Server, backend)
                server.listen(self.notice)  # what it says of its lists reaches the callers (kept once)
                found.append(server)
        return found

    def _named(self, principal: Principal | None, name: str) -> Server | None:
        return next((b for b in self.backends(principal) if b.name == name), None)

    # ---- the caller ----

    def caller(self, ctx: Ctx, params: Any = None) -> FrontCaller:
        return FrontCaller(ctx, self._log_level(ctx), params)

    def _log_level(self, ctx: Ctx) -> str | None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            level = (ctx.meta or {}).get(relay.LOG_LEVEL_META_KEY)
            return level if isinstance(level, str) else None
        session = _session_id(ctx)
        return self.log_levels.get(session, DEFAULT_LOG_LEVEL) if session else DEFAULT_LOG_LEVEL

    async def set_logging_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """Handshake era: the level this session's relayed log lines start at (the front filters nothing
        itself: the level goes upstream with each request, so the server sends no more than that). Kept
        while the session lives (`forget_session`), so it holds no more entries than there are sessions."""
        session = _session_id(ctx)
        if session and session in self.endpoint.manager.owners:
            self.log_levels[session] = params.level
        return types.EmptyResult()

    def forget_session(self, session: str) -> None:
        """A session ended: its log level and subscriptions go (the upstream hears of the last unsubscribe
        at its next listen or subscription change)."""
        self.log_levels.pop(session, None)
        for owner, key, _ in list(self.subscribed.items()):
            if key[1] == session:
                self.subscribed.pop(owner, key)

    # ---- through the pipeline ----

    async def request(
        self,
        kind: RequestKind,
        backend: Server,
        method: str,
        params: dict[str, Any],
        ctx: Ctx,
        principal: Principal | None,
        typed: Any = None,
    ) -> dict[str, Any]:
        """One request of the caller's to `backend` through the gateway's pipeline (its limits, middleware,
        breaker, metrics and call log, and the credentials the backend sends for this caller); the upstream's
        answer as it came, its own JSON-RPC error raised as it came (`MCPError`), the gateway's as
        `GatewayError`."""
        headers = getattr(ctx.request, "headers", None)
        context = CallContext(
            front="mcp",
            principal=principal,
            session_id=_session_id(ctx),
            trace_id=None if ctx.request_id is None else str(ctx.request_id),
            client_credentials=client_credentials(headers) if headers is not None else {},
            peer=self.caller(ctx, typed),
        )
        call = Call(tool=method, arguments=params, context=context, kind=kind, backend=backend.name)
        outcome = await self.endpoint.services.call(call)
        if outcome.error is None:
            return own_result(outcome.value) if isinstance(outcome.value, dict) else outcome.value  # type: ignore[no-any-return]
        answered = outcome.upstream.error if outcome.upstream is not None else None
        if isinstance(answered, dict):  # the server's own answer
            raise MCPError(answered["code"], answered["message"], answered.get("data"))
        raise GatewayError(outcome.error)

    # ---- lists ----

    async def listing(self, ctx: Ctx, principal: Principal | None, method: str, cursor: str | None) -> dict[str, Any]:
        """One page of `method` over the caller's backends: the next backend's page that has anything."""
        index, upstream = decode_cursor(cursor)
        backends = self.backends(principal)
        key = LISTED[method]
        while index < len(backends):
            backend = backends[index]
            try:
                page = await self.request(RequestKind.LIST, backend, method, {"cursor": upstream}, ctx, principal)
            except GatewayError as exc:
                if len(backends) == 1 or exc.failure.kind in CALLER_KINDS:
                    raise _unavailable(exc) from None
                log.warning("mcp_listing_skipped", backend=backend.name, method=method, error=exc.failure.message)
                page = {key: []}
            except MCPError as exc:
                if exc.code != types.METHOD_NOT_FOUND or len(backends) == 1:
                    raise
                page = {key: []}  # a server without this feature lists nothing
            items = [self._remember(backend, method, item) for item in page.get(key) or []]
            following = page.get("nextCursor")
            if following:
                return {**page, key: items, "nextCursor": encode_cursor(index, following)}
            index, upstream = index + 1, None
            if items or index >= len(backends):
                more = index < len(backends)
                page = {k: v for k, v in page.items() if k != "nextCursor"}
                return {**page, key: items, **({"nextCursor": encode_cursor(index, None)} if more else {})}
        return {key: []}

    def _remember(self, backend: Server, method: str, item: dict[str, Any]) -> dict[str, Any]:
        """Note which backend owns a listed item; a prompt under its front name."""
        if method == "resources/list" and isinstance(item.get("uri"), str):
            self.resources[item["uri"]] = backend.name
        elif method == "resources/templates/list" and isinstance(item.get("uriTemplate"), str):
            template = item["uriTemplate"]
            try:
                self.templates[template] = (backend.name, UriTemplate.parse(template))
            except ValueError:
                log.info("mcp_template_unmatched", backend=backend.name, template=template)
        elif method == "prompts/list" and isinstance(item.get("name"), str):
            shown = prompt_name(backend, item["name"])
            self.prompts[shown] = (backend.name, item["name"])
            item = {**item, "name": shown}
        return item

    # ---- owners ----

    async def _prompt_owner(self, ctx: Ctx, principal: Principal | None, name: str) -> tuple[Server, str]:
        if name not in self.prompts:
            await self._list_all(ctx, principal, "prompts/list")
        owner = self.prompts.get(name)
        backend = self._named(principal, owner[0]) if owner else None
        if backend is None or owner is None:
            backends = self.backends(principal)
            if len(backends) == 1 and front_toolkit(backends[0]) is None and not backends[0].settings.rename:
                # One server, its names unchanged: its own answer to a name it did not list, as resources/read.
                return backends[0], name
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {name}", data={"name": name})
        return backend, owner[1]

    async def _resource_owner(self, ctx: Ctx, principal: Principal | None, uri: str) -> Server:
        backends = self.backends(principal)
        if len(backends) == 1:
            return backends[0]  # its own answer, a not-found included, is relayed as it is
        name = self._owner_of(uri)
        if name is None:
            await self._list_all(ctx, principal, "resources/list")
            await self._list_all(ctx, principal, "resources/templates/list")
            name = self._owner_of(uri)
        backend = self._named(principal, name) if name is not None else None
        if backend is None:
            raise MCPError(types.INVALID_PARAMS, "Resource not found", data={"uri": uri})
        return backend

    def _owner_of(self, uri: str) -> str | None:
        if uri in self.resources:
            return self.resources[uri]
        for backend, template in self.templates.values():
            if template.match(uri) is not None:
                return backend
        return None

    async def _list_all(self, ctx: Ctx, principal: Principal | None, method: str) -> None:
        """Every page of `method` once (bounded by each backend's max_pages), to learn who owns what: at most
        once per `OWNERS_REFRESH_S` for the same backends, so names nobody has (a client guessing) cost the
        upstreams nothing more. Each page is the caller's own request (its rate limits apply)."""
        backends = self.backends(principal)
        walked = (method, tuple(b.name for b in backends))
        now = time.monotonic()
        if now - self._walked.get(walked, float("-inf")) < OWNERS_REFRESH_S:
            return
        self._walked[walked] = now
        cursor: str | None = None
        for _ in range(sum(b.settings.max_pages for b in backends) + 1):
            page = await self.listing(ctx, principal, method, cursor)
            cursor = page.get("nextCursor")
            if cursor is None:
                return

    def relisted(self) -> None:
        """A server said its prompts or resources changed: the next unknown name looks again at once."""
        self._walked.clear()

    # ---- requests ----

    async def read(self, ctx: Ctx, principal: Principal | None, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        backend = await self._resource_owner(ctx, principal, uri)
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        return await self._relay(
            RequestKind.READ, backend, "resources/read", {**wire, "uri": uri}, ctx, params, principal
        )

    async def get_prompt(self, ctx: Ctx, principal: Principal | None, params: types.GetPromptRequestParams) -> Any:
        backend, own = await self._prompt_owner(ctx, principal, params.name)
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        return await self._relay(
            RequestKind.PROMPT, backend, "prompts/get", {**wire, "name": own}, ctx, params, principal
        )

    async def complete(self, ctx: Ctx, principal: Principal | None, params: types.CompleteRequestParams) -> Any:
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            backend, own = await self._prompt_owner(ctx, principal, ref.name)
            wire["ref"] = {**wire["ref"], "name": own}
        else:
            template = str(ref.uri)
            if template not in self.templates:
                await self._list_all(ctx, principal, "resources/templates/list")
            owner = self.templates.get(template)
            found = self._named(principal, owner[0]) if owner else None
            if found is None:
                raise MCPError(types.INVALID_PARAMS, f"Unknown resource template: {template}")
            backend = found
        return await self._relay(RequestKind.COMPLETE, backend, "completion/complete", wire, ctx, params, principal)

    async def subscribe(
        self, ctx: Ctx, principal: Principal | None, uri: str, subscribe: bool, holder: str | None = None
    ) -> types.EmptyResult:
        """Remember a holder's interest in `uri` (a handshake-era session, or a 2026-07-28 listen stream:
        `holder`); the upstream hears of the first and the last one."""
        session = holder or _session_id(ctx)
        owner = principal_name(principal)
        backend = await self._resource_owner(ctx, principal, uri)
        others = any(u == uri and s != session for _, (u, s), _ in self.subscribed.items())
        backend.listen(self.notice)  # kept once, however often asked
        if backend.era == "modern" and subscribe and self._owner_of(uri) is None:
            # A 2026-07-28 server has no resources/subscribe: the URI is checked here, and the backend's
            # listen stream asks for its updates (`McpBackend.operate`, `watch`).
            await self._list_all(ctx, principal, "resources/list")
            await self._list_all(ctx, principal, "resources/templates/list")
            if self._owner_of(uri) is None:
                raise MCPError(types.INVALID_PARAMS, "Resource not found", data={"uri": uri})
        if not others:
            method = "resources/subscribe" if subscribe else "resources/unsubscribe"
            await self._relay(RequestKind.SUBSCRIBE, backend, method, {"uri": uri}, ctx, None, principal)
        if session:
            self.subscribed.pop(owner, (uri, session))
            if subscribe:
                try:
                    self.subscribed.put(owner, (uri, session), (uri, session))
                except GatewayError as exc:  # every principal's share of subscriptions is full
                    raise _unavailable(exc) from None
        return types.EmptyResult()

    async def _relay(
        self,
        kind: RequestKind,
        backend: Server,
        method: str,
        params: dict[str, Any],
        ctx: Ctx,
        typed: Any = None,
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        try:
            answer = await self.request(kind, backend, method, params, ctx, principal, typed)
        except GatewayError as exc:
            raise _unavailable(exc) from None
        # A request held for this caller's answers (`held`): where it is held.
        token = answer.get("requestState") if answer.get("resultType") == "input_required" else None
        await held.record(self.endpoint, token, principal, backend.settings.answer_timeout_s)
        return answer

    # ---- what the servers say ----

    async def notice(self, notice: Any) -> None:
        """A server's resource update (to the sessions subscribed to it) or list change (to every session);
        on 2026-07-28, to the listen streams that asked for it (`listen`)."""
        await self.endpoint.listening.publish(notice)
        sessions = self.endpoint.live_sessions()
        if isinstance(notice, types.ResourceUpdatedNotification):
            uri = str(notice.params.uri)
            targets = [sessions[s] for _, (u, s), _ in self.subscribed.items() if u == uri and s in sessions]
        else:
            if isinstance(notice, types.ResourceListChangedNotification | types.PromptListChangedNotification):
                self.relisted()
            targets = list(sessions.values())
        for session in targets:
            try:
                await session.send_notification(notice)
            except Exception as exc:  # a session that just ended: nothing to tell
                log.info("mcp_notice_not_sent", error=type(exc).__name__)


def _session_id(ctx: Ctx) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else None


def result_of(model: Callable[..., Any], answer: dict[str, Any]) -> Any:
    """An upstream's answer as the SDK server's result model (an `InputRequiredResult` stays one)."""
    if answer.get("resultType") == "input_required":
        return types.InputRequiredResult.model_validate(answer, by_name=False)
    return model(answer)
