"""The OpenTool presenter shows what the front really answers: each call is made through the pipeline (its
outcome presented) and over HTTP as a client makes it, and both answers must be the same, byte for byte as JSON.

The JSON-RPC `id` is the client's: the request sends the outcome's call id, as the presenter assumes. Normalised,
as it differs per call: the gateway's own call id that an internal error's message asks the client to quote.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from adapters.opentool.presenter import PRESENTER
from gateway.errors import ErrorKind
from tests.presenting import CONFIG, NOWHERE, QUOTED_CALL_ID, through_pipeline
from tests.support import asgi_client


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(CONFIG) as c:
        yield c


def wire(body: Any) -> Any:
    """A body as a client reads it (encoded as the front encodes, then parsed), the quoted call id normalised."""
    text = orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS).decode()
    return orjson.loads(QUOTED_CALL_ID.sub("call id (per call)", text))


CASES = [  # tool, arguments, the outcome's failure kind, the front's status
    pytest.param("Math_Add", {"a": 10, "b": 5}, None, 200, id="success"),
    pytest.param("Demo_Sleep", {"seconds": 0}, None, 200, id="success-object"),
    pytest.param("Demo_Fail", {"message": "it broke"}, ErrorKind.TOOL_FAILED, 200, id="tool-error"),
    pytest.param("Probe_Boom", {"text": "x"}, ErrorKind.INTERNAL, 200, id="tool-raises"),
    pytest.param("Math_Add", {"a": "ten"}, ErrorKind.INVALID_ARGUMENTS, 200, id="invalid-arguments"),
    pytest.param("Probe_Slow", {}, ErrorKind.DEADLINE, 200, id="timeout"),
]


@pytest.mark.parametrize(("tool_name", "arguments", "kind", "status"), CASES)
async def test_the_answer_is_the_fronts(
    client: httpx.AsyncClient, tool_name: str, arguments: dict[str, Any], kind: ErrorKind | None, status: int
) -> None:
    spec = client.app.gateway.services.resolve(tool_name)  # type: ignore[attr-defined]
    outcome = await through_pipeline(client, spec, arguments)
    assert (outcome.error.kind if outcome.error else None) == kind
    presented = PRESENTER.answer(spec, outcome, arguments)
    request = {"jsonrpc": "2.0", "method": PRESENTER.name_of(spec), "params": arguments, "id": outcome.call_id}
    answer = await client.post("/opentool/call", json=request)
    assert presented.status == answer.status_code == status
    assert wire(presented.body) == wire(answer.json())


async def test_an_unknown_function_is_answered_as_the_front_does(client: httpx.AsyncClient) -> None:
    outcome = await through_pipeline(client, NOWHERE, {})
    assert outcome.error is not None and outcome.error.kind == ErrorKind.NOT_FOUND
    presented = PRESENTER.answer(NOWHERE, outcome, {})
    request = {"jsonrpc": "2.0", "method": PRESENTER.name_of(NOWHERE), "params": {}, "id": outcome.call_id}
    answer = await client.post("/opentool/call", json=request)
    assert (presented.status, wire(presented.body)) == (answer.status_code, wire(answer.json()))
    assert answer.json()["error"] == {"code": -32601, "message": "Method Nope_Tool not found"}


async def test_names_are_the_ones_load_lists(client: httpx.AsyncClient) -> None:
    listed = (await client.get("/opentool/load")).json()["functions"]
    specs = client.app.gateway.services.tools(None)  # type: ignore[attr-defined]
    assert [PRESENTER.name_of(spec) for spec in specs] == [function["name"] for function in listed]
    assert "Math_Add" in [function["name"] for function in listed]
