"""The JSON-RPC front (seed 002): `tool.execute` and `tool.list` at one path (default /rpc).

One POST carries a request, a notification or a batch. Batch entries run
concurrently and are answered in request order; notifications run and are
never answered (a body of only notifications gets 204). Every JSON-RPC
answer is HTTP 200; only transport problems (credentials, body size,
content type) change the status, and they still carry a JSON-RPC error.

A tool of a JSON-RPC upstream (a `jsonrpc` backend) answers as the upstream did: its own
`result` or error object, with only the gateway's own in it changed (`codec.relayed_result`).
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import structlog
from starlette.routing import BaseRoute

from adapters.jsonrpc import codec
from gateway.auth import client_credentials
from gateway.errors import ErrorKind, GatewayError
from gateway.http import is_json_content_type, parse_json
from gateway.model import Call, CallContext, Principal
from gateway.wire import Answer, WireRequest, json_answer, raw_route

if TYPE_CHECKING:
    from adapters.jsonrpc.settings import JsonRpcFrontSettings
    from gateway.services import FrontServices

FRONT = "jsonrpc"
METHODS = ("tool.execute", "tool.list")
# Older JSON-RPC-over-HTTP clients label their bodies with these.
JSONRPC_MEDIA_TYPES = ("application/json-rpc", "application/jsonrequest")
log = structlog.get_logger("toolplex.jsonrpc")
NO_CONTENT = Answer(b"", 204, media_type=None)  # a body of only notifications


# The client's credential headers, for every call of this request (batch entries included).
_CLIENT_CREDENTIALS: ContextVar[dict[str, str] | None] = ContextVar("client_credentials", default=None)


class JsonRpcFront:
    """The handler of one configuration: rebuilt on reload, it keeps nothing but the services and settings."""

    def __init__(self, services: FrontServices, settings: JsonRpcFrontSettings) -> None:
        self.services = services
        self.path = settings.path
        self.max_batch = settings.max_batch
        self.max_timeout_ms = settings.max_timeout_ms

    async def handle(self, request: WireRequest) -> Answer:
        _CLIENT_CREDENTIALS.set(client_credentials(request.headers))  # for backends that forward them
        try:
            principal = self.services.authenticate(request.headers)
        except GatewayError as exc:
            err = codec.failure_error(exc.failure, None, None, None)
            return json_answer(codec.error(None, err), status=401, headers={"WWW-Authenticate": "Bearer"})
        content_type = request.headers.get("content-type")
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if content_type is not None and not is_json_content_type(request) and media not in JSONRPC_MEDIA_TYPES:
            err = codec.RpcError(codec.INVALID_REQUEST, f"Content-Type must be application/json, got {content_type!r}")
            return json_answer(codec.error(None, err), status=415)
        try:
            limits = self.services.limits
            message = parse_json(await request.read(limits.max_body_bytes), limits.max_json_depth)
        except GatewayError as exc:
            if exc.failure.kind == ErrorKind.TOO_LARGE:
                return json_answer(codec.error(None, codec.RpcError(codec.INVALID_REQUEST, exc.failure.message)), 413)
            return json_answer(codec.error(None, codec.RpcError(codec.PARSE_ERROR, exc.failure.message)))
        if isinstance(message, list):
            return await self._batch(message, principal)
        answer = await self._answer(message, principal)
        return json_answer(answer) if answer is not None else NO_CONTENT

    async def _batch(self, items: list[Any], principal: Principal | None) -> Answer:
        if not items:
            return json_answer(codec.error(None, codec.RpcError(codec.INVALID_REQUEST, "A batch must not be empty")))
        if len(items) > self.max_batch:
            err = codec.RpcError(
                codec.INVALID_REQUEST,
                f"A batch may hold at most {self.max_batch} requests; this one has {len(items)}",
                {"max_batch": self.max_batch},
            )
            return json_answer(codec.error(None, err))
        answers = await asyncio.gather(*(self._answer(item, principal) for item in items))
        present = [a for a in answers if a is not None]
        return json_answer(present) if present else NO_CONTENT

    async def _answer(self, item: Any, principal: Principal | None) -> dict[str, Any] | None:
        """The response object for one request, or None for a notification."""
        try:
            req = codec.parse_request(item)
        except codec.RpcError as err:
            return codec.error(err.request_id, err)
        try:
            value = await self._run(req, principal)
        except codec.RpcError as err:
            if req.notification:
                log.info("notification_failed", method=req.method, code=err.code, message=err.message)
                return None
            return codec.error(req.id, err)
        except Exception:
            log.exception("jsonrpc_internal_error", method=req.method)
            if req.notification:
                return None
            return codec.error(req.id, codec.RpcError(codec.INTERNAL_ERROR, "Internal error"))
        return None if req.notification else codec.success(req.id, value)

    async def _run(self, req: codec.Request, principal: Principal | None) -> Any:
        if req.rejected is not None:
            raise req.rejected
        if req.method == "tool.execute":
            return await self._execute(req, principal)
        if req.method == "tool.list":
            return self._list(req.params, principal)
        raise codec.RpcError(
            codec.METHOD_NOT_FOUND,
            f"Method {req.method!r} not found; this server has {', '.join(METHODS)}",
            {"method": req.method, "methods": list(METHODS)},
        )

    def _list(self, params: dict[str, Any], principal: Principal | None) -> dict[str, Any]:
        language = codec.parse_list(params)

        def build() -> list[dict[str, Any]]:
            specs = self.services.tools(principal)  # only what this caller may call
            chosen = [s for s in specs if language is None or s.language == language]
            return [codec.registration(s) for s in chosen]  # an upstream's tools in its order (the catalog's)

        # Encoded once per catalog, permission view and language filter, then reused.
        return {"tools": self.services.listing((FRONT, "tool.list", language), principal, build)}

    async def _execute(self, req: codec.Request, principal: Principal | None) -> Any:
        params = codec.parse_execute(req.params)
        if params.language is not None:
            try:
                spec = self.services.resolve(params.tool, params.version)
            except GatewayError:
                pass  # dispatch answers (and logs) the unknown tool like any other call
            else:
                if params.language != spec.language:
                    log.info("language_mismatch", tool=spec.flat_name, wanted=params.language, actual=spec.language)
                    raise codec.language_mismatch(spec, params.language)
        timeout_ms = params.timeout_ms
        if timeout_ms is not None and self.max_timeout_ms is not None:
            timeout_ms = min(timeout_ms, self.max_timeout_ms)
        context = CallContext(
            front=FRONT,
            principal=principal,
            session_id=params.session_id,
            message_id=params.message_id,
            trace_id=None if req.id is None else str(req.id),
            client_credentials=_CLIENT_CREDENTIALS.get() or {},
        )
        call = Call(
            tool=params.tool,
            version=params.version,
            arguments=params.parameters,
            context=context,
            timeout=timeout_ms / 1000 if timeout_ms is not None else None,
        )
        outcome = await self.services.call(call)
        return codec.execute_result(outcome, params.tool, params.language)  # as the console presents it too


def routes(services: FrontServices, settings: JsonRpcFrontSettings) -> list[BaseRoute]:
    """The one route of the front (`gateway.plugins.FrontPlugin`)."""
    front = JsonRpcFront(services, settings)
    return [raw_route(front.path, front.handle, ["POST"])]
