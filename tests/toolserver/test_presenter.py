"""The ToolServerNode presenter shows what the front really answers: each call is made through the pipeline (its
outcome presented) and over HTTP as XAgent makes it (a `node_id` session, then `/execute_tool`), and both answers
must be the same.

Normalised, as it differs per call: the gateway's own call id that an internal error's message asks the client
to quote. The node's answers carry no other id or timing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from adapters.toolserver.codec import MORE_TOOLS
from adapters.toolserver.presenter import PRESENTER
from gateway.errors import ErrorKind
from gateway.model import ToolSpec
from tests.presenting import CONFIG, NOWHERE, QUOTED_CALL_ID, through_pipeline
from tests.support import asgi_client


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(CONFIG) as c:
        opened = await c.post("/get_cookie")  # XAgent's first request: its session's cookie, sent from now on
        assert opened.status_code == 200 and c.cookies.get("node_id")
        yield c


def wire(body: Any) -> Any:
    """A body as a client reads it (encoded, then parsed), the quoted call id normalised."""
    return orjson.loads(QUOTED_CALL_ID.sub("call id (per call)", orjson.dumps(body).decode()))


async def over_http(client: httpx.AsyncClient, spec: ToolSpec, arguments: dict[str, Any]) -> httpx.Response:
    return await client.post("/execute_tool", json={"tool_name": PRESENTER.name_of(spec), "arguments": arguments})


CASES = [  # tool, arguments, the outcome's failure kind, the front's status
    pytest.param("Math_Add", {"a": 10, "b": 5}, None, 200, id="success"),
    pytest.param("Demo_Sleep", {"seconds": 0}, None, 200, id="success-object"),
    pytest.param("Demo_Fail", {"message": "it broke"}, ErrorKind.TOOL_FAILED, 500, id="tool-error"),
    pytest.param("Probe_Boom", {"text": "x"}, ErrorKind.INTERNAL, 500, id="tool-raises"),
    pytest.param("Math_Add", {"a": "ten"}, ErrorKind.INVALID_ARGUMENTS, 422, id="invalid-arguments"),
    pytest.param("Probe_Slow", {}, ErrorKind.DEADLINE, 500, id="timeout"),
]


@pytest.mark.parametrize(("tool_name", "arguments", "kind", "status"), CASES)
async def test_the_answer_is_the_fronts(
    client: httpx.AsyncClient, tool_name: str, arguments: dict[str, Any], kind: ErrorKind | None, status: int
) -> None:
    spec = client.app.gateway.services.resolve(tool_name)  # type: ignore[attr-defined]
    outcome = await through_pipeline(client, spec, arguments)
    assert (outcome.error.kind if outcome.error else None) == kind
    presented = PRESENTER.answer(spec, outcome, arguments)
    answer = await over_http(client, spec, arguments)
    assert presented.status == answer.status_code == status
    assert wire(presented.body) == wire(answer.json())


async def test_an_unknown_tool_is_answered_as_the_front_does(client: httpx.AsyncClient) -> None:
    outcome = await through_pipeline(client, NOWHERE, {})
    assert outcome.error is not None and outcome.error.kind == ErrorKind.NOT_FOUND
    presented = PRESENTER.answer(NOWHERE, outcome, {})
    answer = await over_http(client, NOWHERE, {})
    assert (presented.status, wire(presented.body)) == (answer.status_code, wire(answer.json()))
    assert answer.json() == {"detail": "The tool Nope_Tool is not found!"}


async def test_names_are_the_ones_the_listings_give(client: httpx.AsyncClient) -> None:
    listed = (await client.post("/get_available_tools")).json()
    names = [PRESENTER.name_of(spec) for spec in client.app.gateway.services.tools(None)]  # type: ignore[attr-defined]
    assert names == listed["available_tools"] == [entry["name"] for entry in listed["tools_json"]]
    in_envs = [name for env in listed["available_envs"] for name in env["tools"]]
    assert set(in_envs) - {MORE_TOOLS} <= set(names) and "Math_Add" in names
