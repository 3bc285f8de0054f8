"""The direct path: the common stateless MCP request answered without the SDK's per-request machinery.

Why: a 2026-07-28 `tools/call` through the `mcp` SDK (2.3.0) cost 2.5 times the CPU of the same call
through the OpenTool front (bench: 1,392 against 567 µs), little of it validation: per request the
SDK builds an anyio task group with a memory stream and a disconnect watcher (cancel scopes; anyio's
cancel even formats the task's repr), a `ServerRunner`, a `Connection`, a `ServerSession` and an
OpenTelemetry span, unwinds a shielded exit stack, and builds and dumps pydantic models of the
request and the result several times over. This module answers that one common request itself.

What takes it (anything else, and anything in doubt, goes to the SDK untouched, the body already
read replayed, so the SDK sees the request exactly as it was sent):

- a POST without `Mcp-Session-Id`; `MCP-Protocol-Version` a 2026-07-28-era version; a JSON
  `Content-Type`; an `Accept` naming JSON and SSE; no routing header (`MCP-Protocol-Version`,
  `Mcp-Method`, `Mcp-Name`) given twice; no `Mcp-Param-*` header; a body within the SDK's limit;
- a body orjson reads exactly as the SDK's `json.loads` would (no 19-digit run, under 512 brackets:
  else orjson could read a big integer as a float, or parse nesting `json.loads` refuses), holding one
  JSON-RPC request (`jsonrpc` "2.0", a string or integer `id`) for `tools/call`, whose params hold
  only `name` (a string, equal to `Mcp-Name`), `arguments` (an object, or none) and `_meta`: the
  protocol version (equal to the header) and the client capabilities, no `progressToken`, and valid
  for the SDK (its per-version validation, its handler's params model, its context's `_meta`; each
  distinct `_meta` checked once);
- a tool that is no MCP upstream's (its relay talks back through the SDK's session) and whose input
  schema declares no `x-mcp-header`; an endpoint not in search mode; a server with only the SDK's own
  middleware (its OpenTelemetry span), no cache hint for `tools/call`, SSE answers, no DNS-rebinding
  settings of its own (the gateway's guard has checked Host and Origin).

Each of those is the SDK's own rule or narrower, so what passes here passes there. Then the call runs:
`Endpoint.call_plain` (what the SDK's registered handler, `Endpoint._call_tool`, comes to on a
non-search endpoint for a request with no session, no progress token and no MCP upstream's tool, without
the SDK's request context), or `Endpoint._call` inside the SDK's middleware when its span could record
anything (a tracer provider set, or more than the envelope in `_meta`). The answer is the SDK's: a
result in its most common form (text blocks, `isError`, plain JSON `structuredContent` and `_meta`) is
built directly in the shape the SDK's result sieve gives it, any other goes through that sieve
(`_shape`); errors through the SDK's own error mapping and writer. As in the SDK, a call still running
when its SSE window passes (15 s) commits `text/event-stream` with keep-alive pings and ends with the
answer as an event, and the client's disconnect cancels the call. Two differences, neither in what a
client parses: the answer is encoded by orjson (non-ASCII as UTF-8, floats in their shortest form) where
the SDK's `json.dumps` escapes them; and the disconnect watcher starts `WATCH_AFTER_S` (0.25 s) into a
call, as a task per request would cost as much as the rest of the path, so a call its client abandons
sooner is cancelled at that mark instead of at once.

`ENABLED` turns the path off (the equivalence tests answer each request both ways and compare).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final, NoReturn

import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    find_invalid_x_mcp_header,
    x_mcp_header_map,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    CORE_RESULT_TYPES,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    methods,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from adapters.mcp import codec, sdk
from gateway.model import Principal, ToolSpec

if TYPE_CHECKING:
    from adapters.mcp.server.endpoint import Endpoint

log = logging.getLogger(__name__)

ENABLED: bool = True
TOOLS_CALL: Final = "tools/call"
PARAM_HEADER_PREFIX: Final = b"mcp-param-"
_ROUTING: Final = frozenset(h.encode() for h in (MCP_PROTOCOL_VERSION_HEADER, MCP_METHOD_HEADER, MCP_NAME_HEADER))
_READ: Final = _ROUTING | {b"content-type", b"accept", b"content-length", b"authorization", b"x-api-key"}
ENVELOPE_KEYS: Final = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY})
PARAMS_KEYS: Final = frozenset({"name", "arguments", "_meta"})
_CREDENTIALS: Final = ((b"authorization", "Authorization"), (b"x-api-key", "X-API-Key"))
BASE64_SENTINEL: Final = "=?base64?"  # an `Mcp-Name` the SDK decodes before comparing: left to it
WATCH_AFTER_S: Final = 0.25  # when the disconnect watcher starts (see the module docstring)
MAX_REMEMBERED: Final = 1024  # distinct `_meta` verdicts, tool-name verdicts per snapshot, input schemas
MAX_KEY_BYTES: Final = 2048  # a verdict keyed by more of a client's bytes is not remembered (memos stay < 2 MiB each)
# A run of 19 digits (digits all read as "0" first): an integer orjson would read as a float where
# `json.loads` (the SDK's) keeps it exact.
_DIGITS_AS_ZERO: Final = bytes(ord("0") if ord("0") <= i <= ord("9") else i for i in range(256))
_LONG_NUMBER: Final = b"0" * 19
# Nesting deeper than this could exceed `json.loads`'s recursion limit where orjson still parses it.
_MAX_BRACKETS: Final = 512
_JSON: Final = b"application/json"
# A tracer provider named in the environment is installed by OpenTelemetry on first use: then every span counts.
_PROVIDER_FROM_ENV: Final = bool(os.environ.get("OTEL_PYTHON_TRACER_PROVIDER"))

Handler = Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]]


class _NoSession:
    """The session of a direct request: there is none, and nothing on this path may need one."""

    def __getattr__(self, name: str) -> NoReturn:
        raise RuntimeError(f"the MCP direct path has no session (asked for {name!r})")


class _HeaderView:
    """What the SDK's `check_accept_headers` reads of a request: its headers."""

    __slots__ = ("headers",)

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


