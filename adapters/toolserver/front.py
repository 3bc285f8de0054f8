"""The ToolServerNode front: XAgent's ToolServer API under a prefix (default: the root).

Sessions are `node_id` cookies; `/execute_tool` answers a call still running
after the front's patience with 450 and a handle that the client collects by
calling the gateway's own hidden tool `Toolplex_collect_result`. A tool of an
upstream node (a `toolserver` backend) answers as the node did: its result body,
its error's status and `detail`, its own 450 (`UpstreamAnswer("toolserver")`);
a 450 whose `next_calling` the gateway has under another name comes back with
that name. The workspace endpoints (`/upload_file`,
...) serve the session's own workspace (gateway/workspaces.py), or pass through
byte for byte to the caller's node of a `toolserver` backend when there is one.
Listings show only what the caller may call, in an upstream node's own order; a
caller that reaches the tools of one node alone is answered `/retrieving_tools`
by that node. `/get_available_tools` adds an
`x-toolplex` member (ignored by XAgent) carrying what the node's format lacks
(toolkit, version, full description), so Toolplex behind Toolplex loses nothing.

The front sees the core only through `FrontServices`. It is rebuilt on every
reload, so everything that must outlive one (sessions, pending runs, result
handles) lives in the services' registries and store, never in this object.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import httpx
import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adapters.toolserver import codec, shapes, workspace
from adapters.toolserver.settings import ToolServerFrontSettings
from gateway.auth import client_credentials
from gateway.backends import Backend, EnvDescriptions, Feature, SessionBackend
from gateway.errors import ConfigError, ErrorKind, Failure, GatewayError
from gateway.forwarding import HomeUnreachable
from gateway.homes import Where
from gateway.http import (
    PassedOnResponse,
    browser_form_content_type,
    json_response,
    parse_json,
    read_body,
    retry_after_headers,
    unsupported_media,
)
from gateway.model import (
    Call,
    CallContext,
    Outcome,
    Principal,
    RequestKind,
    ToolSpec,
    principal_name,
)
from gateway.sessions import Session
from gateway.wire import Answer, RawEndpoint, WireRequest, json_answer
from gateway.workspaces import key_for

if TYPE_CHECKING:
    from gateway.services import FrontServices

FRONT = "toolserver"
KIND = "toolserver"  # the backend kind whose nodes can hold a session's files
RETRIEVAL = "/retrieving_tools"  # the LIST request a `toolserver` backend answers with its node's retrieval
COOKIE = "node_id"
FILE_CHUNK_BYTES = 64 * 1024
COLLECT_TOOL = "Toolplex_collect_result"  # served here, never listed
COLLECT_NAMES = frozenset({COLLECT_TOOL, "Toolplex.collect_result"})
HANDLE_PATTERN = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
GRACE_S = 30.0  # beyond the longest call before a `running` result record with no run anywhere is called lost
SHOWN_ID_LIMIT = 128
# Passed through to the upstream node of the caller's session (the `toolserver` backend).
WORKSPACE_PATHS = ("upload_file", "download_file", "get_workspace_structure", "download_workspace")
PASSED_HEADERS = ("content-type", "content-disposition")
EXTENSION = "x-toolplex"  # what the node's listing format lacks, for a Toolplex on the other side
MULTIPART_OVERHEAD = 1024 * 1024  # room for part headers around an upload of max_upload_bytes
SPOOL_CHUNK = 256 * 1024
# The canonical kind of a workspace answer the front gives itself (its status), for the call log and metrics.
STATUS_KINDS = {
    403: ErrorKind.FORBIDDEN,
    404: ErrorKind.NOT_FOUND,
    413: ErrorKind.TOO_LARGE,
    415: ErrorKind.MALFORMED,
    422: ErrorKind.INVALID_ARGUMENTS,
}

log = structlog.get_logger("toolplex.toolserver")

AnyRequest = Request | WireRequest  # the call route is raw (`gateway.wire`); the others take Starlette's
Handler = Callable[[Any, "_Caller"], Awaitable[Response | Answer]]


class _Answer(Exception):
    """An early answer: status and FastAPI `detail`."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


