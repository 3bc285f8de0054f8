"""A small OXP server of the older kind: `GET {prefix}/tools` answers `{"tools": [...]}`.

It lets the tests see exactly what the `oxp` backend sends and make it read
any answer an OXP server may give:

- `Echo.Request` (two versions) answers, as its value, the body and the headers it received,
  in the shape the request used (flat or wrapped).
- `Echo.Answer` answers with the HTTP status and JSON body named in its input, so that every
  mapping of a 400 / 401 / 422 / 429 / ... is checked against a real HTTP exchange.

    python -m tests.upstreams.oxp_legacy_server --port P [--prefix /oxp]
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SEEN_HEADERS = ("authorization", "x-api-key", "oxp-version", "content-type")


def definition(name: str, version: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"Echo.{name}@{version}",
        "name": f"Echo_{name}",
        "description": f"{name} {version}",
        "version": version,
        "input_schema": {"type": "object", "properties": properties},
        "output_schema": None,
        "requirements": {"authorization": [], "secrets": [], "user_id": False},
    }


TOOLS: list[dict[str, Any]] = [
    definition("Request", "1.0.0", {"note": {"type": "string"}}),
    definition("Request", "2.0.0", {"note": {"type": "string"}}),
    definition("Answer", "1.0.0", {"status": {"type": "integer"}, "body": {}, "headers": {"type": "object"}}),
    {"id": "not a tool id", "name": "broken"},  # a definition the backend must skip, not choke on
]


def build_app(prefix: str) -> Starlette:
    async def tools(_request: Request) -> Response:
        return JSONResponse({"tools": TOOLS})

    async def call(request: Request) -> Response:
        body = await request.json()
        wrapped = isinstance(body, dict) and "request" in body
        inner = body["request"] if wrapped else body
        tool_id = inner.get("tool_id", "")
        if tool_id.startswith("Echo.Answer"):
            wanted = inner.get("input") or {}
            return JSONResponse(
                wanted.get("body"), status_code=int(wanted.get("status", 200)), headers=wanted.get("headers")
            )
        seen = {name: request.headers.get(name) for name in SEEN_HEADERS}
        result = {
            "call_id": inner.get("call_id"),
            "duration": 1,
            "success": True,
            "value": {"body": body, "headers": seen},
        }
        return JSONResponse({"$schema": "urn:oxp:1.0", "result": result} if wrapped else result)

    return Starlette(routes=[Route(f"{prefix}/tools", tools), Route(f"{prefix}/tools/call", call, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prefix", default="")
    args = parser.parse_args()
    uvicorn.run(build_app(args.prefix), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