_NO_SESSION: Final = _NoSession()
# Verdicts of the SDK's own rules for given inputs (pure, so one memo per process serves every endpoint, like
# an lru_cache): each bounded in entries and in the bytes of its keys (`_remember`).
_accepts: dict[bytes, bool] = {}  # Accept header -> whether it names JSON and SSE (the SDK's rule)
_metas: dict[tuple[str, bytes], bool] = {}  # (version, `_meta` as JSON) -> whether the SDK's validation passes it
_schemas: dict[int, tuple[Any, bool]] = {}  # id(input schema) -> (the schema, declares x-mcp-header)


def _remember(memo: dict[Any, Any], key: Any, value: Any, size: int = 0) -> None:
    """Keep a verdict, within `MAX_REMEMBERED` entries of at most `MAX_KEY_BYTES` each: a client's `_meta`,
    tool name or Accept header is not kept when larger (its verdict is worked out again each time)."""
    if size > MAX_KEY_BYTES:
        return
    if len(memo) >= MAX_REMEMBERED:
        memo.clear()
    memo[key] = value


def declares_headers(schema: Any) -> bool:
    """Whether an input schema has any `x-mcp-header` annotation, valid or not (the SDK's header check reads them)."""
    held = _schemas.get(id(schema))
    if held is not None and held[0] is schema:  # the schema is held, so its id is still its own
        return held[1]
    declared = find_invalid_x_mcp_header(schema) is not None or bool(x_mcp_header_map(schema))
    _remember(_schemas, id(schema), (schema, declared))
    return declared


def _plain_tool(endpoint: Endpoint, name: str) -> tuple[bool, ToolSpec | None]:
    """Whether the direct path may take a call of `name`: it names no tool here (then None, for the SDK's
    "Unknown tool"), or one that is no MCP upstream's and declares no x-mcp-header (then that tool).

    Remembered per snapshot and virtual-server globs: `find` with no principal resolves the same tool any
    caller's `find` does (permissions only filter it out, and `call_plain` applies them).
    """
    token = endpoint.services.derived("mcp-direct-snapshot", object)  # one new object per snapshot
    held = endpoint.direct_tools
    if held is None or held[0] is not token or held[1] is not endpoint.include or held[2] is not endpoint.exclude:
        held = (token, endpoint.include, endpoint.exclude, {})
        endpoint.direct_tools = held
    verdicts = held[3]
    verdict = verdicts.get(name)
    if verdict is None:
        spec = endpoint.find(name, None)
        plain = spec is None or not (isinstance(spec.binding, codec.McpTool) or declares_headers(spec.input_schema))
        verdict = (plain, spec)
        _remember(verdicts, name, verdict, len(name))
    return verdict


