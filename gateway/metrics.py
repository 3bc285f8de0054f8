"""Prometheus metrics as a middleware, and the `/metrics` route that shows them.

Counting happens in an `after` hook like any other middleware; the route only
renders what the configured `Metrics` middleware collected. Each instance has
its own registry, so several gateways in one process never share counters.
The route adds each upstream backend's circuit breaker, read when scraped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

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
from gateway.model import Call, Outcome
from gateway.plugins import Adapter, FrontPlugin
from gateway.settings import FrontSettings
from gateway.upstream import UPSTREAMS

if TYPE_CHECKING:
    from gateway.services import FrontServices

UNKNOWN_TOOL = "(unknown)"  # calls for tools not in the catalog: client-chosen names must not become labels
MAX_CACHED_SERIES = 10_000  # label sets whose children are kept at hand (the metrics themselves keep all)
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics(BaseMiddleware):
    """Counts calls by front, tool and outcome; times them; counts cache hits."""

    def __init__(self, buckets: list[float] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "toolplex_calls", "Calls by front, tool and outcome", ["front", "tool", "outcome"], registry=self.registry
        )
        self.duration = Histogram(
            "toolplex_call_duration_seconds",
            "Call duration from arrival in dispatch to outcome",
            ["front", "tool"],
            buckets=tuple(buckets) if buckets else DEFAULT_BUCKETS,
            registry=self.registry,
        )
        self.cache_hits = Counter(
            "toolplex_cache_hits", "Calls answered from the result cache", ["tool"], registry=self.registry
        )
        # Each label set's children, found once: `labels()` takes a lock and builds a key on every call.
        self._series: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    async def after(self, call: Call, outcome: Outcome) -> None:
        front = call.context.front
        tool = outcome.spec.flat_name if outcome.spec else UNKNOWN_TOOL
        kind = "ok" if outcome.error is None else outcome.error.kind.value
        labels = (front, tool, kind)
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = (self.calls.labels(*labels), self.duration.labels(front, tool))
            if len(self._series) > MAX_CACHED_SERIES:  # tools come and go with reloads: keep the newest
                del self._series[next(iter(self._series))]
        series[0].inc()
        series[1].observe(outcome.duration_ms / 1000)
        if outcome.cached:
            self.cache_hits.labels(tool).inc()


class BreakerCollector(Collector):
    """Each upstream backend's circuit breaker, read at scrape time (state 0 closed, 1 half-open, 2 open)."""

    def __init__(self, backend_names: Callable[[], Iterable[str]]) -> None:
        self.backend_names = backend_names

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
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
        for name in sorted(self.backend_names()):
            upstreams = UPSTREAMS.of(name)
            current = UPSTREAMS.breaker_state(name)
            if current is None:
                continue  # an in-process backend: no upstream, no breaker
            state.add_metric([name], STATE_VALUES[current])
            failures.add_metric([name], sum(u.breaker.failures_total for u in upstreams))
            opened.add_metric([name], sum(u.breaker.opened_total for u in upstreams))
        yield from (state, failures, opened)


class ReloadCollector(Collector):
    """Configuration reloads by result (ok, failed), read at scrape time."""

    def __init__(self, services: FrontServices) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        reloads = CounterMetricFamily(
            "toolplex_config_reloads", "Configuration reloads by result (failed: the old one kept)", labels=["result"]
        )
        for result, count in sorted(self.services.reloads.items()):
            reloads.add_metric([result], count)
        yield reloads


class MetricsFrontSettings(FrontSettings):
    """GET <path>: Prometheus metrics collected by the gateway.metrics:Metrics middleware"""

    enabled: bool = False
    path: str = Field(default="/metrics", pattern=r"^(/[A-Za-z0-9._~-]+)+$")


def routes(services: FrontServices, settings: MetricsFrontSettings) -> list[BaseRoute]:
    """`GET <path>` in Prometheus' text format."""
    scraped = CollectorRegistry()
    scraped.register(BreakerCollector(services.backend_names))
    scraped.register(ReloadCollector(services))

    async def metrics(request: Request) -> Response:
        try:
            services.authenticate(request.headers)
        except GatewayError as exc:
            return json_response({"detail": exc.failure.message}, status=401, headers={"WWW-Authenticate": "Bearer"})
        collectors = [m for m in services.middleware if isinstance(m, Metrics)]
        if not collectors:
            detail = "No metrics are collected: add {use: 'gateway.metrics:Metrics'} to the middleware list"
            return json_response({"detail": detail}, status=404)
        body = b"".join(generate_latest(m.registry) for m in collectors) + generate_latest(scraped)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return [Route(settings.path, metrics, methods=["GET"])]


ADAPTER = Adapter(
    name="metrics",
    description="Prometheus metrics of calls, breakers and reloads",
    front=FrontPlugin(settings=MetricsFrontSettings, routes=routes),
)
