"""An input schema's `$ref` to a URI is never fetched: schemas come from upstreams, and a fetch would let one
make the gateway request any address. A real loopback HTTP server counts what it is asked for."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from gateway.validation import SchemaValidator


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"type": "string"}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/schema.json", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_remote_ref_is_not_fetched_and_the_call_is_refused_with_a_clear_message(
    schema_server: tuple[str, list[str]],
) -> None:
    url, asked = schema_server
    validator = SchemaValidator({"type": "object", "properties": {"a": {"$ref": url}}})
    problems = validator.errors({"a": "x"})
    assert problems == {"(arguments)": f"The tool's input schema refers to {url!r}, which the gateway does not fetch"}
    assert asked == []


def test_a_local_ref_still_validates() -> None:
    schema = {"type": "object", "$defs": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/s"}}}
    validator = SchemaValidator(schema)
    assert validator.fast is not None  # the fast validator still compiles local references
    assert validator.errors({"a": "x"}) == {}
    assert validator.errors({"a": 1}) == {"a": "Must be a string"}
