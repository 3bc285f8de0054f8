"""Structured JSON logs; secrets are redacted before anything is written, from every logger.

The rule itself (by key and by shape, and the configured secret values) is
`gateway.redaction`'s, shared with the failures clients are told about; this module applies
it to every structlog event and every standard `logging` record (ours, httpx, httpcore,
uvicorn, tracebacks).

Text from the standard `logging` module is redacted as each record is created (a record
factory), so it holds for handlers installed later too (uvicorn installs its own).
httpx and httpcore log each request URL at INFO and headers at DEBUG: they are kept at
WARNING whatever the gateway's level (and so is watchfiles, whose INFO line per file change
would feed itself when the log is written next to the watched configuration).

Every line is one JSON object, whichever logger wrote it: structlog events as they are,
standard `logging` records (uvicorn, libraries) through `JsonFormatter`, uvicorn's access
log as `http_request` events with their fields. Each line made while serving a request
carries `trace_id` (`gateway.tracing.log_trace_id`: the trace's id when tracing is on,
else the call's id); a different id the client gave for correlation stays as `client_trace_id`.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
import structlog

from gateway.redaction import (  # re-exported: the logging side of the one redaction rule
    _KNOWN,
    MAX_DEPTH,
    REDACTED,
    cannot_hold_shapes,
    is_secret_key,
    redact_shapes,
    redact_text,
    redact_value,
    register_secrets,
)
from gateway.tracing import log_trace_id

__all__ = [
    "MAX_DEPTH",
    "REDACTED",
    "cannot_hold_shapes",
    "is_secret_key",
    "redact_shapes",
    "redact_text",
    "redact_value",
    "register_secrets",
]

QUIET_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2", "hpack", "watchfiles")  # watchfiles: a line per change
ACCESS_LOGGER = "uvicorn.access"
# uvicorn's access record: '%s - "%s %s HTTP/%s" %d' % (client, method, path and query, version, status)
ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")
_SCALARS = (bool, int, float)


@functools.lru_cache(maxsize=1024)  # an event's keys are one of a few fixed sets (one per log call site)
def _any_secret_key(keys: tuple[str, ...]) -> bool:
    return any(is_secret_key(key) for key in keys)


def plain_event(event: dict[str, Any]) -> bool:
    """True when nothing in the event can need redaction: no credential-like key, only scalars
    and strings, and the strings (checked as one) hold no credential shape and no known secret."""
    if _any_secret_key(tuple(event)):
        return False
    texts = []
    for value in event.values():
        if type(value) is str:
            texts.append(value)
        elif value is not None and not isinstance(value, _SCALARS):
            return False
    joined = "\x00".join(texts)  # no shape or secret spans the separator: each needs its own characters
    return cannot_hold_shapes(joined) and not _KNOWN.found_in(joined)


def redact_event(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: runs after exceptions are formatted, so tracebacks are covered too."""
    if plain_event(event):  # most events (every call's): one check instead of one per field
        return event
    for key, value in event.items():  # values are replaced in place: the keys do not change
        if value is None:
            continue
        if is_secret_key(key):
            event[key] = REDACTED
        elif type(value) is str:
            event[key] = redact_text(value)
        elif not isinstance(value, _SCALARS):
            event[key] = redact_value(value)
    return event


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """A stdlib record with its message, exception and stack text redacted (and frozen as text).

    Done once per record: a record whose message is still the text this left (a handler's
    filter asking again) is returned as it is.
    """
    if record.args is None and getattr(record, _REDACTED, None) is record.msg:
        return record
    fields = _access_fields(record)
    if fields is not None:  # uvicorn's own format string, filled with the redacted values
        record.fields = fields
        message = str(record.msg) % tuple(fields.values())
    else:
        try:
            message = redact_text(record.getMessage())
        except Exception:  # a bad format string in a library: log what we have, redacted
            message = redact_text(f"{record.msg!r} {record.args!r}")
    record.msg = message
    record.args = None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact_text(record.exc_text)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)
    setattr(record, _REDACTED, message)
    return record


