"""Traces end to end: a real `toolplex serve` exports spans by OTLP/HTTP to a real collector on loopback.

Clients of every front send W3C `traceparent`; the gateway's call span joins their trace,
and the upstream (the collector's `/echo`, an `http` tool) receives a `traceparent` naming
that span. OXP's `trace_id` is honoured as the trace id. The spans arrive when the gateway
stops (the exporter sends what is left at exit); the logs carry the same trace ids.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e import front_clients
from tests.support import python_server, served_gateway

COLLECTOR_KEY_ENV = "TOOLPLEX_TEST_COLLECTOR_KEY"
STATUS_UNSET, STATUS_ERROR = 0, 2
SPAN_KIND_SERVER = 2


def config(collector: int) -> str:
    return textwrap.dedent(f"""
        tracing:
          enabled: true
          endpoint: http://127.0.0.1:{collector}
          service_name: toolplex-under-test
          headers: {{x-collector-key: "${{{COLLECTOR_KEY_ENV}}}"}}
        backends:
          - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
          - name: echo
            kind: http
            url: http://127.0.0.1:{collector}
            toolkit: Echo
            tools:
              - {{name: Headers, path: /echo, input_schema: {{type: object, properties: {{}}}}}}
    """)


def traceparent(trace_id: str, span_id: str = "00f067aa0ba902b7") -> str:
    return f"00-{trace_id}-{span_id}-01"


def new_trace_id() -> str:
    return secrets.token_hex(16)


def parts(header: str) -> tuple[str, str]:
    """(trace id, parent span id) of a sampled traceparent."""
    version, trace_id, span_id, flags = header.split("-")
    assert (version, len(trace_id), len(span_id), int(flags, 16) & 1) == ("00", 32, 16, 1), header
    return trace_id, span_id


class Run:
    """What one gateway run produced: the answers seen by the test, then the spans and the log."""

    def __init__(self) -> None:
        self.echoed: dict[str, tuple[str, str]] = {}  # front -> (client trace id, traceparent the upstream got)
        self.oxp: dict[str, str] = {}  # what -> call_id
        self.spans: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        self.log_text = ""
        self.key = ""

    def span(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        found = [s for s in self.spans if predicate(s)]
        assert len(found) == 1, (len(found), [s["name"] for s in self.spans])
        return found[0]

    def call_span(self, call_id: str) -> dict[str, Any]:
        return self.span(lambda s: s["attributes"].get("toolplex.call_id") == call_id)


def oxp_call(base: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    answer = httpx.post(f"{base}/tools/call", json=body, headers=headers or {}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One gateway, called through every front, then stopped so that its spans are sent."""
    tmp = tmp_path_factory.mktemp("tracing")
    result = Run()
    result.key = f"collector-key-{secrets.token_hex(8)}"
    with python_server("tests.observability.collector") as collector:
        path = tmp / "gateway.yaml"
        path.write_text(config(collector))
        log_path = tmp / "gateway.log"
        env = {COLLECTOR_KEY_ENV: result.key}
        with served_gateway(path, env=env, log_path=log_path) as (base, _process):
            for name, call in front_clients.FRONTS.items():
                trace_id = new_trace_id()
                with httpx.Client(base_url=base, headers={"traceparent": traceparent(trace_id)}, timeout=30) as http:
                    answer = call(http, "Echo_Headers", {})
                assert answer.ok, (name, answer)
                result.echoed[name] = (trace_id, answer.value["traceparent"])
            result.oxp["hex"] = oxp_call(base, {"tool_id": "Math.Add", "input": {"a": 1, "b": 2}, "trace_id": HEX})[
                "call_id"
            ]
            for index in (1, 2):
                body = {"tool_id": "Echo.Headers", "trace_id": "order-42"}
                answered = oxp_call(base, body)
                result.oxp[f"named{index}"] = answered["call_id"]
                result.echoed[f"named{index}"] = ("", answered["value"]["traceparent"])
            header_trace = new_trace_id()
            both = {"tool_id": "Math.Add", "input": {"a": 1, "b": 1}, "trace_id": HEX2}
            result.oxp["body_wins"] = oxp_call(base, both, {"traceparent": traceparent(header_trace)})["call_id"]
            same = {"tool_id": "Math.Add", "input": {"a": 2, "b": 2}, "trace_id": HEX3.upper()}
            result.oxp["same_trace"] = oxp_call(base, same, {"traceparent": traceparent(HEX3, "1122334455667788")})[
                "call_id"
            ]
            bad = oxp_call(base, {"tool_id": "Echo.Headers"}, {"traceparent": "00-not-a-trace-01"})
            result.oxp["bad_header"] = bad["call_id"]
            result.echoed["bad_header"] = ("", bad["value"]["traceparent"])
            failed = oxp_call(base, {"tool_id": "Math.Divide", "input": {"a": 1, "b": 0}})
            assert failed["success"] is False
            result.oxp["failed"] = failed["call_id"]
            missing = httpx.post(
                f"{base}/rpc",
                json={"jsonrpc": "2.0", "id": "m", "method": "tool.execute", "params": {"tool": "No_Such"}},
                headers={"traceparent": traceparent(HEX4)},
            )
            assert missing.json()["error"]["code"] == -32601
        # stopped: the exporter has sent what was left before the process exited
        result.spans = httpx.get(f"http://127.0.0.1:{collector}/spans", timeout=10).json()
    result.log_text = log_path.read_text()
    result.log = [json.loads(line) for line in result.log_text.splitlines() if line.strip()]
    yield result


