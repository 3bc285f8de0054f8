"""A test XAgent ToolServerNode/Manager that behaves as protocols.md §3 says the real ones do.

- `POST /get_cookie` starts a node and sets the `node_id` session cookie; every other routed
  path answers 403 `invalid node_id: <id>` for a missing or unknown cookie (the Manager).
- `/get_available_tools`: envs cut at 10 tools plus "..." with `total_tools`; `tools_json` is
  left incomplete on purpose (one tool only in `available_tools`), as `/get_json_schema_for_tools`
  (a bare JSON array) fills it in.
- `/execute_tool {tool_name, arguments}`: FastAPI 422 `detail` lists, 404 "The tool X is not
  found!", 500 with the message, results wrapped as the node wraps them, and
  `ShellEnv_run`, which answers 450 with `next_calling` to the HIDDEN `ShellEnv_read_stdout`
  of the same node until the job is done (`ShellEnv_start` does the same with the listed
  `ShellEnv_status`).
- Workspace per node: `/upload_file` (multipart `file`), `/download_file {file_path}`,
  `/get_workspace_structure`, `/download_workspace` (a zip).
- `/release_session` forgets the node; `GET /debug/nodes` lists live node ids (for tests only).

    python -m tests.upstreams.toolserver_node --port P
"""

from __future__ import annotations

import argparse
import base64
import email.parser
import email.policy
import io
import json
import uuid
import zipfile
from typing import Any

import uvicorn
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ENV_CAP = 10


def schema(properties: dict[str, str], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind, "description": name} for name, kind in properties.items()},
        "required": list(properties) if required is None else required,
    }


TOOLS: dict[str, dict[str, Any]] = {
    "EchoEnv_echo": {
        "description": "Echo text, with the id of the node that ran it",
        "parameters": schema({"text": "string"}),
    },
    "EchoEnv_add": {"description": "Add two integers", "parameters": schema({"a": "integer", "b": "integer"})},
    "EchoEnv_fail": {"description": "Always raises", "parameters": schema({"message": "string"})},
    "EchoEnv_blob": {"description": "Some bytes", "parameters": schema({})},
    "EchoEnv_pair": {"description": "Two values at once", "parameters": schema({})},
    "EchoEnv_retired": {"description": "Listed but gone", "parameters": schema({})},
    "EchoEnv_down": {"description": "Its node is down", "parameters": schema({})},
    "MathEnv_divide": {
        "description": "Divide a by b (b must not be zero)",
        "parameters": schema({"a": "number", "b": "number"}),
    },
    "ShellEnv_start": {
        "description": "Start a job whose progress is read with the listed ShellEnv_status",
        "parameters": schema({"steps": "integer"}),
    },
    "ShellEnv_status": {"description": "Read a job's progress", "parameters": schema({"job": "string"})},
    "ShellEnv_run": {"description": "Start a job that needs `steps` reads", "parameters": schema({"steps": "integer"})},
}
UNLISTED_SCHEMA = {"FileSystemEnv_read_from_file"}  # in available_tools only: its schema must be looked up
TOOLS["FileSystemEnv_read_from_file"] = {
    "description": "Read a workspace file",
    "parameters": schema({"filepath": "string"}),
}
HIDDEN = {"ShellEnv_read_stdout": {"description": "Read a job's output", "parameters": schema({"job": "string"})}}
NOT_FOUND = {"EchoEnv_retired"}


class ExecuteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_name: str
    arguments: dict[str, Any] = {}
    env_name: str | None = None


class DownloadBody(BaseModel):
    file_path: str
    file_type: str = "text/plain"


class Node:
    def __init__(self, node_id: str) -> None:
        self.id = node_id
        self.files: dict[str, bytes] = {}
        self.jobs: dict[str, list[int]] = {}  # job -> [reads done, reads needed]


NODES: dict[str, Node] = {}


def fastapi_422(exc: ValidationError, where: str = "body") -> JSONResponse:
    detail = [
        {"type": e["type"], "loc": [where, *e["loc"]], "msg": e["msg"], "input": e["input"]}
        for e in exc.errors(include_url=False, include_context=False)
    ]
    return JSONResponse({"detail": detail}, status_code=422)


def wrap(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool | list):
        return value
    if isinstance(value, bytes):
        return {
            "type": "binary",
            "media_type": "application/octet-stream",
            "name": "blob.bin",
            "data": base64.b64encode(value).decode(),
        }
    if isinstance(value, tuple):
        return {"type": "composite", "data": [wrap(v) for v in value]}
    return {"type": "simple", "data": value}


