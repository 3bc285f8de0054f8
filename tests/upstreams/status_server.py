"""An upstream whose calls fail with the HTTP status the caller asks for, in each protocol a backend speaks.

Discovery works as the real servers' does (OpenTool `/load`, JSON-RPC `tool.list`, Arcade
`/worker/tools`) and offers one tool, `Status.Answer(status)`; calling it answers HTTP
`status` with the body that what usually sends that status sends: Express's
`{"error": ...}` (400, 401) and HTML 404 page, FastAPI's `{"detail": ...}` (403) and 422
validation list, a proxy's plain-text 429 with `Retry-After: 7`, HTML 502 page, a JSON 503
with `Retry-After: 3`, and a 500 with a JSON body of no protocol. These are the statuses a
server or the proxy in front of it answers; protocols.md §1-§4 leave them to HTTP.

    python -m tests.upstreams.status_server --port P
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

STATUS_SCHEMA = {"type": "object", "properties": {"status": {"type": "integer"}}, "required": ["status"]}
VALIDATION = [{"type": "missing", "loc": ["body", "input"], "msg": "Field required", "input": {}}]


def failing(status: int, path: str) -> Response:
    """What a server (or the proxy before it) typically sends with `status`."""
    if status in (400, 401):
        return JSONResponse({"error": {400: "Invalid request body", 401: "Invalid API key"}[status]}, status)
    if status == 403:
        return JSONResponse({"detail": "Not enough permissions"}, status)
    if status == 404:
        return HTMLResponse(f"<!DOCTYPE html>\n<html><body><pre>Cannot POST {path}</pre></body></html>", status)
    if status == 422:
        return JSONResponse({"detail": VALIDATION}, status)
    if status == 429:
        return PlainTextResponse("Too Many Requests", status, headers={"Retry-After": "7"})
    if status == 502:
        return HTMLResponse("<html><body><center><h1>502 Bad Gateway</h1></center></body></html>", status)
    if status == 503:
        return JSONResponse({"message": "Service Unavailable"}, status, headers={"Retry-After": "3"})
    return JSONResponse({"oops": "something broke"}, status)


OPENTOOL_DOCUMENT: dict[str, Any] = {
    "opentool": "1.0.0",
    "info": {"title": "Status", "version": "1.0.0"},
    "functions": [
        {
            "name": "Answer",
            "description": "Answer with the HTTP status asked for",
            "parameters": [{"name": "status", "schema": {"type": "integer"}, "required": True}],
            "return": None,
        }
    ],
}

ARCADE_DEFINITION: dict[str, Any] = {
    "name": "Answer",
    "fully_qualified_name": "Status.Answer@1.0.0",
    "description": "Answer with the HTTP status asked for",
    "toolkit": {"name": "Status", "description": "Statuses", "version": "1.0.0"},
    "input": {
        "parameters": [
            {"name": "status", "required": True, "description": "The status", "value_schema": {"val_type": "integer"}}
        ]
    },
    "output": {"description": "Nothing", "value_schema": None},
    "requirements": {},
}


async def opentool_load(_request: Request) -> Response:
    return JSONResponse(OPENTOOL_DOCUMENT)


async def opentool_call(request: Request) -> Response:
    body = await request.json()
    return failing(int(body["params"]["status"]), request.url.path)


async def rpc(request: Request) -> Response:
    body = await request.json()
    if body.get("method") == "tool.list":
        registration = {
            "id": "Status_Answer",
            "title": "Status.Answer",
            "version": "1.0.0",
            "description": "Answer with the HTTP status asked for",
            "language": "python",
            "schema": STATUS_SCHEMA,
        }
        return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "result": {"tools": [registration]}})
    return failing(int(body["params"]["parameters"]["status"]), request.url.path)


async def arcade_tools(_request: Request) -> Response:
    return JSONResponse([ARCADE_DEFINITION])


async def arcade_invoke(request: Request) -> Response:
    body = await request.json()
    return failing(int(body["inputs"]["status"]), request.url.path)


def build_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/opentool/load", opentool_load),
            Route("/opentool/call", opentool_call, methods=["POST"]),
            Route("/rpc", rpc, methods=["POST"]),
            Route("/worker/tools", arcade_tools),
            Route("/worker/tools/invoke", arcade_invoke, methods=["POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(build_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
