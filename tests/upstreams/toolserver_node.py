"""A test XAgent ToolServerNode that answers as the real bare node does (XAgent `ToolServerNode/main.py`).

No session endpoints at all: `/get_cookie`, `/close_session`, `/release_session` are
FastAPI's own 404 `{"detail": "Not Found"}`; one workspace directory for everyone.
Routes, all POST as on the real node (`/` also GET):
- `/` -> `{"message": "Hello World"}`
- `/upload_file` (multipart `file`, other parts ignored) -> `{"message": "Upload Success!"}`
- `/download_file {file_path, file_type}` -> the raw file bytes, `Content-Disposition: attachment`
  (a leading `workspace/` is stripped); a missing file is Starlette's plain-text 500, as FileResponse fails
- `/download_workspace` -> a zip; `/get_workspace_structure` -> `{"name", "type", "children"}` recursively
- `/get_available_tools`: envs cut at 10 tools plus "..." with `total_tools`; one tool's schema is
  left out of `tools_json` on purpose, as `/get_json_schema_for_tools` (a bare JSON array) fills it in
- `/get_json_schema_for_envs` (a bare JSON array), `/retrieving_tools {question, top_k}`,
  `/register_new_tool {tool_name, code}` -> 406 (this node registers nothing)
- `/execute_tool {tool_name, arguments, env_name?}`: FastAPI 422 lists, 404 "The tool X is not found!",
  500 with the trace, results wrapped as the node wraps them, and `ShellEnv_run`, which answers 450
  with `next_calling` to the HIDDEN `ShellEnv_read_stdout` until the job is done (`ShellEnv_start`
  does the same with the listed `ShellEnv_status`).

`tests.upstreams.toolserver_manager` puts many of these behind a Manager's sessions.

    python -m tests.upstreams.toolserver_node --port P
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvicorn
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

ENV_CAP = 10
COPY_CHUNK = 1024 * 1024


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
    "EchoEnv_object_error": {"description": "Fails with an object detail", "parameters": schema({})},
    "EchoEnv_teapot": {"description": "Answers a status the node protocol does not use", "parameters": schema({})},
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
    "description": "Open and read the textual file content in the workspace",
    "parameters": schema({"filepath": "string", "line_number": "integer"}, required=["filepath"]),
}
HIDDEN = {"ShellEnv_read_stdout": {"description": "Read a job's output", "parameters": schema({"job": "string"})}}
NOT_FOUND = {"EchoEnv_retired"}
ENV_DESCRIPTIONS = {
    "EchoEnv": "Echoes and failures",
    "MathEnv": "Arithmetic",
    "ShellEnv": "Long-running jobs",
    "FileSystemEnv": "Provide a file system operation environment for Agent.",
}


class ExecuteBody(BaseModel):
    model_config = ConfigDict(extra="ignore")  # FastAPI ignores unknown members of an embedded body
    tool_name: str
    arguments: dict[str, Any]
    env_name: str | None = None


class DownloadBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    file_path: str
    file_type: str = "text/plain"


class RetrieveBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question: str
    top_k: int = 5


class RegisterBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    tool_name: str
    code: str


class Node:
    """One node: its id, its work directory and its jobs."""

    def __init__(self, node_id: str, work_directory: Path) -> None:
        self.id = node_id
        self.work_directory = work_directory
        work_directory.mkdir(parents=True, exist_ok=True)
        self.jobs: dict[str, list[int]] = {}  # job -> [reads done, reads needed]


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


class BadJson(Exception):
    pass


async def json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise BadJson() from None


def json_invalid() -> JSONResponse:
    item = {"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error", "input": {}}
    return JSONResponse({"detail": [item]}, status_code=422)


def names_of(body: Any) -> list[str] | JSONResponse:
    """A `List[str] = Body(...)` parameter alone: the body is the bare array."""
    if not isinstance(body, list) or not all(isinstance(n, str) for n in body):
        detail = [{"type": "list_type", "loc": ["body"], "msg": "Input should be a valid list", "input": body}]
        return JSONResponse({"detail": detail}, status_code=422)
    return body


Handler = Callable[[Request, Node], Awaitable[Response]]


async def root(request: Request, node: Node) -> Response:
    return JSONResponse({"message": "Hello World"})


async def get_available_tools(request: Request, node: Node) -> Response:
    envs: dict[str, list[str]] = {}
    for name in TOOLS:
        envs.setdefault(name.split("_", 1)[0], []).append(name)
    available_envs = []
    for env, names in envs.items():
        shown = names[:ENV_CAP] + (["..."] if len(names) > ENV_CAP else [])
        available_envs.append(
            {"name": env, "description": ENV_DESCRIPTIONS[env], "total_tools": len(names), "tools": shown}
        )
    return JSONResponse(
        {
            "available_envs": available_envs,
            "available_tools": list(TOOLS),
            "tools_json": [{"name": n, **t} for n, t in TOOLS.items() if n not in UNLISTED_SCHEMA],
        }
    )


async def get_json_schema_for_tools(request: Request, node: Node) -> Response:
    names = names_of(await json_body(request))
    if isinstance(names, JSONResponse):
        return names
    known = {**TOOLS, **HIDDEN}
    return JSONResponse(
        {
            "tools_json": [{"name": n, **known[n]} for n in names if n in known],
            "missing_tools": [n for n in names if n not in known],
        }
    )


async def get_json_schema_for_envs(request: Request, node: Node) -> Response:
    names = names_of(await json_body(request))
    if isinstance(names, JSONResponse):
        return names
    envs = []
    for env in names:
        if env in ENV_DESCRIPTIONS:
            tools = [n for n in TOOLS if n.startswith(env + "_")]
            envs.append({"name": env, "description": ENV_DESCRIPTIONS[env], "total_tools": len(tools), "tools": tools})
    return JSONResponse({"envs_json": envs, "missing_envs": [e for e in names if e not in ENV_DESCRIPTIONS]})


async def retrieving_tools(request: Request, node: Node) -> Response:
    try:
        body = RetrieveBody.model_validate(await json_body(request))
    except ValidationError as exc:
        return fastapi_422(exc)
    words = set(body.question.lower().split())
    ranked = sorted(TOOLS, key=lambda n: -len(words & set(TOOLS[n]["description"].lower().split())))
    found = ranked[: body.top_k]
    return JSONResponse({"retrieved_tools": found, "tools_json": [{"name": n, **TOOLS[n]} for n in found]})


async def register_new_tool(request: Request, node: Node) -> Response:
    try:
        body = RegisterBody.model_validate(await json_body(request))
    except ValidationError as exc:
        return fastapi_422(exc)
    detail = f"Error happens when registering new tool:\nthis node registers no tools ({body.tool_name})\n\n"
    return JSONResponse({"detail": detail}, status_code=406)


def numbered(text: str) -> str:
    """FileSystemEnv.read_from_file's rendering: numbered lines."""
    return "".join(f"{i}".rjust(5) + ": " + line for i, line in enumerate(text.splitlines(keepends=True), 1))


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
    if name == "EchoEnv_down":  # what a Manager answers for a node that is not running
        return JSONResponse({"detail": f"node is not running: {node.id}"}, status_code=503)
    if name == "EchoEnv_object_error":  # a tool raising HTTPException(500, detail={...}) itself
        return JSONResponse({"detail": {"error": "quota", "left": 0}}, status_code=500)
    if name == "EchoEnv_teapot":  # a tool raising HTTPException(429, ...) itself
        return JSONResponse({"detail": "slow down"}, status_code=429, headers={"Retry-After": "7"})
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
    if name in ("ShellEnv_run", "ShellEnv_start"):
        job = uuid.uuid4().hex[:12]
        node.jobs[job] = [0, int(arguments.get("steps", 1))]
        return again(job, "ShellEnv_status" if name == "ShellEnv_start" else "ShellEnv_read_stdout")
    if name in ("ShellEnv_read_stdout", "ShellEnv_status"):
        state = node.jobs.get(str(arguments.get("job")))
        if state is None:
            return JSONResponse({"detail": f"KeyError: no job {arguments.get('job')} on this node"}, status_code=500)
        state[0] += 1
        if state[0] < state[1]:
            return again(str(arguments["job"]), name)
        return JSONResponse(wrap({"output": f"done after {state[0]} reads", "node": node.id}))
    if name == "FileSystemEnv_read_from_file":
        path = node.work_directory / str(arguments.get("filepath")).strip("/")
        if not path.is_file():
            trace = f"FileNotFoundError: File {arguments.get('filepath')} not found in workspace."
            return JSONResponse({"detail": trace}, status_code=500)
        return JSONResponse(wrap(numbered(path.read_text())))
    raise AssertionError(name)


