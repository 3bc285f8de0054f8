"""The access log: one `http_request` line per answer, written by `gateway.edge.Edge` as its head leaves.

uvicorn used to write it (`uvicorn.access`, a `logging` record made, redacted, filtered and
formatted per request). The line is the same: the `uvicorn.access` logger's fields, redacted
(`gateway.observability.access_fields`), the request's `trace_id`, level and time stamp. When
the records would only reach the gateway's own JSON handlers (`configure_logging`'s), the line is
written to their streams directly; any other set-up (a handler added by hand, a test capturing
records) gets a `logging` record, as from uvicorn.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from typing import Any

from starlette.types import Message, Scope, Send

from gateway.observability import ACCESS_LOGGER, JsonFormatter, RedactingFilter, _json_line, _timestamp, access_fields
from gateway.tracing import log_trace_id

ACCESS = logging.getLogger(ACCESS_LOGGER)
FORMAT = '%s - "%s %s HTTP/%s" %d'  # uvicorn's


def logging_send(scope: Scope, send: Send) -> Send:
    """`send`, writing the access line as the answer's head goes out (as uvicorn did)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            write(scope, message["status"])
        await send(message)

    return sending


def write(scope: Scope, status: int) -> None:
    if not ACCESS.isEnabledFor(logging.INFO):
        return
    args = (_client(scope), scope["method"], _path(scope), scope["http_version"], status)
    handlers = _direct_handlers()
    if handlers is None:
        ACCESS.info(FORMAT, *args)
        return
    event: dict[str, Any] = {"event": "http_request", **access_fields(args), "logger": ACCESS_LOGGER}
    trace_id = log_trace_id()
    if trace_id is not None:
        event["trace_id"] = trace_id
    event["level"] = "info"
    event["timestamp"] = _timestamp(time.time())
    line = _json_line(event)
    for handler in handlers:
        handler.acquire()
        try:
            handler.stream.write(line + handler.terminator)
            handler.flush()
        finally:
            handler.release()


def _direct_handlers() -> list[logging.StreamHandler[Any]] | None:
    """The handlers a `uvicorn.access` record would reach, when each is one of ours; else None."""
    if ACCESS.filters:
        return None
    found: list[logging.StreamHandler[Any]] = []
    logger: logging.Logger | None = ACCESS
    while logger is not None:
        for handler in logger.handlers:
            if (
                type(handler) is not logging.StreamHandler
                or type(handler.formatter) is not JsonFormatter
                or handler.level > logging.INFO
                or not all(type(f) is RedactingFilter for f in handler.filters)
            ):
                return None
            found.append(handler)
        if not logger.propagate:
            break
        logger = logger.parent
    return found


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return "%s:%d" % tuple(client) if client else ""  # noqa: UP031 (uvicorn's own format)


def _path(scope: Scope) -> str:
    path = urllib.parse.quote(scope["path"])
    query = scope["query_string"]
    return f"{path}?{query.decode('ascii')}" if query else path
