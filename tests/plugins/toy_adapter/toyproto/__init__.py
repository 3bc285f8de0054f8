"""The toy protocol: the smallest adapter that provides both a front and a backend kind.

Front (`fronts.toy`): `GET <prefix>/tools` lists the tools the caller may see,
`POST <prefix>/call` with `{"tool": "Math_Add", "args": {...}}` answers
`{"ok": <value>}` or `{"error": <kind>, "message": ...}`.
Backend (`kind: toy`): one tool, `Toy_Greet(name)`, answering "<greeting>, <name>".
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.backends import BackendContext, BaseBackend
from gateway.errors import GatewayError
from gateway.model import Call, CallContext, ToolSpec
from gateway.plugins import Adapter, BackendPlugin, FrontPlugin
from gateway.services import FrontServices
from gateway.settings import BackendSettings, FrontSettings


class ToyFrontSettings(FrontSettings):
    prefix: str = Field(default="/toy", pattern=r"^(/[a-z]+)+$", description="Where the toy front is served")


class ToyBackendSettings(BackendSettings):
    kind: Literal["toy"]
    greeting: str = Field(default="hello", description="How Toy_Greet greets")


def _answer(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def routes(services: FrontServices, settings: ToyFrontSettings) -> list[BaseRoute]:
    async def tools(request: Request) -> Response:
        try:
            principal = services.authenticate(request.headers)
        except GatewayError as exc:
            return _answer({"error": exc.failure.kind.value, "message": exc.failure.message}, 401)
        return _answer({"tools": [spec.flat_name for spec in services.tools(principal)]})

    async def call(request: Request) -> Response:
        try:
            principal = services.authenticate(request.headers)
            body = orjson.loads(await request.body())
        except GatewayError as exc:
            return _answer({"error": exc.failure.kind.value, "message": exc.failure.message}, 401)
        except orjson.JSONDecodeError:
            return _answer({"error": "malformed", "message": "the body is not JSON"}, 400)
        if not isinstance(body, dict) or not isinstance(body.get("tool"), str):
            return _answer({"error": "malformed", "message": 'send {"tool": <name>, "args": {...}}'}, 400)
        context = CallContext(front="toy", principal=principal)
        outcome = await services.call(Call(tool=body["tool"], arguments=body.get("args") or {}, context=context))
        if outcome.error is not None:
            return _answer({"error": outcome.error.kind.value, "message": outcome.error.message}, 422)
        return _answer({"ok": outcome.value})

    return [
        Route(f"{settings.prefix}/tools", tools, methods=["GET"]),
        Route(f"{settings.prefix}/call", call, methods=["POST"]),
    ]


class ToyBackend(BaseBackend):
    def __init__(self, settings: ToyBackendSettings, context: BackendContext) -> None:
        self.name = settings.name
        self.settings = settings

    async def discover(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        return [
            ToolSpec(toolkit="Toy", name="Greet", version="1.0.0", description="Greet someone", input_schema=schema)
        ]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        return f"{self.settings.greeting}, {arguments['name']}"


ADAPTER = Adapter(
    name="toy",
    description="A toy protocol: the plug-in API's example",
    front=FrontPlugin(settings=ToyFrontSettings, routes=routes),
    backend=BackendPlugin(settings=ToyBackendSettings, factory=ToyBackend),
)
