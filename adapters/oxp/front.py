"""The OXP front: `GET /health`, `GET /tools`, `POST /tools/call` under a prefix (default: the root).

Every response carries `OXP-Version: 1.0`, errors included. Calls go
through the gateway's detached runs (`services.detached("oxp")`, see
gateway/detached.py), which make `call_id` an idempotency key and let long
calls outlive the request. The front object keeps nothing of its own: it is
rebuilt on every reload, and the service it configures outlives it.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog
from starlette.routing import BaseRoute

from adapters.oxp import codec
from gateway import tracing
from gateway.auth import client_credentials
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.http import browser_form_content_type, parse_json, retry_after_headers, unsupported_media
from gateway.model import Call, CallContext, Principal, ToolSpec
from gateway.wire import Answer, WireRequest, json_answer, raw_route

if TYPE_CHECKING:
    from adapters.oxp.settings import OxpFrontSettings
    from gateway.detached import DetachedRuns
    from gateway.services import FrontServices

FRONT = "oxp"  # also the namespace of its records in the state store: `oxp:call:<principal>:<call_id>`
GRACE_S = 30.0  # beyond a call's deadline before a `running` record with no run is called lost
MAX_LISTED = 20  # names in a "what exists" developer message
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

log = structlog.get_logger("toolplex.oxp")
Handler = Callable[[WireRequest], Awaitable[Answer]]
VERSION_ONLY = {codec.VERSION_HEADER: codec.OXP_VERSION}


def respond(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    return json_answer(body, status, {**VERSION_ONLY, **headers} if headers else VERSION_ONLY)


def failure_headers(failure: Failure | None) -> dict[str, str]:
    """What a failure answered before the tool ran says in headers: the bearer challenge, `Retry-After`."""
    if failure is None:
        return {}
    headers = {"WWW-Authenticate": 'Bearer realm="toolplex"'} if failure.kind is ErrorKind.UNAUTHENTICATED else {}
    headers.update(retry_after_headers(failure))
    return headers


def failure_response(failure: Failure, shape: codec.Shape = codec.Shape.FLAT) -> Answer:
    """A failure answered before the tool ran: 400 / 401 / 413 / 422 with the spec's error body."""
    return respond(
        codec.wrap_error(shape, codec.error_body(failure)), codec.status_of(failure), failure_headers(failure)
    )


def guarded(handler: Handler) -> Handler:
    """No traceback ever reaches a client: an unexpected error is logged and answered as JSON."""

    @functools.wraps(handler)
    async def run(request: WireRequest) -> Answer:
        try:
            return await handler(request)
        except Exception:
            incident = uuid.uuid4().hex
            log.exception("oxp_internal_error", incident=incident, path=request.path)
            failure = Failure(kind=ErrorKind.INTERNAL, message=f"Internal error; quote {incident} to the operator")
            return respond(codec.server_error(failure), 500)

    return run


class OxpFront:
    """The handlers of one configuration: the services, the settings, and the detached runs they configured."""

    def __init__(self, services: FrontServices, settings: OxpFrontSettings, runs: DetachedRuns) -> None:
        self.services = services
        self.settings = settings
        self.runs = runs

    async def health(self, _request: WireRequest) -> Answer:
        if self.services.ready:
            return respond({"status": "ok"})
        return respond({"status": "starting"}, 503)

    async def list_tools(self, request: WireRequest) -> Answer:
        try:
            principal = self.services.authenticate(request.headers)
            codec.check_version_header(request.headers.get(codec.VERSION_HEADER))
        except GatewayError as exc:
            return failure_response(exc.failure)
        # Encoded once per catalog and permission view (10,000 tools took 100+ ms to encode per request).
        listing = self.services.listing(
            (FRONT, "tools"),
            principal,
            lambda: {"items": [codec.tool_definition(s) for s in self.services.tools(principal, latest_only=False)]},
        )
        return respond(listing)

    async def call(self, request: WireRequest) -> Answer:
        shape = codec.Shape.FLAT
        try:
            principal = self.services.authenticate(request.headers)
            codec.check_version_header(request.headers.get(codec.VERSION_HEADER))
            if (form := browser_form_content_type(request)) is not None:
                return respond(codec.wrap_error(shape, codec.error_body(unsupported_media(form))), 415)
            _check_content_type(request)
            limits = self.services.limits
            body = parse_json(await request.read(limits.max_body_bytes), limits.max_json_depth)
            shape, inner = codec.unwrap(body)
            parsed = codec.parse_call_request(inner)
            spec = _resolve(self.services, principal, parsed.tool_id)
            call = Call(
                tool=spec.flat_name,
                version=spec.version,
                arguments=parsed.input,
                context=CallContext(
                    call_id=parsed.call_id or uuid.uuid4().hex,
                    front=FRONT,
                    principal=principal,
                    trace_id=parsed.trace_id,
                    user_id=parsed.user_id,
                    secrets=parsed.secrets,
                    authorization=parsed.authorization,
                    client_credentials=client_credentials(request.headers),
                ),
            )
            fp = codec.fingerprint(parsed.raw_tool_id, parsed.input, parsed.user_id)
            lost_after = self.services.deadline_for(call, spec) + self.settings.patience_s + GRACE_S
            with tracing.joined(codec.w3c_trace_id(parsed.trace_id), parsed.trace_id):  # trace_id names the trace
                outcome = await self.runs.call(call.context.call_id, fp, call, lost_after, told=bool(parsed.call_id))
        except GatewayError as exc:
            return failure_response(exc.failure, shape)
        status, body = codec.call_answer(outcome, shape)  # as the console presents it too
        return respond(body, status, failure_headers(outcome.error) if status != 200 else None)

    async def not_allowed(self, request: WireRequest) -> Answer:
        allowed = "POST" if request.path.endswith("/tools/call") else "GET, HEAD"
        failure = Failure(
            kind=ErrorKind.MALFORMED,
            message=f"Method {request.method} is not allowed on {request.path}",
            developer_message=f"Use {allowed}",
        )
        return respond(codec.server_error(failure), 405, {"Allow": allowed})


