"""Every log line is JSON, from structlog and from the standard `logging` module alike, with the
trace id of what is being served and nothing a client could use to smuggle a secret through."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog

from gateway import tracing
from gateway.middleware import CallLog
from gateway.model import Call, CallContext, Outcome, Principal
from gateway.observability import REDACTED, _timestamp, configure_logging, register_secrets

SECRET = "planted-secret-7c1e9a2b"


@pytest.fixture
def written(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Sets the gateway's logging up as `toolplex serve` does (in the test itself: capsys' stream is
    only there then); returns a function reading the lines written since."""
    register_secrets([SECRET])

    def start() -> Any:
        configure_logging("info")
        return lambda: [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.strip()]

    try:
        yield start
    finally:  # the capture stream closes after this test: nothing may keep writing to it
        structlog.reset_defaults()
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
        logging.getLogger().handlers.clear()


def test_standard_logging_records_are_json_lines_with_the_call_they_serve(written: Any) -> None:
    read = written()
    token = tracing.mark_call("c0ffee")
    try:
        logging.getLogger("some.library").warning("retrying %s with key %s", "http://u:pw@host/x?token=abc", SECRET)
        try:
            raise RuntimeError(f"boom with {SECRET}")
        except RuntimeError:
            logging.getLogger("some.library").exception("it failed")
    finally:
        tracing.unmark_call(token)
    logging.getLogger("some.library").warning("outside any call")
    warned, failed, outside = read()
    assert warned["logger"] == "some.library" and warned["level"] == "warning" and warned["trace_id"] == "c0ffee"
    assert warned["event"] == f"retrying http://{REDACTED}@host/x?token={REDACTED} with key {REDACTED}"
    assert failed["level"] == "error" and "RuntimeError: boom with [redacted]" in failed["exception"]
    assert SECRET not in json.dumps([warned, failed, outside])
    assert "trace_id" not in outside and outside["timestamp"].endswith("Z")


def test_uvicorns_access_record_becomes_an_http_request_event(written: Any) -> None:
    read = written()
    request = tracing.RequestTrace()
    request.call_id = "c0ffee"
    token = tracing.REQUEST.set(request)
    try:
        access = logging.getLogger("uvicorn.access")
        access.setLevel(logging.INFO)
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:50000", "GET", f"/tools?token={SECRET}&x=1", "1.1", 200)
        access.info('%s - "%s %s HTTP/%s" %d', f"{SECRET}:1", "GET", "/healthz", "1.1", 200)  # a forged client
    finally:
        tracing.REQUEST.reset(token)
    [line, forged] = read()
    assert line == {
        "event": "http_request",
        "client": "127.0.0.1:50000",
        "method": "GET",
        "path": f"/tools?token={REDACTED}&x={REDACTED}",
        "http_version": "1.1",
        "status": 200,
        "logger": "uvicorn.access",
        "trace_id": "c0ffee",  # the call the request carried, though the line is written after it ended
        "level": "info",
        "timestamp": line["timestamp"],
    }
    assert forged["client"] == f"{REDACTED}:1"


def test_a_client_correlation_id_moved_aside_is_still_redacted(written: Any) -> None:
    read = written()
    token = tracing.mark_call("c0ffee")
    try:
        structlog.get_logger("toolplex.call").info("call", trace_id=f"Bearer {SECRET}", tool="Math_Add")
    finally:
        tracing.unmark_call(token)
    [line] = read()
    assert line["trace_id"] == "c0ffee" and line["client_trace_id"] == f"Bearer {REDACTED}"


async def test_the_call_log_line_is_the_one_structlog_writes_through_the_same_processors(written: Any) -> None:
    """`CallLog` runs the gateway's own processors itself (without structlog's wrapper, a tenth of an
    in-process call): the line is byte for byte structlog's, redaction and trace id included."""
    read = written()
    principal = Principal(f"key {SECRET}")
    context = CallContext(call_id="c-1", front="oxp", principal=principal, trace_id=f"Bearer {SECRET}")
    call = Call("Math_Add", {"a": 1}, context, backend="math")
    outcome = Outcome(call_id="c-1", spec=None, value=2, duration_ms=1.25)
    token = tracing.mark_call("c0ffee")
    try:
        await CallLog().after(call, outcome)
        structlog.get_logger("toolplex.call").info(
            "call",
            call_id="c-1",
            front="oxp",
            kind="tool",
            tool="Math_Add",
            version=None,
            backend="math",
            duration_ms=1.25,
            outcome="ok",
            cached=False,
            principal=f"key {SECRET}",
            session_id=None,
            message_id=None,
            trace_id=f"Bearer {SECRET}",
        )
    finally:
        tracing.unmark_call(token)
    direct, through_structlog = read()
    assert direct.pop("timestamp").endswith("Z") and through_structlog.pop("timestamp").endswith("Z")
    assert json.dumps(direct) == json.dumps(through_structlog)  # the same keys in the same order, the same values
    assert direct["trace_id"] == "c0ffee" and direct["client_trace_id"] == f"Bearer {REDACTED}"
    assert SECRET not in json.dumps(direct)


async def test_the_call_log_writes_nothing_above_info_and_follows_another_set_up(written: Any) -> None:
    read = written()
    configure_logging("warning")
    call = Call("Math_Add", {}, CallContext(call_id="c-2"))
    log = CallLog()
    await log.after(call, Outcome(call_id="c-2", spec=None, value=1))
    assert read() == []
    configure_logging("info")
    with structlog.testing.capture_logs() as captured:  # a set-up of someone else's: structlog as configured
        await log.after(call, Outcome(call_id="c-2", spec=None, value=1))
    assert [(e["event"], e["call_id"], e["outcome"]) for e in captured] == [("call", "c-2", "ok")]


@pytest.mark.parametrize(
    "created",
    [0.0, 1_764_355_200.5, 1_764_355_200.999999, 1_764_355_200.9999996, 1_764_355_201.000001, 4_102_444_799.75],
)
def test_time_stamps_are_iso_utc_with_microseconds_whatever_second_was_formatted_last(created: float) -> None:
    expected = datetime.fromtimestamp(created, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert _timestamp(created) == expected
    assert _timestamp(created + 3600.0) != expected  # another second, formatted anew
    assert _timestamp(created) == expected  # and back
