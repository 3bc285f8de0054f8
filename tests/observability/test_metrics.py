"""/metrics of a real `toolplex serve`: calls, latency, calls in flight, backends and breakers,
pending calls, sessions and reloads, read with prometheus_client's own parser.

Gate.Hold (tests/state/fixtures/gate.py) keeps a call running until the test opens its gate,
so "in flight" and "pending" are facts the test controls, not timings.
"""

from __future__ import annotations

import signal
import socket
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.isolation.processes import wait_until
from tests.state.redis_server import redis_server
from tests.support import refused_port, served_gateway

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
TEXT_BACKEND = "  - {name: text, kind: python, module: 'adapters.python.toolkits.text:toolkit'}\n"


def samples(text: str) -> Samples:
    """Every sample of an exposition by (name, labels); the parser fails on anything malformed."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(scraped: Samples, name: str, **labels: str) -> float | None:
    return scraped.get((name, frozenset(labels.items())))


def config(dead_port: int, extra_backend: str = "") -> str:
    return (
        textwrap.dedent(f"""
        fronts:
          metrics: {{enabled: true}}
          toolserver: {{patience_s: 0.2}}
        middleware:
          - use: gateway.metrics:Metrics
            options: {{buckets: [0.5, 5]}}
        backends:
          - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
          - {{name: gate, kind: python, module: "tests.state.fixtures.gate:toolkit"}}
          - name: dead
            kind: http
            url: http://127.0.0.1:{dead_port}
            retries: 0
            circuit_breaker: {{failures: 1, cooldown_s: 600}}
            toolkit: Dead
            tools:
              - {{name: Fetch, path: /fetch, input_schema: {{type: object, properties: {{}}}}}}
          - {{name: gone, kind: opentool, url: "http://127.0.0.1:{dead_port}", retries: 0}}
    """)
        + extra_backend
    )


def rpc(base: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": tool, "parameters": arguments}}
    return httpx.post(f"{base}/rpc", json=body, timeout=30).json()  # type: ignore[no-any-return]


@dataclass
class Scrapes:
    after_calls: Samples = field(default_factory=dict)
    held: Samples = field(default_factory=dict)
    finished: Samples = field(default_factory=dict)
    collected: Samples = field(default_factory=dict)
    reloaded: Samples = field(default_factory=dict)
    raw: str = ""


def scrape(base: str) -> Samples:
    answer = httpx.get(f"{base}/metrics", timeout=10)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return samples(answer.text)


def until(base: str, condition: Callable[[Samples], bool], what: str) -> Samples:
    """Scrape until `condition` holds (bounded); the scrape that showed it."""
    seen: list[Samples] = []

    def check() -> bool:
        seen.append(scrape(base))
        return condition(seen[-1])

    assert wait_until(check, timeout=20, interval=0.05), f"{what} never showed"
    return seen[-1]


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrapes]:
    tmp = tmp_path_factory.mktemp("metrics")
    gate = tmp / "gate"
    gate.mkdir()
    dead = refused_port()
    path = tmp / "gateway.yaml"
    path.write_text(config(dead))
    found = Scrapes()
    env = {"TOOLPLEX_TEST_GATE_DIR": str(gate)}
    with served_gateway(path, env=env, extra_args=["--no-reload"]) as (base, process):
        assert rpc(base, "Math_Add", {"a": 1, "b": 2})["result"]["metadata"]["value"] == 3
        assert rpc(base, "Math_Add", {"a": 2, "b": 2})["result"]["metadata"]["value"] == 4
        assert rpc(base, "Math_Divide", {"a": 1, "b": 0})["error"]["code"] == -32000
        assert rpc(base, "Made_Up", {})["error"]["code"] == -32601
        assert rpc(base, "Dead_Fetch", {})["error"]["code"] == -32603  # the breaker opens (failures: 1)
        oxp = httpx.post(f"{base}/tools/call", json={"tool_id": "Math.Multiply", "input": {"a": 2, "b": 3}})
        assert oxp.json()["value"] == 6
        found.after_calls = scrape(base)

        with httpx.Client(base_url=base, timeout=30) as tsn:
            tsn.post("/get_cookie").raise_for_status()
            held = tsn.post("/execute_tool", json={"tool_name": "Gate_Hold", "arguments": {"key": "m"}})
            assert held.status_code == 450, held.text
            found.held = scrape(base)
            (gate / "open").touch()
            found.finished = until(
                base, lambda s: value(s, "toolplex_pending_calls", state="finished") == 1, "the finished run"
            )
            detail = held.json()["detail"]
            collected = tsn.post(
                "/execute_tool", json={"tool_name": detail["next_calling"], "arguments": detail["arguments"]}
            )
            assert collected.status_code == 200, collected.text
            found.collected = scrape(base)

        path.write_text(
            config(dead, "  - {name: text, kind: python, module: 'adapters.python.toolkits.text:toolkit'}\n")
        )
        process.send_signal(signal.SIGHUP)
        until(base, lambda s: value(s, "toolplex_config_reloads_total", result="ok") == 1, "the reload")
        path.write_text("backends: [{kind: nowhere}]\n")
        process.send_signal(signal.SIGHUP)
        found.reloaded = until(
            base, lambda s: value(s, "toolplex_config_reloads_total", result="failed") == 1, "the failed reload"
        )
        found.raw = httpx.get(f"{base}/metrics", timeout=10).text
    yield found


def test_calls_are_counted_by_front_backend_tool_and_outcome(scrapes: Scrapes) -> None:
    s = scrapes.after_calls
    assert value(s, "toolplex_calls_total", front="jsonrpc", backend="math", tool="Math_Add", outcome="ok") == 2
    assert value(s, "toolplex_calls_total", front="jsonrpc", backend="math", tool="Math_Divide", outcome="tool_failed")
    assert value(s, "toolplex_calls_total", front="oxp", backend="math", tool="Math_Multiply", outcome="ok") == 1
    unknown = value(
        s, "toolplex_calls_total", front="jsonrpc", backend="(unknown)", tool="(unknown)", outcome="not_found"
    )
    assert unknown == 1 and "Made_Up" not in scrapes.raw
    dead = value(
        s, "toolplex_calls_total", front="jsonrpc", backend="dead", tool="Dead_Fetch", outcome="upstream_unavailable"
    )
    assert dead == 1


def test_latency_is_a_histogram_with_the_configured_buckets(scrapes: Scrapes) -> None:
    s = scrapes.after_calls
    labels = {"front": "jsonrpc", "backend": "math", "tool": "Math_Add"}
    assert value(s, "toolplex_call_duration_seconds_count", **labels) == 2
    assert value(s, "toolplex_call_duration_seconds_bucket", le="+Inf", **labels) == 2
    assert value(s, "toolplex_call_duration_seconds_bucket", le="5.0", **labels) == 2
    assert (value(s, "toolplex_call_duration_seconds_sum", **labels) or 0) > 0


def test_backends_health_and_breakers(scrapes: Scrapes) -> None:
    s = scrapes.after_calls
    assert value(s, "toolplex_backend_up", backend="math", kind="python") == 1
    assert value(s, "toolplex_backend_up", backend="gone", kind="opentool") == 0  # its discovery failed
    assert value(s, "toolplex_backend_tools", backend="math") == 4
    assert value(s, "toolplex_backend_tools", backend="gone") == 0
    assert value(s, "toolplex_upstream_breaker_state", backend="dead") == 2  # open
    assert value(s, "toolplex_upstream_breaker_opened_total", backend="dead") == 1
    assert value(s, "toolplex_upstream_failures_total", backend="dead") == 1
    assert value(s, "toolplex_upstream_breaker_state", backend="math") is None  # in process: no breaker


def test_a_held_call_is_in_flight_and_pending_until_collected(scrapes: Scrapes) -> None:
    held, finished, collected = scrapes.held, scrapes.finished, scrapes.collected
    assert value(held, "toolplex_calls_in_flight", front="toolserver") == 1
    assert value(held, "toolplex_pending_calls", state="running") == 1
    assert value(held, "toolplex_pending_calls", state="finished") == 0
    assert value(finished, "toolplex_calls_in_flight", front="toolserver") == 0
    assert value(finished, "toolplex_pending_calls", state="running") == 0
    assert value(collected, "toolplex_pending_calls", state="finished") == 0
    assert value(collected, "toolplex_calls_total", front="toolserver", backend="gate", tool="Gate_Hold", outcome="ok")


def test_sessions_are_counted_per_front(scrapes: Scrapes) -> None:
    assert value(scrapes.after_calls, "toolplex_sessions", front="toolserver") == 0
    assert value(scrapes.held, "toolplex_sessions", front="toolserver") == 1
    assert value(scrapes.held, "toolplex_sessions", front="oxp") == 0
    assert value(scrapes.held, "toolplex_state_store_up") == 1


def test_reloads_are_counted_by_result(scrapes: Scrapes) -> None:
    s = scrapes.reloaded
    assert value(s, "toolplex_config_reloads_total", result="ok") == 1
    assert value(s, "toolplex_config_reloads_total", result="failed") == 1
    assert value(s, "toolplex_backend_tools", backend="text") is not None  # the reloaded configuration's backends


def test_sessions_in_redis_and_a_store_that_stops_answering(tmp_path: Path) -> None:
    """Sessions in a real Redis are counted with one command per front; an unreachable one says so."""
    path = tmp_path / "gateway.yaml"
    with redis_server() as url:
        path.write_text(
            textwrap.dedent(f"""
                state: {{store: redis, url: "{url}", key_prefix: "metrics-test:"}}
                fronts:
                  metrics: {{enabled: true}}
                middleware:
                  - use: gateway.metrics:Metrics
                backends:
                  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
            """)
        )
        with served_gateway(path, extra_args=["--no-reload"]) as (base, _process):
            for _ in range(2):
                httpx.post(f"{base}/get_cookie", timeout=10).raise_for_status()
            s = scrape(base)
            assert value(s, "toolplex_sessions", front="toolserver") == 2
            assert value(s, "toolplex_state_store_up") == 1
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            with socket.create_connection(("127.0.0.1", port), timeout=5) as redis:
                redis.sendall(b"SHUTDOWN NOSAVE\r\n")  # the server closes the connection as it exits
                redis.recv(64)
            s = until(base, lambda s: value(s, "toolplex_state_store_up") == 0, "the unreachable store")
            assert value(s, "toolplex_sessions", front="toolserver") is None  # nothing made up
