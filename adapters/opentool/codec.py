"""OpenTool's wire: JSON-RPC envelopes, error codes per canonical kind, result wrapping.

Both sides use it: the front writes answers, the backend reads an upstream's answers
(error codes back to canonical kinds, wrapped results back to values, SSE events).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import orjson

from adapters.opentool.document import RETURN_NAME
from gateway.errors import ErrorKind, Failure
from gateway.model import Outcome, UpstreamAnswer

PROTOCOL = "opentool"  # the `UpstreamAnswer.protocol` a transparent hop passes on as it came
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
ACCEPTED_JSONRPC = ("2.0", "2.0.0")  # the TypeScript SDK sends "2.0.0"
REQUEST_FIELDS = {"jsonrpc", "method", "params", "id"}

# kind -> (HTTP status, error.code); the README's error table says the same.
KIND_CODES: dict[ErrorKind, tuple[int, int]] = {
    ErrorKind.MALFORMED: (400, INVALID_REQUEST),
    ErrorKind.TOO_LARGE: (413, INVALID_REQUEST),
    ErrorKind.NOT_FOUND: (200, METHOD_NOT_FOUND),
    ErrorKind.INVALID_ARGUMENTS: (200, INVALID_PARAMS),
    ErrorKind.TOOL_FAILED: (200, 500),
    ErrorKind.DEADLINE: (200, 504),
    ErrorKind.PENDING: (200, 504),
    ErrorKind.UNAUTHENTICATED: (401, 401),
    ErrorKind.FORBIDDEN: (200, 403),
    ErrorKind.MISSING_REQUIREMENT: (200, 400),
    ErrorKind.AUTHORIZATION_REQUIRED: (200, 401),
    ErrorKind.UPSTREAM_UNAVAILABLE: (200, 503),
    ErrorKind.RATE_LIMITED: (429, 429),
    ErrorKind.INTERNAL: (200, 500),
}


def wrap_result(value: Any) -> dict[str, Any]:
    """`result` must be an object: any other value is sent as `{"result": value}`.

    An object whose only key is `result` is wrapped too, so that `unwrap_result`
    can always tell a wrapped value from an object: the rule is reversible.
    """
    if isinstance(value, dict) and set(value) != {RETURN_NAME}:
        return value
    return {RETURN_NAME: value}


def unwrap_result(result: Any) -> Any:
    """The inverse of `wrap_result` (for an upstream that is a Toolplex)."""
    if isinstance(result, dict) and set(result) == {RETURN_NAME}:
        return result[RETURN_NAME]
    return result


def success(call_id: str, value: Any) -> dict[str, Any]:
    """`result` is always an object (`wrap_result`)."""
    return {"jsonrpc": "2.0", "result": wrap_result(value), "error": None, "id": call_id}


def error_object(failure: Failure, code: int | None = None) -> dict[str, Any]:
    message = failure.message
    challenges = failure.details.get("authorization") if failure.kind == ErrorKind.AUTHORIZATION_REQUIRED else None
    if challenges:
        urls = [c["url"] for c in challenges if c.get("url")]
        if urls:
            message = f"{message}: {' '.join(urls)}"
    error: dict[str, Any] = {"code": code if code is not None else KIND_CODES[failure.kind][1], "message": message}
    data = {
        key: value
        for key, value in (
            ("developer_message", failure.developer_message),
            ("can_retry", failure.can_retry or None),
            ("retry_after_ms", failure.retry_after_ms),
            ("additional_prompt_content", failure.additional_prompt_content),
            ("parameter_errors", failure.parameter_errors),
            ("authorization", challenges),
        )
        if value is not None
    }
    if data:
        error["data"] = data
    return error


def failure_body(call_id: str | None, failure: Failure, code: int | None = None) -> dict[str, Any]:
    """`result` stays `{}` on errors: the Dart client crashes on a null result."""
    return {"jsonrpc": "2.0", "result": {}, "error": error_object(failure, code), "id": call_id}


def status_of(failure: Failure) -> int:
    return KIND_CODES[failure.kind][0]


# ---- a call's answer (the front's `/call` and `/streamCall`, and the console's view of them) ----


def own_answer(upstream: UpstreamAnswer | None) -> UpstreamAnswer | None:
    """An OpenTool upstream's own answer (a transparent hop), else None."""
    return upstream if upstream is not None and upstream.protocol == PROTOCOL else None


def call_failure(call_id: str, method: str, failure: Failure, own: UpstreamAnswer | None) -> dict[str, Any]:
    """A failure: an OpenTool upstream's `error` exactly as it came; an unknown function as the reference
    servers (the Dart SDK) word it; any other failure in the canonical mapping."""
    body = failure_body(call_id, failure)
    if own is not None and isinstance(own.error, dict):
        body["error"] = own.error
    elif failure.kind == ErrorKind.NOT_FOUND and set(failure.details) == {"tool"}:
        body["error"] = {"code": METHOD_NOT_FOUND, "message": f"Method {method} not found"}
    return body


def call_success(call_id: str, value: Any, own: UpstreamAnswer | None) -> dict[str, Any]:
    """A success: an OpenTool upstream's `result` exactly as it came, any other value wrapped as the protocol asks."""
    if own is not None and isinstance(own.result, dict):
        return {"jsonrpc": "2.0", "result": own.result, "error": None, "id": call_id}
    return success(call_id, value)


