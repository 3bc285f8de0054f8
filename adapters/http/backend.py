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

import re
from dataclasses import dataclass
from typing import Any

import httpx

from adapters.http.settings import HttpBackendSettings
from gateway.backends import BackendContext, BaseBackend
from gateway.errors import Failure, GatewayError
from gateway.model import CallContext, ToolSpec
from gateway.observability import redact_text
from gateway.upstream import Credentials, Upstream, UpstreamSettings, json_of, path_segment, rest_failure

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BODY_METHODS = {"POST", "PUT", "PATCH"}
segment = path_segment  # one path parameter as one path segment (`gateway.upstream.path_segment`)


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
        """An error answer as the canonical failure its status stands for (`gateway.upstream.rest_failure`)."""
        return rest_failure(
            self.name,
            response,
            forwarded=forwarded,
            developer_message=f"{spec.flat_name}: {endpoint.method} {path} answered HTTP {response.status_code}",
        )

    async def close(self) -> None:
        await self.upstream.close()
        await self.credentials.close()
