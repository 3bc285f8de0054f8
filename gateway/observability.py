"""Structured JSON logs; secrets are redacted before anything is written."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_SECRET_WORDS = ("secret", "token", "password", "authorization", "api_key", "apikey", "cookie")


def _redact(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    for key in list(event):
        if any(word in key.lower() for word in _SECRET_WORDS) and event[key] is not None:
            event[key] = "[redacted]"
    return event


def configure_logging(level: str = "info") -> None:
    numeric = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(stream=sys.stderr, level=numeric, format="%(message)s", force=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
