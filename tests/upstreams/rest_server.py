"""A plain REST service for the `http` backend: a path parameter, a query parameter, a JSON body, text.

`/files/{name}` says which name and raw path arrived. `/status/{code}` answers that status
with an object body (429 adds Retry-After: 7), or a text body with `?text=1`. Every other
path lands on a catch-all that says which raw path it reached, so a test sees when an
argument walked out of the configured path.

python -m tests.upstreams.rest_server --port P
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route


async def get_book(request: Request) -> Response:
    book_id = request.path_params["book_id"]
    if book_id == "missing":
        return JSONResponse({"detail": "no such book"}, status_code=404)
    fields = request.query_params.get("fields", "title")
    return JSONResponse({"id": book_id, "fields": fields.split(","), "title": f"Book {book_id}"})


async def get_file(request: Request) -> Response:
    """The name as routed, and the raw path as it arrived (before any decoding)."""
    return JSONResponse({"name": request.path_params["name"], "raw_path": request.scope["raw_path"].decode()})


async def status(request: Request) -> Response:
    code = int(request.path_params["code"])
    headers = {"Retry-After": "7"} if code == 429 else {}
    if request.query_params.get("text"):
        return PlainTextResponse(f"plain {code}", status_code=code, headers=headers)
    body = {"detail": {"reason": f"status {code}", "code": code}}
    return JSONResponse(body, status_code=code, headers=headers)


async def elsewhere(request: Request) -> Response:
    """Any path not configured: what a traversal would reach."""
    return JSONResponse({"elsewhere": True, "raw_path": request.scope["raw_path"].decode()})


async def create_note(request: Request) -> Response:
    body = await request.json()
    return JSONResponse({"created": body, "auth": request.headers.get("authorization")}, status_code=201)


async def shout(request: Request) -> Response:
    return PlainTextResponse(request.query_params.get("text", "").upper())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = Starlette(
        routes=[
            Route("/books/{book_id}", get_book, methods=["GET"]),
            Route("/notes", create_note, methods=["POST"]),
            Route("/shout", shout, methods=["GET"]),
            Route("/files/{name}", get_file, methods=["GET"]),
            Route("/status/{code:int}", status, methods=["GET"]),
            Route("/{rest:path}", elsewhere, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ]
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
