"""Spans and log correlation in process, with the real SDK and its in-memory exporter.

The gateway is the real app behind `RequestTraceMiddleware` (what `toolplex serve` installs),
spoken to over httpx's ASGI transport: sampling, the trace id on log lines, and what tracing
off leaves out of the pipeline.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import structlog
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import LogCapture

from adapters.oxp.codec import w3c_trace_id
from gateway import tracing
from gateway.app import create_app
from gateway.config import parse_config
from gateway.config.models import TracingSettings
from gateway.observability import add_trace_id, redact_event
from tests.support import BUILTIN_BACKENDS

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@asynccontextmanager
async def traced_client(yaml: str = BUILTIN_BACKENDS) -> AsyncIterator[httpx.AsyncClient]:
    config = parse_config(textwrap.dedent(yaml), "test.yaml", env=dict(os.environ))
    app = create_app(config)
    async with app.lifespan():
        transport = httpx.ASGITransport(app=tracing.RequestTraceMiddleware(app))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=30) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


@pytest.fixture
def exporter(request: pytest.FixtureRequest) -> Iterator[InMemorySpanExporter]:
    """Tracing on for the test (more settings by indirect parametrization), its spans kept in memory."""
    spans = InMemorySpanExporter()
    tracing.configure(TracingSettings(enabled=True, **getattr(request, "param", {})), exporter=spans)
    try:
        yield spans
    finally:
        tracing.shutdown()


@pytest.fixture
def lines() -> Iterator[list[dict[str, Any]]]:
    """Events as the gateway writes them: its trace id and redaction processors, then a capture."""
    saved = structlog.get_config()
    capture = LogCapture()
    structlog.configure(
        processors=[add_trace_id, redact_event, capture], wrapper_class=structlog.make_filtering_bound_logger(0)
    )
    try:
        yield capture.entries
    finally:
        structlog.configure(**saved)


def rpc(tool: str, arguments: dict[str, Any], request_id: str = "r-1") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tool.execute",
        "params": {"tool": tool, "parameters": arguments},
    }


@pytest.mark.parametrize("exporter", [{"sample_ratio": 0.0}], indirect=True)
async def test_a_ratio_of_zero_records_no_new_trace_but_follows_a_sampled_client(
    exporter: InMemorySpanExporter, lines: list[dict[str, Any]]
) -> None:
    async with traced_client() as client:
        await client.post("/rpc", json=rpc("Math_Add", {"a": 1, "b": 2}))
        assert exporter.get_finished_spans() == ()
        await client.post(
            "/rpc", json=rpc("Math_Add", {"a": 1, "b": 2}), headers={"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}
        )
        await client.post(
            "/rpc",
            json=rpc("Math_Add", {"a": 1, "b": 2}),
            headers={"traceparent": f"00-{TRACE[::-1]}-00f067aa0ba902b7-00"},
        )
    [span] = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == TRACE and span.name == "call Math_Add"
    calls = [e for e in lines if e["event"] == "call"]
    assert len(calls) == 3
    # unsampled traces still have an id, and the log lines carry it
    assert calls[1]["trace_id"] == TRACE and calls[2]["trace_id"] == TRACE[::-1]
    assert len(calls[0]["trace_id"]) == 32 and calls[0]["trace_id"] != calls[0]["call_id"]
    assert {e["client_trace_id"] for e in calls} == {"r-1"}  # JSON-RPC's request id, kept beside the trace


async def test_a_batch_gives_each_call_its_own_span_in_the_clients_trace(exporter: InMemorySpanExporter) -> None:
    batch = [rpc("Math_Add", {"a": 1, "b": i}, f"r-{i}") for i in range(3)]
    async with traced_client() as client:
        answer = await client.post("/rpc", json=batch, headers={"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"})
    assert answer.status_code == 200 and len(answer.json()) == 3
    spans = exporter.get_finished_spans()
    assert len(spans) == 3 and len({s.context.span_id for s in spans}) == 3
    assert {format(s.context.trace_id, "032x") for s in spans} == {TRACE}
    assert {s.parent.span_id for s in spans if s.parent} == {0x00F067AA0BA902B7}


async def test_tracing_off_adds_no_stage_and_no_upstream_hook_and_logs_the_call_id(lines: list[dict[str, Any]]) -> None:
    assert not tracing.enabled()
    assert tracing.call_stages() == () and tracing.upstream_hooks() == {}
    async with traced_client() as client:
        await client.post(
            "/rpc", json=rpc("Math_Add", {"a": 1, "b": 2}), headers={"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}
        )
        stages = [getattr(s, "__name__", "") for s in client.app.gateway.pipeline.stages]  # type: ignore[attr-defined]
    assert stages[0] == "_observe"
    [call] = [e for e in lines if e["event"] == "call"]
    assert call["trace_id"] == call["call_id"] and call["client_trace_id"] == "r-1"  # no trace: the call id


async def test_lines_logged_inside_a_call_carry_its_trace(
    exporter: InMemorySpanExporter, lines: list[dict[str, Any]]
) -> None:
    async with traced_client() as client:
        answer = await client.post(
            "/tools/call",
            json={"tool_id": "Math.Divide", "input": {"a": 1, "b": 0}, "trace_id": "checkout-7"},
        )
    assert answer.json()["success"] is False
    derived = w3c_trace_id("checkout-7")
    assert {format(s.context.trace_id, "032x") for s in exporter.get_finished_spans()} == {derived}
    assert [e["trace_id"] for e in lines if e["event"] == "call"] == [derived]


def test_oxp_trace_ids_become_w3c_trace_ids() -> None:
    assert w3c_trace_id(None) is None
    assert w3c_trace_id(TRACE) == TRACE
    assert w3c_trace_id("4BF92F35-77B3-4DA6-A3CE-929D0E0E4736") == TRACE  # a UUID, as many clients send it
    assert w3c_trace_id("0" * 32) != "0" * 32  # the invalid all-zero id is hashed like any other text
    assert w3c_trace_id("t1") == w3c_trace_id("t1") != w3c_trace_id("t2")
    assert all(len(w3c_trace_id(t) or "") == 32 for t in ("t1", "x" * 256, "é"))


@pytest.mark.usefixtures("exporter")
def test_a_front_handing_a_bad_trace_id_is_told() -> None:
    with pytest.raises(ValueError, match="not a W3C trace id"):
        tracing.joined("not-hex")
    with pytest.raises(ValueError, match="not a W3C trace id"):
        tracing.joined("0" * 32)
    with tracing.joined(TRACE):
        pass


def test_an_enabled_tracing_section_is_validated() -> None:
    parsed = parse_config("tracing: {enabled: true, sample_ratio: 0.5}\n", "t.yaml", env={})
    assert parsed.settings.tracing.sample_ratio == 0.5 and parsed.settings.tracing.endpoint == "http://127.0.0.1:4318"
    for bad in ("{sample_ratio: 2}", "{endpoint: 'ftp://x'}", "{service_name: ''}"):
        with pytest.raises(Exception, match="tracing"):
            parse_config(f"tracing: {bad}\n", "t.yaml", env={})