def _meta_is_valid(version: str, meta: dict[str, Any]) -> bool:
    """The SDK's three readings of `tools/call` params at `version` (its per-version validation, the params
    model its handler gets, and `_meta` as its context carries it), for `{name, arguments, _meta}` with a
    string name and an object (or no) arguments: those two always pass and no validator looks across
    fields, so the verdict is the `_meta`'s alone, and each distinct `_meta` is read once."""
    # orjson's encoding of what orjson decoded tells apart every two values (1, 1.0 and true among them).
    key = (version, orjson.dumps(meta))
    verdict = _metas.get(key)
    if verdict is None:
        params = {"name": "", "_meta": meta}
        try:
            methods.validate_client_request(TOOLS_CALL, version, params)
            types.CallToolRequestParams.model_validate(params, by_name=False)
            verdict = sdk.extract_meta(params) is not None
        except (KeyError, ValueError):  # pydantic's ValidationError is a ValueError
            verdict = False
        _remember(_metas, key, verdict, len(key[1]))
    return verdict


def _accepts_both(accept: bytes) -> bool:
    verdict = _accepts.get(accept)
    if verdict is None:
        view = _HeaderView({"accept": accept.decode("latin-1")})
        has_json, has_sse = check_accept_headers(view)  # type: ignore[arg-type]
        verdict = has_json and has_sse
        _remember(_accepts, accept, verdict, len(accept))
    return verdict


def replay(messages: list[Message], receive: Receive) -> Receive:
    """`receive` as if nothing had been read: the messages taken, then the rest."""

    async def replayed() -> Message:
        if messages:
            return messages.pop(0)
        return await receive()

    return replayed


def _decode(body: bytes) -> Any:
    """The body as the SDK's `json.loads` reads it, or None for anything orjson might read otherwise."""
    if _LONG_NUMBER in body.translate(_DIGITS_AS_ZERO) or (
        len(body) >= _MAX_BRACKETS and body.count(b"[") + body.count(b"{") >= _MAX_BRACKETS
    ):
        return None
    try:
        return orjson.loads(body)  # stricter than json.loads: whatever it refuses goes to the SDK
    except orjson.JSONDecodeError:
        return None


async def serve(
    endpoint: Endpoint, principal: Principal | None, scope: Scope, receive: Receive, send: Send
) -> Receive | None:
    """Answer this request directly when it is the common one (then None); else the `receive` for the SDK."""
    manager, server = endpoint.manager, endpoint.server
    if (
        not ENABLED
        or scope["method"] != "POST"
        or endpoint.settings.search
        or manager.json_response
        or manager.security_settings is not None
        or TOOLS_CALL in server.cache_hints
        or len(server.middleware) != 1
        or type(server.middleware[0]) is not sdk.OpenTelemetryMiddleware
    ):
        return receive
    # One pass over the header lines (ASGI names them in lower case): the first value of each header read
    # (as the SDK reads them), no routing header twice and no `Mcp-Param-*` at all (the SDK checks those).
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in _READ:
            if name in found:
                if name in _ROUTING:
                    return receive
                continue
            found[name] = value
        elif name.startswith(PARAM_HEADER_PREFIX):
            return receive
    version = found.get(b"mcp-protocol-version", b"").decode("latin-1")
    if (
        version not in MODERN_PROTOCOL_VERSIONS
        or found.get(b"mcp-method") != b"tools/call"
        or not found.get(b"content-type", b"").lower().startswith(b"application/json")
        or not _accepts_both(found.get(b"accept", b""))
    ):
        return receive
    limit = manager.max_request_body_size
    try:
        if int(found.get(b"content-length", b"0")) > limit:
            return receive
    except ValueError:
        pass  # as the SDK's limit: an unreadable length is no length

    messages: list[Message] = []
    size = 0
    while True:  # the body, as the SDK's limit reads it (a body over the limit goes to it, to be refused)
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return replay(messages, receive)
        size += len(message.get("body", b""))
        if size > limit:
            return replay(messages, receive)
        if not message.get("more_body", False):
            break
    body = messages[0].get("body", b"") if len(messages) == 1 else b"".join(m.get("body", b"") for m in messages)
    call = _call_of(_decode(body), found.get(b"mcp-name"), version)
    if call is None:
        return replay(messages, receive)
    plain, spec = _plain_tool(endpoint, call[1])
    if not plain:
        return replay(messages, receive)
    credentials = {
        name: found[raw].decode("latin-1") for raw, name in _CREDENTIALS if found.get(raw)
    }  # as gateway.auth.client_credentials takes them
    await _answer(endpoint, principal, scope, receive, send, version, credentials, spec, *call)
    return None