def again(job: str, next_calling: str) -> Response:
    detail = {"type": "retry", "next_calling": next_calling, "arguments": {"job": job}}
    return JSONResponse({"detail": detail}, status_code=450)


async def execute_tool(request: Request, node: Node) -> Response:
    try:
        body = ExecuteBody.model_validate(await json_body(request))
    except ValidationError as exc:
        return fastapi_422(exc)
    name = body.tool_name if body.env_name is None else f"{body.env_name}_{body.tool_name}"
    if name in NOT_FOUND or (name not in TOOLS and name not in HIDDEN):
        return JSONResponse({"detail": f"The tool {name} is not found!"}, status_code=404)
    return run_tool(node, name, body.arguments)


async def upload_file(request: Request, node: Node) -> Response:
    """As FastAPI's `UploadFile` takes it: the parts parsed as they arrive, the file spooled to disk, so
    large uploads (tests/toolserver/test_large_files.py) cost this double no memory either."""
    try:
        form = await request.form()
    except Exception:  # not multipart at all, or broken: FastAPI finds no `file` either
        form = None
    try:
        upload = form.get("file") if form is not None else None
        if not isinstance(upload, UploadFile):
            item = {"type": "missing", "loc": ["body", "file"], "msg": "Field required", "input": None}
            return JSONResponse({"detail": [item]}, status_code=422)
        with (node.work_directory / str(upload.filename)).open("wb") as target:
            shutil.copyfileobj(upload.file, target, COPY_CHUNK)
    finally:
        if form is not None:
            await form.close()
    return JSONResponse({"message": "Upload Success!"})