HEX = "0af7651916cd43dd8448eb211c80319c"
HEX2 = "5b8efff798038103d269b633813fc60c"
HEX3 = "4bf92f3577b34da6a3ce929d0e0e4736"
HEX4 = "a3ce929d0e0e47364bf92f3577b34da6"


@pytest.mark.parametrize("front", list(front_clients.FRONTS))
def test_a_clients_traceparent_is_the_parent_of_the_call_span_and_reaches_the_upstream(run: Run, front: str) -> None:
    client_trace, received = run.echoed[front]
    trace_id, parent = parts(received)
    assert trace_id == client_trace  # the upstream is in the client's trace
    span = run.span(lambda s: s["trace_id"] == client_trace)
    assert span["parent_span_id"] == "00f067aa0ba902b7"  # the client's span is its parent
    assert parent == span["span_id"]  # and the upstream's parent is the call span
    assert span["name"] == "call Echo_Headers" and span["kind"] == SPAN_KIND_SERVER
    attributes = span["attributes"]
    assert attributes["toolplex.front"] == front
    assert (attributes["toolplex.tool"], attributes["toolplex.tool.version"]) == ("Echo_Headers", "1.0.0")
    assert attributes["toolplex.backend"] == "echo"
    assert attributes["toolplex.upstream"].endswith("/echo") and attributes["toolplex.upstream.method"] == "GET"
    assert attributes["toolplex.outcome"] == "ok" and span["status"]["code"] == STATUS_UNSET
    assert [e["name"] for e in span["events"]] == ["upstream_request"]
    assert span["resource"]["service.name"] == "toolplex-under-test"


def test_spans_are_exported_with_the_configured_headers(run: Run) -> None:
    assert run.spans and {s["auth"] for s in run.spans} == {run.key}
    assert run.key not in run.log_text  # an exporter header is a credential: never logged


def test_an_oxp_trace_id_is_the_trace_id(run: Run) -> None:
    span = run.call_span(run.oxp["hex"])
    assert span["trace_id"] == HEX and span["parent_span_id"] == ""
    assert "toolplex.client_trace_id" not in span["attributes"]  # taken as it was sent


def test_an_oxp_trace_id_that_is_no_w3c_id_names_one_trace_for_every_call_sending_it(run: Run) -> None:
    derived = hashlib.sha256(b"order-42").hexdigest()[:32]
    first, second = run.call_span(run.oxp["named1"]), run.call_span(run.oxp["named2"])
    assert first["trace_id"] == second["trace_id"] == derived
    assert first["span_id"] != second["span_id"]
    assert first["attributes"]["toolplex.client_trace_id"] == "order-42"
    for name, span in (("named1", first), ("named2", second)):
        assert parts(run.echoed[name][1]) == (derived, span["span_id"])
        assert run.echoed[name][1].endswith("-01")  # sampled; not flagged random: the client chose the id


def test_an_oxp_trace_id_wins_over_a_traceparent_of_another_trace_and_keeps_one_of_its_own(run: Run) -> None:
    other = run.call_span(run.oxp["body_wins"])
    assert other["trace_id"] == HEX2 and other["parent_span_id"] == ""
    same = run.call_span(run.oxp["same_trace"])  # sent in upper case: the same trace
    assert same["trace_id"] == HEX3 and same["parent_span_id"] == "1122334455667788"


