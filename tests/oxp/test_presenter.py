"""The OXP presenter shows what the front really answers: each call is made through the pipeline (its outcome
presented) and over HTTP as a seed client makes it (the flat request), and both answers must be the same.

The request's `call_id` is the client's: it sends the outcome's call id, as the presenter assumes. Normalised,
as they differ per call: `duration` (each run's own time) and the gateway's own call id that an internal error's
message asks the client to quote. A `tool_id` naming no tool at all is the one answer the front words from more
than the outcome (its developer message lists the caller's toolkits; see `OxpPresenter`): there the test says
exactly what differs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from adapters.oxp.presenter import PRESENTER
from gateway.errors import ErrorKind
from gateway.model import Outcome, ToolSpec
from tests.presenting import CONFIG as PROBE_CONFIG
from tests.presenting import NOWHERE, QUOTED_CALL_ID, through_pipeline
from tests.support import asgi_client

CONFIG = (
    PROBE_CONFIG
    + '  - {name: calculator, kind: python, module: "tests.oxp.fixtures.calculator:toolkit"}\n'  # two versions
)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(CONFIG) as c:
        yield c


def wire(body: Any) -> Any:
    """A body as a client reads it (encoded, then parsed), `duration` and the quoted call id normalised."""
    text = QUOTED_CALL_ID.sub("call id (per call)", orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS).decode())
    parsed = orjson.loads(text)
    if isinstance(parsed, dict) and "duration" in parsed:
        assert isinstance(parsed["duration"], int | float) and parsed["duration"] >= 0
        parsed["duration"] = "(per call)"
    return parsed


async def over_http(client: httpx.AsyncClient, spec: ToolSpec, outcome: Outcome, arguments: Any) -> httpx.Response:
    body = {"call_id": outcome.call_id, "tool_id": PRESENTER.name_of(spec), "input": arguments}
    return await client.post("/tools/call", json=body)


CASES = [  # tool, version, arguments, the outcome's failure kind, the front's status
    pytest.param("Math_Add", None, {"a": 10, "b": 5}, None, 200, id="success"),
    pytest.param("Calculator_Add", "1.0.0", {"a": 1, "b": 2}, None, 200, id="success-older-version"),
    pytest.param("Demo_Fail", None, {"message": "it broke"}, ErrorKind.TOOL_FAILED, 200, id="tool-error"),
    pytest.param("Probe_Boom", None, {"text": "x"}, ErrorKind.INTERNAL, 200, id="tool-raises"),
    pytest.param("Math_Add", None, {"a": "ten"}, ErrorKind.INVALID_ARGUMENTS, 422, id="invalid-arguments"),
    pytest.param("Probe_Slow", None, {}, ErrorKind.DEADLINE, 200, id="timeout"),
]


@pytest.mark.parametrize(("tool_name", "version", "arguments", "kind", "status"), CASES)
async def test_the_answer_is_the_fronts(
    client: httpx.AsyncClient,
    tool_name: str,
    version: str | None,
    arguments: dict[str, Any],
    kind: ErrorKind | None,
    status: int,
) -> None:
    spec = client.app.gateway.services.resolve(tool_name, version)  # type: ignore[attr-defined]
    outcome = await through_pipeline(client, spec, arguments, qualified=True)
    assert (outcome.error.kind if outcome.error else None) == kind
    presented = PRESENTER.answer(spec, outcome, arguments)
    answer = await over_http(client, spec, outcome, arguments)
    assert presented.status == answer.status_code == status
    assert wire(presented.body) == wire(answer.json())


async def test_an_unknown_version_is_answered_as_the_front_does(client: httpx.AsyncClient) -> None:
    spec = client.app.gateway.services.resolve("Calculator_Add", "1.0.0")  # type: ignore[attr-defined]
    missing = ToolSpec(spec.toolkit, spec.name, "9.0.0", spec.description, spec.input_schema)
    outcome = await through_pipeline(client, missing, {"a": 1, "b": 2}, qualified=True)
    assert outcome.error is not None and outcome.error.kind == ErrorKind.NOT_FOUND
    presented = PRESENTER.answer(missing, outcome, {"a": 1, "b": 2})
    answer = await over_http(client, missing, outcome, {"a": 1, "b": 2})
    assert (
        (presented.status, wire(presented.body))
        == (answer.status_code, wire(answer.json()))
        == (
            400,
            {
                "message": "Tool 'Calculator_Add' was not found",
                "developer_message": "Calculator.Add version 9.0.0 is not available; available versions: 1.1.0, 1.0.0",
            },
        )
    )


async def test_an_unknown_tool_differs_only_in_the_toolkits_the_front_lists(client: httpx.AsyncClient) -> None:
    outcome = await through_pipeline(client, NOWHERE, {}, qualified=True)
    assert outcome.error is not None and outcome.error.kind == ErrorKind.NOT_FOUND
    presented = PRESENTER.answer(NOWHERE, outcome, {})
    answer = await over_http(client, NOWHERE, outcome, {})
    assert presented.status == answer.status_code == 400
    shown, got = wire(presented.body), wire(answer.json())
    assert shown["message"] == got["message"] == "Tool 'Nope_Tool' was not found"
    assert set(shown) == set(got) == {"message", "developer_message"}
    # The front's words come from the caller's view of the catalog, which one outcome does not carry.
    assert (
        got["developer_message"] == "No tool Nope.Tool is served; toolkits: Calculator, Demo, Math, Probe, Text, Time"
    )
    assert shown["developer_message"] == "No tool named 'Nope.Tool' is in the catalog"


async def test_names_are_the_ids_tools_lists(client: httpx.AsyncClient) -> None:
    listed = (await client.get("/tools")).json()["items"]
    specs = client.app.gateway.services.tools(None, latest_only=False)  # type: ignore[attr-defined]
    assert [PRESENTER.name_of(spec) for spec in specs] == [item["id"] for item in listed]
    assert {"Calculator.Add@1.0.0", "Calculator.Add@1.1.0", "Math.Add@1.0.0"} <= {item["id"] for item in listed}