async def download_file(request: Request, node: Node) -> Response:
    try:
        body = DownloadBody.model_validate(await json_body(request))
    except ValidationError as exc:
        return fastapi_422(exc)
    file_path = body.file_path
    prefix = node.work_directory.name
    if file_path.startswith(prefix):
        file_path = file_path[len(prefix) + 1 :]
    path = node.work_directory / file_path
    if not path.is_file():  # FileResponse raises; Starlette answers its plain 500
        return PlainTextResponse("Internal Server Error", status_code=500)
    return FileResponse(path, filename=os.path.basename(file_path))


async def download_workspace(request: Request, node: Node) -> Response:
    target = node.work_directory.parent / f"{node.id}-workspace.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder, _dirs, files in os.walk(node.work_directory):
            for file in files:
                full = Path(folder) / file
                archive.write(full, full.relative_to(node.work_directory).as_posix())
    return FileResponse(target, filename="workspace.zip")


def tree(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"name": path.name}
    if path.is_dir():
        result["type"] = "directory"
        result["children"] = [tree(path / child) for child in os.listdir(path)]
    else:
        result["type"] = "file"
    return result


async def get_workspace_structure(request: Request, node: Node) -> Response:
    return JSONResponse(tree(node.work_directory))


NODE_ROUTES: dict[str, Handler] = {
    "/upload_file": upload_file,
    "/download_file": download_file,
    "/download_workspace": download_workspace,
    "/get_workspace_structure": get_workspace_structure,
    "/get_available_tools": get_available_tools,
    "/retrieving_tools": retrieving_tools,
    "/get_json_schema_for_tools": get_json_schema_for_tools,
    "/get_json_schema_for_envs": get_json_schema_for_envs,
    "/register_new_tool": register_new_tool,
    "/execute_tool": execute_tool,
}


async def serve(handler: Handler, request: Request, node: Node) -> Response:
    try:
        return await handler(request, node)
    except BadJson:
        return json_invalid()


async def not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"detail": "Not Found"}, status_code=404)  # FastAPI's own


async def not_allowed(request: Request, exc: Exception) -> Response:
    return JSONResponse({"detail": "Method Not Allowed"}, status_code=405)


def app(work_directory: Path, prefix: str = "") -> Starlette:
    node = Node(uuid.uuid4().hex, work_directory)

    def bound(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await serve(handler, request, node)

        return endpoint

    routes = [Route(f"{prefix}/", bound(root), methods=["GET", "POST"])]
    routes += [Route(f"{prefix}{path}", bound(handler), methods=["POST"]) for path, handler in NODE_ROUTES.items()]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prefix", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tsn-node-") as scratch:
        uvicorn.run(
            app(Path(scratch) / "workspace", args.prefix), host="127.0.0.1", port=args.port, log_level="warning"
        )


if __name__ == "__main__":
    main()