class _Forward(Exception):
    """The request is for another replica: its session's home."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url  # raised before the body is read: it goes on unread


class _Caller:
    """Who sent the request: principal (when auth is on) and session (when a cookie was sent)."""

    def __init__(self, principal: Principal | None, session: Session | None) -> None:
        self.principal = principal
        self.session = session

    @property
    def session_id(self) -> str | None:
        return self.session.id if self.session else None

    def context(self, **fields: Any) -> CallContext:
        return CallContext(front=FRONT, principal=self.principal, session_id=self.session_id, **fields)

    @property
    def session_key(self) -> str | None:
        """What backends and workspaces key this session's state by (front, principal, id)."""
        return self.context().session_key

    @property
    def owner(self) -> str:
        """Who may collect a 450 handle: this session, or this principal's calls without one."""
        return f"{FRONT}/{principal_name(self.principal)}/{self.session_id or ''}"


def _still_running(outcome: Outcome) -> bool:
    """Our own "not yet" (`gateway.detached`): answered 450 with the handle. An upstream node's own 450
    carries its `next_calling` and is the call's answer (`_render`)."""
    failure = outcome.error
    return failure is not None and failure.kind == ErrorKind.PENDING and "next_calling" not in failure.details


def _respond(answer: codec.Answer) -> Answer:
    return json_answer(answer.body, status=answer.status, headers=answer.headers)


def _shown(node_id: str) -> str:
    return node_id if len(node_id) <= SHOWN_ID_LIMIT else node_id[:SHOWN_ID_LIMIT] + "..."


def _invalid_node(node_id: str | None) -> str:
    return f"invalid node_id: {None if node_id is None else _shown(node_id)}"


