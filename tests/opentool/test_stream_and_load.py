"""`/streamCall` event framing and `/load` documents, round-tripped through the parser."""

from __future__ import annotations

from adapters.opentool.document import document_specs, parse_document
from tests.support import BUILTIN_BACKENDS, asgi_client


async def test_stream_call_success_frames() -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        body = '{"jsonrpc":"2.0","method":"Math_Multiply","params":{"a":6,"b":7},"id":"s1"}'
        r = await client.post("/opentool/streamCall", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.text == (
        'event: start\ndata: {"start":"Math_Multiply"}\n\n'
        'event: data\ndata: {"jsonrpc":"2.0","result":{"result":42},"error":null,"id":"s1"}\n\n'
        'event: done\ndata: {"done":"Math_Multiply"}\n\n'
    )


async def test_stream_call_error_ends_the_stream() -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        body = '{"jsonrpc":"2.0","method":"Math_Divide","params":{"a":6,"b":0},"id":"s2"}'
        r = await client.post("/opentool/streamCall", content=body, headers={"content-type": "application/json"})
    events = r.text.strip().split("\n\n")
    assert events[0] == 'event: start\ndata: {"start":"Math_Divide"}'
    assert events[1].startswith('event: error\ndata: {"jsonrpc":"2.0","result":{},"error":{"code":500,')
    assert len(events) == 2  # no done after an error


async def test_stream_call_rejects_malformed_requests_before_streaming() -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        r = await client.post("/opentool/streamCall", content="nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700


async def test_load_is_a_valid_document_that_round_trips() -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        r = await client.get("/opentool/load")
        gateway = client.app.state.gateway  # type: ignore[attr-defined]
    doc = r.json()
    assert doc["opentool"] == "1.1.0"
    assert doc["info"] == {
        "title": "Toolplex",
        "description": "Tools served by the Toolplex gateway",
        "version": "0.1.0",
    }
    assert doc["server"]["url"] == "http://testserver/opentool"
    add = next(f for f in doc["functions"] if f["name"] == "Math_Add")
    assert add["parameters"][0] == {
        "name": "a",
        "description": "The first number",
        "schema": {"description": "The first number", "type": "number"},
        "required": True,
    }
    assert add["return"]["name"] == "result" and add["return"]["schema"]["type"] == "number"
    fail = next(f for f in doc["functions"] if f["name"] == "Demo_Fail")
    assert fail["return"] is None

    # Without the x-toolplex extension (what any OpenTool client reads), the function name is the tool name.
    plain = {**doc, "functions": [{k: v for k, v in f.items() if k != "x-toolplex"} for f in doc["functions"]]}
    specs = {s.name: s for s in document_specs(parse_document(plain), toolkit="Copy", backend="x", source="load")}
    assert len(specs) == len(gateway.catalog.latest())
    original = gateway.catalog.resolve("Text_WordCount")
    copy = specs["Text_WordCount"]
    assert copy.description == original.description
    assert copy.input_schema["required"] == original.input_schema["required"]
    assert copy.input_schema["properties"] == original.input_schema["properties"]
    assert copy.output_schema == original.output_schema


async def test_load_carries_what_opentool_cannot_say_in_x_toolplex() -> None:
    async with asgi_client(BUILTIN_BACKENDS) as client:
        doc = (await client.get("/opentool/load")).json()
        catalog = client.app.state.gateway.catalog  # type: ignore[attr-defined]
    add = next(f for f in doc["functions"] if f["name"] == "Math_Add")
    original = catalog.resolve("Math_Add")
    assert add["x-toolplex"] == {
        "toolkit": "Math",
        "name": "Add",
        "version": original.version,
        "input_schema": original.input_schema,
        "output_schema": original.output_schema,
    }
    copies = document_specs(parse_document(doc), toolkit=None, backend="x", source="load")
    fields = ("toolkit", "name", "version", "description", "input_schema", "output_schema")
    assert [tuple(getattr(s, f) for f in fields) for s in copies] == [
        tuple(getattr(s, f) for f in fields) for s in catalog.latest()
    ]


async def test_load_uses_configured_server_url() -> None:
    config = BUILTIN_BACKENDS + "fronts:\n  opentool:\n    server_url: https://tools.example/opentool\n"
    async with asgi_client(config) as client:
        r = await client.get("/opentool/load")
    assert r.json()["server"]["url"] == "https://tools.example/opentool"
