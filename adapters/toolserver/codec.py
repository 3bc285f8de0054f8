"""ToolServerNode's wire: result wrapping, tool and env JSON, FastAPI-shaped errors.

The real XAgent client unwraps results (`{"type": "simple", "data": ...}`) and
branches on the HTTP status alone, so both are reproduced exactly here.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, NamedTuple

from gateway.errors import ErrorKind, Failure
from gateway.http import retry_after_headers
from gateway.model import Outcome, ToolSpec, UpstreamAnswer

PROTOCOL = "toolserver"  # `UpstreamAnswer.protocol` of a node's own answer (a `toolserver` backend's)
WRAPPED_TYPES = ("simple", "composite", "binary")
RETRY_STATUS = 450  # "call again": the node's own status for an unfinished call
MORE_TOOLS = "..."  # the node's marker for an env listing cut at the cap
DESCRIPTION_LIMIT = 1024  # the node cuts tool descriptions here

# kind -> HTTP status; the README's error table says the same.
KIND_STATUS: dict[ErrorKind, int] = {
    ErrorKind.MALFORMED: 422,
    ErrorKind.TOO_LARGE: 413,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.INVALID_ARGUMENTS: 422,
    ErrorKind.TOOL_FAILED: 500,
    ErrorKind.DEADLINE: 500,
    ErrorKind.PENDING: RETRY_STATUS,
    ErrorKind.UNAUTHENTICATED: 401,
    ErrorKind.FORBIDDEN: 403,
    ErrorKind.MISSING_REQUIREMENT: 403,
    ErrorKind.AUTHORIZATION_REQUIRED: 403,
    ErrorKind.UPSTREAM_UNAVAILABLE: 503,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.INTERNAL: 500,
}


def is_wrapped(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in WRAPPED_TYPES and "data" in value


def wrap_result(value: Any) -> Any:
    """As the node does: scalars, lists and null raw; objects under `simple`; bytes as `binary`."""
    if value is None or isinstance(value, str | int | float | bool | list):
        return value
    if isinstance(value, bytes | bytearray):
        return {"type": "binary", "media_type": "bytes", "name": None, "data": base64.b64encode(value).decode()}
    if isinstance(value, tuple):
        if len(value) <= 1:
            return {"type": "simple", "data": value[0] if value else None}
        return {"type": "composite", "data": [wrap_result(v) for v in value]}
    if is_wrapped(value):
        return value
    return {"type": "simple", "data": value}


def tool_name(spec: ToolSpec) -> str:
    """The name the node's listings give a tool (`available_tools`, `tools_json`, an env's `tools`) and
    `/execute_tool` calls it by: the flat name. One rule for the listings and the console's view of them."""
    return spec.flat_name


def tool_json(spec: ToolSpec) -> dict[str, Any]:
    """`{name, description, parameters}` with `parameters` an object JSON Schema, as OpenAI functions."""
    parameters = dict(spec.input_schema)
    parameters["type"] = "object"
    parameters.setdefault("properties", {})
    parameters.setdefault("required", [])
    return {"name": tool_name(spec), "description": spec.description[:DESCRIPTION_LIMIT], "parameters": parameters}


def env_json(name: str, description: str, tools: Sequence[ToolSpec], cap: int | None) -> dict[str, Any]:
    """One env (a toolkit); `cap` None lists every tool, else at most `cap` plus a "..." entry."""
    names = [tool_name(spec) for spec in tools]
    if cap is not None and len(names) > cap:
        names = [*names[:cap], MORE_TOOLS]
    return {"name": name, "description": description, "total_tools": len(tools), "tools": names}


def summary(env: str, tools: Sequence[ToolSpec]) -> str:
    """An env description made from its tools, for a toolkit described nowhere else."""
    firsts = [spec.description.strip().split("\n", 1)[0].rstrip(".") for spec in tools if spec.description.strip()]
    text = f"{env}: " + "; ".join(firsts) if firsts else f"{env}: " + ", ".join(s.name for s in tools)
    return text[:DESCRIPTION_LIMIT]


def extension_entry(spec: ToolSpec) -> dict[str, Any]:
    """One tool as a Toolplex upstream describes it beside the node's format (`x-toolplex`).

    `tool_name` is what `/execute_tool` accepts to run exactly this version.
    """
    return {
        "tool_name": f"{tool_name(spec)}@{spec.version}",
        "toolkit": spec.toolkit,
        "name": spec.name,
        "version": spec.version,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "output_schema": spec.output_schema,
    }


def detail(message: Any) -> dict[str, Any]:
    return {"detail": message}


def status_of(failure: Failure) -> int:
    return KIND_STATUS[failure.kind]


def validation_item(kind: str, loc: Sequence[str | int], msg: str, value: Any) -> dict[str, Any]:
    """One entry of FastAPI's 422 `detail` list."""
    return {"type": kind, "loc": list(loc), "msg": msg, "input": value}


