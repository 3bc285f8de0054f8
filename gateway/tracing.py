"""Which call and which trace the running code serves; OpenTelemetry spans when `tracing.enabled`.

Two jobs, one module, because logs and traces must agree on the trace id:

- Correlation, always: the call pipeline marks the call being served (`CALL_ID`), and
  `RequestTraceMiddleware` (installed by `toolplex serve` when the access log or tracing is
  on) keeps one `RequestTrace` per HTTP request, so a line logged outside the call itself
  (uvicorn's access line, written as the answer leaves) still names it. `log_trace_id` is
  what every log line carries as `trace_id`: the active trace's id, else the call id.
- Traces, optional (`pip install 'toolplex[otel]'`): `configure` builds an SDK tracer that
  sends spans by OTLP over HTTP. Each call gets one span (`call_stages`, the outermost stage
  of the pipeline) with its front, tool, version, backend, outcome and the upstream it
  reached; a client's W3C `traceparent` (any front: it is an HTTP header) is its parent; a
  trace id a protocol carries in its body (a front hands it over with `joined`) is
  honoured as the trace id; every upstream request carries `traceparent` (`upstream_hooks`).

Tracing off (the default) imports nothing of OpenTelemetry and adds no stage, no hook and
no header parsing: the per-call cost is the call-id mark alone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from gateway.config.models import TracingSettings
    from gateway.model import Call, Outcome

    Next = Callable[[Call], Awaitable[Outcome]]
    Stage = Callable[[Call, Next], Awaitable[Outcome]]

# What `toolplex[otel]` brings, by the module the tracer needs from each distribution.
EXTRA_MODULES = {
    "opentelemetry-sdk": "opentelemetry.sdk.trace",
    "opentelemetry-exporter-otlp-proto-http": "opentelemetry.exporter.otlp.proto.http.trace_exporter",
}
TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for spans, added to `tracing.endpoint` unless it is there
EXPORT_TIMEOUT_S = 5.0  # one export attempt; a dead collector never holds the gateway's exit longer
SERVER_FAULTS = frozenset({"tool_failed", "deadline_exceeded", "upstream_unavailable", "internal"})
UNKNOWN_TOOL = "(unknown)"  # a span's name must not carry names the client made up
W3C_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
TRACE_HEADERS = (b"traceparent", b"tracestate")

try:
    GATEWAY_VERSION = version("toolplex")
except PackageNotFoundError:  # a source tree that was not installed
    GATEWAY_VERSION = "0.0.0"


class RequestTrace:
    """One HTTP request's trace context: the client's (when tracing) and the calls it served."""

    __slots__ = ("call_id", "parent", "trace_id")

    def __init__(self) -> None:
        self.parent: Any = None  # an OpenTelemetry Context holding the client's remote span
        self.trace_id: str | None = None  # the client's trace, then that of the last call served
        self.call_id: str | None = None  # the last call served (tracing off)


CALL_ID: ContextVar[str | None] = ContextVar("toolplex_call_id", default=None)
REQUEST: ContextVar[RequestTrace | None] = ContextVar("toolplex_request_trace", default=None)
_JOINED: ContextVar[tuple[str, str | None] | None] = ContextVar("toolplex_joined_trace", default=None)
_FORCED_TRACE_ID: ContextVar[int | None] = ContextVar("toolplex_forced_trace_id", default=None)

_tracer: _Tracer | None = None


def enabled() -> bool:
    """True while `configure` has a tracer in force."""
    return _tracer is not None


def missing_extra() -> str | None:
    """The first distribution of `toolplex[otel]` that cannot be imported, or None when all can."""
    for distribution, module in EXTRA_MODULES.items():
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):  # a parent package missing (or blocked)
            found = None
        if found is None:
            return distribution
    return None


def configure(settings: TracingSettings, *, exporter: Any = None) -> None:
    """Put `settings` in force for the whole process (the previous tracer is flushed and shut down).

    `exporter` replaces the OTLP exporter (an SDK `SpanExporter`, sent to synchronously), for
    embedding the gateway where spans go elsewhere. Calls see the change from the next
    configuration (or discovery) snapshot on: pipelines are composed with or without the span.
    """
    global _tracer
    shutdown()
    if settings.enabled:
        _tracer = _Tracer(settings, exporter)


def shutdown() -> None:
    """Send what is left and stop tracing (also done at interpreter exit)."""
    global _tracer
    tracer, _tracer = _tracer, None
    if tracer is not None:
        tracer.provider.shutdown()


# ---- what the pipeline, the upstream clients and the fronts call ----


def call_stages() -> tuple[Stage, ...]:
    """The span stage when tracing is on, nothing otherwise (composed once per pipeline)."""
    return () if _tracer is None else (_tracer.stage,)


def upstream_hooks() -> dict[str, list[Callable[[httpx.Request], Awaitable[None]]]]:
    """httpx event hooks of an upstream client: `traceparent` on every request made inside a call."""
    return {} if _tracer is None else {"request": [_tracer.inject]}


def inject_upstream(method: str, address: str, headers: Any) -> None:
    """`traceparent` on a request `Upstream` sends without httpx (its `upstream_hooks` counterpart):
    `address` is the request's `upstream_address`; nothing with tracing off or outside a call."""
    if _tracer is not None:
        _tracer.inject_headers(method, address, headers)


