"""A tiny OTLP/HTTP trace collector that is also an upstream, for the tracing tests.

- `POST /v1/traces`: an OTLP `ExportTraceServiceRequest` (protobuf, as the SDK's exporter
  sends it), decoded and kept; answered with an empty `ExportTraceServiceResponse`.
- `GET /spans`: every span received so far, as JSON (ids in lowercase hex).
- `GET /echo`: the upstream of an `http` tool: answers the trace headers it was sent.

python -m tests.observability.collector --port P
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SPANS: list[dict[str, Any]] = []


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


async def traces(request: Request) -> Response:
    if request.headers.get("content-type") != "application/x-protobuf":
        return JSONResponse({"detail": "protobuf only"}, status_code=415)
    message = ExportTraceServiceRequest()
    message.ParseFromString(await request.body())
    for resource_spans in message.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                SPANS.append(
                    {
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "attributes": _attributes(span.attributes),
                        "events": [{"name": e.name, "attributes": _attributes(e.attributes)} for e in span.events],
                        "status": {"code": span.status.code, "message": span.status.message},
                        "resource": resource,
                        "auth": request.headers.get("x-collector-key"),
                    }
                )
    return Response(ExportTraceServiceResponse().SerializeToString(), media_type="application/x-protobuf")


async def spans(_request: Request) -> Response:
    return JSONResponse(SPANS)


async def echo(request: Request) -> Response:
    return JSONResponse({name: request.headers.get(name) for name in ("traceparent", "tracestate")})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = Starlette(
        routes=[
            Route("/v1/traces", traces, methods=["POST"]),
            Route("/spans", spans, methods=["GET"]),
            Route("/echo", echo, methods=["GET"]),
        ]
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
