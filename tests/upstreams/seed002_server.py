"""A seed-002 server that is not a Toolplex: the cross-language bridge of the opencode fork the seed comes from.

What such a server sends (../shared/protocols.md §4 and the seed): JSON-RPC 2.0 at one path, `"protocol": "1.0.0"`
in every message, `tool.execute` with `{tool, language, parameters, context}`, results `{output, metadata:
{title, ...}, diagnostics}` and errors `-32601`/`-32602`/`-32000`/`-32001`/`-32002` with `data: {tool, language,
details}`, batches and notifications. Its tools are the two kinds the bridge joins:

- TypeScript tools (opencode's `Tool.Info`): `execute` returns `{title, metadata, output}`, and the bridge answers
  `output`, `metadata` as the tool's own with its `title` in it, and the LSP diagnostics of the files the tool
  touched (`edit`), each `{range, severity, message, source, code}`.
- Python tools (`tool_info()` / `tool_function()`): a function returning a string, which the bridge "converts to
  structured format": `output` the string, `metadata: {title, additionalData: {}}`, no diagnostics.

Registrations are the seed's `ToolRegistration` without the handler (`id`, `description`, `language`, `schema`:
no title, no version, no extension), listed by `tool.list` (optionally `{"language": ...}`), the discovery the
`jsonrpc` backend uses. `language` in a call picks the registry of that language: a tool of the other one is not
found there. Nothing here knows Toolplex.

    python -m tests.upstreams.seed002_server --port P
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import Any

import uvicorn
from jsonschema import Draft202012Validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

PROTOCOL = "1.0.0"
FILES = {"notes.txt": "first line\nligne deux: é\n", "src/app.ts": "export const port: number = 8080\n"}


class ToolError(Exception):
    """A JSON-RPC error a tool run ends in."""

    def __init__(self, code: int, message: str, details: str) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details


# ---- TypeScript tools: execute(args) -> {title, metadata, output}, plus the diagnostics of what they touched ----


def _read(args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = args["filePath"]
    if path not in FILES:
        raise ToolError(-32000, "Tool execution failed", f"File not found: {path}")
    lines = FILES[path].splitlines()[args.get("offset", 0) :][: args.get("limit", 2000)]
    numbered = "\n".join(f"{i + 1:05d}| {line}" for i, line in enumerate(lines))
    output = f"<file>\n{numbered}\n\n(End of file - total {len(lines)} lines)\n</file>"
    return {"title": path, "metadata": {"preview": "\n".join(lines[:20])}, "output": output}, []


def _edit(args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path, old, new = args["filePath"], args["oldString"], args["newString"]
    before = FILES.get(path, "")
    if old not in before:
        raise ToolError(-32000, "Tool execution failed", "oldString not found in content")
    diff = f"Index: {path}\n===================================================================\n-{old}\n+{new}\n"
    diagnostics = []
    if "number = '" in before.replace(old, new):
        diagnostics.append(
            {
                "range": {"start": {"line": 0, "character": 13}, "end": {"line": 0, "character": 17}},
                "severity": 1,
                "message": "Type 'string' is not assignable to type 'number'.",
                "source": "ts",
                "code": 2322,
            }
        )
    metadata = {"diff": diff, "filediff": {"file": path, "additions": 1, "deletions": 1}, "diagnostics": {}}
    return {"title": path, "metadata": metadata, "output": ""}, diagnostics


def _guarded(args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    raise ToolError(-32002, "Permission denied", "bash: 'rm' requires the user's permission")


# ---- Python tools: tool_function(**parameters) -> str ----


def _word_count(args: dict[str, Any]) -> str:
    return str(len(args["text"].split()))


def _shout(args: dict[str, Any]) -> str:
    return args["text"].upper() + " !"


def _divide(args: dict[str, Any]) -> str:
    return str(args["a"] / args["b"])  # ZeroDivisionError: the bridge's -32000


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


STRING = {"type": "string"}
NUMBER = {"type": "number"}
# id -> (language, description, schema, run)
TOOLS: dict[str, tuple[str, str, dict[str, Any], Callable[[dict[str, Any]], Any]]] = {
    "read": (
        "typescript",
        "Reads a file from the local filesystem.",
        _object({"filePath": STRING, "offset": {"type": "integer"}, "limit": {"type": "integer"}}, ["filePath"]),
        _read,
    ),
    "edit": (
        "typescript",
        "Performs exact string replacements in files.",
        _object({"filePath": STRING, "oldString": STRING, "newString": STRING}, ["filePath", "oldString", "newString"]),
        _edit,
    ),
    "bash": ("typescript", "Executes a bash command.", _object({"command": STRING}, ["command"]), _guarded),
    "word_count": ("python", "Count the words of a text.", _object({"text": STRING}, ["text"]), _word_count),
    "shout": ("python", "Say it louder.", _object({"text": STRING}, ["text"]), _shout),
    "divide": ("python", "Divide a by b.", _object({"a": NUMBER, "b": NUMBER}, ["a", "b"]), _divide),
}


def registration(tool_id: str) -> dict[str, Any]:
    language, description, schema, _ = TOOLS[tool_id]
    return {"id": tool_id, "description": description, "language": language, "schema": schema}


# ---- the protocol ----


def _error(request_id: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "protocol": PROTOCOL, "id": request_id, "error": error}


def _result(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "protocol": PROTOCOL, "id": request_id, "result": result}


async def _execute(params: dict[str, Any]) -> dict[str, Any]:
    tool_id, language = params.get("tool"), params.get("language")
    parameters = params.get("parameters") or {}
    context = params.get("context") or {}
    entry = TOOLS.get(tool_id) if isinstance(tool_id, str) else None
    if entry is None or (language is not None and language != entry[0]):
        where = f" in the {language} registry" if language is not None else ""
        raise ToolError(-32601, "Tool not found", f"No tool {tool_id!r}{where}")
    tool_language, _, schema, run = entry
    problems = sorted(Draft202012Validator(schema).iter_errors(parameters), key=lambda e: list(e.path))
    if problems:
        details = "; ".join(f"{'.'.join(map(str, p.path)) or 'parameters'}: {p.message}" for p in problems)
        raise ToolError(-32602, "Invalid parameters", details)
    timeout_s = context["timeout"] / 1000 if isinstance(context.get("timeout"), (int, float)) else None
    try:
        async with asyncio.timeout(timeout_s):
            answer = await asyncio.to_thread(run, parameters)
    except TimeoutError:
        raise ToolError(-32001, "Tool execution timed out", f"Timed out after {context['timeout']} ms") from None
    except ToolError:
        raise
    except Exception as exc:  # the tool raised: -32000 with what it said
        raise ToolError(-32000, "Tool execution failed", f"{type(exc).__name__}: {exc}") from None
    if tool_language == "python":  # "convert string output to structured format"
        return {"output": answer, "metadata": {"title": tool_id, "additionalData": {}}, "diagnostics": []}
    info, diagnostics = answer
    metadata = {"title": info["title"], **info["metadata"]}
    return {"output": info["output"], "metadata": metadata, "diagnostics": diagnostics}


async def _answer(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict) or item.get("jsonrpc") != "2.0" or not isinstance(item.get("method"), str):
        return _error(None, -32600, "Invalid Request")
    request_id, notification = item.get("id"), "id" not in item
    params = item.get("params") or {}
    try:
        if item["method"] == "tool.list":
            language = params.get("language")
            tools = [registration(t) for t in TOOLS if language is None or TOOLS[t][0] == language]
            result: Any = {"tools": tools}
        elif item["method"] == "tool.execute":
            result = await _execute(params)
        else:
            return None if notification else _error(request_id, -32601, "Method not found")
    except ToolError as exc:
        if notification:
            return None
        tool_id = params.get("tool")
        language = params.get("language") or (TOOLS[tool_id][0] if tool_id in TOOLS else None)
        data = {"tool": tool_id, "language": language, "details": exc.details}
        return _error(request_id, exc.code, exc.message, data)
    return None if notification else _result(request_id, result)


async def rpc(request: Request) -> Response:
    try:
        body = json.loads(await request.body())
    except ValueError:
        return JSONResponse(_error(None, -32700, "Parse error"))
    if isinstance(body, list):
        if not body:
            return JSONResponse(_error(None, -32600, "Invalid Request"))
        answers = [a for a in await asyncio.gather(*(_answer(item) for item in body)) if a is not None]
        return JSONResponse(answers) if answers else Response(status_code=204)
    answer = await _answer(body)
    return JSONResponse(answer) if answer is not None else Response(status_code=204)


app = Starlette(routes=[Route("/rpc", rpc, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
