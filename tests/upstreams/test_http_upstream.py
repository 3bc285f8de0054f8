"""The `http` backend against a real REST service: path, query and body placement, JSON and text answers,
path parameters that cannot leave their path, and upstream error statuses that keep their meaning."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

import pytest

from gateway.errors import ErrorKind
from gateway.runtime import Gateway
from tests.support import asgi_client, call_tool, python_server, started_gateway

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
      - name: GetFile
        path: /files/{{name}}
        input_schema: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
      - name: Status
        path: /status/{{code}}
        query: [text]
        input_schema:
          type: object
          properties: {{code: {{type: integer}}, text: {{type: string}}}}
          required: [code]
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
        assert missing.json()["error"]["code"] == -32601  # the upstream's 404 is "not found" on every front
        assert missing.json()["error"]["message"] == "Upstream 'library' answered HTTP 404: no such book"
        invalid = await client.post("/opentool/call", json=rpc("Library_GetBook", {"fields": "x"}))
        assert invalid.json()["error"]["data"]["parameter_errors"] == {"book_id": "Missing required parameter"}


async def test_side_effects_follow_the_method(rest_port: int) -> None:
    async with asgi_client(CONFIG.format(port=rest_port)) as client:
        catalog = client.app.state.gateway.catalog  # type: ignore[attr-defined]
        assert catalog.resolve("Library_GetBook").side_effects is False
        assert catalog.resolve("Library_CreateNote").side_effects is True


@pytest.fixture
async def library(rest_port: int) -> AsyncIterator[Gateway]:
    gateway = await started_gateway(CONFIG.format(port=rest_port))
    try:
        yield gateway
    finally:
        await gateway.close()


HOSTILE = [
    "..",
    ".",
    "%2e%2e",
    "%2E%2E",
    "%2e",
    ".%2e",
    "%252e%252e",
    "%25252e%25252e",
    "../..",
    "..%2f..",
    "..%5c..",
    "..\\..",
    "a/../../x",
    "",
    "?fields=secret",
    "#top",
    "../status/500",
]


@pytest.mark.parametrize("value", HOSTILE)
async def test_a_path_parameter_never_reaches_another_path(library: Gateway, value: str) -> None:
    outcome = await call_tool(library, "Library_GetFile", {"name": value})
    if outcome.error is not None:  # refused before anything was sent
        assert outcome.error.kind is ErrorKind.INVALID_ARGUMENTS, outcome.error
        assert "name" in (outcome.error.parameter_errors or {})
        return
    reached = outcome.value
    assert "elsewhere" not in reached, reached
    assert reached["raw_path"] == "/files/" + quote(value, safe="")  # one segment, exactly the argument
    assert reached["name"] == value


@pytest.mark.parametrize("value", ["...", ".hidden", "a.b", "a b", "a/b", "%41", "é"])
async def test_ordinary_values_are_one_encoded_segment(library: Gateway, value: str) -> None:
    outcome = await call_tool(library, "Library_GetFile", {"name": value})
    assert outcome.error is None, outcome.error
    assert outcome.value["raw_path"] == "/files/" + quote(value, safe="")  # what the upstream does with %2F is its own


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (400, ErrorKind.INVALID_ARGUMENTS),
        (422, ErrorKind.INVALID_ARGUMENTS),
        (401, ErrorKind.UPSTREAM_UNAVAILABLE),  # the gateway's own credentials: no client can fix that
        (403, ErrorKind.FORBIDDEN),
        (404, ErrorKind.NOT_FOUND),
        (429, ErrorKind.RATE_LIMITED),
        (409, ErrorKind.TOOL_FAILED),
        (500, ErrorKind.UPSTREAM_UNAVAILABLE),
        (502, ErrorKind.UPSTREAM_UNAVAILABLE),
        (503, ErrorKind.UPSTREAM_UNAVAILABLE),
    ],
)
async def test_upstream_error_statuses_keep_their_meaning(library: Gateway, code: int, kind: ErrorKind) -> None:
    outcome = await call_tool(library, "Library_Status", {"code": code})
    assert outcome.error is not None
    assert outcome.error.kind is kind, outcome.error
    # an object is shown as JSON, never as a Python repr
    assert f'{{"reason":"status {code}","code":{code}}}' in outcome.error.message
    assert "{'reason'" not in outcome.error.message
    if code == 429:
        assert outcome.error.retry_after_ms == 7000 and outcome.error.can_retry
    text = await call_tool(library, "Library_Status", {"code": code, "text": "1"})
    assert text.error is not None and text.error.kind is kind
    assert text.error.message.endswith(f"plain {code}")


async def test_each_front_answers_an_upstream_429_in_its_own_format(rest_port: int) -> None:
    async with asgi_client(CONFIG.format(port=rest_port)) as client:
        opentool = await client.post("/opentool/call", json=rpc("Library_Status", {"code": 429}))
        oxp = await client.post("/tools/call", json={"tool_id": "Library.Status", "input": {"code": 429}})
        tsn = await client.post("/execute_tool", json={"tool_name": "Library_Status", "arguments": {"code": 429}})
    for response in (opentool, oxp, tsn):
        assert response.status_code == 429, response.text
        assert response.headers["retry-after"] == "7"
