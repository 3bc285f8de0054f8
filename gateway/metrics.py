"""Prometheus metrics: a middleware counts calls; the `/metrics` route adds what it reads when scraped.

Per call, the `Metrics` middleware (listed in `middleware`; `config/gateway.yaml` does) counts
calls by front, backend, tool and outcome, times them, counts cache hits and keeps the calls
in flight per front. Each label set's children are found once and kept (bounded), so a call
costs a dict lookup, a counter and a histogram update, and two integer updates.

When scraped, and only then, the route reads: each backend's discovery state, tool count and
upstream circuit breaker; pending calls (runs started for a later collect, running or
finished); sessions per front (the state store's `count`, when it has one; Redis answers it
with one command per front); configuration reloads; tool definitions found changed (pinning).
Nothing of that costs a call anything.
Each middleware instance has its own registry, so several gateways in one process never
share counters. The route asks for credentials like every front.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.breaker import STATE_VALUES
from gateway.errors import GatewayError
from gateway.http import json_response
from gateway.middleware import BaseMiddleware
from gateway.model import Call, Outcome, labels_of
from gateway.plugins import Adapter, FrontPlugin, fronts
from gateway.settings import FrontSettings
from gateway.upstream_registry import UPSTREAMS

if TYPE_CHECKING:
    from gateway.pipeline import Next
    from gateway.runs import RunRegistry
    from gateway.services import FrontServices
    from gateway.state import StateStore

log = structlog.get_logger("toolplex.metrics")

MAX_CACHED_SERIES = 10_000  # label sets whose children are kept at hand (the metrics themselves keep all)
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
SESSION_NAMESPACE = "session.{front}"  # gateway/sessions.py: each front's sessions in a store namespace of its own


class Metrics(BaseMiddleware):
    """Counts calls by front, backend, tool and outcome; times them; counts cache hits and calls in flight."""

    def __init__(self, buckets: list[float] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "toolplex_calls",
            "Calls by front, backend, tool and outcome (ok or the error kind)",
            ["front", "backend", "tool", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "toolplex_call_duration_seconds",
            "Call duration from arrival in the pipeline to outcome",
            ["front", "backend", "tool"],
            buckets=tuple(buckets) if buckets else DEFAULT_BUCKETS,
            registry=self.registry,
        )
        self.cache_hits = Counter(
            "toolplex_cache_hits", "Calls answered from the result cache", ["tool"], registry=self.registry
        )
        self.in_flight: dict[str, int] = {}  # front -> calls inside `stage` now (plain ints: one event loop)
        self.registry.register(InFlightCollector(self.in_flight))
        # Each label set's children, found once: `labels()` takes a lock and builds a key on every call.
        self._series: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}

    async def stage(self, call: Call, next_: Next) -> Outcome:
        """Counts the call in flight while the rest of the pipeline (validation, the tool) runs."""
        front = call.context.front
        flights = self.in_flight
        flights[front] = flights.get(front, 0) + 1
        try:
            return await next_(call)
        finally:
            flights[front] -= 1

    async def after(self, call: Call, outcome: Outcome) -> None:
        front = call.context.front
        backend, tool = labels_of(call, outcome)
        labels = (front, backend, tool, "ok" if outcome.error is None else outcome.error.kind.value)
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = (self.calls.labels(*labels), self.duration.labels(front, backend, tool))
            if len(self._series) > MAX_CACHED_SERIES:  # tools come and go with reloads: keep the newest
                del self._series[next(iter(self._series))]
        series[0].inc()
        series[1].observe(outcome.duration_ms / 1000)
        if outcome.cached:
            self.cache_hits.labels(tool).inc()


class InFlightCollector(Collector):
    """Calls in flight per front, read from the middleware's counters at scrape time."""

    def __init__(self, in_flight: dict[str, int]) -> None:
        self.in_flight = in_flight

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "toolplex_calls_in_flight",
            "Calls past resolve, permissions and requirements, not answered yet, per front",
            labels=["front"],
        )
        for front, count in sorted(self.in_flight.items()):
            family.add_metric([front], count)
        yield family


