"""The OpenTool upstream backend: discovers from `/load` (or a local `description_file`),
calls `/call`, streams through `/streamCall` when the client streamed.

Real servers differ (protocols.md §1): the TypeScript SDK serves no description over
`/load`, answers `"jsonrpc": "2.0.0"` and returns an unknown function as a successful
`{"code": 405, ...}` result; most servers have no `/streamCall`. Each difference has
one place here, and every answer becomes a value or one canonical failure.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

from adapters.opentool import codec
from adapters.opentool.document import Document, DocumentError, Function, load_description, parse_document
from adapters.opentool.document import document_specs as specs_of
from adapters.opentool.settings import OpenToolBackendSettings
from gateway.backends import BackendContext, BaseBackend, Feature
from gateway.errors import ConfigError, ErrorKind, Failure, GatewayError
from gateway.model import Answered, CallContext, ToolSpec, UpstreamAnswer, UpstreamFailed
from gateway.upstream import (
    Credentials,
    Upstream,
    UpstreamSettings,
    error_body,
    failure_for_status,
    json_of,
    plain_message,
)

PROTOCOL = "opentool"  # `Upstream.protocol` of this backend's answers
_NO_STREAM = object()  # the upstream has no /streamCall: call /call instead


class OpenToolBackend(BaseBackend):
    """One OpenTool server; streams a call through `/streamCall` when the client streams."""

    relays = "opentool"  # a front of this protocol is a transparent hop (`BaseBackend.relays`)

    features = frozenset({Feature.STREAM})

    def __init__(self, settings: OpenToolBackendSettings, context: BackendContext) -> None:
        self.name = settings.name
        self.settings = settings
        self.credentials = Credentials.of(settings.api_key, settings, context.store)
        self.upstream = Upstream(
            self.name,
            UpstreamSettings.from_config(settings, context.max_response_bytes),
            auth=self.credentials.auth(None),
        )
        self.base_path = settings.path.rstrip("/")
        self.description_file = settings.description_file
        self.streams: bool | None = None  # False once /streamCall answered 404/405: not asked again

    # ---- discovery ----

    async def discover(self) -> list[ToolSpec]:
        if self.description_file:
            document = self._local_document()
            await self._probe()
        else:
            document = await self._loaded_document()
        source = f"backend {self.name!r} ({self.upstream.settings.url})"
        specs = specs_of(document, toolkit=None, backend=self.name, source=source, language="remote")
        by_name = {fn.name: fn for fn in document.functions}
        return [_bound(spec, by_name[spec.binding]) for spec in specs]

    def _local_document(self) -> Document:
        assert self.description_file is not None
        try:
            return load_description(Path(self.description_file))
        except DocumentError as exc:
            raise ConfigError([f"backend {self.name!r}: description_file {exc}"]) from None

    async def _probe(self) -> None:
        """With a local description, `GET /version` says whether the upstream is there."""
        where = f"{self.base_path}/version"
        response = await self.upstream.request("GET", where, headers=self._credentials(), idempotent=True)
        if response.status_code != 200:
            raise self.upstream.unavailable(f"GET {where} answered HTTP {response.status_code}")

    async def _loaded_document(self) -> Document:
        where = f"{self.base_path}/load"
        hint = (
            "give the backend `description_file:` (a local copy of its OpenTool description, JSON or YAML) "
            "to serve its tools"
        )
        response = await self.upstream.request("GET", where, headers=self._credentials(), idempotent=True)
        status = response.status_code
        if status in (401, 403):
            raise self.upstream.unavailable(f"GET {where} refused the gateway's credentials (HTTP {status})")
        if status in (404, 405, 501):
            raise self.upstream.unavailable(f"it has no GET {where} (HTTP {status}); {hint}")
        if status != 200:
            raise self.upstream.unavailable(f"GET {where} answered HTTP {status}")
        data = json_of(self.upstream, response)
        if not isinstance(data, dict) or "opentool" not in data:
            # The TypeScript SDK: 200 {"code": 404, "message": "Json Parser NOT implement"}; the spec: {}.
            answer = codec.text_of(data)[:200]
            raise self.upstream.unavailable(f"GET {where} serves no OpenTool description ({answer}); {hint}")
        try:
            return parse_document(data)
        except DocumentError as exc:
            raise self.upstream.unavailable(f"GET {where} returned an invalid OpenTool document: {exc}") from None

    # ---- calls ----

    def _credentials(self) -> dict[str, str]:
        return self.credentials.own()

    def _headers(self, context: CallContext) -> dict[str, str]:
        return self.credentials.for_call(context)

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        function: Function = spec.binding
        body = {
            "jsonrpc": "2.0",
            "method": function.name,
            "params": arguments,
            "id": context.call_id or uuid.uuid4().hex,
        }
        if context.stream is not None and self.streams is not False:
            value = await self._stream_call(function, body, context)
            if value is not _NO_STREAM:
                return value
        response = await self.upstream.request(
            "POST", f"{self.base_path}/call", json=body, headers=self._headers(context), deadline=context.deadline
        )
        if response.status_code >= 400:
            raise GatewayError(self._status_failure(response, forwarded=self.credentials.forward_authorization))
        return self._value(function, json_of(self.upstream, response), response)

    async def _stream_call(self, function: Function, body: dict[str, Any], context: CallContext) -> Any:
        """Values pass on event by event; `_NO_STREAM` when the upstream has no /streamCall."""
        assert context.stream is not None
        where = f"{self.base_path}/streamCall"
        async with self.upstream.stream(
            "POST", where, json=body, headers=self._headers(context), deadline=context.deadline
        ) as response:
            if response.status_code in (404, 405):
                self.streams = False
                return _NO_STREAM
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                await response.aread()
                if response.status_code >= 400:
                    raise GatewayError(self._status_failure(response, forwarded=self.credentials.forward_authorization))
                answer = json_of(self.upstream, response)
                if _method_not_found(answer):
                    return _NO_STREAM  # a JSON-RPC dispatcher without streamCall; /call tells about the tool
                return self._value(function, answer, response)
            self.streams = True
            value: Any = None
            streamed = 0
            async for event, data in codec.sse_events(response.aiter_lines()):
                if event not in ("data", "error"):
                    continue
                try:
                    answer = orjson.loads(data)
                except orjson.JSONDecodeError:
                    raise self._invalid(response, f"an SSE {event} event that is not JSON") from None
                if event == "error" and not streamed and _method_not_found(answer):
                    return _NO_STREAM
                value = self._value(function, answer, response)
                streamed += 1
                await context.stream(value)  # an `Answered`: an OpenTool front passes the result on as it came
            return value

    def _value(self, function: Function, answer: Any, response: httpx.Response) -> Answered:
        """The value of one JSON-RPC answer with its `result` as it came, or the canonical failure it carries
        (raised, with its `error` as it came): an OpenTool front passes either on unchanged."""
        try:
            result, error = codec.read_answer(answer)
        except ValueError as exc:
            raise self._invalid(response, str(exc)) from None
        toolplex = function.extension is not None
        if error is not None:
            raise UpstreamFailed(codec.read_error(error, toolplex=toolplex), UpstreamAnswer(PROTOCOL, error=error))
        if not toolplex and _unsupported(result):
            # The TypeScript SDK returns an unknown function as a *successful* {"code": 405, ...}.
            raise GatewayError.of(
                ErrorKind.NOT_FOUND,
                f"Upstream {self.name!r} does not know function {function.name!r}: {codec.text_of(result['message'])}",
                developer_message="Its description lists a function the server does not implement",
            )
        value = codec.unwrap_result(result) if toolplex else unwrap(function, result)
        return Answered(value, UpstreamAnswer(PROTOCOL, result=result))

    def _status_failure(self, response: httpx.Response, *, forwarded: bool = False) -> Failure:
        """An HTTP error answer: its status says the kind; a JSON-RPC error body adds its details."""
        body = error_body(response)
        message = codec.error_message_of(body, plain_message(response))
        fields: dict[str, Any] = {}
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            carried = codec.read_error(error, toolplex=False)
            fields = {
                "developer_message": carried.developer_message,
                "parameter_errors": carried.parameter_errors,
                "details": carried.details,
            }
            if carried.retry_after_ms is not None:
                fields["retry_after_ms"] = carried.retry_after_ms
        failure = failure_for_status(
            self.name, response.status_code, message, response.headers, client_credentials=forwarded, **fields
        )
        assert failure is not None  # only called for statuses >= 400
        return failure

    def _invalid(self, response: httpx.Response, why: str) -> GatewayError:
        snippet = response.text[:120].replace("\n", " ") if response.is_stream_consumed else ""
        return self.upstream.protocol_fault(
            f"its answer is not a valid OpenTool response ({why})",
            response,
            developer_message=f"HTTP {response.status_code}, first bytes: {snippet!r}",
        )

    async def close(self) -> None:
        await self.upstream.close()
        await self.credentials.close()


def _bound(spec: ToolSpec, function: Function) -> ToolSpec:
    return dataclasses.replace(spec, binding=function)


def _method_not_found(answer: Any) -> bool:
    error = answer.get("error") if isinstance(answer, dict) else None
    return isinstance(error, dict) and error.get("code") == codec.METHOD_NOT_FOUND


def _unsupported(result: Any) -> bool:
    return isinstance(result, dict) and set(result) == {"code", "message"} and result["code"] == 405


def unwrap(function: Function, result: Any) -> Any:
    """`{"<return name>": v}` back to `v` when the declared return is not an object.

    OpenTool results must be maps, so servers wrap scalars under the return's
    name; unwrapping restores the value the tool produced. A result that is not
    an object (servers that do not wrap) is the value itself.
    """
    if not isinstance(result, dict):
        return result
    schema = function.output_schema or {}
    if function.return_name and schema.get("type") != "object" and set(result) == {function.return_name}:
        return result[function.return_name]
    return result
