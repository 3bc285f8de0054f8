"""HTTP plumbing every front shares: bounded body reading, JSON in and out, answers passed on as they arrive."""

from __future__ import annotations

import math
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import httpx
import orjson
import structlog
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.config.models import LimitsSettings
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.wire import WireRequest

log = structlog.get_logger("toolplex.http")

# Kinds whose HTTP answer carries Retry-After when the failure knows a delay.
RETRY_AFTER_KINDS = frozenset({ErrorKind.RATE_LIMITED, ErrorKind.UPSTREAM_UNAVAILABLE})


async def read_body(request: Request | WireRequest, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes without reading them all (`WireRequest.read`, the one
    bounded reader: a Starlette request's body is read from its `receive` the same way)."""
    wire = request if isinstance(request, WireRequest) else WireRequest(request.scope, request.receive)
    return await wire.read(limit)


DEFAULT_MAX_JSON_DEPTH = LimitsSettings().max_json_depth  # the default lives in the model


def parse_json(body: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> Any:
    """Parse JSON nested at most `max_depth` arrays/objects deep.

    Deeper documents are refused here, as malformed, so that nothing after the
    parser (validation, fingerprints, recursion in codecs) ever meets them.
    """
    if not body.strip():
        raise GatewayError.of(ErrorKind.MALFORMED, "Request body is empty; a JSON document is expected")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit exceeded" in str(exc):  # orjson's own bound, above any max_depth allowed
            raise _too_deep(max_depth) from None
        raise GatewayError.of(ErrorKind.MALFORMED, f"Request body is not valid JSON: {exc}") from None
    few_brackets = body.count(b"[") + body.count(b"{") <= max_depth  # the usual case: nothing to walk
    if not few_brackets and nesting_exceeds(document, max_depth):
        raise _too_deep(max_depth)
    return document


def nesting_exceeds(document: Any, max_depth: int) -> bool:
    """True when arrays/objects nest more than `max_depth` levels (a scalar is depth 0); no recursion."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _too_deep(max_depth: int) -> GatewayError:
    return GatewayError.of(
        ErrorKind.MALFORMED,
        f"Request body nests arrays/objects more than {max_depth} levels deep (limits.max_json_depth)",
    )


# The body types a web page may POST to any origin without a CORS preflight (the Fetch
# standard's "CORS-safelisted" request types). A JSON endpoint that accepted them could be
# driven by any page the developer visits; they are refused with 415 instead.
BROWSER_FORM_TYPES = frozenset({"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"})
BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def browser_form_content_type(request: Request | WireRequest) -> str | None:
    """The media type when a request with a body declares a type a browser form can send, else None.

    A missing Content-Type is not a form (real OXP, JSON-RPC and ToolServerNode clients send
    none), and GET/HEAD/OPTIONS carry no body to refuse.
    """
    if request.method in BODYLESS_METHODS:
        return None
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media if media in BROWSER_FORM_TYPES else None


def unsupported_media(media: str) -> Failure:
    """The failure a front answers with 415, in its own error format, for a browser-form body."""
    return Failure(
        kind=ErrorKind.MALFORMED,
        message=f"Content-Type {media} is not accepted here; send the body as application/json",
    )


def is_json_content_type(request: Request | WireRequest) -> bool:
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


class PassedOnResponse(StreamingResponse):
    """An answer streamed from another server (an upstream's file, a replica's answer), whose source is
    closed however the answer ends: sent whole, its client gone, or the source failing mid-way.

    Starlette's `background` task is skipped when the source raises (and, under ASGI 2.4, when the
    client goes away), which would leave the source's connection open until garbage collection. A
    source that fails once the head is sent cannot change the status any more: the answer is left
    incomplete (the server then closes the connection), so the client sees a cut answer, never a
    whole-looking one, and the reason is logged (`answer_cut`). `raw_headers` are sent as given.
    """

    def __init__(
        self,
        content: AsyncIterable[bytes],
        *,
        status_code: int,
        raw_headers: list[tuple[bytes, bytes]],
        close: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(content, status_code=status_code)
        self.raw_headers = raw_headers
        self.close = close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except (GatewayError, httpx.HTTPError) as exc:
            reason = exc.failure.message if isinstance(exc, GatewayError) else type(exc).__name__
            log.warning("answer_cut", path=scope.get("path"), reason=reason)
        finally:
            await self.close()
