"""The JSON-RPC presenter shows what the front really answers: each call is made through the pipeline (its outcome
presented) and over HTTP as a seed-002 client makes it (one `tool.execute` request), and both answers must be the
same.

The request's `id` is the client's: it sends the outcome's call id, as the presenter assumes. Normalised, as they
differ per call: the gateway's own call id (`metadata.callId`, `error.data.callId`, and quoted in an internal
error's message) and the run's own time (`metadata.durationMs`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from adapters.jsonrpc.presenter import PRESENTER
from adapters.python import Toolkit, tool
from gateway.errors import ErrorKind
from gateway.model import Call, Outcome, ToolSpec
from tests.jsonrpc.conftest import execute
from tests.support import BUILTIN_BACKENDS, asgi_client


@tool(name="Boom", side_effects=False)
def boom(text: str) -> str:
    """Raise a plain exception (not a ToolError): the tool itself breaks."""
    raise RuntimeError(f"boom: {text}")


@tool(name="Slow", side_effects=False, timeout=0.3)
async def slow(seconds: float = 5) -> str:
    """Outlive the tool's own deadline (0.3 s)."""
    await asyncio.sleep(seconds)
    return "late"


toolkit = Toolkit("Probe", [boom, slow])
CONFIG = BUILTIN_BACKENDS + '  - {name: probe, kind: python, module: "tests.jsonrpc.test_presenter:toolkit"}\n'
NOWHERE = ToolSpec(toolkit="Nope", name="Tool", version="1.0.0", description="Not in the catalog", input_schema={})
QUOTED_CALL_ID = re.compile(r"call id [0-9a-f]{32}")


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


async def through_pipeline(client: httpx.AsyncClient, spec: ToolSpec, arguments: dict[str, Any]) -> Outcome:
    return await client.app.gateway.services.call(Call(tool=spec.flat_name, arguments=dict(arguments)))  # type: ignore[attr-defined,no-any-return]


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
