from __future__ import annotations

import structlog


def pytest_configure() -> None:
    # Keep test output readable: call events go to structlog's default printer at warning level.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
