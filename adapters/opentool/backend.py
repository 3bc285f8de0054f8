"""The OpenTool upstream backend: discovers from `/load`, calls `/call` through the SDK client."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from typing import Any

import httpx

from adapters.opentool.client import (
    FunctionCall,
    OpenToolClient,
    OpenToolException,
    OpenToolServerCallException,
    OpenToolServerNoAccessException,
    OpenToolServerUnauthorizedException,
)
from adapters.opentool.codec import INVALID_PARAMS, METHOD_NOT_FOUND
from adapters.opentool.document import DocumentError, Function, parse_document
from adapters.opentool.document import document_specs as specs_of
from gateway.errors import ErrorKind, GatewayError
from gateway.model import CallContext, ToolSpec
from gateway.upstream import Upstream, UpstreamSettings

# error.code an upstream sends -> canonical kind (anything else is a tool failure)
UPSTREAM_CODES: dict[int, ErrorKind] = {
    METHOD_NOT_FOUND: ErrorKind.NOT_FOUND,
    INVALID_PARAMS: ErrorKind.INVALID_ARGUMENTS,
    504: ErrorKind.DEADLINE,
    503: ErrorKind.UPSTREAM_UNAVAILABLE,
    403: ErrorKind.FORBIDDEN,
}


class OpenToolBackend:
    def __init__(self, name: str, settings: dict[str, Any]) -> None:
        self.name = name
        self.settings = settings
        self.upstream = Upstream(name, UpstreamSettings.from_config(settings))
        self.base_path = settings.get("path", "/opentool").rstrip("/")
        self.forward_authorization = bool(settings.get("forward_authorization", False))
        self.client = OpenToolClient(
            self.base_path, api_key=settings.get("api_key"), sender=self._send, streamer=self._stream
        )

    async def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        deadline = kwargs.pop("deadline", None)
        idempotent = kwargs.pop("idempotent", False)
        return await self.upstream.request(method, url, deadline=deadline, idempotent=idempotent, **kwargs)

    def _stream(self, method: str, url: str, **kwargs: Any) -> contextlib.AbstractAsyncContextManager[httpx.Response]:
        return self.upstream.stream(method, url, **kwargs)

    async def discover(self) -> list[ToolSpec]:
        try:
            data = await self.client.load_json(idempotent=True)
        except OpenToolException as exc:
            raise self.upstream.unavailable(f"/load failed: {exc.message}") from None
        if data is None:
            return []
        try:
            document = parse_document(data)
        except DocumentError as exc:
            raise self.upstream.unavailable(f"/load returned an invalid OpenTool document: {exc}") from None
        source = f"backend {self.name!r} ({self.upstream.settings.url})"
        specs = specs_of(document, toolkit=None, backend=self.name, source=source, language="remote")
        by_name = {fn.name: fn for fn in document.functions}
        return [dataclasses.replace(spec, binding=by_name[spec.binding]) for spec in specs]

    def _headers(self, context: CallContext) -> dict[str, str]:
        if self.forward_authorization and context.client_authorization:
            return {"Authorization": context.client_authorization}
        return {}

    async def invoke(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        function: Function = spec.binding
        call = FunctionCall(id=context.call_id or uuid.uuid4().hex, name=function.name, arguments=arguments)
        headers = self._headers(context)
        try:
            if context.stream is not None:  # the client used /streamCall: stream from the upstream too
                value: Any = None
                async for returned in self.client.stream_call(call, deadline=context.deadline, headers=headers):
                    value = unwrap(function, returned.result)
                    await context.stream(value)
                return value
            returned = await self.client.call(call, deadline=context.deadline, headers=headers)
        except OpenToolServerCallException as exc:
            kind = UPSTREAM_CODES.get(exc.code or 0, ErrorKind.TOOL_FAILED)
            data = exc.data if isinstance(exc.data, dict) else {}
            raise GatewayError.of(
                kind,
                exc.message or "The upstream tool failed",
                developer_message=data.get("developer_message"),
                can_retry=bool(data.get("can_retry", kind == ErrorKind.DEADLINE)),
                retry_after_ms=data.get("retry_after_ms"),
                additional_prompt_content=data.get("additional_prompt_content"),
                parameter_errors=data.get("parameter_errors"),
            ) from None
        except OpenToolServerUnauthorizedException:
            raise self.upstream.unavailable("it rejected the gateway's API key (401)") from None
        except OpenToolServerNoAccessException:
            raise self.upstream.unavailable("it answered 404 for /call") from None
        except OpenToolException as exc:
            raise self.upstream.unavailable(exc.message) from None
        return unwrap(function, returned.result)

    async def close(self) -> None:
        await self.upstream.close()


def unwrap(function: Function, result: dict[str, Any]) -> Any:
    """`{"<return name>": v}` back to `v` when the declared return is not an object.

    OpenTool results must be maps, so servers wrap scalars under the return's
    name; unwrapping restores the value the tool produced.
    """
    schema = function.output_schema or {}
    if function.return_name and schema.get("type") != "object" and set(result) == {function.return_name}:
        return result[function.return_name]
    return result
