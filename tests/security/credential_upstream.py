"""One loopback server playing three upstreams at once, recording the credential headers of every request.

Each upstream answers as the existing doubles (and the real servers they model) do:

- `/opentool/...`: `tests.upstreams.opentool_server`, the Dart SDK's OpenTool server (protocols.md §1),
  with no key of its own, so it takes whatever credentials come;
- `/rpc`: a seed-002 JSON-RPC server (protocols.md §4): `tool.list` offers `Relay.Say(text)`,
  `tool.execute` answers `{output, metadata: {title}, diagnostics: []}`;
- `/tsn/...`: `tests.upstreams.toolserver_manager`, XAgent's ToolServerManager in front of bare-node
  doubles (protocols.md §3), under the path prefix `/tsn`.

Every request except the debug route is recorded as `{path, authorization, x-api-key}`:
`GET /debug/credentials` lists them, `DELETE /debug/credentials` forgets them.

    python -m tests.security.credential_upstream --port P
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.upstreams import opentool_server, toolserver_manager

DEBUG_PATH = "/debug/credentials"
TSN_PREFIX = "/tsn"
REGISTRATION = {
    "id": "Relay_Say",
    "title": "Relay.Say",
    "version": "1.0.0",
    "description": "Say the text back",
    "language": "python",
    "schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


async def rpc(request: Request) -> Response:
    try:
        body = await request.json()
    except ValueError:
        error = {"code": -32700, "message": "Parse error"}
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error})
    method, request_id = body.get("method"), body.get("id")
    if method == "tool.list":
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [REGISTRATION]}})
    if method == "tool.execute" and (body.get("params") or {}).get("tool") == "Relay_Say":
        text = str(((body.get("params") or {}).get("parameters") or {}).get("text"))
        result = {"output": text, "metadata": {"title": "Relay.Say"}, "diagnostics": []}
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": result})
    error = {"code": -32601, "message": f"Method {method} not found", "data": {"tool": None}}
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})


def build_app(scratch: Path) -> ASGIApp:
    seen: list[dict[str, Any]] = []
    opentool = opentool_server.build_app(None, omit_error=False)
    manager = toolserver_manager.app(scratch, prefix=TSN_PREFIX)
    jsonrpc = Starlette(routes=[Route("/rpc", rpc, methods=["POST"])])

    async def credentials(request: Request) -> Response:
        if request.method == "DELETE":
            seen.clear()
        return Response(json.dumps(seen), media_type="application/json")

    debug = Starlette(routes=[Route(DEBUG_PATH, credentials, methods=["GET", "DELETE"])])

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == DEBUG_PATH:
            await debug(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        seen.append(
            {"path": path, "authorization": headers.get("authorization"), "x-api-key": headers.get("x-api-key")}
        )
        if path.startswith("/opentool/"):
            await opentool(scope, receive, send)
        elif path == "/rpc":
            await jsonrpc(scope, receive, send)
        else:
            await manager(scope, receive, send)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="credential-upstream-") as scratch:
        uvicorn.run(build_app(Path(scratch)), host="127.0.0.1", port=args.port, log_level="warning", lifespan="off")


if __name__ == "__main__":
    main()