_REDACTED = "_toolplex_redacted"  # the message text redact_record left on a record
_ADDRESS = re.compile(r"[0-9A-Fa-f.:\[\]]{1,64}")  # ip:port, v4 or v6: no credential shape fits in these characters


def _access_fields(record: logging.LogRecord) -> dict[str, Any] | None:
    """uvicorn's access record as fields (client, method, path, http_version, status), each redacted."""
    args = record.args
    if record.name != ACCESS_LOGGER or not isinstance(args, tuple) or len(args) != len(ACCESS_FIELDS):
        return None
    return access_fields(args)


def access_fields(args: tuple[Any, ...]) -> dict[str, Any]:
    """An access line's values (client, method, path, http_version, status) as fields, each redacted."""
    fields: dict[str, Any] = {}
    for name, value in zip(ACCESS_FIELDS, args, strict=True):
        if isinstance(value, int):
            fields[name] = value
            continue
        text = str(value)
        fields[name] = _KNOWN.replace(text) if _ADDRESS.fullmatch(text) else redact_text(text)
    return fields


class RedactingFilter(logging.Filter):
    """A logging filter for handlers someone adds by hand; the record factory already covers the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


_FACTORY_LOCK = threading.Lock()
_installed = False


def install_record_redaction() -> None:
    """Redact every stdlib log record as it is created, whichever logger and handler it goes to."""
    global _installed
    with _FACTORY_LOCK:
        if _installed:
            return
        make = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            return redact_record(make(*args, **kwargs))

        logging.setLogRecordFactory(factory)
        _installed = True


def config_secrets(data: Any, key: str = "", depth: int = 0) -> list[str]:
    """Every credential a configuration holds: values under credential-like keys, backend
    header values, and passwords (and tokens) inside URLs."""
    found: list[str] = []
    if depth > 32:
        return found
    if isinstance(data, Mapping):
        for k, v in data.items():
            name = str(k).lower()
            if name == "headers" and isinstance(v, Mapping):
                found.extend(str(h) for h in v.values() if isinstance(h, str))
                found.extend(_credential_parts(h) for h in v.values() if isinstance(h, str))
            elif name.endswith("_env"):  # the name of a variable holding a secret, not the secret
                continue
            elif isinstance(v, str) and (is_secret_key(k) or name == "key"):
                found.append(v)
            elif name == "secrets" and isinstance(v, Mapping):  # name -> value
                found.extend(_strings(v))
            else:
                found.extend(config_secrets(v, name, depth + 1))
    elif isinstance(data, list):
        for item in data:
            found.extend(config_secrets(item, key, depth + 1))
    elif isinstance(data, str) and "://" in data:
        found.extend(_url_secrets(data))
    return [f for f in found if f]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _credential_parts(header: str) -> str:
    """`Bearer abc` -> `abc`: the credential alone, as it may appear elsewhere."""
    _scheme, _, rest = header.strip().partition(" ")
    return rest.strip() if rest else ""


def _url_secrets(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    values = [password] if password else []
    for pair in parts.query.split("&"):
        _, equals, value = pair.partition("=")
        if equals and value:
            values.append(value)
    return [v for v in values if v]


def quiet_libraries() -> None:
    """httpx/httpcore log URLs (and, at DEBUG, headers) of every upstream request: warnings only."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def add_trace_id(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: the line's `trace_id` (see the module docstring); before redaction."""
    trace_id = log_trace_id()
    if trace_id is None:
        return event
    given = event.get("trace_id")
    if given is not None and given != trace_id:
        event["client_trace_id"] = given
    event["trace_id"] = trace_id
    return event


_SECOND: tuple[int, str] = (0, "1970-01-01T00:00:00")  # the last whole second formatted, and its text