def node_of(request: Request) -> Node | JSONResponse:
    node_id = request.cookies.get("node_id")
    node = NODES.get(node_id or "")
    if node is None:
        return JSONResponse({"detail": f"invalid node_id: {node_id}"}, status_code=403)
    return node


async def json_body(request: Request) -> Any:
    raw = await request.body()
    return json.loads(raw) if raw.strip() else None


async def get_cookie(request: Request) -> Response:
    node = Node(uuid.uuid4().hex)
    NODES[node.id] = node
    response = JSONResponse({"message": "add cookie"})
    response.set_cookie("node_id", node.id)
    return response


async def get_available_tools(request: Request) -> Response:
    node = node_of(request)
    if isinstance(node, JSONResponse):
        return node
    envs: dict[str, list[str]] = {}
    for name in TOOLS:
        envs.setdefault(name.split("_", 1)[0], []).append(name)
    available_envs = []
    for env, names in envs.items():
        shown = names[:ENV_CAP] + (["..."] if len(names) > ENV_CAP else [])
        available_envs.append({"name": env, "description": f"The {env}", "total_tools": len(names), "tools": shown})
    return JSONResponse(
        {
            "available_envs": available_envs,
            "available_tools": list(TOOLS),
            "tools_json": [{"name": n, **t} for n, t in TOOLS.items() if n not in UNLISTED_SCHEMA],
        }
    )


async def get_json_schema_for_tools(request: Request) -> Response:
    node = node_of(request)
    if isinstance(node, JSONResponse):
        return node
    names = await json_body(request)
    if not isinstance(names, list):
        detail = [{"type": "list_type", "loc": ["body"], "msg": "Input should be a valid list", "input": names}]
        return JSONResponse({"detail": detail}, status_code=422)
    known = {**TOOLS, **HIDDEN}
    return JSONResponse(
        {
            "tools_json": [{"name": n, **known[n]} for n in names if n in known],
            "missing_tools": [n for n in names if n not in known],
        }
    )


def run_tool(node: Node, name: str, arguments: dict[str, Any]) -> Response:
    if name == "EchoEnv_echo":
        return JSONResponse(wrap({"echo": arguments.get("text"), "node": node.id}))
    if name == "EchoEnv_add":
        return JSONResponse(wrap(arguments["a"] + arguments["b"]))
    if name == "EchoEnv_fail":
        return JSONResponse({"detail": f"RuntimeError: {arguments.get('message')}"}, status_code=500)
    if name == "EchoEnv_blob":
        return JSONResponse(wrap(b"\x00\x01binary"))
    if name == "EchoEnv_pair":
        return JSONResponse(wrap(({"left": 1}, "right")))
    if name == "EchoEnv_down":
        return JSONResponse({"detail": "The node is not running"}, status_code=503)
    if name == "MathEnv_divide":
        if arguments.get("b") == 0:
            item = {
                "type": "value_error",
                "loc": ["body", "arguments", "b"],
                "msg": "Value error, b must not be zero",
                "input": 0,
            }
            return JSONResponse({"detail": [item]}, status_code=422)
        return JSONResponse(wrap(arguments["a"] / arguments["b"]))
    if name == "ShellEnv_run":
        job = uuid.uuid4().hex[:12]
        node.jobs[job] = [0, int(arguments.get("steps", 1))]
        return again(job)
    if name == "ShellEnv_start":
        job = uuid.uuid4().hex[:12]
        node.jobs[job] = [0, int(arguments.get("steps", 1))]
        return again(job, "ShellEnv_status")
    if name in ("ShellEnv_read_stdout", "ShellEnv_status"):
        state = node.jobs.get(str(arguments.get("job")))
        if state is None:
            return JSONResponse({"detail": f"KeyError: no job {arguments.get('job')} on this node"}, status_code=500)
        state[0] += 1
        if state[0] < state[1]:
            return again(str(arguments["job"]), name)
        return JSONResponse(wrap({"output": f"done after {state[0]} reads", "node": node.id}))
    if name == "FileSystemEnv_read_from_file":
        content = node.files.get(str(arguments.get("filepath")))
        if content is None:
            return JSONResponse({"detail": f"FileNotFoundError: {arguments.get('filepath')}"}, status_code=500)
        return JSONResponse(wrap(content.decode(errors="replace")))
    raise AssertionError(name)


