"""A test OpenTool server that behaves as protocols.md §1 says real SDK servers do.

Quirks it reproduces: `"opentool": "1.0.0"` documents with `#/schemas/Name` references,
success answers without an `error` member (`--omit-error`) or with `"error": null`,
tool failures as HTTP 200 with `"result": {}`, a 400 for a numeric id, 401 without the
API key on every route, `/streamCall` as Server-Sent Events.

`--stream` says what `/streamCall` does: `sse` (the Dart SDK's events), `absent` (no
such route: 404), `405` (the route refuses POST), `rpc-not-found` (a JSON-RPC -32601
answer, as a server routing every path to one JSON-RPC dispatcher gives).

`--flavor typescript` is the opentool-hub TypeScript SDK's example server instead
(`examples/server`, an Express app), as it runs: see `tests/upstreams/opentool_typescript.py`.

    python -m tests.upstreams.opentool_server --port 9627 [--api-key KEY] [--omit-error] [--stream MODE]
    python -m tests.upstreams.opentool_server --port 9627 --flavor typescript [--api-key KEY]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.upstreams import opentool_typescript

DOCUMENT: dict[str, Any] = {
    "opentool": "1.0.0",
    "info": {"title": "Geo tools", "description": "Distances and places", "version": "1.2.0"},
    "server": {"url": "http://127.0.0.1/opentool"},
    "functions": [
        {
            "name": "distance",
            "description": "Great-circle distance between two points in km",
            "parameters": [
                {"name": "from", "schema": {"$ref": "#/schemas/Point"}, "required": True},
                {"name": "to", "schema": {"$ref": "#/schemas/Point"}, "required": True},
            ],
            "return": {"name": "km", "schema": {"type": "number"}},
        },
        {
            "name": "echo",
            "description": "Echo the message back, with the headers that reached the server",
            "parameters": [{"name": "message", "schema": {"type": "string"}, "required": True}],
            "return": {"name": "echo", "schema": {"type": "object"}},
        },
        {
            "name": "countdown",
            "description": "Count down from n; /streamCall sends one event per number",
            "parameters": [{"name": "n", "schema": {"type": "integer"}, "required": True}],
            "return": {"name": "left", "schema": {"type": "integer"}},
        },
        {
            "name": "explode",
            "description": "Always fails",
            "parameters": [],
            "return": None,
        },
    ],
    "schemas": {
        "Point": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
        }
    },
}


def _distance(a: dict[str, float], b: dict[str, float]) -> float:
    from math import asin, cos, radians, sin, sqrt

    lat1, lon1, lat2, lon2 = map(radians, (a["lat"], a["lon"], b["lat"], b["lon"]))
    h = sin((lat2 - lat1) / 2) ** 2 + cos(lat1) * cos(lat2) * sin((lon2 - lon1) / 2) ** 2
    return round(2 * 6371.0 * asin(sqrt(h)), 3)


STREAM_MODES = ("sse", "absent", "405", "rpc-not-found")


def build_app(api_key: str | None, omit_error: bool, stream: str = "sse") -> Starlette:
    def authorized(request: Request) -> bool:
        if not api_key:
            return True
        header = request.headers.get("authorization", "")
        return header in (f"Bearer {api_key}", api_key)

    def unauthorized() -> Response:
        return JSONResponse({"code": 401, "message": "Unauthorized"}, status_code=401)

    def answer(request_id: str, result: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "result": result, "id": request_id}
        if not omit_error:
            body["error"] = None
        return body

    async def run(request: Request) -> tuple[dict[str, Any], int]:
        try:
            body = await request.json()
        except ValueError:
            return {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}, 400
        if not isinstance(body.get("id"), str):
            return {"jsonrpc": "2.0", "error": {"code": -32600, "message": "id must be a string"}, "id": None}, 400
        params = body.get("params") or {}
        method = body.get("method")
        if method == "distance":
            return answer(body["id"], {"km": _distance(params["from"], params["to"])}), 200
        if method == "echo":
            seen = {"authorization": request.headers.get("authorization")}
            return answer(body["id"], {"echo": params.get("message"), "headers": seen}), 200
        if method == "countdown":
            return answer(body["id"], {"left": 0}), 200
        if method == "explode":
            failure = {"code": 500, "message": "The tool exploded"}
            return {"jsonrpc": "2.0", "result": {}, "error": failure, "id": body["id"]}, 200
        missing = {"code": -32601, "message": f"Method {method} not found"}
        return {"jsonrpc": "2.0", "result": {}, "error": missing, "id": body["id"]}, 200

    async def version(request: Request) -> Response:
        return JSONResponse({"version": "1.0.0"}) if authorized(request) else unauthorized()

    async def load(request: Request) -> Response:
        return JSONResponse(DOCUMENT) if authorized(request) else unauthorized()

    async def call(request: Request) -> Response:
        if not authorized(request):
            return unauthorized()
        body, status = await run(request)
        return JSONResponse(body, status_code=status)

    async def stream_call(request: Request) -> Response:
        if not authorized(request):
            return unauthorized()
        if stream == "405":
            return JSONResponse({"detail": "Method Not Allowed"}, status_code=405, headers={"Allow": "GET"})
        if stream == "rpc-not-found":
            missing = {"code": -32601, "message": "Method streamCall not found"}
            request_id = (await request.json()).get("id")
            return JSONResponse({"jsonrpc": "2.0", "result": {}, "error": missing, "id": request_id})
        body, status = await run(request)
        if status != 200:
            return JSONResponse(body, status_code=status)
        method = (await request.json()).get("method")

        async def events() -> Any:
            yield f"event:start\ndata:{json.dumps({'start': method})}\n\n"
            if body.get("error"):
                yield f"event:error\ndata:{json.dumps(body)}\n\n"
                return
            if method == "countdown":
                for left in range(int((await request.json())["params"]["n"]) - 1, -1, -1):
                    yield f"event:data\ndata:{json.dumps(answer(body['id'], {'left': left}))}\n\n"
            else:
                yield f"event:data\ndata:{json.dumps(body)}\n\n"
            yield f"event:done\ndata:{json.dumps({'done': method})}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    routes = [
        Route("/opentool/version", version),
        Route("/opentool/load", load),
        Route("/opentool/call", call, methods=["POST"]),
    ]
    if stream != "absent":
        routes.append(Route("/opentool/streamCall", stream_call, methods=["POST"]))
    return Starlette(routes=routes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key")
    parser.add_argument("--omit-error", action="store_true")
    parser.add_argument("--stream", choices=STREAM_MODES, default="sse")
    parser.add_argument("--flavor", choices=("dart", "typescript"), default="dart")
    args = parser.parse_args()
    if args.flavor == "typescript":
        app = opentool_typescript.build_app(args.api_key)
    else:
        app = build_app(args.api_key, args.omit_error, args.stream)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
