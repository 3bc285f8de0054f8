"""A handshake-era upstream's question to a 2026-07-28 caller, relayed by holding the upstream's call open.

A server of the handshake era (2025-06-18, 2025-11-25) asks its client mid-call (during `tools/call`,
`prompts/get` or `resources/read`): it sends an `elicitation/create`, `sampling/createMessage` or
`roots/list` request on the call's stream and waits for the answer before it answers the call. A
2026-07-28 client is never asked that way: it gets an `InputRequiredResult` and sends the call again
with its `inputResponses`. Between the two the backend keeps the upstream's call running (a `Hold`) and
turns each question into an entry of an `InputRequiredResult`; the caller's retry answers the question,
and the call goes on to its result or to the next question. (Where the server speaks the caller's era
too, no hold is needed: `McpBackend._link_for`.)

- The `requestState` the caller echoes is `relay.HELD_PREFIX` and a random token naming the hold. It is
  bound to the caller's principal, the tool (prompt, URI) and a digest of its arguments, and is new each
  round: a retry by anyone else, for another tool or with other arguments, or with an earlier round's
  state, gets the SDK's own refusal (-32602 "Invalid or expired requestState").
- A hold lives in the replica that holds the upstream's connection; the front routes a retry there
  (`adapters.mcp.server.held`).
- Every part has a bound: the held calls per backend (`max_held_calls`, each principal its share of
  them: one caller's unanswered calls never keep another's from being held), the wait for an answer
  (`answer_timeout_s`, after which the upstream's call is cancelled), and the questions one call may
  ask (`MAX_QUESTIONS`). A round that times out or whose client goes away cancels the call, as an
  ordinary call's would; a hold that ends answers its open questions upstream with an error.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import mcp_types as types
import orjson
import structlog
from mcp.shared.exceptions import MCPError

from adapters.mcp import relay
from adapters.mcp.relay import HELD_PREFIX, invalid_state
from gateway.errors import ErrorKind, GatewayError
from gateway.model import Principal, principal_name
from gateway.ownership import WHOLE, Shares

if TYPE_CHECKING:
    from adapters.mcp.client.http import Exchange
    from adapters.mcp.client.link import Link

log = structlog.get_logger("toolplex.mcp")

MAX_QUESTIONS: Final = 32  # questions one held call may ask; the next is refused to the upstream
ENDED: Final = "The gateway's caller did not answer before the call ended"  # the upstream's question's answer


def identity(method: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(target, arguments) a held `resources/read` or `prompts/get` is bound to, as a tool call is to its
    tool and arguments."""
    if method == "resources/read":
        return f"{method} {params.get('uri')}", {}
    return f"{method} {params.get('name')}", dict(params.get("arguments") or {})


def digest(arguments: dict[str, Any]) -> bytes:
    """What binds a hold to the arguments it was made for (sorted keys: key order is no difference)."""
    return hashlib.sha256(orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)).digest()


class _Question:
    __slots__ = ("answer", "capability", "request", "result_type")

    def __init__(
        self, capability: str, request: types.ServerRequest, result_type: type[Any], answer: asyncio.Future[Any]
    ) -> None:
        self.capability = capability
        self.request = request
        self.result_type = result_type
        self.answer = answer