def _call_of(
    decoded: Any, name_header: bytes | None, version: str
) -> tuple[Any, str, dict[str, Any], dict[str, Any]] | None:
    """(request id, tool name, params, `_meta`) of a `tools/call` the SDK would dispatch as it is, else None.

    Each test is the SDK's own or narrower: `JSONRPCRequest` (an object with "2.0", a string or non-boolean
    integer id, a string method, object params), its classifier's ladder (the `_meta` envelope pair, the
    routing headers equal to the body), its per-version params validation, and no progress token.
    """
    if type(decoded) is not dict or decoded.get("jsonrpc") != "2.0" or decoded.get("method") != TOOLS_CALL:
        return None
    request_id = decoded.get("id")
    params = decoded.get("params")
    if type(request_id) not in (str, int) or type(params) is not dict or not params.keys() <= PARAMS_KEYS:
        return None
    name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
    if (
        type(name) is not str
        or name.startswith(BASE64_SENTINEL)
        or name_header is None
        or name_header.decode("latin-1") != name
        or not (arguments is None or type(arguments) is dict)
        or type(meta) is not dict
        or meta.get(PROTOCOL_VERSION_META_KEY) != version
        or CLIENT_CAPABILITIES_META_KEY not in meta
        or "progressToken" in meta
        or not _meta_is_valid(version, meta)
    ):
        return None
    return request_id, name, params, meta


async def _answer(
    endpoint: Endpoint,
    principal: Principal | None,
    scope: Scope,
    receive: Receive,
    send: Send,
    version: str,
    credentials: dict[str, str],
    spec: ToolSpec | None,
    request_id: Any,
    name: str,
    params: dict[str, Any],
    meta: dict[str, Any],
) -> None:
    """Run the call as the SDK's kernel would, then write its answer as the SDK's modern entry does (SSE mode)."""
    server = endpoint.server
    # `_call_tool`, the registered handler, on a non-search endpoint and a request without a session, is
    # `_call` with the caller (already authenticated from these same headers), the name and a copy of the
    # arguments; without progress, session or relay, `call_plain` is that call without the SDK's context.
    arguments = dict(params.get("arguments") or {})
    flight = _Flight(receive, send, endpoint.flights)
    result: Any = None
    error: types.JSONRPCError | None = None
    try:
        if _span_is_silent(meta):
            result = wire_result(
                server, version, await endpoint.call_plain(principal, name, spec, arguments, request_id, credentials)
            )
        else:  # the SDK's middleware (its span) around the handler, with the context it would build
            ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
                session=_NO_SESSION,  # type: ignore[arg-type]
                lifespan_context=sdk.lifespan_state(endpoint.manager),
                protocol_version=version,
                method=TOOLS_CALL,
                params=params,
                request_id=request_id,
                meta=sdk.extract_meta(params),
                request=Request(scope),
            )
            call: Handler = partial(_shaped, endpoint, principal, name, arguments, server, version)
            for middleware in reversed(server.middleware):
                call = partial(sdk.apply_middleware, middleware, call)
            result = sdk.dump_result(await call(ctx))
    except asyncio.CancelledError:
        if not flight.disconnected:
            raise
    except Exception as exc:
        error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc))
    finally:
        if flight.tasks:
            await flight.close()
        else:
            endpoint.flights.remove(flight)
    if flight.disconnected:
        return  # the client went away: the call was cancelled, and nobody is there to answer
    if flight.committed:
        message = error or types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
        await send({"type": "http.response.body", "body": sdk.sse_event(message), "more_body": False})
    elif error is not None:
        await sdk.write_modern(error, scope, receive, send)
    else:
        data = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", b"%d" % len(data)), (b"content-type", _JSON)],
            }
        )
        await send({"type": "http.response.body", "body": data})


