"""The `http` backend: each tool is one REST endpoint described in the configuration.

- name: weather
  kind: http
  url: http://127.0.0.1:9000
  toolkit: Weather
  tools:
    - name: Forecast
      method: GET
      path: /forecast/{city}        # {name}s come from the arguments
      query: [days]                 # these go in the query string
      # the remaining arguments go in a JSON body (POST/PUT/PATCH) or the query (GET/DELETE)
      input_schema: {type: object, properties: {city: {type: string}, days: {type: integer}}, required: [city]}
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import httpx

from adapters.http.settings import HttpBackendSettings
from gateway.backends import BackendContext, BaseBackend
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.http import dumps
from gateway.model import CallContext, ToolSpec
from gateway.observability import redact_text
from gateway.upstream import Credentials, Upstream, UpstreamSettings, failure_for_status, json_of

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BODY_METHODS = {"POST", "PUT", "PATCH"}
_DOT_SEGMENTS = frozenset({".", ".."})
_UNQUOTE_ROUNDS = 4  # a value encoded more often than this is refused rather than decoded further
MAX_ERROR_TEXT = 500  # characters of an upstream's error body carried in the message


def segment(name: str, value: Any) -> str:
    """One path parameter as one path segment, never a step elsewhere.

    `/` is percent-encoded (quote with nothing safe), and a value that is, or decodes to,
    an empty segment or a dot segment (`.`, `..`, `%2e%2e`, `%252e%252e`, `a/../b`) is
    refused: an upstream or a proxy in between that decodes and normalises the path would
    otherwise walk out of the configured path.
    """
    text = str(value)
    decoded = text
    for _ in range(_UNQUOTE_ROUNDS):
        step = unquote(decoded)
        if step == decoded:
            break
        decoded = step
    else:
        if unquote(decoded) != decoded:
            raise _bad_segment(name, text, "it is percent-encoded too many times")
    parts = re.split(r"[/\\]", decoded)
    if not text:
        raise _bad_segment(name, text, "it is empty")
    if any(part in _DOT_SEGMENTS for part in parts):
        raise _bad_segment(name, text, "it would leave the configured path")
    return quote(text, safe="")


def _bad_segment(name: str, value: str, why: str) -> GatewayError:
    shown = value if len(value) <= 80 else value[:80] + "..."
    message = f"{name}: {shown!r} cannot be used as a path segment: {why}"
    return GatewayError.of(ErrorKind.INVALID_ARGUMENTS, message, parameter_errors={name: message})


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    path_params: tuple[str, ...]
    query: tuple[str, ...]
    body: tuple[str, ...] | None  # None: "everything not placed elsewhere"

    def split(self, arguments: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
        path = _PLACEHOLDER.sub(lambda m: segment(m.group(1), arguments[m.group(1)]), self.path)
        rest = {k: v for k, v in arguments.items() if k not in self.path_params}
        query = {k: rest.pop(k) for k in self.query if k in rest}
        if self.body is not None:
            body = {k: rest.pop(k) for k in self.body if k in rest}
        elif self.method in _BODY_METHODS:
            body, rest = rest, {}
        else:
            body = None
        query.update(rest)
        params = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in query.items()}
        return path, params, body if (body or self.method in _BODY_METHODS) else None


class HttpBackend(BaseBackend):
    """One upstream; each configured endpoint is a tool. Answers come whole: no features to declare."""

    settings: HttpBackendSettings

    def __init__(self, settings: HttpBackendSettings, context: BackendContext) -> None:
        self.settings = settings
        self.name = settings.name
        # No key of its own: OAuth tokens (`oauth:`), or only the client's own credentials, when forwarded.
        self.credentials = Credentials.of(None, settings, context.store)
        self.upstream = Upstream(
            self.name,
            UpstreamSettings.from_config(settings, context.max_response_bytes),
            auth=self.credentials.auth(None),
        )
        self.forward_authorization = settings.forward_authorization

    async def discover(self) -> list[ToolSpec]:
        toolkit = self.settings.toolkit or "Http"
        specs = []
        for tool in self.settings.tools:
            method = tool.method
            path_params = tuple(_PLACEHOLDER.findall(tool.path))
            schema = tool.input_schema or {"type": "object", "properties": {}}
            required = set(schema.get("required", []))
            missing = [p for p in path_params if p not in required]
            if missing:
                schema = {**schema, "required": sorted(required | set(missing))}
            specs.append(
                ToolSpec(
                    toolkit=toolkit,
                    name=tool.name,
                    version=tool.version,
                    description=tool.description if tool.description is not None else f"{method} {tool.path}",
                    input_schema=schema,
                    output_schema=tool.output_schema,
                    backend=self.name,
                    language="remote",
                    timeout=tool.timeout_s,
                    side_effects=method not in ("GET", "HEAD"),
                    source=f"backend {self.name!r} ({redact_text(self.upstream.settings.url)})",
                    binding=Endpoint(
                        method=method,
                        path=tool.path,
                        path_params=path_params,
                        query=tuple(tool.query),
                        body=tuple(tool.body) if tool.body is not None else None,
                    ),
                )
            )
        return specs

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        endpoint: Endpoint = spec.binding
        path, params, body = endpoint.split(arguments)
        forwarded = self.forward_authorization  # an upstream 401 is then the client's to fix
        headers = self.credentials.for_call(context)
        auth = self.credentials.auth(context)  # an OAuth token: the backend's own, or exchanged for the caller
        response = await self.upstream.request(
            endpoint.method,
            path,
            params=params,
            json=body,
            headers=headers,
            **({"auth": auth} if auth is not None else {}),
            deadline=context.deadline,
            expect_json=False,  # a REST endpoint may answer text
        )
        if response.status_code >= 400:
            raise GatewayError(self._failure(spec, endpoint, path, response, forwarded=forwarded))
        is_json = "json" in response.headers.get("content-type", "")
        return json_of(self.upstream, response) if is_json and response.content else response.text

    def _failure(
        self, spec: ToolSpec, endpoint: Endpoint, path: str, response: httpx.Response, *, forwarded: bool = False
    ) -> Failure:
        """An error answer as the canonical failure its status stands for (see `failure_for_status`).

        400/422 invalid arguments, 401, 403, 404, 429 (Retry-After carried), 5xx upstream
        failed; any other 4xx is the tool refusing (tool failed). An object body is shown as JSON.
        """
        status = response.status_code
        failure = failure_for_status(
            self.name,
            status,
            _error_text(response),
            response.headers,
            client_credentials=forwarded,
            developer_message=f"{spec.flat_name}: {endpoint.method} {path} answered HTTP {status}",
        )
        assert failure is not None  # status >= 400
        if failure.kind is ErrorKind.MALFORMED:  # our request was well-formed: the endpoint refused it
            failure = dataclasses.replace(failure, kind=ErrorKind.TOOL_FAILED)
        return failure

    async def close(self) -> None:
        await self.upstream.close()
        await self.credentials.close()


def _error_text(response: httpx.Response) -> str:
    """What an error answer says: its `message`/`detail` when it has one, else the body; JSON, never a repr."""
    value: Any = response.text
    if "json" in response.headers.get("content-type", "") and response.content:
        try:
            value = response.json()
        except ValueError:
            value = response.text
    if isinstance(value, dict):
        said = value.get("message") or value.get("detail") or value.get("error")
        value = said if said else value
    text = value if isinstance(value, str) else dumps(value)
    return text if len(text) <= MAX_ERROR_TEXT else text[:MAX_ERROR_TEXT] + "..."
