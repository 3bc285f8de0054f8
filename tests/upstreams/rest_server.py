"""A plain REST service for the `http` backend: a path parameter, a query parameter, a JSON body, text.

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
        ]
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
