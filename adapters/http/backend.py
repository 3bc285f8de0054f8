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
from urllib.parse import quote

from gateway.errors import ErrorKind, GatewayError
from gateway.model import CallContext, ToolSpec
from gateway.upstream import Upstream, UpstreamSettings, json_of

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BODY_METHODS = {"POST", "PUT", "PATCH"}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    path_params: tuple[str, ...]
    query: tuple[str, ...]
    body: tuple[str, ...] | None  # None: "everything not placed elsewhere"

    def split(self, arguments: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
        path = _PLACEHOLDER.sub(lambda m: quote(str(arguments[m.group(1)]), safe=""), self.path)
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


class HttpBackend:
    def __init__(self, name: str, settings: dict[str, Any]) -> None:
        self.name = name
        self.settings = settings
        self.upstream = Upstream(name, UpstreamSettings.from_config(settings))
        self.forward_authorization = bool(settings.get("forward_authorization", False))

    async def discover(self) -> list[ToolSpec]:
        toolkit = self.settings.get("toolkit") or "Http"
        specs = []
        for tool in self.settings.get("tools", []):
            method = tool.get("method", "GET").upper()
            path_params = tuple(_PLACEHOLDER.findall(tool["path"]))
            schema = tool.get("input_schema") or {"type": "object", "properties": {}}
            required = set(schema.get("required", []))
            missing = [p for p in path_params if p not in required]
            if missing:
                schema = {**schema, "required": sorted(required | set(missing))}
            specs.append(
                ToolSpec(
                    toolkit=toolkit,
                    name=tool["name"],
                    version=tool.get("version", "1.0.0"),
                    description=tool.get("description", f"{method} {tool['path']}"),
                    input_schema=schema,
                    output_schema=tool.get("output_schema"),
                    backend=self.name,
                    language="remote",
                    timeout=tool.get("timeout_s"),
                    side_effects=method not in ("GET", "HEAD"),
                    source=f"backend {self.name!r} ({self.upstream.settings.url})",
                    binding=Endpoint(
                        method=method,
                        path=tool["path"],
                        path_params=path_params,
                        query=tuple(tool.get("query", [])),
                        body=tuple(tool["body"]) if "body" in tool else None,
                    ),
                )
            )
        return specs

    async def invoke(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        endpoint: Endpoint = spec.binding
        path, params, body = endpoint.split(arguments)
        headers = {}
        if self.forward_authorization and context.client_authorization:
            headers["Authorization"] = context.client_authorization
        response = await self.upstream.request(
            endpoint.method,
            path,
            params=params,
            json=body,
            headers=headers,
            deadline=context.deadline,
            expect_json=False,  # a REST endpoint may answer text
        )
        if response.status_code in (502, 503, 504):
            raise self.upstream.unavailable(f"it answered HTTP {response.status_code}")
        is_json = "json" in response.headers.get("content-type", "")
        value = json_of(self.upstream, response) if is_json and response.content else response.text
        if response.status_code >= 400:
            detail = value if isinstance(value, str) else (value.get("message") or value.get("detail") or value)
            raise GatewayError.of(
                ErrorKind.TOOL_FAILED,
                f"{spec.flat_name} failed with HTTP {response.status_code}: {str(detail)[:500]}",
                developer_message=f"{endpoint.method} {path}",
                can_retry=response.status_code == 429,
            )
        return value

    async def close(self) -> None:
        await self.upstream.close()
