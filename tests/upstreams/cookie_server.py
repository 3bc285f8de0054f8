"""A real Toolplex upstream (OpenTool, OXP, JSON-RPC and ToolServerNode fronts, the arithmetic
toolkit) behind a cookie trap: every answer sets `trap=<caller>`, the caller being the name
before the first `-` of the request's bearer key (`gateway` without one), and every request is
recorded with the `Cookie` header it arrived with and the `node_id` cookies its answer set.

`GET /_seen` answers the records; `DELETE /_seen` forgets them. A client that keeps cookies
shows up as a request carrying `trap=...` that it did not choose to send.

python -m tests.upstreams.cookie_server --port P
"""

from __future__ import annotations

import argparse
import textwrap
from http.cookies import SimpleCookie
from typing import Any

import orjson
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.app import create_app
from gateway.config import parse_config

CONFIG = """
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
"""
SEEN_PATH = "/_seen"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return str(value.decode("latin-1"))
    return None


def caller_of(authorization: str | None) -> str:
    """Who sent the request: the bearer key's first `-`-separated part, or `gateway` for none."""
    if not authorization or not authorization.startswith("Bearer "):
        return "gateway"
    return authorization.removeprefix("Bearer ").split("-", 1)[0]


def node_ids_set(headers: list[tuple[bytes, bytes]]) -> list[str]:
    """The `node_id` values an answer's `Set-Cookie` headers carry."""
    found = []
    for key, value in headers:
        if key.lower() == b"set-cookie":
            jar: SimpleCookie = SimpleCookie()
            jar.load(value.decode("latin-1"))
            if "node_id" in jar:
                found.append(jar["node_id"].value)
    return found


class CookieTrap:
    """Sets a caller-named cookie on every answer and records what each request carried."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == SEEN_PATH:
            if scope["method"] == "DELETE":
                self.seen.clear()
            await self._answer(send, orjson.dumps(self.seen))
            return
        caller = caller_of(_header(scope, b"authorization"))
        record: dict[str, Any] = {
            "path": scope["path"],
            "caller": caller,
            "cookie": _header(scope, b"cookie"),
            "node_ids_set": [],
        }
        self.seen.append(record)

        async def trap(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                record["node_ids_set"] = node_ids_set(headers)
                headers.append((b"set-cookie", f"trap={caller}; Path=/".encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, trap)

    @staticmethod
    async def _answer(send: Send, body: bytes) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = create_app(parse_config(textwrap.dedent(CONFIG), "cookie_server.yaml"), bind_host="127.0.0.1")
    uvicorn.run(CookieTrap(app), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