async def _shaped(
    endpoint: Endpoint,
    principal: Principal | None,
    name: str,
    arguments: dict[str, Any],
    server: Any,
    version: str,
    ctx: ServerRequestContext[Any, Any],
) -> Any:
    """The handler's result shaped for the wire inside the middleware, as the SDK's `_inner` does."""
    result = await endpoint._call(ctx, principal, name, arguments, None)
    if isinstance(result, types.ErrorData):
        raise MCPError.from_error_data(result)
    return _shape(server, version, result)


def wire_result(server: Any, version: str, result: Any) -> dict[str, Any]:
    """A `tools/call` handler's result as the wire's `result` (the SDK's `_serialize`, stamped with `server`'s
    `serverInfo`): a result as JSON written as it is when plain, else through the model. The direct path and the
    console's view of an answer (`adapters.mcp.presenter`) shape with it."""
    if type(result) is dict:
        return _plain(result, server) or _shape(
            server, version, types.CallToolResult.model_validate(result, by_name=False)
        )
    return _shape(server, version, result)


def _span_is_silent(meta: dict[str, Any]) -> bool:
    """Whether the SDK's OpenTelemetry span would leave no trace: no tracer provider (the gateway's tracing
    keeps its own, never the global one) and nothing in `_meta` a propagator could take a context from."""
    provider = trace._TRACER_PROVIDER  # None until one is set; `get_tracer_provider()` would install one
    return provider is None and not _PROVIDER_FROM_ENV and meta.keys() <= ENVELOPE_KEYS


def _shape(server: Any, version: str, result: Any) -> dict[str, Any]:
    """`ServerRunner._serialize` for `tools/call` at a 2026-era version with no cache hint (the only case here):
    the result sieved by the version's surface, `resultType` filled, the `serverInfo` stamp in `_meta`."""
    dumped = sdk.dump_result(result)
    result_type = dumped.get("resultType")
    if not isinstance(result_type, str) or result_type in CORE_RESULT_TYPES:
        try:
            dumped = methods.serialize_server_result(TOOLS_CALL, version, dumped)
        except ValidationError:
            log.exception("handler for %r returned an invalid result", TOOLS_CALL)
            raise MCPError(code=types.INTERNAL_ERROR, message="Handler returned an invalid result") from None
    if dumped.get("resultType") is None:
        dumped["resultType"] = "complete"
    return _stamped(server, dumped)


def _stamped(server: Any, dumped: dict[str, Any]) -> dict[str, Any]:
    """The `serverInfo` stamp, as `ServerRunner._stamp_server_info` puts it: the server's once-made dump rather
    than a deep copy of it, as the answer is encoded before anything could change it."""
    stamp = sdk.server_info_stamp(server)
    meta = dumped.get("_meta")
    if meta is None:
        dumped["_meta"] = {SERVER_INFO_META_KEY: stamp}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: stamp}
    return dumped