class Hold:
    """One upstream call kept running while its caller answers the upstream's questions (`relay.Questions`)."""

    def __init__(
        self,
        holds: Holds,
        principal: Principal | None,
        tool: str,
        arguments: dict[str, Any],
        link: Link,
        exchange: Exchange,
        caller: relay.Caller,
    ) -> None:
        self.holds = holds
        self.token = ""  # the requestState of its latest InputRequiredResult (`Holds.park`: new each round)
        self.principal = principal_name(principal)
        self.tool = tool
        self.digest = digest(arguments)
        self.link = link  # the backend's connection the call runs on
        self.exchange = exchange  # what the call's HTTP requests met (the backend reads its errors)
        self.pending = relay.Pending(caller)  # the call as the server's messages about it find it
        self.pending.hold = self
        self.capabilities: dict[str, Any] = dict(caller.capabilities)  # what the round's caller can answer
        self.task: asyncio.Task[Any] | None = None
        self.open: dict[str, _Question] = {}  # asked, not yet answered
        self.asked = 0
        self.busy = False  # a round is waiting on the call now
        self._changed = asyncio.Event()
        self._expiry: asyncio.TimerHandle | None = None

    # ---- the upstream's side (its questions arrive through `relay`) ----

    async def ask(self, capability: str, request: types.ServerRequest, result_type: type[Any]) -> Any:
        """Put the question into the next `InputRequiredResult`; return the caller's answer to the upstream."""
        if self.asked >= MAX_QUESTIONS:
            raise MCPError(types.INVALID_REQUEST, f"The gateway relays at most {MAX_QUESTIONS} questions per call")
        key = f"q{self.asked}"
        self.asked += 1
        question = _Question(capability, request, result_type, asyncio.get_running_loop().create_future())
        self.open[key] = question
        self._changed.set()
        try:
            return await question.answer
        finally:
            self.open.pop(key, None)

    # ---- the caller's side ----

    def start(self, call: Awaitable[Any]) -> None:
        self.task = asyncio.ensure_future(call)  # a copy of this context: the call's `relay.PENDING` is this hold's
        self.task.add_done_callback(_retrieved)  # a call that fails while no round waits is no unhandled error

    async def round(self, caller: relay.Caller) -> Any:
        """Wait for the call's result (returned, or its error raised) or its next questions (returned as an
        `InputRequiredResult`); meanwhile its logs and progress go to `caller`. The caller's deadline bounds
        the wait: a wait that ends with neither (timeout, the client gone) cancels the call."""
        assert self.task is not None
        self.pending.caller = caller
        self.busy = True
        parked = False
        try:
            while not self.task.done() and not self.open:
                self._changed.clear()
                changed = asyncio.ensure_future(self._changed.wait())
                try:
                    await asyncio.wait({self.task, changed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
            if self.task.cancelled():  # ended under the hold (its connection closed with the backend)
                raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, "The upstream's call ended before it answered")
            if self.task.done():
                return self.task.result()  # the call is over: `end` forgets it
            parked = self.holds.park(self)
            if not parked:
                raise GatewayError(self.holds.full(self.tool, self._capability()))
            asked = {key: _wire(question.request) for key, question in self.open.items()}
            return types.InputRequiredResult.model_validate(
                {"resultType": "input_required", "inputRequests": asked, "requestState": self.token}, by_name=False
            )
        finally:
            self.busy = False
            self.pending.caller = None  # its stream ends with this round's answer
            if not parked:
                self.end()

    def _answer(self, responses: dict[str, Any]) -> None:
        """Resolve each open question the caller answered (all checked before any is resolved)."""
        answers: dict[str, Any] = {}
        for key, question in self.open.items():
            if key not in responses:
                continue  # asked again in the next InputRequiredResult
            try:
                answers[key] = question.result_type.model_validate(_wire(responses[key]), by_name=False)
            except ValueError:
                what = f"inputResponses[{key!r}] is no answer to its {question.request.method} request"
                raise MCPError(types.INVALID_PARAMS, what) from None
        for key, answer in answers.items():
            future = self.open.pop(key).answer  # no longer open: the round waits for what comes next
            if not future.done():
                future.set_result(answer)

    def _capability(self) -> str:
        return next(iter(self.open.values())).capability

    def expire_after(self, seconds: float) -> None:
        self.stop_expiry()
        self._expiry = asyncio.get_running_loop().call_later(seconds, self._expired)

    def stop_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    def _expired(self) -> None:
        log.info("mcp_held_call_expired", tool=self.tool, questions=len(self.open))
        self.end()

    def end(self) -> None:
        """Stop holding: the call is cancelled if it still runs, and its token opens nothing any more."""
        self.stop_expiry()
        self.holds.forget(self)
        if self.task is not None and not self.task.done():
            self.task.cancel()
        for question in self.open.values():
            if not question.answer.done():
                # An error answer, never a cancellation: the question waits in a task of the backend's MCP
                # session (the SDK's handler of the server's request), where a CancelledError would end the
                # whole session, every other caller's calls with it. The upstream gets a JSON-RPC error.
                question.answer.set_exception(MCPError(types.INTERNAL_ERROR, ENDED))


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _wire(value: Any) -> Any:
    """A model as its JSON (by alias); anything else as it is."""
    dump = getattr(value, "model_dump", None)
    return dump(by_alias=True, mode="json", exclude_none=True) if dump is not None else value


class Holds:
    """The held calls of one backend, by token; at most `limit`, each principal at most its share of them
    (`gateway.ownership.Shares`), each for at most `answer_s` per question."""

    def __init__(
        self, limit: int, answer_s: float, full: Callable[[str, str], Any], shares: Shares | None = None
    ) -> None:
        self.limit = limit
        self.answer_s = answer_s
        self.full = full  # (tool, capability) -> the Failure of a call that cannot be held
        self.shares = shares if shares is not None else WHOLE
        self._held: OrderedDict[str, Hold] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def park(self, hold: Hold) -> bool:
        """Keep `hold` for its caller's answer under a new token (each round's `requestState` is new, so an
        earlier round's opens nothing); False when `limit` calls are held already."""
        again = self.holding(hold)
        if not again and len(self._held) >= self.limit:
            log.warning("mcp_held_calls_full", limit=self.limit, tool=hold.tool)
            return False
        share = self.shares.of(self.limit) if self.limit > 0 else 0
        if not again and sum(1 for h in self._held.values() if h.principal == hold.principal) >= share:
            log.warning("mcp_held_calls_share_full", share=share, tool=hold.tool, principal=hold.principal or None)
            return False
        self.forget(hold)
        hold.token = HELD_PREFIX + secrets.token_urlsafe(24)
        self._held[hold.token] = hold
        hold.expire_after(self.answer_s)
        return True

    def holding(self, hold: Hold) -> bool:
        return bool(hold.token) and self._held.get(hold.token) is hold

    def forget(self, hold: Hold) -> None:
        if self._held.get(hold.token) is hold:
            del self._held[hold.token]

    def resume(self, caller: relay.Caller, principal: Principal | None, tool: str, arguments: dict[str, Any]) -> Hold:
        """The hold a retry names, with the questions it answers answered; `invalid_state` unless the hold is
        this caller's, for this tool and these arguments, and no other retry of it is under way."""
        hold = self._held.get(caller.request_state or "")
        if (
            hold is None
            or hold.busy
            or hold.principal != principal_name(principal)
            or hold.tool != tool
            or hold.digest != digest(arguments)
        ):
            raise invalid_state()
        hold._answer(caller.input_responses or {})
        hold.capabilities = dict(caller.capabilities)
        hold.stop_expiry()
        return hold

    def close(self) -> None:
        for hold in list(self._held.values()):
            hold.end()