def again(job: str, next_calling: str = "ShellEnv_read_stdout") -> Response:
    detail = {"type": "retry", "next_calling": next_calling, "arguments": {"job": job}}
    return JSONResponse({"detail": detail}, status_code=450)


async def execute_tool(request: Request) -> Response:
    node = node_of(request)
    if isinstance(node, JSONResponse):
        return node
    try:
        body = ExecuteBody.model_validate(await json_body(request))
    except ValidationError as exc:
        return fastapi_422(exc)
    name = body.tool_name
    if name in NOT_FOUND or (name not in TOOLS and name not in HIDDEN):
        return JSONResponse({"detail": f"The tool {name} is not found!"}, status_code=404)
    return run_tool(node, name, body.arguments)


def multipart_file(request: Request, raw: bytes) -> tuple[str, bytes] | None:
    head = f"Content-Type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    for part in message.iter_parts() if message.is_multipart() else []:
        if part.get_param("name", header="content-disposition") == "file":
            return str(part.get_filename()), part.get_payload(decode=True) or b""
    return None


async def upload_file(request: Request) -> Response:
    node = node_of(request)
    if isinstance(node, JSONResponse):
        return node
    found = multipart_file(request, await request.body())
    if found is None:
        item = {"type": "missing", "loc": ["body", "file"], "msg": "Field required", "input": None}
        return JSONResponse({"detail": [item]}, status_code=422)
    name, content = found
    node.files[name] = content
    return JSONResponse({"message": "Upload Success", "file_path": f"workspace/{name}"})


async def download_file(request: Request) -> Response:
    node = node_of(request)
    if isinstance(node, JSONResponse):
        return node
    try:
        body = DownloadBody.model_validate(await json_body(request))
    except ValidationError as exc:
        return fastapi_422(exc)
    path = body.file_path.removeprefix("workspace/")
    if path not in node.files:
        return JSONResponse({"detail": f"File {body.file_path} not found"}, status_code=404)
    return Response(
        node.files[path],
        media_type=body.file_type,
        headers={"content-disposition": f'attachment; filename="{path.rsplit("/", 1)[-1]}"'},
    )


async def get_workspace_structure(request: Request) -> Response:
    node = node_of(request)
    if isinstance(node, JSONResponse):
        return node
    children = [{"name": n, "type": "file"} for n in sorted(node.files)]
    return JSONResponse({"name": "workspace", "type": "directory", "children": children})


async def download_workspace(request: Request) -> Response:
    node = node_of(request)
    if isinstance(node, JSONResponse):
        return node
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in node.files.items():
            archive.writestr(name, content)
    headers = {"content-disposition": 'attachment; filename="workspace.zip"'}
    return Response(buffer.getvalue(), media_type="application/zip", headers=headers)


async def release_session(request: Request) -> Response:
    node_id = request.cookies.get("node_id")
    NODES.pop(node_id or "", None)
    return JSONResponse(f"Release session: {node_id}")


async def close_session(request: Request) -> Response:
    return JSONResponse(f"Close session: {request.cookies.get('node_id')}")


async def debug_nodes(request: Request) -> Response:
    return JSONResponse(sorted(NODES))


def app(prefix: str = "") -> Starlette:
    routes = [
        Route(f"{prefix}/get_cookie", get_cookie, methods=["POST"]),
        Route(f"{prefix}/get_available_tools", get_available_tools, methods=["GET", "POST"]),
        Route(f"{prefix}/get_json_schema_for_tools", get_json_schema_for_tools, methods=["GET", "POST"]),
        Route(f"{prefix}/execute_tool", execute_tool, methods=["POST"]),
        Route(f"{prefix}/upload_file", upload_file, methods=["POST"]),
        Route(f"{prefix}/download_file", download_file, methods=["POST"]),
        Route(f"{prefix}/get_workspace_structure", get_workspace_structure, methods=["GET", "POST"]),
        Route(f"{prefix}/download_workspace", download_workspace, methods=["GET", "POST"]),
        Route(f"{prefix}/release_session", release_session, methods=["POST"]),
        Route(f"{prefix}/close_session", close_session, methods=["POST"]),
        Route("/debug/nodes", debug_nodes, methods=["GET"]),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"detail": "Not Found"}, status_code=404)  # FastAPI's own

    return Starlette(routes=routes, exception_handlers={404: not_found})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prefix", default="")
    args = parser.parse_args()
    uvicorn.run(app(args.prefix), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
