"""The baselines of `make bench`: what a request costs with none of the gateway's work.

One bare Starlette app, run on the same server stack as the gateway (uvicorn with
uvloop and httptools, one process, no access log):

- `POST /call`: a JSON-RPC request for an addition answered in JSON-RPC, the shape of
  OpenTool's `/call`; the baseline of the in-process cases.
- `POST /add`: `{"a", "b"}` answered with `{"result": a + b}`, the upstream REST tool the
  proxied cases reach through the gateway, and, called directly, their baseline.

    .venv/bin/python -m bench.servers --port 9000
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def call(request: Request) -> JSONResponse:
    body = await request.json()
    params = body["params"]
    return JSONResponse({"jsonrpc": "2.0", "result": {"result": params["a"] + params["b"]}, "id": body["id"]})


async def add(request: Request) -> JSONResponse:
    body = await request.json()
    return JSONResponse({"result": body["a"] + body["b"]})


async def healthz(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


app = Starlette(
    routes=[
        Route("/call", call, methods=["POST"]),
        Route("/add", add, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools", log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()