def _timestamp(created: float) -> str:
    """ISO 8601 in UTC with microseconds and a Z, as structlog's TimeStamper(fmt="iso", utc=True) writes it
    (except that a whole second keeps its `.000000`). Two lines per request are stamped: the date and time
    part is formatted once per second (a third of the cost of formatting it every time)."""
    global _SECOND
    seconds = int(created)
    micro = round((created - seconds) * 1e6)  # rounded as `datetime.fromtimestamp` rounds (a float's .000001
    if micro == 1_000_000:  # is 0.00000095...)
        seconds, micro = seconds + 1, 0
    second, text = _SECOND
    if seconds != second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _SECOND = (seconds, text)  # one tuple, replaced whole: a thread reading it sees one or the other
    return f"{text}.{micro:06d}Z"


def add_timestamp(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: the line's `timestamp`, as the access and library lines write it (`_timestamp`)."""
    event["timestamp"] = _timestamp(time.time())
    return event


class JsonFormatter(logging.Formatter):
    """Standard `logging` records (uvicorn, libraries) as the same JSON lines as structlog's events.

    The text was redacted when the record was made (`install_record_redaction`); uvicorn's
    access records become `http_request` events with `client`, `method`, `path`,
    `http_version` and `status`.
    """

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        event: dict[str, Any] = {"event": "http_request", **fields} if fields else {"event": record.getMessage()}
        event["logger"] = record.name
        trace_id = log_trace_id()
        if trace_id is not None:
            event["trace_id"] = trace_id
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(self.formatException(record.exc_info))
        if record.exc_text:
            event["exception"] = record.exc_text
        if record.stack_info:
            event["stack"] = record.stack_info
        event["level"] = record.levelname.lower()
        event["timestamp"] = _timestamp(record.created)
        return _json_line(event)


def _json_line(event: Any, **_options: Any) -> str:
    """orjson instead of json.dumps for every log line; what it cannot encode is written as text."""
    return orjson.dumps(event, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def configure_logging(level: str = "info") -> None:
    numeric = getattr(logging, level.upper(), logging.INFO)
    install_record_redaction()
    # What no line of ours shows, not gathered per record (the logging HOWTO's "Optimization"):
    # the caller's file and line (a walk up the stack), thread, process and multiprocessing names.
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging.basicConfig(stream=sys.stderr, level=numeric, force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())
        handler.setFormatter(JsonFormatter())
    for name in ("uvicorn", "uvicorn.error", ACCESS_LOGGER):  # uvicorn's own dictConfig, if any ran, is undone:
        own = logging.getLogger(name)  # its lines reach the JSON handler above, never a plain-text one
        own.handlers.clear()
        own.propagate = True
        own.disabled = False
    quiet_libraries()
    processors = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.format_exc_info,
        add_trace_id,  # before redaction: a client's own id moved to client_trace_id is redacted too
        redact_event,  # before the level and time stamp: those are ours, and need no redaction
        structlog.processors.add_log_level,
        add_timestamp,
        structlog.processors.JSONRenderer(serializer=_json_line),
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    global _OWN
    _OWN = OwnChain(tuple(processors), numeric)


@dataclass(frozen=True)
class OwnChain:
    """The processors `configure_logging` gave structlog (as the list held them: structlog.testing.capture_logs
    changes it in place), and its level."""

    processors: tuple[Any, ...]
    level: int


_OWN: OwnChain | None = None


def own_chain(config: Mapping[str, Any]) -> OwnChain | None:
    """`configure_logging`'s chain, while structlog's configuration (`structlog.get_config()`) is still the one
    it installed; None under any other (a test capturing events, an operator's own set-up).

    A line logged on every call (`gateway.middleware.CallLog`) goes through these very processors itself,
    without structlog's bound-logger wrapper around them, which cost a tenth of an in-process call."""
    own, current = _OWN, config["processors"]
    if own is None or len(current) != len(own.processors):
        return None
    return own if all(a is b for a, b in zip(current, own.processors, strict=True)) else None