class ToolServerFront:
    """The endpoints of one configuration; built again on every reload, holding only that configuration."""

    def __init__(self, services: FrontServices, settings: ToolServerFrontSettings) -> None:
        self.services = services
        self.prefix = settings.prefix
        self.patience = settings.patience_s
        self.env_tool_cap = settings.env_tool_cap
        # Results of calls answered 450, collected with their handle (`gateway.detached`); it outlives reloads.
        self.detached = services.detached(FRONT)
        self.detached.configure(
            retention=settings.result_retention_s,
            patience=settings.patience_s,
            retry_after_ms=0,
            max_bytes=settings.result_max_bytes,
            max_entries=settings.result_max_entries,
            recorded=lambda _outcome: True,  # whatever it came to is the handle's answer
            identity="one call",
            subject="this call",
            again="call the tool again to start a new run",
            collect_hint=f"collect its result with {COLLECT_TOOL}",
        )
        # The services keep the registry (and its sessions) across reloads; this only names it.
        self.sessions = services.sessions(FRONT, idle_s=settings.session_idle_s)
        self.workspace_backend = _workspace_backend(services, settings.workspace_backend)

    @property
    def max_upload_bytes(self) -> int:
        return self.services.limits.max_upload_bytes

    # ---- plumbing shared by every endpoint ----

    def _authenticate(self, request: AnyRequest) -> Principal | None:
        try:
            return self.services.authenticate(request.headers)
        except GatewayError as exc:
            raise _Answer(401, exc.failure.message) from None

    async def _caller(self, request: AnyRequest) -> _Caller:
        principal = self._authenticate(request)
        node_id = request.cookies.get(COOKIE)
        if node_id is None:
            return _Caller(principal, None)
        session = await self.sessions.get(node_id, principal)
        if session is None:
            raise _Answer(403, _invalid_node(node_id))
        session = await self._at_home(request, session)
        caller = _Caller(principal, session)
        self.services.workspaces.touch(key_for(caller.context()))  # the workspace lives as long as its session
        return caller

    async def _at_home(self, request: AnyRequest, session: Session) -> Session:
        """Forward the request to the session's home replica; adopt the session when that replica was lost, is
        stopping, or cannot be connected to (`gateway.homes`: a session moves; its files are on the shared
        workspace volume where one is configured, its upstream node sessions are opened again).

        The home holds what lives in one process: the session's workspace on disk,
        its pending calls, its upstream node sessions.
        """
        route = await self.services.homes.route(session.home, request, movable=True)
        if route.where is Where.HERE:
            return session
        if route.where is Where.THERE:
            raise _Forward(str(route.url))
        log.warning("session_adopted", former_home=session.home, replica=self.services.replicas.id)
        return await self.sessions.adopt(session)

    async def _body(self, request: AnyRequest) -> Any:
        """The JSON body, or None when there is none."""
        try:
            raw = await read_body(request, self.services.limits.max_body_bytes)
        except GatewayError as exc:
            raise _Answer(413, exc.failure.message) from None
        if not raw.strip():
            return None
        try:
            return parse_json(raw, self.services.limits.max_json_depth)
        except GatewayError as exc:
            shown = raw[:200].decode(errors="replace")
            item = codec.validation_item("json_invalid", ["body"], exc.failure.message, shown)
            raise _Answer(422, [item]) from None

    async def _no_parameters(self, request: Request) -> None:
        """Endpoints without parameters accept no body, `{}` or `null`; anything else is refused."""
        if request.method == "GET":
            extra = list(request.query_params.keys())
            if extra:
                items = [
                    codec.validation_item("extra_forbidden", ["query", k], "Extra inputs are not permitted", v)
                    for k, v in request.query_params.multi_items()
                ]
                raise _Answer(422, items)
            return
        body = await self._body(request)
        if body is None or body == {}:
            return
        if isinstance(body, dict):
            items = [
                codec.validation_item("extra_forbidden", ["body", k], "Extra inputs are not permitted", v)
                for k, v in body.items()
            ]
        else:
            items = [codec.validation_item("dict_type", ["body"], "This endpoint takes no parameters", body)]
        raise _Answer(422, items)

    def _endpoint(
        self, handler: Handler, *, with_session: bool = True
    ) -> Callable[[AnyRequest], Awaitable[Response | Answer]]:
        async def endpoint(request: AnyRequest, home_unreachable: bool = False) -> Response | Answer:
            try:
                caller = await self._caller(request) if with_session else _Caller(self._authenticate(request), None)
                form = browser_form_content_type(request)
                if form is not None and not request.scope["path"].endswith("/upload_file"):  # multipart by protocol
                    raise _Answer(415, unsupported_media(form).message)
                return await handler(request, caller)
            except _Forward as forward:
                unread = request.starlette() if isinstance(request, WireRequest) else request
                try:
                    return await self.services.homes.forward(unread, forward.url)
                except HomeUnreachable as exc:
                    if home_unreachable:  # adopted, and its new home is unreachable too: answer
                        return self._failure(exc.failure)
                    return await endpoint(request, home_unreachable=True)  # nothing was sent: adopt it here
                except GatewayError as exc:
                    return self._failure(exc.failure)
            except _Answer as answer:
                return json_answer(codec.detail(answer.detail), status=answer.status)
            except GatewayError as exc:  # e.g. the shared state store is unreachable
                return self._failure(exc.failure)
            except workspace.WorkspaceAnswer as answer:
                return json_answer(codec.detail(answer.detail), status=answer.status)
            except shapes.BadRequest as bad:
                return json_answer(codec.detail(bad.detail), status=422)

        return endpoint

    @staticmethod
    def _failure(failure: Failure) -> Answer:
        return json_answer(
            codec.detail(codec.failure_detail(failure)),
            status=codec.status_of(failure),
            headers=retry_after_headers(failure),
        )

    # ---- envs and tools ----

    def _env_description(self, env: str, tools: list[ToolSpec]) -> str:
        """The backend's configured description, else its upstream's env description, else the tools'."""
        for spec in tools:
            configured = self.services.backend_description(spec.backend)
            if configured:
                return configured
        for spec in tools:
            described = _env_descriptions(self.services.backend(spec.backend))
            if described.get(env):
                return str(described[env])
        return codec.summary(env, tools)

    def _envs(
        self, principal: Principal | None, cap: int | None, names: list[str] | None = None
    ) -> tuple[list[dict[str, Any]], list[str]]:
        kits = self.services.toolkits(principal)
        wanted = list(kits) if names is None else names
        found, missing = [], []
        for name in wanted:
            tools = kits.get(name)
            if tools is None:
                missing.append(name)
                continue
            found.append(codec.env_json(name, self._env_description(name, tools), tools, cap))
        return found, missing

    def _lookup(self, name: str, principal: Principal | None) -> ToolSpec | None:
        """A tool the caller may call (hidden ones too: they are callable), else None."""
        return self.services.callable_tool(name, principal)

    # ---- endpoints ----

    async def get_cookie(self, request: Request, caller: _Caller) -> Response:
        await self._no_parameters(request)
        session = await self.sessions.create(caller.principal)
        response = json_response({"message": "add cookie", "version": self.services.version})
        response.set_cookie(COOKIE, session.id, path=self.prefix or "/", httponly=True, samesite="lax")
        return response

    async def get_available_tools(self, request: Request, caller: _Caller) -> Answer:
        await self._no_parameters(request)
        principal = caller.principal

        unlisted = self._schemas_unlisted()

        def build() -> dict[str, Any]:
            specs = self.services.tools(principal)
            envs, _ = self._envs(principal, self.env_tool_cap)
            every_version = self.services.tools(principal, latest_only=False)
            return {
                "available_envs": envs,
                "available_tools": [codec.tool_name(s) for s in specs],
                # A node's tool it lists without a schema (looked up apart) is left out here too, as the node does.
                "tools_json": [codec.tool_json(s) for s in specs if s.flat_name not in unlisted.get(s.backend, ())],
                EXTENSION: {"tools": [codec.extension_entry(s) for s in every_version]},
            }

        # Encoded once per catalog and permission view; an upstream's env descriptions (and which of its tools
        # it lists without a schema) may change alone.
        described = tuple(
            (b.name, tuple(_env_descriptions(b).items())) for b in self.services.backends_with(Feature.ENV_DESCRIPTIONS)
        )
        schemaless = tuple((name, tuple(sorted(flats))) for name, flats in unlisted.items())
        key = (FRONT, "tools", self.env_tool_cap, described, schemaless)
        return json_answer(self.services.listing(key, principal, build))

    def _schemas_unlisted(self) -> dict[str, frozenset[str]]:
        """backend -> the flat names of the tools its node lists without a schema (`toolserver` backends)."""
        found: dict[str, frozenset[str]] = {}
        for name in self.services.backend_names(KIND):
            flats = getattr(self.services.backend(name), "schema_unlisted", None)
            if isinstance(flats, frozenset) and flats:
                found[name] = flats
        return found

    async def retrieving_tools(self, request: Request, caller: _Caller) -> Answer:
        if request.method == "GET":
            wanted = shapes.retrieval_request(dict(request.query_params), where="query")
        else:
            wanted = shapes.retrieval_request(await self._body(request))
        node = self._only_node(caller.principal)
        if node is not None:
            return await self._retrieve_at(node, request, wanted, caller)
        # Off the event loop; only tools this caller may call (a restricted key still gets top_k of its own).
        found = await self.services.search(wanted.question, wanted.top_k, caller.principal)
        return json_answer(
            {"retrieved_tools": [codec.tool_name(s) for s in found], "tools_json": [codec.tool_json(s) for s in found]}
        )

    def _only_node(self, principal: Principal | None) -> str | None:
        """The backend of every tool listed to the caller, when it is one upstream node (a backend that relays
        this protocol): the same-protocol case, where the node's own retrieval is the answer."""
        backends = {spec.backend for spec in self.services.tools(principal)}
        if len(backends) != 1:
            return None
        name = next(iter(backends))
        return name if getattr(self.services.backend(name), "relays", None) == codec.PROTOCOL else None

    async def _retrieve_at(
        self, backend: str, request: Request, wanted: shapes.RetrievalRequest, caller: _Caller
    ) -> Response | Answer:
        """The node's own `/retrieving_tools` answer, a LIST request of the caller's through the pipeline (to its
        own node session), kept to the tools the caller may call here under the node's names (in the node's order,
        its entries as it gave them); the node's error as it came."""
        context = caller.context(client_credentials=client_credentials(request.headers))
        params = {"question": wanted.question, "top_k": wanted.top_k}
        call = Call(tool=RETRIEVAL, arguments=params, context=context, kind=RequestKind.LIST, backend=backend)
        outcome = await self.services.call(call)
        own = codec.own_answer(outcome.upstream)
        if outcome.error is not None:
            if own is not None and isinstance(own.error, dict):
                return _respond(codec.as_it_came(own.error))
            return self._failure(outcome.error)
        answer = own.result if own is not None else outcome.value
        kept = [
            name
            for name in answer["retrieved_tools"]
            if isinstance(name, str) and self._served_by(name, backend, caller.principal)
        ]
        shown = set(kept)
        entries = [e for e in answer["tools_json"] if isinstance(e, dict) and e.get("name") in shown]
        return json_answer({**answer, "retrieved_tools": kept, "tools_json": entries})

    def _served_by(self, name: str, backend: str, principal: Principal | None) -> bool:
        """`name` is a tool of `backend` the caller may call here under that very name."""
        spec = self.services.callable_tool(name, principal)
        return spec is not None and spec.backend == backend and spec.flat_name == name

    async def _names(self, request: Request, keys: tuple[str, ...]) -> list[str]:
        if request.method == "GET":
            names = [part for value in request.query_params.getlist(keys[0]) for part in value.split(",") if part]
            extra = {k: v for k, v in request.query_params.items() if k != keys[0]}
            return shapes.names_request({keys[0]: names, **extra}, keys, where="query")
        return shapes.names_request(await self._body(request), keys)

    async def get_json_schema_for_tools(self, request: Request, caller: _Caller) -> Answer:
        names = await self._names(request, ("tools", "tool_names"))
        tools_json, missing = [], []
        for name in names:
            spec = self._lookup(name, caller.principal)
            if spec is None:
                missing.append(name)
            else:
                tools_json.append(codec.tool_json(spec))
        return json_answer({"tools_json": tools_json, "missing_tools": missing})

    async def get_json_schema_for_envs(self, request: Request, caller: _Caller) -> Answer:
        names = await self._names(request, ("envs", "env_names"))
        envs, missing = self._envs(caller.principal, None, names)
        return json_answer({"envs_json": envs, "missing_envs": missing})

    async def execute_tool(self, request: WireRequest, caller: _Caller) -> Answer:
        wanted = shapes.execute_request(await self._body(request))
        name = wanted.tool_name
        if wanted.env_name is not None:
            if not self.services.has_toolkit(wanted.env_name):
                raise _Answer(404, f"The env {wanted.env_name} is not found!")
            if not name.startswith(f"{wanted.env_name}_"):
                name = f"{wanted.env_name}_{name}"
        if name in COLLECT_NAMES:
            return await self._collect(request, wanted.arguments, caller)
        context = caller.context(client_credentials=client_credentials(request.headers))
        name, _, version = name.partition("@")  # `Name@x.y.z`: a Toolplex on the other side asks for a version
        call = Call(tool=name, arguments=wanted.arguments, context=context, version=version or None)
        handle = secrets.token_urlsafe(32)
        lost_after = self.services.limits.max_timeout_s + self.patience + GRACE_S
        try:
            outcome = await self.detached.call(
                handle,
                handle,
                call,
                lost_after,
                owner=caller.owner,
                meta={"tool": name, "arguments": wanted.arguments},
                told=False,  # a handle is ours: recorded only if the 450 names it
            )
        except GatewayError as exc:
            raise _Answer(codec.status_of(exc.failure), codec.failure_detail(exc.failure)) from None
        if _still_running(outcome):
            if caller.session is not None:  # released with its session
                record_key = self.detached.record_key(principal_name(caller.principal), handle)
                await self.sessions.own(caller.session, record_key)
            return self._retry(handle)
        return self._render(outcome, name, wanted.arguments)  # answered in time: nothing was recorded

    async def _collect(self, request: WireRequest, arguments: dict[str, Any], caller: _Caller) -> Answer:
        """Collect a result handle: a request of the caller's own through the pipeline (`RequestKind.COLLECT`:
        its limits, middleware, metrics and call log); a handle that is not this session's is answered
        exactly as one that never existed."""
        handle = shapes.collect_arguments(arguments)
        gone = f"The result handle {_shown(handle)} is unknown, expired or already collected"

        async def collect(context: CallContext) -> tuple[Outcome, dict[str, Any]]:
            collected = None
            if HANDLE_PATTERN.match(handle):
                collected = await self.detached.collect(
                    handle, Call(tool="collect", arguments={}, context=context), owner=caller.owner
                )
            if collected is None:
                raise GatewayError.of(ErrorKind.NOT_FOUND, gone)
            return collected

        call = Call(tool="collect", arguments={}, context=caller.context(), kind=RequestKind.COLLECT, run=collect)
        answer = await self.services.call(call)
        if answer.error is not None:
            if answer.error.kind == ErrorKind.NOT_FOUND:
                raise _Answer(404, gone)
            return self._failure(answer.error)
        outcome, meta = answer.value
        if _still_running(outcome):
            return self._retry(handle)
        await self.detached.forget(handle, principal_name(caller.principal))  # a handle is collected once
        if caller.session is not None:
            await self.sessions.disown(
                caller.session, self.detached.record_key(principal_name(caller.principal), handle)
            )
        return self._render(outcome, str(meta.get("tool") or ""), meta.get("arguments") or {})

    @staticmethod
    def _retry(handle: str) -> Answer:
        detail = codec.retry_detail(COLLECT_TOOL, {"handle": handle})
        return json_answer(codec.detail(detail), status=codec.RETRY_STATUS)

    @staticmethod
    def _render(outcome: Outcome, name: str, arguments: dict[str, Any]) -> Answer:
        return _respond(codec.call_answer(outcome, name, arguments))  # as the console presents it too

    # ---- sessions ----

    async def close_session(self, request: Request, caller: _Caller) -> Answer:
        await self._no_parameters(request)
        node_id = request.cookies.get(COOKIE)
        session = await self.sessions.get(node_id, caller.principal) if node_id is not None else None
        if session is None:
            return json_answer(_invalid_node(node_id))
        self.services.runs.cancel_owned_by(_Caller(caller.principal, session).owner)
        return json_answer(f"Close session: {session.id}")

    async def release_session(self, request: Request, caller: _Caller) -> Response:
        await self._no_parameters(request)
        node_id = request.cookies.get(COOKIE)
        session = await self.sessions.release(node_id, caller.principal) if node_id is not None else None
        if session is None:
            return json_answer(_invalid_node(node_id))
        self.services.runs.cancel_owned_by(_Caller(caller.principal, session).owner)
        for key in session.owned:  # its runs' records went with the session (`SessionRegistry.release`)
            self.services.runs.forget(key)
        released = _Caller(caller.principal, session)
        await self._release_upstream(principal_name(caller.principal), str(released.session_key))
        self.services.workspaces.release(key_for(released.context()))
        response = json_response(f"Release session: {session.id}")
        response.delete_cookie(COOKIE, path=self.prefix or "/", httponly=True, samesite="lax")
        return response

    async def _release_upstream(self, owner: str, session_key: str) -> None:
        """Backends that hold upstream sessions per front session (Feature.SESSIONS) let theirs go too."""
        for backend in self.services.backends_with(Feature.SESSIONS):
            try:
                await cast(SessionBackend, backend).release_session(owner, session_key)
            except Exception:  # releasing is a courtesy to the upstream; the client's release succeeded
                log.exception("upstream_release_failed", backend=backend.name)

    # ---- workspaces: the session's own, or passed through to its upstream node ----

    async def _file_request(
        self, caller: _Caller, path: str, *, backend: str | None = None, run: Any = None, **request: Any
    ) -> Any:
        """One workspace request through the pipeline (`RequestKind.FILE`: the caller's limits, middleware,
        metrics, call log): to the workspace backend's node, or the gateway's own workspace (`run`). A file
        may take long to move: its deadline is the longest a call may have (`limits.max_timeout_s`)."""
        answered: list[BaseException] = []

        async def serve(context: CallContext) -> Any:
            try:
                return await run(context)
            except (_Answer, workspace.WorkspaceAnswer, shapes.BadRequest) as answer:
                answered.append(answer)  # answered as it is, below; the pipeline records its kind
                status = getattr(answer, "status", 422)
                raise GatewayError.of(STATUS_KINDS.get(status, ErrorKind.MALFORMED), str(answer)) from None

        context = caller.context(client_credentials=client_credentials(request.pop("headers", {})))
        call = Call(
            tool=path,
            arguments=request.pop("params", {}),
            context=context,
            timeout=float(self.services.limits.max_timeout_s),
            kind=RequestKind.FILE,
            backend=backend,
            payload=request.pop("payload", None),
            run=serve if run is not None else None,
        )
        outcome = await self.services.call(call)
        if answered:
            raise answered[0]
        if outcome.error is not None:
            raise _Answer(codec.status_of(outcome.error), outcome.error.message)
        return outcome.value

    def _local(self, path: str) -> Handler:
        """The gateway's own workspace of the caller's session (no toolserver upstream holds the files)."""

        async def serve(request: Request, caller: _Caller) -> Response:
            spaces = self.services.workspaces
            key = key_for(caller.context())

            async def run(_context: CallContext) -> Response:
                if path == "upload_file":
                    return await workspace.upload(request, spaces, key, self.max_upload_bytes)
                if path == "download_file":
                    return workspace.download(await self._body(request), spaces, key)
                await self._no_parameters(request)
                # Zipping or walking a workspace touches up to its whole size on disk: off the event loop.
                if path == "download_workspace":
                    return await asyncio.to_thread(workspace.archive, spaces, key)
                return await asyncio.to_thread(workspace.structure, spaces, key)

            return cast(Response, await self._file_request(caller, f"/{path}", run=run, headers=request.headers))

        return serve

    def _passthrough(self, path: str) -> Handler:
        """The request, as it came, to the caller's node on the workspace backend; its answer streamed back.

        The body is spooled to disk first (a renewed node session is sent it again); the answer is passed
        on as it arrives, up to `limits.max_upload_bytes`: no file is ever whole in memory. The spool and
        the upstream answer are closed when the answer ends, is cut, or its client goes away.
        """

        async def forward(request: Request, caller: _Caller) -> Response:
            if self.services.backend(self.workspace_backend or "") is None:
                raise _Answer(503, f"The workspace backend {self.workspace_backend!r} is not running")
            limit = (
                self.max_upload_bytes + MULTIPART_OVERHEAD
                if path == "/upload_file"
                else self.services.limits.max_body_bytes
            )
            held = contextlib.AsyncExitStack()
            try:
                body, size = await held.enter_async_context(_spooled(request, limit))
                params = {
                    "content_type": request.headers.get("content-type"),
                    "size": size,
                    "max_answer_bytes": self.max_upload_bytes,
                }
                answer: httpx.Response = await self._file_request(
                    caller,
                    path,
                    backend=self.workspace_backend,
                    params=params,
                    payload=body,
                    headers=request.headers,  # sent on only with forward_authorization
                )
                held.push_async_callback(answer.aclose)  # closed before the spool it may still be reading
            except BaseException:
                await held.aclose()
                raise
            return PassedOnResponse(
                answer.aiter_bytes(FILE_CHUNK_BYTES),  # a file goes on in pieces of this size, whatever the node sent
                status_code=answer.status_code,
                raw_headers=_passed_headers(answer),
                close=held.aclose,
            )

        return forward

    async def reconnect_session(self, request: Request, caller: _Caller) -> Answer:
        await self._no_parameters(request)
        node_id = request.cookies.get(COOKIE)
        session = await self.sessions.get(node_id, caller.principal) if node_id is not None else None
        if session is None:
            return json_answer(_invalid_node(node_id))
        return json_answer(f"Reconnect session: {session.id}")


