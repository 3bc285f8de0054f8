"""The OXP front: `GET /health`, `GET /tools`, `POST /tools/call` under a prefix (default: the root).

Every response carries `OXP-Version: 1.0`, errors included. Calls go
through the `CallLedger`, which makes `call_id` an idempotency key and lets
long calls outlive the request (see ledger.py).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adapters.oxp import codec
from adapters.oxp.ledger import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, CallLedger, fingerprint, record_key
from gateway.catalog import Catalog
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.http import (
    browser_form_content_type,
    json_response,
    parse_json,
    read_body,
    retry_after_headers,
    unsupported_media,
)
from gateway.model import Call, CallContext, ToolSpec, principal_name

if TYPE_CHECKING:
    from gateway.runtime import Gateway

FRONT = "oxp"
GRACE_S = 30.0  # beyond a call's deadline before a `running` record with no run is called lost
MAX_LISTED = 20  # names in a "what exists" developer message
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

log = structlog.get_logger("toolplex.oxp")
Handler = Callable[[Request], Awaitable[Response]]


def respond(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return json_response(body, status=status, headers={codec.VERSION_HEADER: codec.OXP_VERSION, **(headers or {})})


def failure_response(failure: Failure, shape: codec.Shape = codec.Shape.FLAT) -> Response:
    """A failure answered before the tool ran: 400 / 401 / 413 / 422 with the spec's error body."""
    headers = {"WWW-Authenticate": 'Bearer realm="toolplex"'} if failure.kind is ErrorKind.UNAUTHENTICATED else {}
    headers.update(retry_after_headers(failure))
    return respond(codec.wrap_error(shape, codec.error_body(failure)), codec.status_of(failure), headers)


def guarded(handler: Handler) -> Handler:
    """No traceback ever reaches a client: an unexpected error is logged and answered as JSON."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception:
            incident = uuid.uuid4().hex
            log.exception("oxp_internal_error", incident=incident, path=request.url.path)
            failure = Failure(kind=ErrorKind.INTERNAL, message=f"Internal error; quote {incident} to the operator")
            return respond(codec.server_error(failure), 500)

    return run


class OxpFront:
    def __init__(self, gateway: Gateway, settings: dict[str, Any]) -> None:
        self.gateway = gateway
        self.prefix: str = settings.get("prefix", "")
        self.patience = float(settings.get("patience_s", 30))
        self.ledger = CallLedger(
            gateway.store,
            gateway.runs,
            retention=float(settings.get("retention_s", 600)),
            patience=self.patience,
            retry_after_ms=int(settings.get("retry_after_ms", 1000)),
            max_bytes=int(settings.get("retention_max_bytes", DEFAULT_MAX_BYTES)),
            max_entries=int(settings.get("retention_max_entries", DEFAULT_MAX_ENTRIES)),
        )

    async def health(self, _request: Request) -> Response:
        if self.gateway.ready:
            return respond({"status": "ok"})
        return respond({"status": "starting"}, 503)

    async def list_tools(self, request: Request) -> Response:
        try:
            principal = self.gateway.auth.authenticate(request.headers)
            codec.check_version_header(request.headers.get(codec.VERSION_HEADER))
        except GatewayError as exc:
            return failure_response(exc.failure)
        specs = self.gateway.dispatcher.visible_tools(principal, latest_only=False)
        return respond({"items": [codec.tool_definition(spec) for spec in specs]})

    async def call(self, request: Request) -> Response:
        shape = codec.Shape.FLAT
        try:
            principal = self.gateway.auth.authenticate(request.headers)
            codec.check_version_header(request.headers.get(codec.VERSION_HEADER))
            if (form := browser_form_content_type(request)) is not None:
                return respond(codec.wrap_error(shape, codec.error_body(unsupported_media(form))), 415)
            _check_content_type(request)
            body = parse_json(await read_body(request, self.gateway.max_body_bytes), self.gateway.max_json_depth)
            shape, inner = codec.unwrap(body)
            parsed = codec.parse_call_request(inner)
            spec = _resolve(self.gateway.catalog, parsed.tool_id)
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
                    client_authorization=request.headers.get("authorization"),
                ),
            )
            key = record_key(principal_name(principal), call.context.call_id)
            fp = fingerprint(parsed.raw_tool_id, parsed.input, parsed.user_id)
            lost_after = self.gateway.dispatcher.deadline_for(call, spec) + self.patience + GRACE_S
            outcome = await self.ledger.call(key, fp, call, lost_after)
        except GatewayError as exc:
            return failure_response(exc.failure, shape)
        if codec.status_of(outcome.error) != 200:
            return failure_response(outcome.error, shape)  # type: ignore[arg-type]
        result = codec.call_result(outcome.call_id, outcome.duration_ms, outcome.value, outcome.error)
        return respond(codec.wrap(shape, result))

    async def not_allowed(self, request: Request) -> Response:
        allowed = "POST" if request.url.path.endswith("/tools/call") else "GET, HEAD"
        failure = Failure(
            kind=ErrorKind.MALFORMED,
            message=f"Method {request.method} is not allowed on {request.url.path}",
            developer_message=f"Use {allowed}",
        )
        return respond(codec.server_error(failure), 405, {"Allow": allowed})


def _check_content_type(request: Request) -> None:
    """JSON or no Content-Type at all (tolerated); a form or text body is refused."""
    raw = request.headers.get("content-type")
    if raw is None:
        return
    media = raw.split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return
    raise codec.malformed(f"Content-Type must be application/json, got {raw!r}")


def _resolve(catalog: Catalog, tool_id: codec.ToolId) -> ToolSpec:
    """The exact spec a tool id names, with a developer message that says what does exist."""
    try:
        spec = catalog.resolve(tool_id.qualified_name, tool_id.version)
    except GatewayError as exc:
        failure = exc.failure
        if "available_versions" not in failure.details:
            failure = _with_known_tools(catalog, tool_id, failure)
        raise GatewayError(failure) from None
    if spec.qualified_name != tool_id.qualified_name:  # flat names collide across the dot: not the same tool
        raise GatewayError(
            _with_known_tools(
                catalog,
                tool_id,
                Failure(kind=ErrorKind.NOT_FOUND, message=f"Tool '{spec.flat_name}' was not found"),
            )
        )
    return spec


def _with_known_tools(catalog: Catalog, tool_id: codec.ToolId, failure: Failure) -> Failure:
    kits = catalog.toolkits()
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


def routes(gateway: Gateway, settings: dict[str, Any]) -> list[BaseRoute]:
    front = OxpFront(gateway, settings)
    p = front.prefix
    fallback = guarded(front.not_allowed)
    return [
        Route(f"{p}/health", guarded(front.health), methods=["GET"]),
        Route(f"{p}/tools", guarded(front.list_tools), methods=["GET"]),
        Route(f"{p}/tools/call", guarded(front.call), methods=["POST"]),
        Route(f"{p}/health", fallback, methods=ALL_METHODS),
        Route(f"{p}/tools", fallback, methods=ALL_METHODS),
        Route(f"{p}/tools/call", fallback, methods=ALL_METHODS),
    ]
