"""The baseline for bench/gateway_overhead.py: the same addition behind a bare Starlette
route on the same server stack (uvicorn), with none of the gateway's work."""

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
    return JSONResponse(
        {"jsonrpc": "2.0", "result": {"result": params["a"] + params["b"]}, "error": None, "id": body["id"]}
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = Starlette(routes=[Route("/opentool/call", call, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
