"""A handshake-era upstream's mid-call questions reach a 2026-07-28 caller as an `InputRequiredResult`.

The upstream (tests/mcp/reference_server.py, held to the handshake era by `era: legacy`) asks its client
mid-call; the gateway holds that call open, hands the question to the 2026-07-28 caller, and answers the
upstream with what the caller's retry carries (adapters/mcp/client/held.py).

Real processes: the reference server, two `toolplex serve` replicas in front of it sharing a real
Redis, two API keys. The 2026-07-28 requests are raw HTTP where the exact bytes matter (the retry a
replica that does not hold the call forwards; another caller's retry), and the `mcp` SDK's client
(`mode="2026-07-28"`, its own input-required loop) where what matters is that a real client gets through.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from adapters.mcp import relay
from tests.mcp import conformance
from tests.mcp.front.modern_http import DEADLINE_S, MODERN, Caller
from tests.mcp.front.two_replicas import ALICE, BOB, fronting_reference

ASKS = {"elicitation": {}, "sampling": {}, "roots": {}}
NAME = {"action": "accept", "content": {"name": "Ada"}}

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[tuple[str, str]]:
    """Two replicas (their MCP URLs) fronting one handshake-era reference server, sharing one Redis."""
    with fronting_reference(redis_url, tmp_path_factory.mktemp("mcp-held"), era="legacy") as urls:
        yield urls


def asked(result: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    """(key, request, requestState) of an InputRequiredResult holding one question."""
    assert result["resultType"] == "input_required", result
    (key, request), *more = result["inputRequests"].items()
    assert not more, result
    assert result["requestState"].startswith(relay.HELD_PREFIX)
    return key, request, result["requestState"]


def retry(arguments: dict[str, Any], state: str, responses: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "reference_test_input_required_result_elicitation",
        "arguments": arguments,
        "requestState": state,
        "inputResponses": responses,
    }


def test_the_question_goes_to_the_caller_and_its_retry_through_the_other_replica_answers_it(
    gateways: tuple[str, str],
) -> None:
    a, b = gateways
    alice = Caller(ALICE, ASKS)
    first = alice.call(a, "reference_test_input_required_result_elicitation", {})
    key, request, state = asked(first)
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "What is your name?"
    assert request["params"]["requestedSchema"]["required"] == ["name"]

    done = alice.result(b, "tools/call", retry({}, state, {key: NAME}))  # b holds nothing: forwarded to a
    assert done.get("resultType", "complete") == "complete" and not done.get("isError"), done
    assert done["content"][0]["text"] == "Hello, Ada!"

    again = alice.request(a, "tools/call", retry({}, state, {key: NAME}))["error"]  # the call is over
    assert again == {
        "code": types.INVALID_PARAMS,
        "message": relay.INVALID_STATE,
        "data": {"reason": "invalid_request_state"},
    }


def test_a_held_call_answers_its_own_caller_only_for_its_own_tool_and_arguments(gateways: tuple[str, str]) -> None:
    a, b = gateways
    alice, bob = Caller(ALICE, ASKS), Caller(BOB, ASKS)
    key, _, state = asked(alice.call(a, "reference_test_elicitation", {"message": "Who are you?"}))
    refusals = [
        bob.request(
            a,
            "tools/call",
            {
                **retry({}, state, {key: NAME}),
                "name": "reference_test_elicitation",
                "arguments": {"message": "Who are you?"},
            },
        ),  # another caller, on the home
        bob.request(
            b,
            "tools/call",
            {
                **retry({}, state, {key: NAME}),
                "name": "reference_test_elicitation",
                "arguments": {"message": "Who are you?"},
            },
        ),  # another caller, elsewhere
        alice.request(
            b,
            "tools/call",
            {
                **retry({}, state, {key: NAME}),
                "name": "reference_test_elicitation",
                "arguments": {"message": "Someone else?"},
            },
        ),  # other arguments
        alice.request(a, "tools/call", retry({}, state, {key: NAME})),  # another tool (no arguments)
    ]
    for answer in refusals:
        assert answer["error"]["code"] == types.INVALID_PARAMS, answer
        assert answer["error"]["message"] == relay.INVALID_STATE, answer

    unfit = alice.request(
        b,
        "tools/call",
        {
            **retry({}, state, {key: {"roots": []}}),
            "name": "reference_test_elicitation",
            "arguments": {"message": "Who are you?"},
        },
    )
    assert unfit["error"]["code"] == types.INVALID_PARAMS and key in unfit["error"]["message"], unfit

    # None of that touched the call: its caller still answers it.
    done = alice.result(
        b,
        "tools/call",
        {
            **retry({}, state, {key: NAME}),
            "name": "reference_test_elicitation",
            "arguments": {"message": "Who are you?"},
        },
    )
    assert done["content"][0]["text"] == 'User response: action=accept, content={"name": "Ada"}', done


def test_a_prompts_question_is_held_too_and_each_round_has_a_state_of_its_own(gateways: tuple[str, str]) -> None:
    a, b = gateways
    alice = Caller(ALICE, ASKS)
    prompt = "test_input_required_result_prompt"
    key, request, state = asked(alice.result(a, "prompts/get", {"name": prompt}, name=prompt))
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "What context should the prompt use?"

    unanswered = alice.result(b, "prompts/get", {"name": prompt, "requestState": state}, name=prompt)
    again, _, renewed = asked(unanswered)  # no answer: asked again, under a new state
    assert again == key and renewed != state
    stale = alice.request(b, "prompts/get", {"name": prompt, "requestState": state, "inputResponses": {}}, prompt)
    assert stale["error"]["message"] == relay.INVALID_STATE, stale

    context = {"action": "accept", "content": {"context": "held across eras"}}
    answered = {"name": prompt, "requestState": renewed, "inputResponses": {key: context}}
    done = alice.result(b, "prompts/get", answered, name=prompt)
    assert done["messages"][0]["content"]["text"] == "Use the following context: held across eras", done


def test_a_state_no_replica_issued_is_refused_not_ignored(gateways: tuple[str, str]) -> None:
    a, _ = gateways
    alice = Caller(ALICE, ASKS)
    fresh = {
        "name": "reference_test_input_required_result_elicitation",
        "arguments": {},
        "inputResponses": {"q0": NAME},
    }
    asked(alice.result(a, "tools/call", fresh))  # answers without a state answer nothing yet: the question is asked
    for state in (relay.HELD_PREFIX + "forged", "an-upstreams-own-state"):
        answer = alice.request(a, "tools/call", retry({}, state, {"q0": NAME}))
        assert answer["error"]["message"] == relay.INVALID_STATE, answer


def test_a_caller_that_cannot_answer_is_not_asked(gateways: tuple[str, str]) -> None:
    """No hold for a question the caller did not declare it can answer: declined to the upstream, whose
    own error (it fails the call) reaches the caller as it came."""
    a, _ = gateways
    answer = Caller(ALICE, {}).request(
        a, "tools/call", {"name": "reference_test_elicitation", "arguments": {"message": "Who are you?"}}
    )
    assert answer["error"]["code"] == types.INVALID_REQUEST, answer
    assert answer["error"]["message"] == "The gateway's caller cannot answer elicitation requests"


async def test_the_sdks_client_gets_through_several_rounds_and_every_kind_of_question(
    gateways: tuple[str, str],
) -> None:
    a, _ = gateways
    seen: list[str] = []

    async def on_elicitation(context: Any, params: Any) -> types.ElicitResult:
        seen.append(params.message)
        content = {"color": "teal"} if "color" in params.message else {"name": "Ada"}
        return types.ElicitResult(action="accept", content=content)

    async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen.append("sampling")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Hi"), model="m")

    async def on_roots(context: Any) -> types.ListRootsResult:
        seen.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=DEADLINE_S)
    async with Client(
        streamable_http_client(a, http_client=http),
        mode=MODERN,
        elicitation_callback=on_elicitation,
        sampling_callback=on_sampling,
        list_roots_callback=on_roots,
        read_timeout_seconds=DEADLINE_S,
        cache=None,
    ) as mcp:
        rounds = await mcp.call_tool("reference_test_input_required_result_multi_round", {})
        several = await mcp.call_tool("reference_test_input_required_result_multiple_inputs", {})
        listed = await mcp.call_tool("reference_test_input_required_result_list_roots", {})
    assert rounds.content[0].text == "Ada likes teal.", rounds  # type: ignore[union-attr]
    assert several.content[0].text == "All inputs received.", several  # type: ignore[union-attr]
    assert listed.content[0].text == "Client exposed 1 root(s): file:///work", listed  # type: ignore[union-attr]
    assert seen[:2] == ["Step 1: What is your name?", "Step 2: What is your favorite color?"]
    assert {"sampling", "roots", "What is your name?"} <= set(seen[2:])


SUITE_MISSING = conformance.missing_reason()


@pytest.fixture(scope="module")
def legacy_target() -> Iterator[str]:
    with conformance.TARGETS["toolplex-legacy-reference"]() as url:
        yield url


@pytest.mark.skipif(SUITE_MISSING is not None, reason=f"MCP conformance suite not installed: {SUITE_MISSING}")
@pytest.mark.parametrize(
    "scenario",
    [
        "input-required-result-multi-round",  # two questions, two rounds, a new requestState each
        "input-required-result-non-tool-request",  # a prompt's question
        "input-required-result-tampered-state",  # a tampered requestState is -32602
        "input-required-result-capability-check",  # no question the client did not declare
    ],
)
def test_the_official_suite_grades_the_relay_across_eras(legacy_target: str, scenario: str, tmp_path: Path) -> None:
    """The suite's own 2026-07-28 client against Toolplex fronting the handshake-era reference server."""
    result = conformance.run_scenario(legacy_target, MODERN, scenario, tmp_path)
    assert result.passed, result.failures
    assert result.checks_failed == 0
