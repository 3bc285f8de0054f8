"""The opentool-hub TypeScript SDK's example server (`examples/server`), answering as it runs.

Read from its source (`src/server/*.ts`, `src/dto.ts`, `src/tool/exception.ts` and the
example's `MockTool`), an Express app under `/opentool`:

- `express.json()` runs first: a JSON body that does not parse is Express's 400 HTML page;
  a body of another content type is left empty (so `/call` answers "Invalid request body").
- then, when API keys are set, every path under the prefix needs `Authorization: Bearer <key>`
  or the bare key: 401 `{"error": "Authorization header missing"}` / `{"error": "Invalid API key"}`.
- `GET /version` -> `{"version": "0.0.1"}`; `GET /load` -> 200 `{"code": 404, "message": "Json
  Parser NOT implement"}` (the description is not served); there is no `/streamCall`: any
  other route is Express's 404 HTML page `Cannot POST /opentool/streamCall`.
- `POST /call` answers `"jsonrpc": "2.0.0"`; success omits `error`; a tool that throws gives
  `"result": {}` and `error {code: 500, message: <the error's toString()>}` (for the SDK's own
  exceptions that string is their JSON); an unknown function is a *successful* result
  `{"code": 405, "message": "Function Not Supported: <name>"}`; a body without `method` or
  `id` is HTTP 400 with error code 400. A numeric `id` is accepted and echoed.

The tools are the example's in-memory text store: count, create, read, update, delete, run.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

PREFIX = "/opentool"
JSONRPC_VERSION = "2.0.0"  # the SDK's constant, sent in every answer


def express_json(data: Any, status: int = 200) -> Response:
    """`res.json()`: JSON.stringify without spaces, `application/json; charset=utf-8`."""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return Response(body, status_code=status, media_type="application/json; charset=utf-8")


def express_error_page(status: int, text: str) -> Response:
    """Express's default (finalhandler) HTML error page."""
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Error</title>\n'
        f"</head>\n<body>\n<pre>{text}</pre>\n</body>\n</html>\n"
    )
    return Response(page, status_code=status, media_type="text/html; charset=utf-8")


class ToolThrew(Exception):
    """A thrown JavaScript error; `text` is its toString()."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class MockTool:
    """The example's MockTool over MockUtil: a map of texts with increasing ids."""

    def __init__(self) -> None:
        self.storage: dict[int, str] = {}
        self.next_id = 1

    def _existing(self, text_id: Any) -> int:
        if text_id not in self.storage:
            raise ToolThrew(f"Error: No text found with id: {text_id}")
        return int(text_id)

    def call(self, name: str, args: dict[str, Any] | None) -> dict[str, Any]:
        if name == "count":
            return {"count": len(self.storage)}
        if name == "create" and args is not None:
            text_id, self.next_id = self.next_id, self.next_id + 1
            self.storage[text_id] = args.get("text")  # type: ignore[assignment]
            return {"id": text_id}
        if name == "read" and args is not None:
            return {"text": self.storage[self._existing(args.get("id"))]}
        if name == "update" and args is not None:
            self.storage[self._existing(args.get("id"))] = args.get("text")  # type: ignore[assignment]
            return {"result": "Update successfully."}
        if name == "delete" and args is not None:
            del self.storage[self._existing(args.get("id"))]
            return {"result": "Delete successfully."}
        if name == "run":  # ToolBreakException(e.toString()); its own toString() is its JSON
            inner = {"code": 500, "message": "Error: Fatal error occurred in run()"}
            raise ToolThrew(json.dumps(inner, separators=(",", ":")))
        return {"code": 405, "message": f"Function Not Supported: {name}"}  # returned, not thrown


def build_app(api_key: str | None) -> Starlette:
    tool = MockTool()
    keys = [api_key] if api_key else []

    def refused(request: Request) -> Response | None:
        if not keys:
            return None
        header = request.headers.get("authorization")
        if not header:
            return express_json({"error": "Authorization header missing"}, 401)
        token = header[7:] if header.startswith("Bearer ") else header
        if not token or token not in keys:
            return express_json({"error": "Invalid API key"}, 401)
        return None

    async def handle(request: Request) -> Response:
        body: Any = {}
        if request.headers.get("content-type", "").split(";")[0].strip() == "application/json":
            raw = await request.body()
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError as exc:
                    return express_error_page(400, f"SyntaxError: {exc}")
        path = request.url.path
        if path == PREFIX or path.startswith(f"{PREFIX}/"):
            rejection = refused(request)
            if rejection is not None:
                return rejection
        route = (request.method, path)
        if route == ("GET", f"{PREFIX}/version"):
            return express_json({"version": "0.0.1"})
        if route == ("GET", f"{PREFIX}/load"):
            return express_json({"code": 404, "message": "Json Parser NOT implement"})
        if route == ("POST", f"{PREFIX}/call"):
            return call(body)
        return express_error_page(404, f"Cannot {request.method} {path}")

    def call(body: Any) -> Response:
        if not isinstance(body, dict) or not body.get("method") or "id" not in body:
            invalid = {"code": 400, "message": "Invalid request body"}
            return express_json({"jsonrpc": JSONRPC_VERSION, "result": {}, "id": "", "error": invalid}, 400)
        try:
            result = tool.call(body["method"], body.get("params"))
        except ToolThrew as exc:
            error = {"code": 500, "message": exc.text}
            return express_json({"jsonrpc": JSONRPC_VERSION, "result": {}, "id": body["id"], "error": error})
        return express_json({"jsonrpc": JSONRPC_VERSION, "result": result, "id": body["id"]})

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    return Starlette(routes=[Route("/{path:path}", handle, methods=methods)])
