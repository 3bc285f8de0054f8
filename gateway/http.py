"""HTTP plumbing every front shares: bounded body reading, JSON in and out."""

from __future__ import annotations

import math
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import ErrorKind, Failure, GatewayError

# Kinds whose HTTP answer carries Retry-After when the failure knows a delay.
RETRY_AFTER_KINDS = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.UPSTREAM_UNAVAILABLE})


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes without reading them all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise GatewayError.of(ErrorKind.TOO_LARGE, f"Request body is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise GatewayError.of(ErrorKind.TOO_LARGE, f"Request body is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(body: bytes) -> Any:
    """Parse JSON; nesting deeper than 1024 levels is refused (orjson's bound)."""
    if not body.strip():
        raise GatewayError.of(ErrorKind.MALFORMED, "Request body is empty; a JSON document is expected")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise GatewayError.of(ErrorKind.MALFORMED, f"Request body is not valid JSON: {exc}") from None


def is_json_content_type(request: Request) -> bool:
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )


def dumps(data: Any) -> str:
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS).decode()


def retry_after_headers(failure: Failure | None) -> dict[str, str]:
    """`Retry-After` (whole seconds, at least 1) for a failure that says when to come back."""
    if failure is None or failure.retry_after_ms is None or failure.kind not in RETRY_AFTER_KINDS:
        return {}
    return {"Retry-After": str(max(1, math.ceil(failure.retry_after_ms / 1000)))}
