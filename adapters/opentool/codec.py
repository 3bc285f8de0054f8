"""OpenTool's wire: JSON-RPC envelopes, error codes per canonical kind, result wrapping."""

from __future__ import annotations

from typing import Any

from adapters.opentool.document import RETURN_NAME
from gateway.errors import ErrorKind, Failure

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


def success(call_id: str, value: Any) -> dict[str, Any]:
    """`result` is always an object: non-objects are wrapped under the return name."""
    result = value if isinstance(value, dict) else {RETURN_NAME: value}
    return {"jsonrpc": "2.0", "result": result, "error": None, "id": call_id}


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
