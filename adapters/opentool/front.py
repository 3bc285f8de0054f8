"""The OpenTool front: `/version`, `/call`, `/streamCall`, `/load` under a prefix (default /opentool)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from adapters.opentool import codec
from adapters.opentool.document import build_document
from gateway.auth import client_credentials
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.http import (
    browser_form_content_type,
    dumps,
    is_json_content_type,
    json_response,
    parse_json,
    retry_after_headers,
    unsupported_media,
)
from gateway.model import Answered, Call, CallContext, Principal
from gateway.wire import Answer, WireRequest, json_answer, raw_route

if TYPE_CHECKING:
    from adapters.opentool.settings import OpenToolFrontSettings
    from gateway.services import FrontServices

FRONT = "opentool"


class _Rejected(Exception):
    """A request answered before dispatch, with its JSON-RPC code."""

    def __init__(self, failure: Failure, code: int, call_id: str | None = None, status: int | None = None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.code = code
        self.call_id = call_id
        self.status = status  # when the HTTP status is not the failure kind's (415)


def _malformed(message: str, code: int = codec.INVALID_REQUEST, call_id: str | None = None) -> _Rejected:
    return _Rejected(Failure(kind=ErrorKind.MALFORMED, message=message), code, call_id)


def _rejection_response(rejected: _Rejected) -> Answer:
    return json_answer(
        codec.failure_body(rejected.call_id, rejected.failure, rejected.code),
        status=rejected.status or codec.status_of(rejected.failure),
    )


class OpenToolFront:
    """The handlers of one configuration: rebuilt on reload, they keep nothing but the services and settings."""

    def __init__(self, services: FrontServices, settings: OpenToolFrontSettings) -> None:
        self.services = services
        self.prefix = settings.prefix
        self.server_url = settings.server_url

    def _authenticate(self, request: Request | WireRequest) -> Principal | None:
        try:
            return self.services.authenticate(request.headers)
        except GatewayError as exc:
            raise _Rejected(exc.failure, 401) from None

    async def _parse_call(self, request: WireRequest) -> tuple[Call, str]:
        principal = self._authenticate(request)
        if (form := browser_form_content_type(request)) is not None:
            raise _Rejected(unsupported_media(form), codec.INVALID_REQUEST, status=415)
        if not is_json_content_type(request):
            raise _malformed(
                f"Content-Type must be application/json, got {request.headers.get('content-type') or 'none'!r}"
            )
        try:
            limits = self.services.limits
            body = parse_json(await request.read(limits.max_body_bytes), limits.max_json_depth)
        except GatewayError as exc:
            code = codec.PARSE_ERROR if exc.failure.kind == ErrorKind.MALFORMED else codec.INVALID_REQUEST
            raise _Rejected(exc.failure, code) from None
        if not isinstance(body, dict):
            raise _malformed(f"The body must be a JSON-RPC request object, not a JSON {type(body).__name__}")
        call_id = body.get("id") if isinstance(body.get("id"), str) else None
        unknown = sorted(set(body) - codec.REQUEST_FIELDS)
        if unknown:
            raise _malformed(f"Unknown request member(s): {', '.join(unknown)}", call_id=call_id)
        if body.get("jsonrpc") not in codec.ACCEPTED_JSONRPC:
            raise _malformed(f"'jsonrpc' must be \"2.0\", got {body.get('jsonrpc')!r}", call_id=call_id)
        if "id" not in body or body["id"] is None:
            raise _malformed("'id' is required: a string that the response echoes")
        if not isinstance(body["id"], str):
            raise _malformed(f"'id' must be a string, got {type(body['id']).__name__} {body['id']!r}")
        method = body.get("method")
        if not isinstance(method, str) or not method:
            raise _malformed("'method' is required: the name of the function to call", call_id=call_id)
        params = body.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            failure = Failure(
                kind=ErrorKind.INVALID_ARGUMENTS,
                message=f"'params' must be an object keyed by parameter name, got a JSON {type(params).__name__}",
            )
            raise _Rejected(failure, codec.INVALID_PARAMS, call_id)
        context = CallContext(
            front=FRONT,
            principal=principal,
            trace_id=body["id"],
            client_credentials=client_credentials(request.headers),
        )
        return Call(tool=method, arguments=params, context=context), body["id"]

    async def version(self, request: Request) -> Answer | Response:
        try:
            self._authenticate(request)
        except _Rejected as rejected:
            return _rejection_response(rejected)
        return json_response({"version": self.services.version})

    async def call(self, request: WireRequest) -> Answer:
        try:
            call, call_id = await self._parse_call(request)
        except _Rejected as rejected:
            return _rejection_response(rejected)
        outcome = await self.services.call(call)
        status, body = codec.call_answer(call_id, call.tool, outcome)  # as the console presents it too
        return json_answer(body, status=status, headers=retry_after_headers(outcome.error))

    async def stream_call(self, request: WireRequest) -> Answer | Response:
        try:
            call, call_id = await self._parse_call(request)
        except _Rejected as rejected:
            return _rejection_response(rejected)
        method = call.tool

        async def events() -> AsyncIterator[str]:
            yield _event("start", {"start": method})
            partial: asyncio.Queue[Any] = asyncio.Queue(maxsize=64)
            call.context.stream = partial.put  # a backend that streams sends each value here as it comes
            task = asyncio.create_task(self.services.call(call))
            streamed = 0
            try:
                while not (task.done() and partial.empty()):
                    getter = asyncio.ensure_future(partial.get())
                    await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                    if getter.done():
                        streamed += 1
                        item = getter.result()  # a value, or an upstream's `Answered` with its result as it came
                        if isinstance(item, Answered):
                            yield _event(
                                "data", codec.call_success(call_id, item.value, codec.own_answer(item.upstream))
                            )
                        else:
                            yield _event("data", codec.success(call_id, item))
                    else:
                        getter.cancel()
                outcome = task.result()
            finally:
                if not task.done():  # the client went away: stop the call
                    task.cancel()
            own = codec.own_answer(outcome.upstream)
            if outcome.error is not None:
                yield _event("error", codec.call_failure(call_id, method, outcome.error, own))
                return
            if not streamed:  # a tool that returns one value yields one data event
                yield _event("data", codec.call_success(call_id, outcome.value, own))
            yield _event("done", {"done": method})

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def load(self, request: Request) -> Answer | Response:
        try:
            principal = self._authenticate(request)
        except _Rejected as rejected:
            return _rejection_response(rejected)
        base = (self.services.public_url or str(request.base_url)).rstrip("/")
        server_url = self.server_url or f"{base}{self.prefix}"
        # Encoded once per catalog, permission view and server URL, then reused.
        document = self.services.listing(
            (FRONT, "load", server_url),
            principal,
            lambda: build_document(
                self.services.tools(principal),  # only what this caller may call
                title="Toolplex",
                version=self.services.version,
                description="Tools served by the Toolplex gateway",
                server_url=server_url,
            ),
        )
        return json_response(document)


def _event(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {dumps(data)}\n\n"


def routes(services: FrontServices, settings: OpenToolFrontSettings) -> list[BaseRoute]:
    """The front's routes under its prefix (`gateway.plugins.FrontPlugin`)."""
    front = OpenToolFront(services, settings)
    p = front.prefix
    return [
        Route(f"{p}/version", front.version, methods=["GET"]),
        raw_route(f"{p}/call", front.call, ["POST"]),
        raw_route(f"{p}/streamCall", front.stream_call, ["POST"]),
        Route(f"{p}/load", front.load, methods=["GET"]),
    ]