class Families(Collector):
    """Metric families read once for one scrape."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        yield from self.families


def backend_families(states: list[dict[str, Any]]) -> list[Metric]:
    """Each backend's discovery state and tools, and each upstream's circuit breaker (0 closed, 1 half-open, 2 open)."""
    up = GaugeMetricFamily(
        "toolplex_backend_up",
        "1 when the backend's last discovery succeeded and its own health says up, else 0",
        labels=["backend", "kind"],
    )
    tools = GaugeMetricFamily("toolplex_backend_tools", "Tools the backend's last discovery found", labels=["backend"])
    breaker = GaugeMetricFamily(
        "toolplex_upstream_breaker_state",
        "Circuit breaker of each upstream backend: 0 closed, 1 half-open, 2 open",
        labels=["backend"],
    )
    failures = CounterMetricFamily(
        "toolplex_upstream_failures",
        "Upstream faults counted by the breaker: connect errors, timeouts, 5xx, malformed answers",
        labels=["backend"],
    )
    opened = CounterMetricFamily(
        "toolplex_upstream_breaker_opened", "Times the breaker opened (closed -> open)", labels=["backend"]
    )
    for state in sorted(states, key=lambda s: s["name"]):
        name = state["name"]
        up.add_metric([name, state["kind"]], 1 if state["state"] == "up" else 0)
        tools.add_metric([name], state["tools"])
        current = UPSTREAMS.breaker_state(name)
        if current is None:
            continue  # an in-process backend: no upstream, no breaker
        upstreams = UPSTREAMS.of(name)
        breaker.add_metric([name], STATE_VALUES[current])
        failures.add_metric([name], sum(u.breaker.failures_total for u in upstreams))
        opened.add_metric([name], sum(u.breaker.opened_total for u in upstreams))
    return [up, tools, breaker, failures, opened]


def pending_family(runs: RunRegistry, unclaimed: int = 0) -> Metric:
    """`unclaimed`: finished runs whose outcome waits in a detached record (`DetachedRuns.unclaimed`)."""
    family = GaugeMetricFamily(
        "toolplex_pending_calls",
        "Calls answered 'still running' and collected later: running, or finished and not collected yet",
        labels=["state"],
    )
    family.add_metric(["running"], runs.running)
    family.add_metric(["finished"], runs.finished + unclaimed)
    return family


async def session_families(store: StateStore, front_names: Iterable[str]) -> list[Metric]:
    """Sessions per front, as the store counts them (expired ones until it next tidies up).

    A store that cannot count cheaply has no `count`: nothing is said. A store that fails to
    answer (Redis unreachable) shows as `toolplex_state_store_up 0`.
    """
    count = getattr(store, "count", None)  # the memory store's is sync, Redis' async; a store may have none
    if count is None:
        return []
    sessions = GaugeMetricFamily(
        "toolplex_sessions", "Client sessions held in the state store, per front", labels=["front"]
    )
    reachable = GaugeMetricFamily("toolplex_state_store_up", "1 when the state store answered this scrape, else 0")
    try:
        for front in sorted(front_names):
            found = count(SESSION_NAMESPACE.format(front=front))
            sessions.add_metric([front], await found if inspect.isawaitable(found) else found)
    except GatewayError as exc:
        log.warning("metrics_state_store_unreachable", error=exc.failure.message)
        reachable.add_metric([], 0)
        return [reachable]
    reachable.add_metric([], 1)
    return [sessions, reachable]


def reload_family(reloads: dict[str, int]) -> Metric:
    family = CounterMetricFamily(
        "toolplex_config_reloads", "Configuration reloads by result (failed: the old one kept)", labels=["result"]
    )
    for result, count in sorted(reloads.items()):
        family.add_metric([result], count)
    return family


def pin_change_family(changes: dict[tuple[str, str, str, str], int]) -> Metric:
    """Tool definitions found changed since they were approved, or added to a pinned backend (`gateway.pinning`),
    counted where recorded."""
    family = CounterMetricFamily(
        "toolplex_tool_definition_changes",
        "Upstream tool definitions found changed since approved (kind changed) or added to a backend whose tools "
        "are pinned (kind added), by backend, tool, pinning mode and kind",
        labels=["backend", "tool", "mode", "kind"],
    )
    for (backend, tool, mode, kind), count in sorted(changes.items()):
        family.add_metric([backend, tool, mode, kind], count)
    return family


async def backend_states(services: FrontServices) -> list[dict[str, Any]]:
    """Discovery's view of each backend with its own health, as /readyz shows it."""
    return await services.backend_states()


async def scraped(services: FrontServices) -> CollectorRegistry:
    """Everything read at scrape time, in a registry of its own for this scrape."""
    registry = CollectorRegistry()
    families = [
        *backend_families(await backend_states(services)),
        pending_family(services.runs, services.unclaimed_runs()),
        *await session_families(services.store, (name for name in fronts() if name != "metrics")),
        reload_family(dict(services.reloads)),
        pin_change_family(dict(services.pin_changes)),
    ]
    registry.register(Families(families))
    return registry


class MetricsFrontSettings(FrontSettings):
    """GET <path>: Prometheus metrics collected by the gateway.metrics:Metrics middleware"""

    enabled: bool = False
    path: str = Field(default="/metrics", pattern=r"^(/[A-Za-z0-9._~-]+)+$")


def routes(services: FrontServices, settings: MetricsFrontSettings) -> list[BaseRoute]:
    """`GET <path>` in Prometheus' text format."""

    async def metrics(request: Request) -> Response:
        try:
            services.authenticate(request.headers)
        except GatewayError as exc:
            return json_response({"detail": exc.failure.message}, status=401, headers={"WWW-Authenticate": "Bearer"})
        collectors = [m for m in services.middleware if isinstance(m, Metrics)]
        if not collectors:
            detail = "No metrics are collected: add {use: 'gateway.metrics:Metrics'} to the middleware list"
            return json_response({"detail": detail}, status=404)
        body = b"".join(generate_latest(m.registry) for m in collectors) + generate_latest(await scraped(services))
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return [Route(settings.path, metrics, methods=["GET"])]


ADAPTER = Adapter(
    name="metrics",
    description="Prometheus metrics of calls, backends, pending calls, sessions and reloads",
    front=FrontPlugin(settings=MetricsFrontSettings, routes=routes),
)
