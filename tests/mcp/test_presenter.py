"""The MCP presenter shows what the front really answers: each call is made through the pipeline (its outcome
presented) and over HTTP as a 2026-07-28 client makes it (a stateless `tools/call` with its routing headers and
`_meta` envelope), and both answers must be the same: status and JSON-RPC body, result `_meta` and its
`serverInfo` stamp included.

The JSON-RPC `id` is the client's: the request sends the outcome's call id, as the presenter assumes. Normalised,
as it differs per call: the gateway's own call id (an `isError` result's `io.toolplex/callId`, and quoted in an
internal error's message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest

from adapters.mcp.presenter import PRESENTER
from gateway.errors import ErrorKind
from gateway.model import Outcome, ToolSpec
from tests.mcp.conformance import reference_server
from tests.mcp.front.modern_http import MODERN, message_of
from tests.presenting import CONFIG, NOWHERE, QUOTED_CALL_ID, through_pipeline
from tests.support import asgi_client

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "test-presenter", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(CONFIG) as c:
        yield c


@pytest.fixture(scope="module")
def reference() -> Iterator[str]:
    """tests/mcp/reference_server.py, a real MCP server: its tools keep their own names on the front."""
    with reference_server() as url:
        yield url


def wire(body: Any) -> Any:
    """A response as a client reads it (encoded, then parsed), the gateway's call id normalised."""
    parsed = orjson.loads(QUOTED_CALL_ID.sub("call id (per call)", orjson.dumps(body).decode()))
    meta = parsed.get("result", {}).get("_meta") if isinstance(parsed.get("result"), dict) else None
    if isinstance(meta, dict) and "io.toolplex/callId" in meta:
        meta["io.toolplex/callId"] = "(per call)"
    return parsed


async def request(
    client: httpx.AsyncClient, request_id: Any, method: str, params: dict[str, Any], name: str | None = None
) -> httpx.Response:
    """One 2026-07-28 request over raw HTTP, as `tests.mcp.front.modern_http` sends it."""
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": META}}
    return await client.post("/mcp", json=body, headers=headers)


async def over_http(client: httpx.AsyncClient, spec: ToolSpec, outcome: Outcome, arguments: Any) -> httpx.Response:
    name = PRESENTER.name_of(spec)
    return await request(client, outcome.call_id, "tools/call", {"name": name, "arguments": arguments}, name)


CASES = [  # tool, arguments, the outcome's failure kind
    pytest.param("Math_Add", {"a": 10, "b": 5}, None, id="success"),
    pytest.param("Demo_Sleep", {"seconds": 0}, None, id="success-structured"),
    pytest.param("Demo_Fail", {"message": "it broke"}, ErrorKind.TOOL_FAILED, id="tool-error"),
    pytest.param("Probe_Boom", {"text": "x"}, ErrorKind.INTERNAL, id="tool-raises"),
    pytest.param("Math_Add", {"a": "ten"}, ErrorKind.INVALID_ARGUMENTS, id="invalid-arguments"),
    pytest.param("Probe_Slow", {}, ErrorKind.DEADLINE, id="timeout"),
]


@pytest.mark.parametrize(("tool_name", "arguments", "kind"), CASES)
async def test_the_answer_is_the_fronts(
    client: httpx.AsyncClient, tool_name: str, arguments: dict[str, Any], kind: ErrorKind | None
) -> None:
    spec = client.app.gateway.services.resolve(tool_name)  # type: ignore[attr-defined]
    outcome = await through_pipeline(client, spec, arguments)
    assert (outcome.error.kind if outcome.error else None) == kind
    presented = PRESENTER.answer(spec, outcome, arguments)
    answer = await over_http(client, spec, outcome, arguments)
    assert presented.status == answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")  # answered within the SSE window
    assert wire(presented.body) == wire(answer.json())
    assert answer.json()["result"]["isError"] is (kind is not None)


async def test_an_unknown_tool_is_answered_as_the_front_does(client: httpx.AsyncClient) -> None:
    outcome = await through_pipeline(client, NOWHERE, {})
    assert outcome.error is not None and outcome.error.kind == ErrorKind.NOT_FOUND
    presented = PRESENTER.answer(NOWHERE, outcome, {})
    answer = await over_http(client, NOWHERE, outcome, {})
    assert (presented.status, wire(presented.body)) == (answer.status_code, wire(answer.json()))
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "code": -32602,
        "message": "Unknown tool: Nope_Tool",
        "data": {"name": "Nope_Tool"},
    }


async def listed_names(client: httpx.AsyncClient) -> list[str]:
    listed: list[str] = []
    cursor: str | None = None
    for page in range(100):  # every page, bounded
        params = {"cursor": cursor} if cursor else {}
        result = message_of(await request(client, page, "tools/list", params))["result"]
        listed += [entry["name"] for entry in result["tools"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            return listed
    raise AssertionError("tools/list never ended")


async def test_names_are_the_ones_tools_list_gives(client: httpx.AsyncClient) -> None:
    names = [PRESENTER.name_of(spec) for spec in client.app.gateway.services.tools(None)]  # type: ignore[attr-defined]
    assert names == await listed_names(client) and "Math_Add" in names


RELAYED = [  # an MCP upstream's tool (the front relays its own answer), its arguments, whether it is an error
    ("test_simple_text", {}, False),
    ("test_structured_content", {"a": 1, "b": 2}, False),
    ("test_error_handling", {}, True),
]


async def test_an_mcp_upstreams_tools_keep_their_names_and_answers(reference: str) -> None:
    async with asgi_client(CONFIG + f'  - {{name: reference, kind: mcp, url: "{reference}"}}\n') as client:
        services = client.app.gateway.services  # type: ignore[attr-defined]
        names = [PRESENTER.name_of(spec) for spec in services.tools(None)]
        assert names == await listed_names(client)
        for tool_name, arguments, is_error in RELAYED:
            assert tool_name in names  # its own name, not the flat reference_<name>
            spec = services.resolve(f"reference_{tool_name}")
            outcome = await through_pipeline(client, spec, arguments)
            assert outcome.upstream is not None and outcome.upstream.protocol == "mcp"  # the upstream's own answer
            presented = PRESENTER.answer(spec, outcome, arguments)
            answer = await over_http(client, spec, outcome, arguments)
            assert presented.status == answer.status_code == 200
            assert wire(presented.body) == wire(message_of(answer)), tool_name
            assert message_of(answer)["result"]["isError"] is is_error
