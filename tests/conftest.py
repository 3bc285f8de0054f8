from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture


def pytest_configure() -> None:
    # Keep test output readable: call events go to structlog's default printer at warning level.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """A test that sets the gateway's logging up in this process (`configure_logging`, `gateway.cli.main`) writes
    to the stream it had then, often capsys' own, which closes after it: the next test logging a warning on this
    worker would fail writing to it. Each test's logging set-up ends with the test."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    if structlog.get_config() != saved:
        structlog.reset_defaults()
        structlog.configure(**saved)
    if root.handlers != handlers or root.level != level:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.fixture
def events() -> Iterator[list[dict[str, Any]]]:
    """Every structlog event (all levels) emitted during the test."""
    saved = structlog.get_config()
    capture = LogCapture()
    structlog.configure(processors=[capture], wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        yield capture.entries
    finally:
        structlog.configure(**saved)