@contextlib.asynccontextmanager
async def _spooled(request: Request, limit: int) -> AsyncIterator[tuple[Callable[[], AsyncIterator[bytes]], int]]:
    """The request body spooled to a temporary file (never whole in memory), re-readable per attempt."""
    with tempfile.TemporaryFile() as spool:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _Answer(413, f"Request body is larger than the limit of {limit} bytes")
            await asyncio.to_thread(spool.write, chunk)  # disk writes stay off the event loop
        position = threading.Lock()

        def read_at(offset: int) -> bytes:
            # Seek and read as one: an abandoned attempt's last read (its thread outlives it) cannot move
            # the position under the next attempt's.
            with position:
                spool.seek(offset)
                return spool.read(SPOOL_CHUNK)

        async def replay() -> AsyncIterator[bytes]:
            offset = 0
            while chunk := await asyncio.to_thread(read_at, offset):
                offset += len(chunk)
                yield chunk

        yield replay, size


def _passed_headers(answer: httpx.Response) -> list[tuple[bytes, bytes]]:
    """What a node's file answer says of itself: its type and name, and its length when the bytes come
    through as the node sent them (not decoded from a Content-Encoding). Names in lower case, as ASGI wants."""
    names = {*PASSED_HEADERS, *(() if "content-encoding" in answer.headers else ("content-length",))}
    lowered = [(name.lower(), value) for name, value in answer.headers.raw]
    return [(name, value) for name, value in lowered if name.decode("latin-1") in names]


