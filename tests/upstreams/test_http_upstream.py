"""The `http` backend against a real REST service: path, query and body placement, JSON and text answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import asgi_client, python_server

CONFIG = """
backends:
  - name: library
    kind: http
    url: http://127.0.0.1:{port}
    toolkit: Library
    tools:
      - name: GetBook
        description: Look a book up by id
        path: /books/{{book_id}}
        query: [fields]
        input_schema:
          type: object
          properties: {{book_id: {{type: string}}, fields: {{type: string}}}}
          additionalProperties: false
      - name: CreateNote
        method: POST
        path: /notes
        input_schema: {{type: object, properties: {{text: {{type: string}}, tags: {{type: array}}}}, required: [text]}}
      - name: Shout
        path: /shout
        input_schema: {{type: object, properties: {{text: {{type: string}}}}, required: [text]}}
"""


@pytest.fixture(scope="module")
def rest_port() -> Iterator[int]:
    with python_server("tests.upstreams.rest_server") as port:
        yield port


def rpc(method: str, params: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "method": method, "params": params, "id": "1"}


async def test_arguments_go_where_declared(rest_port: int) -> None:
    async with asgi_client(CONFIG.format(port=rest_port)) as client:
        book = await client.post("/opentool/call", json=rpc("Library_GetBook", {"book_id": "a b", "fields": "x,y"}))
        assert book.json()["result"] == {"id": "a b", "fields": ["x", "y"], "title": "Book a b"}
        note = await client.post("/opentool/call", json=rpc("Library_CreateNote", {"text": "hi", "tags": ["t"]}))
        assert note.json()["result"] == {"created": {"text": "hi", "tags": ["t"]}, "auth": None}
        shout = await client.post("/opentool/call", json=rpc("Library_Shout", {"text": "quiet"}))
        assert shout.json()["result"] == {"result": "QUIET"}  # a text answer is the value
        missing = await client.post("/opentool/call", json=rpc("Library_GetBook", {"book_id": "missing"}))
        assert missing.json()["error"]["code"] == 500
        assert missing.json()["error"]["message"] == "Library_GetBook failed with HTTP 404: no such book"
        invalid = await client.post("/opentool/call", json=rpc("Library_GetBook", {"fields": "x"}))
        assert invalid.json()["error"]["data"]["parameter_errors"] == {"book_id": "Missing required parameter"}


async def test_side_effects_follow_the_method(rest_port: int) -> None:
    async with asgi_client(CONFIG.format(port=rest_port)) as client:
        catalog = client.app.state.gateway.catalog  # type: ignore[attr-defined]
        assert catalog.resolve("Library_GetBook").side_effects is False
        assert catalog.resolve("Library_CreateNote").side_effects is True