def call_answer(call_id: str, method: str, outcome: Outcome) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON-RPC body `/call` answers an outcome with; `method` is the name the client called
    (an unknown function's error names it)."""
    own = own_answer(outcome.upstream)
    if outcome.error is not None:
        return status_of(outcome.error), call_failure(call_id, method, outcome.error, own)
    return 200, call_success(call_id, outcome.value, own)


# ---- reading an upstream's answers (the backend's side) ----

# error.code an upstream sends -> canonical kind; anything else is the tool failing.
UPSTREAM_CODES: dict[int, ErrorKind] = {
    METHOD_NOT_FOUND: ErrorKind.NOT_FOUND,
    INVALID_PARAMS: ErrorKind.INVALID_ARGUMENTS,
    PARSE_ERROR: ErrorKind.UPSTREAM_UNAVAILABLE,  # the upstream could not read the gateway's request
    INVALID_REQUEST: ErrorKind.UPSTREAM_UNAVAILABLE,
    400: ErrorKind.INVALID_ARGUMENTS,
    401: ErrorKind.UNAUTHENTICATED,
    403: ErrorKind.FORBIDDEN,
    404: ErrorKind.NOT_FOUND,
    405: ErrorKind.NOT_FOUND,
    408: ErrorKind.DEADLINE,
    422: ErrorKind.INVALID_ARGUMENTS,
    429: ErrorKind.RATE_LIMITED,
    502: ErrorKind.UPSTREAM_UNAVAILABLE,
    503: ErrorKind.UPSTREAM_UNAVAILABLE,
    504: ErrorKind.DEADLINE,
}
# A Toolplex upstream speaks this module's KIND_CODES: its 400 is a missing secret or user id.
TOOLPLEX_CODES: dict[int, ErrorKind] = {**UPSTREAM_CODES, 400: ErrorKind.MISSING_REQUIREMENT}
_URL = re.compile(r"https?://\S+")


def text_of(value: Any) -> str:
    """A message as text: strings as they are, anything else as JSON (never a Python repr)."""
    return value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def error_code(error: dict[str, Any]) -> int | None:
    """`error.code`; for a message that is itself a JSON error object (the TypeScript SDK's
    exceptions stringify that way: `{"code":400,"message":...}`), the inner code."""
    code = error.get("code")
    message = error.get("message")
    if code == 500 and isinstance(message, str) and message.startswith("{"):
        try:
            inner = orjson.loads(message)
        except orjson.JSONDecodeError:
            inner = None
        if isinstance(inner, dict) and isinstance(inner.get("code"), int) and inner["code"] != 500:
            return int(inner["code"])
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def read_error(error: dict[str, Any], *, toolplex: bool) -> Failure:
    """An upstream's JSON-RPC error object as the canonical failure it stands for.

    An authorization challenge keeps its URL: from `data.authorization` (a Toolplex
    upstream), else from the message; without any URL a 401 is "unauthenticated".
    """
    code = error_code(error)
    kind = (TOOLPLEX_CODES if toolplex else UPSTREAM_CODES).get(code or 0, ErrorKind.TOOL_FAILED)
    message = text_of(error.get("message", "")) or "The upstream tool failed"
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    details: dict[str, Any] = {}
    if code == 401:
        challenges = [c for c in data.get("authorization") or [] if isinstance(c, dict) and c.get("id")]
        if not challenges:
            challenges = [{"id": "authorization", "url": url} for url in _URL.findall(message)]
        if challenges:
            kind = ErrorKind.AUTHORIZATION_REQUIRED
            details["authorization"] = challenges
            urls = " ".join(c["url"] for c in challenges if c.get("url"))
            message = message.removesuffix(f": {urls}") if urls else message  # the front adds them again
    parameter_errors = data.get("parameter_errors")
    retry_after = data.get("retry_after_ms")
    return Failure(
        kind=kind,
        message=message,
        developer_message=_text_or_none(data.get("developer_message")),
        can_retry=bool(data.get("can_retry", kind in (ErrorKind.DEADLINE, ErrorKind.RATE_LIMITED))),
        retry_after_ms=int(retry_after) if isinstance(retry_after, (int, float)) else None,
        additional_prompt_content=_text_or_none(data.get("additional_prompt_content")),
        parameter_errors={str(k): text_of(v) for k, v in parameter_errors.items()}
        if isinstance(parameter_errors, dict)
        else None,
        details=details,
    )


def _text_or_none(value: Any) -> str | None:
    return None if value is None else text_of(value)


def read_answer(body: Any) -> tuple[Any, dict[str, Any] | None]:
    """(result, error) of a JSON-RPC answer; ValueError when it is not one.

    Tolerant as real servers need: `"jsonrpc": "2.0.0"` (TypeScript SDK), `error`
    missing or null on success, a result that is not an object.
    """
    if not isinstance(body, dict) or not ({"result", "error"} & set(body)):
        raise ValueError("not a JSON-RPC response: expected an object with 'result' or 'error'")
    error = body.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise ValueError(f"'error' must be an object, got {text_of(error)}")
        return None, error
    if "result" not in body or body["result"] is None:
        raise ValueError("a JSON-RPC response with neither 'result' nor 'error'")
    return body["result"], None


def error_message_of(body: Any, fallback: str) -> str:
    """What an HTTP error answer says, whichever shape it has: a JSON-RPC `error`, an
    Express `{"error": "..."}`, `{"message"}`, FastAPI's `{"detail"}`; else `fallback`."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message") is not None:
            return text_of(error["message"])
        for key in ("error", "message", "detail"):
            if body.get(key) is not None:
                return text_of(body[key])
    return fallback


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event, data) per Server-Sent Event; `data` lines joined with newlines, as the spec says."""
    event, data = "message", []
    async for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue  # a comment
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            event = value
        elif key == "data":
            data.append(value)
    if data:
        yield event, "\n".join(data)