def _is_json(value: Any) -> bool:
    """Plain JSON data: what a JSON-mode dump and the result sieve both leave exactly as it is."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        return all(type(k) is str and _is_json(v) for k, v in value.items())
    if kind is list:
        return all(_is_json(v) for v in value)
    return False


_TEXT_BLOCK: Final = {"type", "text"}  # the keys of a plain text block
_RESULT_KEYS: Final = frozenset({"content", "isError", "structuredContent", "_meta"})


def _plain(wire: dict[str, Any], server: Any) -> dict[str, Any] | None:
    """The wire form `_shape` gives a `CallToolResult` in its most common form, built directly from the result's
    JSON (`listing.call_result_wire`, `listing.error_result_wire`): text blocks without annotations, plain JSON
    `structuredContent`, a `_meta` of plain JSON without nulls; None otherwise (the SDK's model then shapes it).
    Same keys in the same order: the sieve's field order (`_meta`, content, isError, resultType,
    structuredContent; a text block's text, then type) and the stamp added last."""
    blocks, is_error = wire.get("content"), wire.get("isError", False)
    if not wire.keys() <= _RESULT_KEYS or type(blocks) is not list or type(is_error) is not bool:
        return None
    content = []
    for block in blocks:
        if type(block) is not dict or block.keys() != _TEXT_BLOCK or block["type"] != "text":
            return None
        text = block["text"]
        if type(text) is not str:
            return None
        content.append({"text": text, "type": "text"})
    shaped: dict[str, Any] = {}
    meta = wire.get("_meta")
    if meta is not None:
        if type(meta) is not dict or not _is_json(meta) or None in meta.values():
            return None
        shaped["_meta"] = dict(meta)
    shaped["content"] = content
    shaped["isError"] = is_error
    shaped["resultType"] = "complete"
    structured = wire.get("structuredContent")
    if structured is not None:
        if not _is_json(structured):
            return None
        shaped["structuredContent"] = structured
    return _stamped(server, shaped)


class _Flight:
    """One direct call while it runs. From `WATCH_AFTER_S` on, a task watches for the client's disconnect
    (which cancels the call, as in the SDK); once the SDK's SSE window passes, `text/event-stream` is
    committed and pinged as the SDK does. One timer looks after every call in flight (`_tend`), so a call
    done before the mark costs no timer of its own."""

    __slots__ = (
        "call_task",
        "committed",
        "disconnected",
        "flights",
        "receive",
        "send",
        "started",
        "tasks",
        "window",
    )

    def __init__(self, receive: Receive, send: Send, flights: Flights) -> None:
        self.receive, self.send, self.flights = receive, send, flights
        self.window: float = sdk.sse_window()  # read per request: the tests shorten it
        self.committed = False
        self.disconnected = False
        self.call_task = asyncio.current_task()
        self.tasks: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        self.started = loop.time()
        flights.add(self, loop, self.started + min(WATCH_AFTER_S, self.window))

    def due(self) -> float:
        """When this call next needs looking after: its watcher's start, then its SSE commit (inf: nothing left)."""
        if not self.tasks:
            return self.started + min(WATCH_AFTER_S, self.window)
        return self.started + self.window if len(self.tasks) == 1 else math.inf

    def tend(self, loop: asyncio.AbstractEventLoop, now: float) -> None:
        if not self.tasks and now >= self.started + min(WATCH_AFTER_S, self.window):
            self.tasks.append(loop.create_task(self._watch()))
        if len(self.tasks) == 1 and now >= self.started + self.window:
            self.tasks.append(loop.create_task(self._keepalive()))

    async def _watch(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass
        self.disconnected = True
        if self.call_task is not None:
            self.call_task.cancel()

    async def _keepalive(self) -> None:
        self.committed = True
        await self.send({"type": "http.response.start", "status": 200, "headers": sdk.sse_headers()})
        while True:
            await self.send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
            await asyncio.sleep(self.window)

    async def close(self) -> None:
        """Stop the helpers; a cancellation the watcher asked for is taken back (the call is over)."""
        self.flights.remove(self)
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.disconnected and self.call_task is not None:
            self.call_task.uncancel()  # the watcher's one cancel(), delivered by now (in the call, or just above)


class Flights:
    """The direct calls in flight on one endpoint, oldest first, and the one timer that tends them."""

    def __init__(self) -> None:
        self.calls: dict[_Flight, None] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._when = math.inf

    def add(self, flight: _Flight, loop: asyncio.AbstractEventLoop, due: float) -> None:
        if self._timer is None or self._loop is not loop or self._when > due:
            self._tend_at(loop, due)
        self.calls[flight] = None

    def remove(self, flight: _Flight) -> None:
        self.calls.pop(flight, None)

    def _tend_at(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        """Set the timer for `when` (instead of a later one, or one of a loop that has since ended)."""
        if self._timer is not None:
            if self._loop is not loop:  # an earlier event loop's calls and timer
                self.calls.clear()
            self._timer.cancel()
        self._loop, self._when = loop, when
        self._timer = loop.call_at(when, self._tend, loop)

    def _tend(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start what each call in flight is due (its watcher, its SSE commit); set the timer for the next one."""
        self._timer, self._when = None, math.inf
        now = loop.time()
        following = math.inf
        for flight in list(self.calls):
            flight.tend(loop, now)
            following = min(following, flight.due())
        if following < math.inf:
            self._tend_at(loop, following)
