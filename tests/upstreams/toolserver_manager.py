"""A test XAgent ToolServerManager (XAgent `ToolServerManager/main.py`) in front of bare-node doubles.

- `POST /get_cookie` starts a node (here: a `toolserver_node.Node` with its own work
  directory) and sets the `node_id` session cookie; answers `{"message": "add cookie", "version"}`.
- Every routed path (the node's own) answers 403 `invalid node_id: <id>` for a missing or unknown
  cookie, else is answered by that session's node exactly as the bare node answers it.
- `/reconnect_session`, `/close_session`, `/release_session` answer 200 with a string, also for an
  unknown id (`"invalid node_id: None"`); release forgets the node and its files.
- `GET /alive` -> "alive"; `GET /debug/nodes` lists live node ids (for tests only).

    python -m tests.upstreams.toolserver_manager --port P
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.upstreams.toolserver_node import NODE_ROUTES, Handler, Node, not_allowed, not_found, serve

VERSION = "0.1"


class Manager:
    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.nodes: dict[str, Node] = {}

    async def get_cookie(self, request: Request) -> Response:
        node_id = uuid.uuid4().hex + uuid.uuid4().hex  # a container id: 64 hex digits
        self.nodes[node_id] = Node(node_id, self.scratch / node_id / "workspace")
        response = JSONResponse({"message": "add cookie", "version": VERSION})
        response.headers["Server"] = "ToolServerManager/" + VERSION
        response.set_cookie(key="node_id", value=node_id)
        return response

    def _session(self, verb: str, *, forget: bool = False) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            node_id = request.cookies.get("node_id")
            if node_id not in self.nodes:
                return JSONResponse(f"invalid node_id: {node_id}")
            if forget:
                node = self.nodes.pop(str(node_id))
                shutil.rmtree(node.work_directory.parent, ignore_errors=True)
            return JSONResponse(f"{verb} session: {node_id}")

        return endpoint

    def routed(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            node_id = request.cookies.get("node_id")
            node = self.nodes.get(node_id or "")
            if node is None:
                return JSONResponse({"detail": f"invalid node_id: {node_id}"}, status_code=403)
            return await serve(handler, request, node)

        return endpoint

    async def alive(self, request: Request) -> Response:
        return JSONResponse("alive")

    async def debug_nodes(self, request: Request) -> Response:
        return JSONResponse(sorted(self.nodes))


def app(scratch: Path, prefix: str = "") -> Starlette:
    manager = Manager(scratch)
    routes = [
        Route(f"{prefix}/get_cookie", manager.get_cookie, methods=["POST"]),
        Route(f"{prefix}/reconnect_session", manager._session("Reconnect"), methods=["POST"]),
        Route(f"{prefix}/close_session", manager._session("Close"), methods=["POST"]),
        Route(f"{prefix}/release_session", manager._session("Release", forget=True), methods=["POST"]),
        Route(f"{prefix}/alive", manager.alive, methods=["GET"]),
        Route("/debug/nodes", manager.debug_nodes, methods=["GET"]),
    ]
    routes += [Route(f"{prefix}{path}", manager.routed(h), methods=["POST"]) for path, h in NODE_ROUTES.items()]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prefix", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tsn-manager-") as scratch:
        uvicorn.run(app(Path(scratch), args.prefix), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
