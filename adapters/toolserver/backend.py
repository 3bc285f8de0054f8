"""The `toolserver` backend: an XAgent ToolServerNode (or Manager) as upstream.

Speaks what the real client sends (protocols.md §3): `POST /get_cookie` for a
`node_id`, `/get_available_tools` (plus `/get_json_schema_for_tools` with a bare
array for tools listed without a schema), `/execute_tool {tool_name, arguments}`.
A Manager keeps state per cookie, so each front session gets its own node
session, keyed by `CallContext.session_key`. A bare node has no session
endpoints (`/get_cookie` is a 404 there): detected, or forced with
`sessions: none`, every call then goes to its one workspace without a cookie.
A Toolplex upstream's `x-toolplex` listing member keeps toolkits, versions and
full descriptions across the hop.

A ToolServerNode front in front of this backend is a transparent hop (`relays`): its
calls are judged by the node alone (no argument validation of the gateway's), and each
answer keeps the node's own body (`UpstreamAnswer("toolserver")`): a result as the node
wrapped it, an error's status, `detail` and `Retry-After` (credentials redacted), which
that front answers unchanged; every other front gets the canonical value or failure.

Upstream 450 ("call again"): a call that came through the ToolServerNode front
gets the 450 back: the node's own when the gateway has its `next_calling` under
the node's name (the follow-up reaches the caller's own node session), else with
`next_calling` in gateway names (a listed tool's routed name, or this backend's
hidden relay tool with a one-use continuation token), so the client's own loop
drives it; every other front waits while the backend follows `next_calling`
itself, with backoff, until a result or the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any, NoReturn, cast

import httpx
import orjson
import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from adapters.toolserver import codec
from adapters.toolserver.nodes import GATEWAY_NODE, Continuation, Continuations, NodeKey, NodeSession, NodeSessions
from adapters.toolserver.settings import ToolServerBackendSettings
from gateway.backends import BackendContext, BaseBackend, Feature
from gateway.catalog import validate_spec
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import (
    Answered,
    CallContext,
    RequestKind,
    ToolSpec,
    UpstreamAnswer,
    UpstreamFailed,
    principal_name,
)
from gateway.ownership import StoreFull
from gateway.redaction import redact_text
from gateway.routing import apply_routing
from gateway.upstream import (
    Credentials,
    Limit,
    Upstream,
    UpstreamSettings,
    error_body,
    failure_for_status,
    json_of,
)

log = structlog.get_logger("toolplex.toolserver")

FRONT = "toolserver"  # CallContext.front of calls that came through the ToolServerNode front
PROTOCOL = "toolserver"  # `UpstreamAnswer.protocol` of this backend's answers
COOKIE = "node_id"
RELAY_TOOLKIT = "Toolplex"
RELAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"continuation": {"type": "string", "minLength": 1, "maxLength": 128}},
    "required": ["continuation"],
    "additionalProperties": False,
}
RELEASE_TIMEOUT_S = 2.0
FILE_PATHS = ("/upload_file", "/download_file", "/get_workspace_structure", "/download_workspace")
RETRIEVAL = "/retrieving_tools"  # the one listing asked of the node for a caller (`RequestKind.LIST`)
FILE_LIMIT = "limits.max_upload_bytes"  # what bounds a file answer, instead of limits.max_upstream_response_bytes
MAX_FOLLOW_PAUSE_S = 3.0  # the XAgent client's own pause between retries
SCHEMA_BATCH = 500
LISTING_KEYS = ("available_tools", "tools_json")
EXTENSION = "x-toolplex"
NO_SESSION_ENDPOINT = (404, 405)  # what a bare node answers to /get_cookie
FRAMEWORK_ANSWERS = ("Not Found", "Method Not Allowed")  # FastAPI's own 404 / 405: no such route at this path
MAX_PASSED_DEPTH = 64  # an error body nested deeper is not passed on as it came (the canonical failure is)
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class Relay:
    """Binding of the hidden tool that continues an upstream 450 by token."""

    backend: str


def _version_key(version: str) -> tuple[int, ...]:
    parts = version.split(".")
    return tuple(int(p) if p.isdigit() else 0 for p in parts)


def _safe(part: str) -> str:
    return _UNSAFE.sub("_", part) or "_"


def _node_id_of(response: httpx.Response) -> str | None:
    for header in response.headers.get_list("set-cookie"):
        jar: SimpleCookie = SimpleCookie()
        with contextlib.suppress(Exception):
            jar.load(header)
        if COOKIE in jar and jar[COOKIE].value:
            return jar[COOKIE].value
    return None


def _named(items: Any) -> list[dict[str, Any]]:
    """The objects with a string `name` in what should be a list of them."""
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict) and isinstance(item.get("name"), str)]


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("detail") if isinstance(body, dict) else None


def _text(detail: Any) -> str:
    """An error detail as text: strings as they are, anything else as JSON (never a Python repr)."""
    return detail if isinstance(detail, str) else orjson.dumps(detail, default=str).decode()


def _redacted(value: Any, depth: int = 0) -> Any:
    """`value` with every string passed through the gateway's redaction (`redact_text`: credential shapes and
    the gateway's own secrets), as every error text a client reads is; raises RecursionError past
    `MAX_PASSED_DEPTH`."""
    if depth > MAX_PASSED_DEPTH:
        raise RecursionError("nested too deep")
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [_redacted(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, depth + 1) for key, item in value.items()}
    return value


def _as_it_came(response: httpx.Response) -> dict[str, Any] | None:
    """A node's error answer as the ToolServerNode front passes it on (`UpstreamAnswer.error`): its status, its
    JSON body (FastAPI's `{"detail": ...}`, credentials redacted) and its `Retry-After`; None when the body is
    no JSON object (the canonical failure is answered then)."""
    body = error_body(response)
    if not isinstance(body, dict):
        return None
    try:
        body = _redacted(body)
    except RecursionError:
        return None
    answer: dict[str, Any] = {"status": response.status_code, "body": body}
    retry_after = response.headers.get("retry-after")
    if retry_after is not None:
        answer["headers"] = {"Retry-After": retry_after}
    return answer


class ToolServerBackend(BaseBackend):
    """One ToolServerNode upstream: its node sessions, its 450 continuations and its workspace passthrough."""

    # Node sessions released with the front's (SESSIONS), the session's files upstream (WORKSPACES, served as
    # FILE requests through the pipeline), and the node's own env descriptions for the front's listings.
    features = frozenset({Feature.SESSIONS, Feature.WORKSPACES, Feature.ENV_DESCRIPTIONS})
    # FILE: the session's files upstream; LIST: the node's own retrieval, for a caller of this node alone.
    operations = frozenset({RequestKind.FILE, RequestKind.LIST})
    relays = PROTOCOL  # a ToolServerNode front is a transparent hop (`BaseBackend.relays`)

    def __init__(self, settings: ToolServerBackendSettings, context: BackendContext) -> None:
        self.name = settings.name
        self.settings: ToolServerBackendSettings = settings
        # The pooled client keeps no cookies (gateway.upstream.CookielessClient): each request carries its own
        # session's cookie.
        self.credentials = Credentials.of(settings.api_key, settings, context.store)
        self.upstream = Upstream(
            settings.name,
            UpstreamSettings.from_config(settings, context.max_response_bytes),
            auth=self.credentials.auth(None),
        )
        self.path = settings.path.rstrip("/")
        self.per_session = settings.sessions == "per_session"
        self.sessionless = settings.sessions == "none"  # a bare node: no cookies at all (also set when detected)
        self.env_descriptions: dict[str, str] = {}  # the upstream's env descriptions, for the front's listings
        self.sessions = NodeSessions(settings.max_sessions, settings.session_idle_s, context.shares)
        self.continuations = Continuations(settings.max_sessions * 10, settings.session_idle_s, context.shares)
        self.follow_max_calls = settings.follow_max_calls
        self.follow_backoff_s = settings.follow_backoff_s
        self.gateway_names: dict[str, str] = {}  # upstream tool name -> its gateway flat name
        # Gateway flat names of the tools the node lists in `available_tools` but not in `tools_json` (their
        # schema looked up apart): the ToolServerNode front's `tools_json` leaves them out, as the node does.
        self.schema_unlisted: frozenset[str] = frozenset()
        self._unlisted_upstream: frozenset[str] = frozenset()
        self.relay_name: str | None = None  # the relay's gateway flat name, None when routing drops it
        self._releases: set[asyncio.Task[None]] = set()

    # ---- sessions ----

    def _key(self, context: CallContext | None) -> NodeKey:
        """The upstream session of a caller: its front session's (`CallContext.session_key`), else its
        principal's own default one; the gateway's one node session when the backend shares it
        (`sessions: shared`, a bare node) or for the gateway's own requests (discovery)."""
        if context is None or not self.per_session or self.sessionless:
            return GATEWAY_NODE
        owner = principal_name(context.principal)
        return NodeKey(owner, context.session_key or f"default/{owner}")

    @staticmethod
    def _owner(context: CallContext) -> str:
        """Who may continue an upstream 450: the caller's session, or its principal's calls without one."""
        return context.session_key or f"{context.front}/{principal_name(context.principal)}/"

    def _headers(self, node: NodeSession, context: CallContext | None = None) -> dict[str, str]:
        """The node session's cookie, and the client's credentials (forwarded) or the backend's key."""
        headers = self.credentials.for_call(context) if context is not None else self.credentials.own()
        if node.node_id is not None:
            headers["Cookie"] = f"{COOKIE}={node.node_id}"
        return headers

    async def _new_cookie(self, deadline: float) -> str | None:
        """A fresh node session. Never re-sent once it may have arrived: a Manager starts a node per cookie.

        None for a bare node: it has no `/get_cookie` (nor the seed's `/get_cookies`).
        """
        if self.sessionless:
            return None
        auth = self.credentials.own()
        response = await self.upstream.request("POST", f"{self.path}/get_cookie", deadline=deadline, headers=auth)
        if response.status_code in NO_SESSION_ENDPOINT:  # the seed's spelling
            response = await self.upstream.request("POST", f"{self.path}/get_cookies", deadline=deadline, headers=auth)
        if response.status_code in NO_SESSION_ENDPOINT:
            self.sessionless = True
            log.info(
                "toolserver_bare_node",
                backend=self.name,
                detail="no session endpoints: every caller shares its workspace",
            )
            return None
        if response.status_code != 200:
            failure = failure_for_status(self.name, response.status_code, _detail(response) or response.text[:200])
            raise GatewayError(failure) if failure else self.upstream.unavailable("/get_cookie failed")
        return _node_id_of(response)  # a node without sessions sets none: tolerated

    async def _node(self, key: NodeKey, deadline: float) -> NodeSession:
        try:
            node, evicted = self.sessions.get(key)
        except StoreFull as refused:  # every session is another principal's: this caller waits its turn
            for old in refused.dropped:
                self._release_later(cast(NodeSession, old))
            raise
        for old in evicted:
            self._release_later(old)
        if not node.ready:
            async with node.lock:
                if not node.ready:
                    node.node_id = await self._new_cookie(deadline)
                    node.ready = True
        return node

    async def _renew(self, node: NodeSession, stale: str | None, deadline: float) -> None:
        async with node.lock:
            if node.node_id == stale:  # a concurrent call may have renewed it already
                node.node_id = await self._new_cookie(deadline)
                log.info("toolserver_session_renewed", backend=self.name)

    async def _send(
        self,
        key: NodeKey,
        path: str,
        *,
        deadline: float,
        context: CallContext | None = None,
        headers: dict[str, str] | None = None,
        idempotent: bool = False,
        body: Callable[[], Any] | None = None,
        streamed: Limit | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """POST in session `key`; a 403 `invalid node_id` (refused, so it did not run) renews the cookie once.

        `body` makes a fresh request body for each attempt (a streamed upload). With `streamed`, the answer
        comes back with its body unread, at most that many bytes (`Upstream.open`): the caller closes it.
        """
        node = await self._node(key, deadline)
        for attempt in range(2):
            stale = node.node_id
            if body is not None:
                kwargs["content"] = body()
            path_at, headers_at = f"{self.path}{path}", {**(headers or {}), **self._headers(node, context)}
            if streamed is None:
                response = await self.upstream.request(
                    "POST", path_at, deadline=deadline, idempotent=idempotent, headers=headers_at, **kwargs
                )
            else:
                response = await self.upstream.open(
                    "POST", path_at, limit=streamed, deadline=deadline, headers=headers_at, **kwargs
                )
                if response.status_code == 403:  # a short refusal to look into, not a file
                    await self.upstream.read(response)
            detail = _detail(response) if response.status_code == 403 else None
            if not (isinstance(detail, str) and detail.startswith("invalid node_id")):
                return response
            if attempt == 0:
                await self._renew(node, stale, deadline)
        raise self.upstream.unavailable("it refused a freshly issued node_id (403 invalid node_id)")

    async def release_session(self, owner: str, session_key: str) -> None:
        """The front session of `owner` (its `CallContext.session_key`) ended: release its upstream node session."""
        if not session_key:
            return
        self.continuations.forget_session(session_key)
        if not self.per_session or self.sessionless:
            return  # the shared session outlives every front session
        node = self.sessions.pop(NodeKey(owner, session_key))
        if node is not None:
            await self._release(node)

    async def _release(self, node: NodeSession) -> None:
        if node.node_id is None:
            return
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        try:
            await self.upstream.request(
                "POST", f"{self.path}/release_session", deadline=deadline, headers=self._headers(node)
            )
        except GatewayError as exc:
            log.info("toolserver_release_failed", backend=self.name, error=exc.failure.message)

    def _release_later(self, node: NodeSession) -> None:
        task = asyncio.get_running_loop().create_task(self._release(node))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    # ---- discovery ----

    def _deadline(self) -> float:
        return time.monotonic() + self.upstream.settings.total_timeout_s

    async def _listing(self, path: str, body: Any, deadline: float) -> Any:
        response = await self._send(GATEWAY_NODE, path, json=body, deadline=deadline, idempotent=True)
        if response.status_code != 200:
            raise self.upstream.unavailable(f"{path} answered HTTP {response.status_code}")
        return json_of(self.upstream, response)

    async def discover(self) -> list[ToolSpec]:
        deadline = self._deadline()
        data = await self._listing("/get_available_tools", {}, deadline)
        if not isinstance(data, dict) or not any(isinstance(data.get(k), list) for k in LISTING_KEYS):
            raise self.upstream.unavailable("/get_available_tools did not answer a ToolServerNode tool listing")
        schemas = {t["name"]: t for t in _named(data.get("tools_json"))}
        names = [n for n in data.get("available_tools") or [] if isinstance(n, str)]
        listed = set(names)
        names += [n for n in schemas if n not in listed]
        missing = [n for n in names if n not in schemas]
        self._unlisted_upstream = frozenset(missing)
        for start in range(0, len(missing), SCHEMA_BATCH):
            found = await self._listing("/get_json_schema_for_tools", missing[start : start + SCHEMA_BATCH], deadline)
            for tool in _named(found.get("tools_json") if isinstance(found, dict) else None):
                schemas.setdefault(tool["name"], tool)
        listed_envs = _named(data.get("available_envs"))
        envs = [e["name"] for e in listed_envs]
        self.env_descriptions = {
            _safe(e["name"]): e["description"] for e in listed_envs if isinstance(e.get("description"), str)
        }
        extension = data.get(EXTENSION)
        specs = self._extension_specs(extension) if isinstance(extension, dict) else None
        if specs is None:
            specs = self._specs(names, schemas, envs)
        specs.append(self._relay())
        specs = [s for s in specs if not validate_spec(s)]
        self._learn_names(specs)
        return specs

    def _source(self) -> str:
        return f"backend {self.name!r} ({self.upstream.settings.url})"

    def _extension_specs(self, extension: dict[str, Any]) -> list[ToolSpec] | None:
        """The tools as a Toolplex upstream describes them: toolkits, every version, full descriptions."""
        entries = extension.get("tools")
        if not isinstance(entries, list):
            return None
        specs: list[ToolSpec] = []
        for entry in entries:
            if not isinstance(entry, dict) or not all(
                isinstance(entry.get(k), str) for k in ("tool_name", "toolkit", "name", "version")
            ):
                continue
            output = entry.get("output_schema")
            spec = ToolSpec(
                toolkit=entry["toolkit"],
                name=entry["name"],
                version=entry["version"],
                description=str(entry.get("description") or ""),
                input_schema=self._schema(entry["tool_name"], entry.get("input_schema")),
                output_schema=output if isinstance(output, dict) else None,
                backend=self.name,
                language="remote",
                source=self._source(),
                binding=entry["tool_name"],
            )
            problems = validate_spec(spec)
            if problems:
                log.warning("toolserver_tool_skipped", backend=self.name, tool=entry["tool_name"], problems=problems)
                continue
            specs.append(spec)
        return specs

    def _split(self, tool: str, envs: list[str]) -> tuple[str, str]:
        """`<EnvName>_<method>` -> (toolkit, name), so the gateway's flat name is the upstream's own."""
        for env in sorted(envs, key=len, reverse=True):
            if tool.startswith(f"{env}_") and len(tool) > len(env) + 1:
                return _safe(env), _safe(tool[len(env) + 1 :])
        head, sep, rest = tool.partition("_")
        if sep and head and rest:
            return _safe(head), _safe(rest)
        return _safe(self.name), _safe(tool)

    def _specs(self, names: list[str], schemas: dict[str, dict[str, Any]], envs: list[str]) -> list[ToolSpec]:
        source = self._source()
        specs: list[ToolSpec] = []
        seen: set[str] = set()
        for tool in names:
            toolkit, name = self._split(tool, envs)
            described = schemas.get(tool) or {}
            spec = ToolSpec(
                toolkit=toolkit,
                name=name,
                version="1.0.0",
                description=str(described.get("description") or ""),
                input_schema=self._schema(tool, described.get("parameters")),
                backend=self.name,
                language="remote",
                source=source,
                binding=tool,
            )
            problems = validate_spec(spec)
            if problems or spec.flat_name in seen:
                log.warning("toolserver_tool_skipped", backend=self.name, tool=tool, problems=problems or ["duplicate"])
                continue
            seen.add(spec.flat_name)
            specs.append(spec)
        return specs

    def _relay(self) -> ToolSpec:
        return ToolSpec(
            toolkit=RELAY_TOOLKIT,
            name=f"continue_{_safe(self.name)}",
            version="1.0.0",
            description=f"Continues a call that upstream {self.name!r} answered with 450 (call again)",
            input_schema=RELAY_SCHEMA,
            visible=False,
            backend=self.name,
            language="remote",
            source=self._source(),
            binding=Relay(self.name),
        )

    def _schema(self, tool: str, parameters: Any) -> dict[str, Any]:
        if not isinstance(parameters, dict):
            return {"type": "object", "properties": {}}
        try:
            Draft202012Validator.check_schema(parameters)
        except SchemaError as exc:
            log.warning("toolserver_schema_invalid", backend=self.name, tool=tool, error=exc.message)
            return {"type": "object", "properties": {}}
        return {**parameters, "type": "object"}

    def _learn_names(self, specs: list[ToolSpec]) -> None:
        """The gateway names of this backend's tools after routing, to translate `next_calling`."""
        routed = apply_routing(specs, self.settings)
        names: dict[str, str] = {}
        for spec in sorted((s for s in routed if isinstance(s.binding, str)), key=lambda s: _version_key(s.version)):
            names[spec.binding] = spec.flat_name
            names[spec.binding.partition("@")[0]] = spec.flat_name  # the upstream's bare name: its latest
        self.gateway_names = names
        self.schema_unlisted = frozenset(
            spec.flat_name
            for spec in routed
            if isinstance(spec.binding, str) and spec.binding.partition("@")[0] in self._unlisted_upstream
        )
        relays = [s for s in routed if isinstance(s.binding, Relay)]
        self.relay_name = relays[0].flat_name if relays and validate_spec(relays[0]) == [] else None

    # ---- calls ----

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Answered:
        """The tool's value with the node's result body as it came (`Answered`), or its failure raised, with
        the node's own error answer when it gave one (`UpstreamFailed`)."""
        key = self._key(context)
        owner = self._owner(context)
        deadline = context.deadline if context.deadline is not None else self._deadline()
        if isinstance(spec.binding, Relay):
            continuation = self.continuations.take(
                str(arguments.get("continuation")), principal_name(context.principal), owner
            )
            if continuation is None:
                raise GatewayError.of(
                    ErrorKind.NOT_FOUND,
                    "The continuation is unknown, expired, already used or belongs to another session",
                )
            tool, arguments = continuation.tool, continuation.arguments
        else:
            tool = spec.binding
        response = await self._execute(key, tool, arguments, context, deadline)
        follows = 0
        while response.status_code == codec.RETRY_STATUS:
            tool, arguments = self._next_calling(response)
            pending = self._pending(key, owner, tool, arguments, response) if context.front == FRONT else None
            if pending is not None:
                raise pending
            follows += 1
            if follows > self.follow_max_calls:
                raise GatewayError.of(
                    ErrorKind.DEADLINE,
                    f"Upstream {self.name!r} still asked to call again after {self.follow_max_calls} calls",
                    can_retry=True,
                )
            pause = min(self.follow_backoff_s * 2 ** (follows - 1), MAX_FOLLOW_PAUSE_S)
            await asyncio.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            response = await self._execute(key, tool, arguments, context, deadline)
        return self._result(response, tool, forwarded=self.credentials.forward_authorization)

    async def _execute(
        self, key: NodeKey, tool: str, arguments: dict[str, Any], context: CallContext, deadline: float
    ) -> httpx.Response:
        body = {"tool_name": tool, "arguments": arguments}
        return await self._send(key, "/execute_tool", json=body, deadline=deadline, context=context)

    def _next_calling(self, response: httpx.Response) -> tuple[str, dict[str, Any]]:
        detail = _detail(response)
        if (
            not isinstance(detail, dict)
            or detail.get("type") != "retry"
            or not isinstance(detail.get("next_calling"), str)
            or not isinstance(detail.get("arguments", {}), dict)
        ):
            raise self.upstream.unavailable("it answered 450 without a 'retry' detail naming next_calling")
        return detail["next_calling"], detail.get("arguments") or {}

    def _pending(
        self, key: NodeKey, owner: str, tool: str, arguments: dict[str, Any], response: httpx.Response
    ) -> GatewayError | None:
        """The 450 for the ToolServerNode front, `next_calling` in the gateway's names; None when it has none.

        When the gateway has `next_calling` under the node's own name, the node's 450 goes on as it came
        (`UpstreamFailed`): the client calls that tool through the gateway, which sends it to the caller's own
        node session (`_key`), where the node's job is. Otherwise a listed tool's routed name, or the relay
        with a one-use continuation token bound to this caller (a hidden node tool is in no catalog)."""
        name = self.gateway_names.get(tool)
        if name == tool:
            own = _as_it_came(response)
            failure = Failure(
                kind=ErrorKind.PENDING,
                message=f"Upstream {self.name!r} has not finished; call {name} to continue",
                can_retry=True,
                details={"next_calling": name, "arguments": arguments},
            )
            return UpstreamFailed(failure, UpstreamAnswer(PROTOCOL, error=own)) if own else GatewayError(failure)
        if name is None:
            if self.relay_name is None:  # routing dropped the relay: the backend follows instead
                return None
            token = self.continuations.add(Continuation(key=key, owner=owner, tool=tool, arguments=arguments))
            name, arguments = self.relay_name, {"continuation": token}
        return GatewayError.of(
            ErrorKind.PENDING,
            f"Upstream {self.name!r} has not finished; call {name} to continue",
            can_retry=True,
            details={"next_calling": name, "arguments": arguments},
        )

    def _result(self, response: httpx.Response, tool: str, *, forwarded: bool = False) -> Answered:
        """The node's answer: its value with its body as it came, or its failure raised (`_raise`)."""
        if response.status_code != 200:
            self._raise(response, tool, "/execute_tool", forwarded=forwarded)
        body = json_of(self.upstream, response)
        try:
            value = codec.unwrap_result(body)
        except ValueError as exc:
            raise self.upstream.protocol_fault(
                f"/execute_tool answered {exc}, not a ToolServerNode result", response
            ) from None
        return Answered(value, UpstreamAnswer(PROTOCOL, result=body))

    def _raise(self, response: httpx.Response, tool: str, path: str, *, forwarded: bool = False) -> NoReturn:
        """Raise the canonical failure of a node's error answer, with the answer as it came (`UpstreamFailed`)
        when it is the node's own word on the request: not a route missing at `path` (the framework's 404 or
        405), nor a 401 to the gateway's own credentials, nor a body that is no JSON object."""
        failure = self._failure(response, tool, path, forwarded=forwarded)
        own = _as_it_came(response)
        if own is None or (response.status_code == 401 and not forwarded):
            raise GatewayError(failure)
        raise UpstreamFailed(failure, UpstreamAnswer(PROTOCOL, error=own))

    def _failure(self, response: httpx.Response, tool: str, path: str, *, forwarded: bool = False) -> Failure:
        """The canonical failure a node's error answer stands for (raised instead when the node is at fault)."""
        status = response.status_code
        detail = _detail(response)
        if status in (404, 405) and detail in FRAMEWORK_ANSWERS:  # no such route at this path
            raise self.upstream.unavailable(f"{self.path}{path} does not exist there ({status})")
        if status in (404, 422, 500) and detail is None:
            json_of(self.upstream, response)  # raises for a body that is not JSON
            raise self.upstream.protocol_fault(f"it answered HTTP {status} without a FastAPI 'detail'", response)
        message = _text(detail)[:1000] if detail is not None else response.text[:200]
        if status == 404:  # the node's own meaning: no such tool
            return GatewayError.of(ErrorKind.NOT_FOUND, message, details={"upstream_tool": tool}).failure
        if status == 422:  # FastAPI's validation list
            problems = codec.parameter_errors_of(detail) if isinstance(detail, list) else {}
            listed = "; ".join(f"{k}: {v}" for k, v in problems.items())
            return GatewayError.of(
                ErrorKind.INVALID_ARGUMENTS,
                f"Invalid arguments for {tool}: {listed or message}",
                parameter_errors=problems or None,
            ).failure
        if status == 500:  # the tool raised; the detail is its trace
            return GatewayError.of(ErrorKind.TOOL_FAILED, message).failure
        if status == 413:
            return GatewayError.of(ErrorKind.TOO_LARGE, message).failure
        failure = failure_for_status(self.name, status, message, response.headers, client_credentials=forwarded)
        if failure is None:  # 1xx/2xx/3xx: not an answer a node gives
            raise self.upstream.unavailable(f"it answered HTTP {status}")
        return failure

    # ---- the node's own retrieval (the front's /retrieving_tools, for a caller of this node alone) ----

    async def _retrieve(self, params: dict[str, Any], context: CallContext) -> Answered:
        """`/retrieving_tools {question, top_k}` asked of the caller's own node session: the node's answer as it
        came (the front keeps what the caller may call), its error raised as `_raise` does."""
        deadline = context.deadline if context.deadline is not None else self._deadline()
        body = {"question": params.get("question"), "top_k": params.get("top_k")}
        response = await self._send(
            self._key(context), RETRIEVAL, json=body, deadline=deadline, context=context, idempotent=True
        )
        if response.status_code != 200:
            self._raise(response, RETRIEVAL, RETRIEVAL, forwarded=self.credentials.forward_authorization)
        answer = json_of(self.upstream, response)
        if not isinstance(answer, dict) or not all(
            isinstance(answer.get(key), list) for key in ("retrieved_tools", "tools_json")
        ):
            raise self.upstream.protocol_fault(f"{RETRIEVAL} did not answer retrieved_tools and tools_json", response)
        return Answered(answer, UpstreamAnswer(PROTOCOL, result=answer))

    # ---- file passthrough (the front's /upload_file, /download_file, workspace endpoints) ----

    async def operate(
        self, kind: str, operation: str, params: dict[str, Any], context: CallContext, payload: Any = None
    ) -> httpx.Response | Answered:
        """One workspace request (`RequestKind.FILE`, after the pipeline's policy), sent as it came to the
        caller's own node session (`_key`): `operation` is the path, `params` its `content_type`, `size` and
        `max_answer_bytes` (the gateway's `limits.max_upload_bytes`), `payload` gives the body afresh for each
        attempt. The answer is returned as soon as its head arrived, its body unread (`Upstream.open`): a
        file of up to `max_answer_bytes` is passed on as it arrives, never held whole; the caller closes it.
        Files are answers as often as JSON: a valid non-JSON answer is no fault of the upstream.

        A LIST request is the node's own `/retrieving_tools` (`params`: `question`, `top_k`), see `_retrieve`."""
        if kind == RequestKind.LIST and operation == RETRIEVAL:
            return await self._retrieve(params, context)
        if kind != RequestKind.FILE or operation not in FILE_PATHS:
            raise GatewayError.of(ErrorKind.MALFORMED, f"{operation} is not a workspace request of this backend")
        # Identity: the bytes go on to the client as they come, their Content-Length still true.
        headers = {"Content-Length": str(int(params.get("size") or 0)), "Accept-Encoding": "identity"}
        if params.get("content_type"):
            headers["Content-Type"] = str(params["content_type"])
        limit = int(params.get("max_answer_bytes") or self.upstream.settings.max_response_bytes)
        deadline = context.deadline if context.deadline is not None else self._deadline()
        response = await self._send(
            self._key(context),
            operation,
            body=payload,
            headers=headers,
            deadline=deadline,
            context=context,
            streamed=(limit, FILE_LIMIT),
        )
        if response.status_code in (502, 503, 504):
            await response.aclose()
            raise self.upstream.unavailable(f"it answered HTTP {response.status_code}")
        return response

    async def close(self) -> None:
        nodes = self.sessions.drain()
        pending = [*self._releases, *(asyncio.ensure_future(self._release(n)) for n in nodes)]
        if pending:
            await asyncio.wait(pending, timeout=RELEASE_TIMEOUT_S)
            for task in pending:
                task.cancel()
        await self.upstream.close()
        await self.credentials.close()
