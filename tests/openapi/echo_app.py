"""An echo API with its own OpenAPI 3.0.3 document, for testing requests built from a document.

`python -m tests.openapi.echo_app --port P` serves it on 127.0.0.1:P (tests/openapi/fixtures.py's EchoApp runs
it so). GET /openapi.json is the document; its server is http://<host>/api, and every operation under it answers
with what it received, byte for byte, so a test compares the request the upstream got with what the document
prescribes:

    {"operation": "queryForm", "method": "GET", "path": "/api/query/form", "query": "prim=a&arr_flat=1,2",
     "headers": [["host", "127.0.0.1:P"], ...], "cookies": {"session": "s1"},
     "content_type": null, "body": "<base64 of the raw body>"}

`path` is the raw path (percent-escapes as sent), `query` the raw query string, `headers` every header in the
order received (names lower-cased), `cookies` the Cookie header's pairs (values as sent). The operations whose
answer is not that JSON (text, binary download, 204, problem) carry the same echo, base64url-encoded JSON
without `body`, in the X-Echo response header; every other answer carries it too.

Operations (path, parameters, styles) are in OPERATIONS' document below; operation ids:
  pathSimple, pathLabel, pathMatrix        path parameters: primitive, array, object in each style
  queryForm, queryDelimited, queryDeepObject
  headersAndCookies                        header (primitive, array, object) and cookie parameters
  bodyJson, bodyForm, bodyMultipart, bodyBinary, text (text/plain in and out)
  download (application/octet-stream answer), deleteItem (204), problem (application/problem+json error)
  secure                                   apiKey in header/query/cookie, bearer, basic (not enforced: echoed)
The request is never validated: whatever arrives is echoed.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
from http.cookies import SimpleCookie
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

PREFIX = "/api"
PRIMITIVE = {"type": "string"}
ARRAY = {"type": "array", "items": {"type": "string"}}
INT_ARRAY = {"type": "array", "items": {"type": "integer"}}
OBJECT = {"type": "object", "properties": {"r": {"type": "integer"}, "g": {"type": "integer"}}}
ECHO_REF = {"$ref": "#/components/schemas/Echo"}
ECHO_JSON = {"description": "What the operation received", "content": {"application/json": {"schema": ECHO_REF}}}
PROBLEM = {"$ref": "#/components/responses/Problem"}


def _param(name: str, where: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "schema": schema, **({"required": True} if where == "path" else {}), **extra}


def _path_operation(style: str, explode_array: bool, explode_object: bool) -> dict[str, Any]:
    return {
        "operationId": f"path{style.capitalize()}",
        "summary": f"Path parameters in style {style}",
        "parameters": [
            _param("prim", "path", PRIMITIVE, style=style),
            _param("arr", "path", ARRAY, style=style, explode=explode_array),
            _param("obj", "path", OBJECT, style=style, explode=explode_object),
        ],
        "responses": {"200": ECHO_JSON},
    }


def document(server: str) -> dict[str, Any]:
    """The echo API's OpenAPI 3.0.3 document, its server at `server` (e.g. http://127.0.0.1:8000/api)."""
    form_schema = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "tags": ARRAY,
            "ids": INT_ARRAY,
            "colour": OBJECT,
        },
    }
    multipart_schema = {
        "type": "object",
        "required": ["file"],
        "properties": {
            "file": {"type": "string", "format": "binary"},
            "note": {"type": "string"},
            "meta": {"type": "object", "properties": {"author": {"type": "string"}}},
            "tags": ARRAY,
        },
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Toolplex echo API",
            "version": "1.0.0",
            "description": "Every operation answers with the request it received (method, raw path and query, "
            "headers, cookies, body).",
        },
        "servers": [{"url": server}],
        "paths": {
            "/path/simple/{prim}/{arr}/{obj}": {"get": _path_operation("simple", False, True)},
            "/path/label/{prim}/{arr}/{obj}": {"get": _path_operation("label", False, True)},
            "/path/matrix/{prim}/{arr}/{obj}": {"get": _path_operation("matrix", True, False)},
            "/query/form": {
                "get": {
                    "operationId": "queryForm",
                    "summary": "Query parameters in style form",
                    "parameters": [
                        _param("prim", "query", PRIMITIVE, required=True),
                        _param("limit", "query", {"type": "integer", "default": 10, "minimum": 1}),
                        _param("flag", "query", {"type": "boolean"}),
                        _param("arr_explode", "query", ARRAY, style="form", explode=True),
                        _param("arr_flat", "query", INT_ARRAY, style="form", explode=False),
                        _param("obj_explode", "query", OBJECT, style="form", explode=True),
                        _param("obj_flat", "query", OBJECT, style="form", explode=False),
                        _param("reserved", "query", PRIMITIVE, allowReserved=True),
                        _param("empty", "query", PRIMITIVE, allowEmptyValue=True),
                    ],
                    "responses": {"200": ECHO_JSON},
                }
            },
            "/query/delimited": {
                "get": {
                    "operationId": "queryDelimited",
                    "summary": "Query arrays delimited by spaces and pipes",
                    "parameters": [
                        _param("space", "query", ARRAY, style="spaceDelimited", explode=False),
                        _param("pipe", "query", INT_ARRAY, style="pipeDelimited", explode=False),
                    ],
                    "responses": {"200": ECHO_JSON},
                }
            },
            "/query/deep": {
                "get": {
                    "operationId": "queryDeepObject",
                    "summary": "A query object in style deepObject",
                    "parameters": [
                        _param(
                            "filter",
                            "query",
                            {"type": "object", "properties": {"name": {"type": "string"}, "min": {"type": "integer"}}},
                            style="deepObject",
                            explode=True,
                        ),
                    ],
                    "responses": {"200": ECHO_JSON},
                }
            },
            "/headers": {
                "get": {
                    "operationId": "headersAndCookies",
                    "summary": "Header and cookie parameters",
                    "parameters": [
                        _param("X-Request-Id", "header", PRIMITIVE, required=True),
                        _param("X-Tags", "header", ARRAY, style="simple", explode=False),
                        _param("X-Colour", "header", OBJECT, style="simple", explode=True),
                        _param("session", "cookie", PRIMITIVE),
                        _param("theme", "cookie", PRIMITIVE),
                        _param("ids", "cookie", INT_ARRAY, style="form", explode=False),
                    ],
                    "responses": {"200": ECHO_JSON},
                }
            },
            "/body/json": {
                "post": {
                    "operationId": "bodyJson",
                    "summary": "A JSON request body",
                    "parameters": [
                        _param("dry_run", "query", {"type": "boolean"}),
                        _param("Idempotency-Key", "header", PRIMITIVE),
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["title"],
                                    "properties": {
                                        "title": {"type": "string"},
                                        "priority": {"type": "integer"},
                                        "labels": ARRAY,
                                        "owner": {"type": "object", "properties": {"id": {"type": "integer"}}},
                                    },
                                }
                            }
                        },
                    },
                    "responses": {"200": ECHO_JSON, "default": PROBLEM},
                }
            },
            "/body/form": {
                "put": {
                    "operationId": "bodyForm",
                    "summary": "A form-urlencoded request body",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/x-www-form-urlencoded": {
                                "schema": form_schema,
                                "encoding": {
                                    "ids": {"style": "form", "explode": False},
                                    "colour": {"style": "deepObject", "explode": True},
                                },
                            }
                        },
                    },
                    "responses": {"200": ECHO_JSON},
                }
            },
            "/body/multipart": {
                "post": {
                    "operationId": "bodyMultipart",
                    "summary": "A multipart/form-data request body with a file part",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "multipart/form-data": {
                                "schema": multipart_schema,
                                "encoding": {
                                    "file": {"contentType": "application/octet-stream"},
                                    "meta": {"contentType": "application/json"},
                                },
                            }
                        },
                    },
                    "responses": {"200": ECHO_JSON},
                }
            },
            "/body/binary": {
                "put": {
                    "operationId": "bodyBinary",
                    "summary": "A raw binary request body",
                    "requestBody": {
                        "required": True,
                        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
                    },
                    "responses": {"200": ECHO_JSON},
                }
            },
            "/text": {
                "post": {
                    "operationId": "text",
                    "summary": "Plain text in, the same text out",
                    "requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}},
                    "responses": {
                        "200": {
                            "description": "The request body, as received",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/files/{name}": {
                "get": {
                    "operationId": "download",
                    "summary": "A binary download: `size` bytes 0, 1, ..., 255, 0, 1, ...",
                    "parameters": [
                        _param("name", "path", PRIMITIVE),
                        _param("size", "query", {"type": "integer", "minimum": 0, "default": 256}),
                    ],
                    "responses": {
                        "200": {
                            "description": "The file",
                            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
                        }
                    },
                }
            },
            "/items/{id}": {
                "delete": {
                    "operationId": "deleteItem",
                    "summary": "No content (the echo is in X-Echo)",
                    "parameters": [_param("id", "path", {"type": "integer"})],
                    "responses": {"204": {"description": "Deleted"}},
                }
            },
            "/problem": {
                "get": {
                    "operationId": "problem",
                    "summary": "Always an error: an application/problem+json of status `status`",
                    "parameters": [_param("status", "query", {"type": "integer", "default": 422})],
                    "responses": {"default": PROBLEM},
                }
            },
            "/secure": {
                "get": {
                    "operationId": "secure",
                    "summary": "Any one of the security schemes (not checked: echoed)",
                    "security": [
                        {"headerKey": []},
                        {"queryKey": []},
                        {"cookieKey": []},
                        {"bearer": []},
                        {"basic": []},
                    ],
                    "responses": {"200": ECHO_JSON},
                }
            },
        },
        "components": {
            "schemas": {
                "Echo": {
                    "type": "object",
                    "required": ["operation", "method", "path", "query", "headers", "cookies", "body"],
                    "properties": {
                        "operation": {"type": "string"},
                        "method": {"type": "string"},
                        "path": {"type": "string"},
                        "query": {"type": "string"},
                        "headers": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
                        "cookies": {"type": "object", "additionalProperties": {"type": "string"}},
                        "content_type": {"type": "string", "nullable": True},
                        "body": {"type": "string", "format": "byte"},
                    },
                },
                "Problem": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string"},
                        "title": {"type": "string"},
                        "status": {"type": "integer"},
                        "detail": {"type": "string"},
                        "echo": ECHO_REF,
                    },
                },
            },
            "responses": {
                "Problem": {
                    "description": "An error (RFC 9457)",
                    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
                }
            },
            "securitySchemes": {
                "headerKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "queryKey": {"type": "apiKey", "in": "query", "name": "api_key"},
                "cookieKey": {"type": "apiKey", "in": "cookie", "name": "token"},
                "bearer": {"type": "http", "scheme": "bearer"},
                "basic": {"type": "http", "scheme": "basic"},
            },
        },
    }


