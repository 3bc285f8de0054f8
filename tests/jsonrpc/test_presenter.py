"""The JSON-RPC presenter shows what the front really answers: each call is made through the pipeline (its outcome
presented) and over HTTP as a seed-002 client makes it (one `tool.execute` request), and both answers must be the
same.

The request's `id` is the client's: it sends the outcome's call id, as the presenter assumes. Normalised, as they
differ per call: the gateway's own call id (`metadata.callId`, `error.data.callId`, and quoted in an internal
error's message) and the run's own time (`metadata.durationMs`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from adapters.jsonrpc.presenter import PRESENTER
from gateway.errors import ErrorKind
from gateway.model import Outcome, ToolSpec
from tests.jsonrpc.conftest import execute
from tests.presenting import CONFIG, NOWHERE, QUOTED_CALL_ID, through_pipeline
from tests.support import asgi_client


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(CONFIG) as c:
        yield c


def wire(body: Any) -> Any:
    """A response as a client reads it (encoded, then parsed), what differs per call normalised."""
    parsed = orjson.loads(QUOTED_CALL_ID.sub("call id (per call)", orjson.dumps(body).decode()))
    metadata = parsed.get("result", {}).get("metadata") if isinstance(parsed.get("result"), dict) else None
    for held, key in ((metadata, "callId"), (metadata, "durationMs"), (parsed.get("error", {}).get("data"), "callId")):
        if isinstance(held, dict) and key in held:
            held[key] = "(per call)"
    return parsed


async def over_http(client: httpx.AsyncClient, spec: ToolSpec, outcome: Outcome, arguments: Any) -> httpx.Response:
    return await client.post("/rpc", json=execute(PRESENTER.name_of(spec), arguments, request_id=outcome.call_id))


CASES = [  # tool, arguments, the outcome's failure kind
    pytest.param("Math_Add", {"a": 10, "b": 5}, None, id="success"),
    pytest.param("Demo_Sleep", {"seconds": 0}, None, id="success-object"),
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
    assert wire(presented.body) == wire(answer.json())
    assert answer.json()["id"] == outcome.call_id


async def test_an_unknown_tool_is_answered_as_the_front_does(client: httpx.AsyncClient) -> None:
    outcome = await through_pipeline(client, NOWHERE, {})
    assert outcome.error is not None and outcome.error.kind == ErrorKind.NOT_FOUND
    presented = PRESENTER.answer(NOWHERE, outcome, {})
    answer = await over_http(client, NOWHERE, outcome, {})
    assert (presented.status, wire(presented.body)) == (answer.status_code, wire(answer.json()))
    assert answer.json()["error"]["code"] == -32601


async def test_names_are_the_ids_tool_list_gives(client: httpx.AsyncClient) -> None:
    listed = (await client.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.list"})).json()
    names = [PRESENTER.name_of(spec) for spec in client.app.gateway.services.tools(None)]  # type: ignore[attr-defined]
    assert names == [entry["id"] for entry in listed["result"]["tools"]]
    assert "Math_Add" in names
