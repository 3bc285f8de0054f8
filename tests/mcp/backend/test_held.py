"""The bounds of a held call (adapters/mcp/client/held.py): the answer wait, the number held, the questions per
call, and a round whose caller goes away. In process: the upstream's call is a coroutine that asks as
the SDK's callback would (the cross-process behaviour is tests/mcp/front/test_held_questions.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from adapters.mcp import relay
from adapters.mcp.client import held
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import Principal

WAIT_S = 5.0  # bound on every wait here
ASK = types.ElicitRequest(
    params=types.ElicitRequestFormParams(
        message="Your name?", requested_schema={"type": "object", "properties": {"name": {"type": "string"}}}
    )
)
ALICE = Principal(name="alice")
NO_LINK: Any = None  # the upstream's call here is a coroutine: no connection, no HTTP exchange
NO_EXCHANGE: Any = None


@dataclass
class FakeCaller(relay.CallerBase):
    """A 2026-07-28 caller as the MCP front hands it over (`relay.Caller`)."""

    request_state: str | None = None
    input_responses: dict[str, Any] | None = None
    capabilities: dict[str, Any] = field(default_factory=lambda: {"elicitation": {}})
    modern: bool = True
    log_level: str | None = None
    progress_token: str | int | None = None

    async def notify(self, notification: Any) -> None:
        raise AssertionError("nothing to notify here")

    async def ask(self, request: Any, result_type: type[Any]) -> Any:
        raise AssertionError("a 2026-07-28 caller is never asked directly")


def refused(tool: str, capability: str) -> Failure:
    return Failure(kind=ErrorKind.RATE_LIMITED, message=f"{tool} {capability}")


def hold_of(holds: held.Holds, caller: FakeCaller, arguments: dict[str, Any] | None = None) -> held.Hold:
    """A hold whose upstream call asks one question, then answers with what it was told."""
    hold = held.Hold(holds, ALICE, "greet", arguments or {}, NO_LINK, NO_EXCHANGE, caller)

    async def call() -> str:
        answer = await hold.ask("elicitation", ASK, types.ElicitResult)
        return f"Hello, {answer.content['name']}"

    hold.start(call())
    return hold


async def ended(hold: held.Hold) -> None:
    assert hold.task is not None
    await asyncio.wait({hold.task}, timeout=WAIT_S)
    assert hold.task.done()


async def test_an_answer_resumes_the_call_and_its_result_ends_the_hold() -> None:
    holds = held.Holds(limit=4, answer_s=WAIT_S, full=refused)
    hold = hold_of(holds, FakeCaller())
    interim = await hold.round(FakeCaller())
    assert isinstance(interim, types.InputRequiredResult) and interim.request_state == hold.token
    assert interim.input_requests is not None and list(interim.input_requests) == ["q0"]
    assert holds.holding(hold)

    retry = FakeCaller(
        request_state=hold.token, input_responses={"q0": {"action": "accept", "content": {"name": "Ada"}}}
    )
    assert holds.resume(retry, ALICE, "greet", {}) is hold
    assert await hold.round(retry) == "Hello, Ada"
    assert not holds.holding(hold)
    with pytest.raises(MCPError) as refusal:
        holds.resume(retry, ALICE, "greet", {})
    assert refusal.value.error.message == relay.INVALID_STATE


async def test_a_retry_names_its_callers_call_for_its_tool_and_arguments_only() -> None:
    holds = held.Holds(limit=4, answer_s=WAIT_S, full=refused)
    hold = hold_of(holds, FakeCaller(), {"b": 1, "a": 2})
    await hold.round(FakeCaller())
    retry = FakeCaller(request_state=hold.token, input_responses={})
    for principal, tool, arguments in (
        (Principal(name="bob"), "greet", {"b": 1, "a": 2}),
        (None, "greet", {"b": 1, "a": 2}),
        (ALICE, "other", {"b": 1, "a": 2}),
        (ALICE, "greet", {"b": 1, "a": 3}),
    ):
        with pytest.raises(MCPError) as refusal:
            holds.resume(retry, principal, tool, arguments)
        assert refusal.value.error.code == types.INVALID_PARAMS
    assert holds.resume(retry, ALICE, "greet", {"a": 2, "b": 1}) is hold  # key order is no difference
    hold.end()
    await ended(hold)


async def test_an_answer_of_the_wrong_kind_is_refused_and_the_question_stays_open() -> None:
    holds = held.Holds(limit=4, answer_s=WAIT_S, full=refused)
    hold = hold_of(holds, FakeCaller())
    await hold.round(FakeCaller())
    wrong = FakeCaller(request_state=hold.token, input_responses={"q0": {"roots": []}})
    with pytest.raises(MCPError) as refusal:
        holds.resume(wrong, ALICE, "greet", {})
    assert "inputResponses['q0']" in refusal.value.error.message
    first = hold.token
    unanswered = FakeCaller(request_state=first, input_responses={})
    again = await holds.resume(unanswered, ALICE, "greet", {}).round(unanswered)
    assert isinstance(again, types.InputRequiredResult) and list(again.input_requests or {}) == ["q0"]
    assert again.request_state == hold.token != first  # each round's state is new; the earlier one opens nothing
    with pytest.raises(MCPError):
        holds.resume(unanswered, ALICE, "greet", {})
    hold.end()
    await ended(hold)


async def test_a_question_left_unanswered_cancels_the_call_after_the_answer_wait() -> None:
    holds = held.Holds(limit=4, answer_s=0.05, full=refused)
    hold = hold_of(holds, FakeCaller())
    await hold.round(FakeCaller())
    await ended(hold)  # ended by the expiry, not by this test
    assert hold.task is not None and hold.task.cancelled()
    assert len(holds) == 0


async def test_no_more_calls_are_held_than_the_limit() -> None:
    holds = held.Holds(limit=1, answer_s=WAIT_S, full=refused)
    first, second = hold_of(holds, FakeCaller()), hold_of(holds, FakeCaller())
    await first.round(FakeCaller())
    with pytest.raises(GatewayError) as full:
        await second.round(FakeCaller())
    assert full.value.failure == refused("greet", "elicitation")
    await ended(second)
    assert second.task is not None and second.task.cancelled()
    assert holds.holding(first) and len(holds) == 1
    holds.close()
    await ended(first)
    assert len(holds) == 0


async def test_a_round_that_times_out_cancels_the_call() -> None:
    holds = held.Holds(limit=4, answer_s=WAIT_S, full=refused)
    hold = held.Hold(holds, ALICE, "slow", {}, NO_LINK, NO_EXCHANGE, FakeCaller())
    hold.start(asyncio.Event().wait())  # an upstream that never answers
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0):  # the caller's deadline has passed: the round is cancelled as it waits
            await hold.round(FakeCaller())
    await ended(hold)
    assert hold.task is not None and hold.task.cancelled() and len(holds) == 0


async def test_a_call_may_ask_only_so_many_questions() -> None:
    holds = held.Holds(limit=4, answer_s=WAIT_S, full=refused)
    hold = held.Hold(holds, ALICE, "chatty", {}, NO_LINK, NO_EXCHANGE, FakeCaller())
    hold.asked = held.MAX_QUESTIONS
    with pytest.raises(MCPError) as refusal:
        await hold.ask("elicitation", ASK, types.ElicitResult)
    assert str(held.MAX_QUESTIONS) in refusal.value.error.message