def _check_content_type(request: WireRequest) -> None:
    """JSON or no Content-Type at all (tolerated); a form or text body is refused."""
    raw = request.headers.get("content-type")
    if raw is None:
        return
    media = raw.split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return
    raise codec.malformed(f"Content-Type must be application/json, got {raw!r}")


def _resolve(services: FrontServices, principal: Principal | None, tool_id: codec.ToolId) -> ToolSpec:
    """The exact spec a tool id names, with a developer message that says what does exist."""
    try:
        spec = services.resolve(tool_id.qualified_name, tool_id.version)
    except GatewayError as exc:
        failure = exc.failure
        if "available_versions" not in failure.details:
            failure = _with_known_tools(services, principal, tool_id, failure)
        raise GatewayError(failure) from None
    if spec.qualified_name != tool_id.qualified_name:  # flat names collide across the dot: not the same tool
        raise GatewayError(
            _with_known_tools(
                services,
                principal,
                tool_id,
                Failure(kind=ErrorKind.NOT_FOUND, message=f"Tool '{spec.flat_name}' was not found"),
            )
        )
    return spec


def _with_known_tools(
    services: FrontServices, principal: Principal | None, tool_id: codec.ToolId, failure: Failure
) -> Failure:
    """`failure` with a developer message naming what the caller could call instead (toolkits sorted by name)."""
    kits = dict(sorted(services.toolkits(principal).items()))
    if tool_id.toolkit in kits:
        known = [s.qualified_name for s in kits[tool_id.toolkit]]
        what = f"toolkit {tool_id.toolkit} has {_listing(known)}"
    else:
        what = f"toolkits: {_listing(list(kits))}" if kits else "the catalog is empty"
    return Failure(
        kind=failure.kind,
        message=failure.message,
        developer_message=f"No tool {tool_id.qualified_name} is served; {what}",
        details=failure.details,
    )


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return f"{shown} and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else shown


def configure_runs(services: FrontServices, settings: OxpFrontSettings) -> DetachedRuns:
    """The detached runs of this front, (re)configured from its current settings (a reload may change them)."""
    runs = services.detached(FRONT)
    runs.configure(
        retention=settings.retention_s,
        patience=settings.patience_s,
        retry_after_ms=settings.retry_after_ms,
        max_bytes=settings.retention_max_bytes,
        max_entries=settings.retention_max_entries,
        recorded=codec.recorded_by_tool,
        identity=codec.CALL_IDENTITY,
    )
    return runs


def routes(services: FrontServices, settings: OxpFrontSettings) -> list[BaseRoute]:
    front = OxpFront(services, settings, configure_runs(services, settings))
    p = settings.prefix
    fallback = guarded(front.not_allowed)
    return [
        raw_route(f"{p}/health", guarded(front.health), ["GET"]),
        raw_route(f"{p}/tools", guarded(front.list_tools), ["GET"]),
        raw_route(f"{p}/tools/call", guarded(front.call), ["POST"]),
        raw_route(f"{p}/health", fallback, ALL_METHODS),
        raw_route(f"{p}/tools", fallback, ALL_METHODS),
        raw_route(f"{p}/tools/call", fallback, ALL_METHODS),
    ]