# (method, compiled raw-path pattern, operation id), from the document: matched on the raw path, so an
# escaped "/" (%2F) inside a parameter does not split a segment.
def _routes() -> list[tuple[str, re.Pattern[str], str]]:
    routes = []
    for template, item in document("")["paths"].items():
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]*", re.escape(PREFIX + template))
        for method, operation in item.items():
            routes.append((method.upper(), re.compile(f"^{pattern}$"), operation["operationId"]))
    return routes


ROUTES = _routes()


def _cookies(header: str) -> dict[str, str]:
    cookies: dict[str, str] = {}
    for pair in header.split(";"):
        name, sep, value = pair.strip().partition("=")
        if sep:
            cookies[name] = value
    if not cookies and header:  # fall back on the standard parser for odd headers
        jar: SimpleCookie = SimpleCookie()
        jar.load(header)
        cookies = {k: m.value for k, m in jar.items()}
    return cookies


async def _echo(request: Request, operation: str) -> dict[str, Any]:
    scope = request.scope
    raw_path = scope.get("raw_path") or scope["path"].encode()
    body = await request.body()
    headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
    return {
        "operation": operation,
        "method": scope["method"],
        "path": raw_path.decode("latin-1"),
        "query": scope.get("query_string", b"").decode("latin-1"),
        "headers": headers,
        "cookies": _cookies(request.headers.get("cookie", "")),
        "content_type": request.headers.get("content-type"),
        "body": base64.b64encode(body).decode("ascii"),
    }