def test_an_invalid_traceparent_is_ignored_and_the_call_starts_a_trace(run: Run) -> None:
    span = run.call_span(run.oxp["bad_header"])
    assert span["parent_span_id"] == "" and int(span["trace_id"], 16)
    assert parts(run.echoed["bad_header"][1]) == (span["trace_id"], span["span_id"])


def test_failures_are_errors_on_the_span_only_when_the_gateway_or_the_tool_failed(run: Run) -> None:
    failed = run.call_span(run.oxp["failed"])
    assert failed["attributes"]["toolplex.outcome"] == "tool_failed"
    assert failed["status"] == {"code": STATUS_ERROR, "message": "tool_failed"}
    missing = run.span(lambda s: s["trace_id"] == HEX4)
    assert missing["name"] == "call (unknown)"  # a client-chosen name never names a span
    assert missing["attributes"]["toolplex.outcome"] == "not_found" and "toolplex.tool" not in missing["attributes"]
    assert missing["status"]["code"] == STATUS_UNSET and "No_Such" not in json.dumps(missing)


def test_every_log_line_is_json_and_carries_the_trace_of_the_call(run: Run) -> None:
    calls = [e for e in run.log if e.get("event") == "call"]
    access = [e for e in run.log if e.get("event") == "http_request"]
    for front, (trace_id, _) in run.echoed.items():
        if front in front_clients.FRONTS:
            [call] = [e for e in calls if e["front"] == front and e["trace_id"] == trace_id]
            assert call["tool"] == "Echo_Headers"
    assert {e["trace_id"] for e in calls} >= {HEX, HEX2, HEX3, HEX4}
    # the access line of each traced request names the trace (written as the answer leaves)
    traced = {e["trace_id"] for e in access if e["method"] == "POST"}
    assert {trace_id for trace_id, _ in run.echoed.values() if trace_id} <= traced
    assert {HEX, HEX2, HEX3, HEX4} <= traced
    for line in access:
        assert line["logger"] == "uvicorn.access" and isinstance(line["status"], int) and line["level"] == "info"
    opentool = [e for e in calls if e["front"] == "opentool"]
    assert all(e["client_trace_id"] for e in opentool)  # the request id the front had taken as trace id


def test_toolplex_check_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    """The OpenTelemetry packages made unimportable in a real process: a clear configuration error."""
    import subprocess
    import sys

    path = tmp_path / "g.yaml"
    path.write_text("tracing: {enabled: true}\n")
    done = subprocess.run(
        [sys.executable, "-m", "tests.observability.without_otel", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "tracing" in done.stderr and "pip install 'toolplex[otel]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_gateway_without_the_extra_serves_every_front_and_never_imports_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support import free_port, stop, wait_for_http

    path = tmp_path / "g.yaml"
    path.write_text(
        "fronts:\n  metrics: {enabled: true}\nmiddleware:\n  - use: gateway.metrics:Metrics\n"
        "backends:\n  - {name: math, kind: python, module: 'adapters.python.toolkits.arithmetic:toolkit'}\n"
    )
    attempts = tmp_path / "attempts"
    port = free_port()
    command = [sys.executable, "-m", "tests.observability.without_otel", "serve", "--config", str(path)]
    with (tmp_path / "log").open("wb") as log:
        process = subprocess.Popen(
            [*command, "--port", str(port), "--no-reload"],
            env={**os.environ, "TOOLPLEX_TEST_OTEL_ATTEMPTS": str(attempts)},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for_http(f"{base}/healthz", process)
            headers = {"traceparent": traceparent(new_trace_id())}
            with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
                for name, call in front_clients.FRONTS.items():
                    assert call(http, "Math_Add", {"a": 1, "b": 2}).value == 3, name
                assert "toolplex_calls_total" in http.get("/metrics").text
        finally:
            stop(process)
    assert not attempts.exists(), attempts.read_text()
    lines = [json.loads(line) for line in (tmp_path / "log").read_text().splitlines()]
    calls = [e for e in lines if e.get("event") == "call"]
    assert len(calls) == 4 and all(e["trace_id"] == e["call_id"] for e in calls)  # no trace: the call id
