"""A small REST upstream for the cross-caller matrix: it says who called it and which run answered.

`GET /me?tag=T&sleep=S` answers `{"auth": <the Authorization header it received, or "none">, "tag": T,
"serial": N}` after sleeping S seconds (at most 10): `serial` counts every request this process served,
so two answers with the same serial are one run (a cached or replayed answer), and `auth` says whose
credentials reached it (the gateway's `http` backend with `forward_authorization: true` sends the
caller's own). The gateway's result cache may keep these answers (a GET has no side effects).

    python -m tests.security.matrix_upstream --port P
"""

from __future__ import annotations

import argparse
import asyncio
import itertools

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

MAX_SLEEP_S = 10.0
_serials = itertools.count(1)


async def me(request: Request) -> Response:
    try:
        pause = min(MAX_SLEEP_S, max(0.0, float(request.query_params.get("sleep") or 0)))
    except ValueError:
        pause = 0.0
    serial = next(_serials)  # taken when the request arrives: the run's own number
    if pause:
        await asyncio.sleep(pause)
    return JSONResponse(
        {
            "auth": request.headers.get("authorization") or "none",
            "tag": request.query_params.get("tag"),
            "serial": serial,
        }
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    args = parser.parse_args(argv)
    app = Starlette(routes=[Route("/me", me, methods=["GET"])])
    uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")).run()


if __name__ == "__main__":
    main()