def joined(trace_id: str | None, as_sent: str | None = None) -> contextlib.AbstractContextManager[None]:
    """Calls made inside the block belong to trace `trace_id` (32 lowercase hex digits).

    For a front whose protocol carries a trace id in its body rather than a `traceparent`
    header; `as_sent` is the client's own value when the front had to derive the id from it
    (it is kept on the span). A `traceparent` of the same trace keeps its parent span.
    """
    if _tracer is None or trace_id is None:
        return contextlib.nullcontext()
    if not W3C_TRACE_ID.match(trace_id) or not int(trace_id, 16):
        raise ValueError(f"not a W3C trace id (32 lowercase hex digits, not all zero): {trace_id!r}")
    return _joined(trace_id, as_sent)


@contextlib.contextmanager
def _joined(trace_id: str, as_sent: str | None) -> Iterator[None]:
    token = _JOINED.set((trace_id, as_sent if as_sent != trace_id else None))
    try:
        yield
    finally:
        _JOINED.reset(token)


def log_trace_id() -> str | None:
    """What a log line carries as `trace_id`: the active trace, else the call served, else the request's."""
    if _tracer is not None:
        active = _tracer.active_trace_id()
        if active is not None:
            return active
    call_id = CALL_ID.get()
    if call_id is not None:
        return call_id
    request = REQUEST.get()
    if request is not None:
        return request.trace_id or request.call_id
    return None


def mark_call(call_id: str) -> Any:
    """The pipeline's per-call mark: lines logged during the call name it, and so do the request's."""
    request = REQUEST.get()
    if request is not None:
        request.call_id = call_id
    return CALL_ID.set(call_id)


def unmark_call(token: Any) -> None:
    CALL_ID.reset(token)


def extract(request: RequestTrace, headers: Iterable[tuple[bytes, bytes]]) -> None:
    """With tracing on, the client's `traceparent` (if valid) becomes the request's parent; else nothing."""
    if _tracer is not None:
        _tracer.extract(request, headers)


class RequestTraceMiddleware:
    """ASGI: a `RequestTrace` for each HTTP request; with tracing on, the client's `traceparent`."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = RequestTrace()
        if _tracer is not None:
            _tracer.extract(request, scope["headers"])
        token = REQUEST.set(request)
        try:
            await self.app(scope, receive, send)
        finally:
            REQUEST.reset(token)


def upstream_address(url: httpx.URL) -> str:
    """scheme://host:port/path of an upstream request: never its userinfo or query (credentials live there)."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


# ---- the tracer itself (OpenTelemetry imported only here, only when enabled) ----