def _echo_header(echo: dict[str, Any]) -> str:
    meta = {k: v for k, v in echo.items() if k != "body"}
    return base64.urlsafe_b64encode(json.dumps(meta, separators=(",", ":")).encode()).decode("ascii")


def decode_echo_header(value: str) -> dict[str, Any]:
    """The echo (without `body`) an X-Echo response header carries."""
    return dict(json.loads(base64.urlsafe_b64decode(value.encode("ascii"))))


def _int(request: Request, name: str, default: int) -> int:
    try:
        return int(request.query_params.get(name, default))
    except ValueError:
        return default


async def _answer(request: Request, operation: str) -> Response:
    echo = await _echo(request, operation)
    headers = {"X-Echo": _echo_header(echo)}
    if operation == "text":
        return Response(base64.b64decode(echo["body"]), media_type="text/plain; charset=utf-8", headers=headers)
    if operation == "download":
        size = max(0, min(_int(request, "size", 256), 10_000_000))
        name = request.url.path.rsplit("/", 1)[-1]
        headers["Content-Disposition"] = f'attachment; filename="{name}"'
        return Response(bytes(i % 256 for i in range(size)), media_type="application/octet-stream", headers=headers)
    if operation == "deleteItem":
        return Response(status_code=204, headers=headers)
    if operation == "problem":
        status = _int(request, "status", 422)
        status = status if 400 <= status <= 599 else 422
        problem = {"type": "about:blank", "title": "Echoed error", "status": status, "detail": "as asked", "echo": echo}
        return JSONResponse(problem, status_code=status, media_type="application/problem+json", headers=headers)
    return JSONResponse(echo, headers=headers)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI app: /openapi.json, the operations under /api, 404 (with the echo) for anything else."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "http":
        return
    request = Request(scope, receive)
    raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    if raw_path == "/openapi.json":
        server = f"{request.url.scheme}://{request.headers.get('host', 'localhost')}{PREFIX}"
        response: Response = JSONResponse(document(server))
    else:
        operation = None
        for method, pattern, operation_id in ROUTES:
            if pattern.match(raw_path):
                operation = operation_id if method == scope["method"] else operation or "methodNotAllowed"
                if method == scope["method"]:
                    break
        if operation in (None, "methodNotAllowed"):
            echo = await _echo(request, operation or "notFound")
            status = 405 if operation else 404
            response = JSONResponse(echo, status_code=status, headers={"X-Echo": _echo_header(echo)})
        else:
            response = await _answer(request, operation)
    await response(scope, receive, send)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        http="h11",
        loop="asyncio",
        server_header=False,
        date_header=False,
        lifespan="on",
    )


if __name__ == "__main__":
    main()
