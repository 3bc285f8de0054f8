"""Secrets never reach the logs: keys that name credentials are redacted."""

from __future__ import annotations

import json
import logging

import pytest
import structlog

from gateway.observability import configure_logging


def test_secret_looking_keys_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")
    try:
        structlog.get_logger("t").info(
            "event", authorization="Bearer abc", api_key="k", worker_secret="s", token=None, tool="Math_Add"
        )
        line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    finally:  # the capture stream closes after this test: nothing may keep writing to it
        structlog.reset_defaults()
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
        logging.getLogger().handlers.clear()
    assert line["authorization"] == line["api_key"] == line["worker_secret"] == "[redacted]"
    assert line["token"] is None and line["tool"] == "Math_Add"