class _Tracer:
    """The SDK's provider, tracer and W3C propagator, as `configure` set them up."""

    def __init__(self, settings: TracingSettings, exporter: Any = None) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        from opentelemetry.trace.status import Status, StatusCode

        class ClientTraceIds(RandomIdGenerator):
            """A new root span takes the trace id a client named in its body (`joined`), if any."""

            def generate_trace_id(self) -> int:
                forced = _FORCED_TRACE_ID.get()
                return forced if forced is not None else super().generate_trace_id()

            def is_trace_id_random(self) -> bool:  # W3C's "random" flag: not for an id the client chose
                return _FORCED_TRACE_ID.get() is None

        self._context = otel_context
        self._trace = trace
        self._status = lambda description: Status(StatusCode.ERROR, description)
        self._server_kind = trace.SpanKind.SERVER
        self._propagator = TraceContextTextMapPropagator()
        resource = Resource.create({"service.name": settings.service_name, "service.version": GATEWAY_VERSION})
        self.provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
            resource=resource,
            id_generator=ClientTraceIds(),
        )
        if exporter is None:
            self.provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(settings)))
        else:
            self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("toolplex", GATEWAY_VERSION)

    def extract(self, request: RequestTrace, headers: Iterable[tuple[bytes, bytes]]) -> None:
        """The client's trace context, when its `traceparent` is valid (an invalid one is ignored, as W3C says)."""
        carrier: dict[str, str] = {}
        for name, value in headers:
            if name in TRACE_HEADERS:
                key = name.decode("latin-1")
                text = value.decode("latin-1")
                carrier[key] = f"{carrier[key]},{text}" if key in carrier else text
        if "traceparent" not in carrier:
            return
        parent = self._propagator.extract(carrier)
        found = self._trace.get_current_span(parent).get_span_context()
        if found.is_valid:
            request.parent = parent
            request.trace_id = format(found.trace_id, "032x")

    def active_trace_id(self) -> str | None:
        found = self._trace.get_current_span().get_span_context()
        return format(found.trace_id, "032x") if found.is_valid else None

    async def stage(self, call: Call, next_: Next) -> Outcome:
        """The call's span, around everything else: the call log and the upstream requests are inside it."""
        ctx = call.context
        request = REQUEST.get()
        parent = request.parent if request is not None else None
        joined = _JOINED.get()
        forced = None
        if joined is not None:
            remote = self._trace.get_current_span(parent).get_span_context() if parent is not None else None
            if remote is None or format(remote.trace_id, "032x") != joined[0]:
                parent, forced = self._context.Context(), int(joined[0], 16)  # a root span of the named trace
        attributes: dict[str, Any] = {"toolplex.front": ctx.front, "toolplex.call_id": ctx.call_id}
        if ctx.principal is not None and ctx.principal.name:
            attributes["toolplex.principal"] = ctx.principal.name
        if joined is not None and joined[1] is not None:
            attributes["toolplex.client_trace_id"] = joined[1]
        token = _FORCED_TRACE_ID.set(forced)
        try:
            span = self.tracer.start_span("call", context=parent, kind=self._server_kind)
        finally:
            _FORCED_TRACE_ID.reset(token)
        if request is not None:
            request.trace_id = format(span.get_span_context().trace_id, "032x")
        attached = self._context.attach(self._trace.set_span_in_context(span))
        try:
            outcome = await next_(call)
        except BaseException as exc:  # cancelled (errors never get here: `frame` makes them outcomes)
            span.set_attributes({**attributes, "toolplex.outcome": type(exc).__name__})
            raise
        else:
            self._annotate(span, call, outcome, attributes)
        finally:
            self._context.detach(attached)
            span.end()
        return outcome

    def _annotate(self, span: Any, call: Call, outcome: Outcome, attributes: dict[str, Any]) -> None:
        """Name and attributes once the outcome is known, in one call (the SDK checks each attribute set)."""
        if not span.is_recording():
            return
        spec = outcome.spec
        kind = "ok" if outcome.error is None else outcome.error.kind.value
        if spec is None and call.kind != "tool":  # a request of another kind: named by its operation
            span.update_name(f"{call.kind} {call.tool}")
            attributes["toolplex.kind"] = str(call.kind)
            if call.backend is not None:
                attributes["toolplex.backend"] = call.backend
        else:
            span.update_name(f"call {spec.flat_name if spec else UNKNOWN_TOOL}")
        if spec is not None:
            attributes["toolplex.tool"] = spec.flat_name
            attributes["toolplex.tool.version"] = spec.version
            attributes["toolplex.backend"] = spec.backend
        attributes["toolplex.outcome"] = kind
        attributes["toolplex.cached"] = outcome.cached
        span.set_attributes(attributes)
        if kind in SERVER_FAULTS:
            span.set_status(self._status(kind))

    async def inject(self, request: httpx.Request) -> None:
        """httpx request hook: inside a call, the upstream gets `traceparent` and the span names the upstream."""
        self.inject_headers(request.method, upstream_address(request.url), request.headers)

    def inject_headers(self, method: str, address: str, headers: Any) -> None:
        """Inside a call, `traceparent` (and `tracestate`) into `headers`, and the span names the upstream."""
        span = self._trace.get_current_span()
        if not span.get_span_context().is_valid:
            return  # discovery and other requests made outside any call
        self._propagator.inject(headers)
        if span.is_recording():
            span.set_attributes({"toolplex.upstream": address, "toolplex.upstream.method": method})
            span.add_event("upstream_request", {"toolplex.upstream": address, "http.request.method": method})


def _otlp_exporter(settings: TracingSettings) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = settings.endpoint.rstrip("/")
    if not endpoint.endswith(TRACES_PATH):
        endpoint += TRACES_PATH
    return OTLPSpanExporter(endpoint=endpoint, headers=dict(settings.headers), timeout=EXPORT_TIMEOUT_S)