def _env_descriptions(backend: Backend | None) -> Mapping[str, str]:
    """A backend's descriptions of its toolkits, when it declares Feature.ENV_DESCRIPTIONS."""
    if backend is None or Feature.ENV_DESCRIPTIONS not in backend.features:
        return {}
    return cast(EnvDescriptions, backend).env_descriptions


def _workspace_backend(services: FrontServices, wanted: str | None) -> str | None:
    """The backend whose node holds the files: `workspace_backend`, else the first `toolserver` backend."""
    names = services.backend_names(KIND)
    if wanted is not None and wanted not in names:
        raise ConfigError(
            [f"fronts.toolserver.workspace_backend: {wanted!r} is not a toolserver backend (they are: {names})"]
        )
    return wanted if wanted is not None else next(iter(names), None)


def routes(services: FrontServices, settings: ToolServerFrontSettings) -> list[BaseRoute]:
    front = ToolServerFront(services, settings)
    p = front.prefix
    read_only = ["GET", "POST"]
    # These look at the cookie themselves: a stale one must not stop a client from starting over.
    session_free = {"get_cookie", "get_cookies", "close_session", "release_session", "reconnect_session"}
    table: list[tuple[str, Handler, list[str]]] = [
        ("get_cookie", front.get_cookie, ["POST"]),
        ("get_cookies", front.get_cookie, ["POST"]),
        ("get_available_tools", front.get_available_tools, read_only),
        ("retrieving_tools", front.retrieving_tools, read_only),
        ("get_json_schema_for_tools", front.get_json_schema_for_tools, read_only),
        ("get_json_schema_for_envs", front.get_json_schema_for_envs, read_only),
        ("execute_tool", front.execute_tool, ["POST"]),
        ("close_session", front.close_session, ["POST"]),
        ("release_session", front.release_session, ["POST"]),
        ("reconnect_session", front.reconnect_session, ["POST"]),
    ]
    for path in WORKSPACE_PATHS:  # the upstream node's files when one holds them, else the gateway's own
        serve = front._passthrough(f"/{path}") if front.workspace_backend is not None else front._local(path)
        table.append((path, serve, ["POST"]))
    raw = {"execute_tool"}  # the call route: on raw ASGI (`gateway.wire`)
    served: list[BaseRoute] = []
    for path, handler, methods in table:
        endpoint = front._endpoint(handler, with_session=path not in session_free)
        served.append(Route(f"{p}/{path}", RawEndpoint(endpoint) if path in raw else endpoint, methods=methods))
    return served