def failure_detail(failure: Failure, arguments: Any = None) -> Any:
    """The `detail` of an error response: a FastAPI list for bad arguments, else a message."""
    if failure.kind == ErrorKind.INVALID_ARGUMENTS and failure.parameter_errors:
        given = arguments if isinstance(arguments, dict) else {}
        return [
            validation_item(
                "missing" if name not in given else "value_error",
                ("body", "arguments", name),
                message,
                given.get(name),
            )
            for name, message in failure.parameter_errors.items()
        ]
    message = failure.message
    if failure.kind == ErrorKind.AUTHORIZATION_REQUIRED:
        urls = [c["url"] for c in failure.details.get("authorization", []) if c.get("url")]
        if urls:
            message = f"{message}: {' '.join(urls)}"
    if failure.additional_prompt_content:
        message = f"{message}\n{failure.additional_prompt_content}"
    return message


def retry_detail(next_calling: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "retry", "next_calling": next_calling, "arguments": arguments}


# ---- a call's answer (the front's `/execute_tool`, and the console's view of it) ----


class Answer(NamedTuple):
    """An answer as the front sends it: HTTP status, JSON body, headers (None: only the content type)."""

    status: int
    body: Any
    headers: dict[str, str] | None = None


def own_answer(upstream: UpstreamAnswer | None) -> UpstreamAnswer | None:
    """An upstream node's own answer (a `toolserver` backend's: a transparent hop), else None."""
    return upstream if upstream is not None and upstream.protocol == PROTOCOL else None


def as_it_came(error: dict[str, Any]) -> Answer:
    """A node's error answer, kept by its backend as `{"status", "body", "headers"?}`, answered as it came."""
    headers = error.get("headers")
    return Answer(
        int(error.get("status") or 500),
        error.get("body"),
        {str(k): str(v) for k, v in headers.items()} if isinstance(headers, dict) else None,
    )


def call_answer(outcome: Outcome, name: str, arguments: dict[str, Any]) -> Answer:
    """What `/execute_tool` answers for a call that ended (not the gateway's own 450 with a result handle):
    `name` is the tool as the client called it (an unknown tool's message names it), `arguments` as it sent them
    (a FastAPI-shaped 422 names each bad one with its value)."""
    failure = outcome.error
    own = own_answer(outcome.upstream)
    if failure is None:
        # An upstream node's result body as it came (its own wrapping), else the value wrapped as a node does.
        return Answer(200, own.result if own is not None else wrap_result(outcome.value))
    if own is not None and isinstance(own.error, dict):
        # An upstream node's own error answer (its status, `detail`, Retry-After), its own 450 included.
        return as_it_came(own.error)
    if failure.kind == ErrorKind.PENDING and isinstance(failure.details.get("next_calling"), str):
        # An upstream node's own 450, its next_calling already in gateway names: the client's loop goes on.
        retry = retry_detail(failure.details["next_calling"], failure.details.get("arguments") or {})
        return Answer(RETRY_STATUS, detail(retry))
    if failure.kind == ErrorKind.NOT_FOUND:
        message: Any = f"The tool {name} is not found!"
    else:
        message = failure_detail(failure, arguments)
    return Answer(status_of(failure), detail(message), retry_after_headers(failure))


# ---- reading a node's answers (the `toolserver` backend) ----


def unwrap_result(value: Any) -> Any:
    """The value a node's `/execute_tool` answer carries, as the XAgent client unwraps it.

    `simple` gives its data, `composite` a list; `binary` stays the whole object
    (media type, name and base64 data), so that a front re-wrapping it passes it on intact.
    Raises ValueError for a bare object: the node never sends one, so it is not a node.
    """
    if isinstance(value, dict):
        if not is_wrapped(value):
            raise ValueError("an object that is not wrapped as {'type': 'simple' | 'composite' | 'binary', 'data'}")
        if value["type"] == "simple":
            return value["data"]
        if value["type"] == "composite":
            parts = value["data"] if isinstance(value["data"], list) else [value["data"]]
            return [_unwrap_part(part) for part in parts]
        return value
    return value


def _unwrap_part(part: Any) -> Any:
    return part["data"] if is_wrapped(part) and part["type"] == "simple" else part


def parameter_errors_of(items: Sequence[Any]) -> dict[str, str]:
    """FastAPI's 422 `detail` list -> {parameter: message}; entries outside the arguments keep their path."""
    problems: dict[str, str] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        loc = [str(part) for part in item.get("loc") or []]
        message = str(item.get("msg") or "Invalid value")
        for marker in ("arguments", "parameters"):
            if marker in loc:
                rest = loc[loc.index(marker) + 1 :]
                break
        else:
            rest = [".".join(p for p in loc if p != "body") or "(arguments)"]
        if not rest:
            problems.setdefault("(arguments)", message)
            continue
        name = rest[0]
        problems.setdefault(name, f"{'.'.join(rest[1:])}: {message}" if len(rest) > 1 else message)
    return problems
