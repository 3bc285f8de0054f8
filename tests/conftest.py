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
