"""The MCP backend's pass-through: the MCP front's requests other than tool calls, relayed to the server.

Resources, resource templates, prompts, completions, the tasks extension's `tasks/*` and resource
subscriptions reach the backend as pipeline requests of their own kinds (`gateway.model.RequestKind`),
after the pipeline's policy (the caller's limits, middleware, metrics, call log), through `operate`.
Each goes to the server as it came, on the connection of its caller's era (`McpBackend._link_for`),
under the backend's breaker, with the caller's credentials when the backend forwards them; the
answer comes back as the server gave it, its own JSON-RPC error as an `UpstreamFailed` the MCP front
answers as it came. `PassThrough` is the part of `McpBackend` that does this.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import ValidationError

from adapters.mcp import codec, relay, tasks
from adapters.mcp.client import held
from adapters.mcp.client.failures import SendAgain, answered, error_of
from adapters.mcp.client.link import calling, held_call
from gateway.errors import ErrorKind, GatewayError
from gateway.model import CallContext, RequestKind, UpstreamFailed

if TYPE_CHECKING:
    from adapters.mcp.client.http import Exchange
    from adapters.mcp.client.link import Link

log = structlog.get_logger("toolplex.mcp")

# The requests other than tool calls an MCP backend relays, by kind.
OPERATIONS: Final[dict[str, tuple[str, ...]]] = {
    RequestKind.LIST: ("resources/list", "resources/templates/list", "prompts/list"),
    RequestKind.READ: ("resources/read",),
    RequestKind.PROMPT: ("prompts/get",),
    RequestKind.COMPLETE: ("completion/complete",),
    RequestKind.TASK: tasks.METHODS,
    RequestKind.SUBSCRIBE: ("resources/subscribe", "resources/unsubscribe"),
}
MAX_WATCHED: Final = 256  # resource URIs one listen stream asks updates of (the MCP front's subscriptions), at most


class PassThrough:
    """`McpBackend`'s pass-through requests (see the module docstring); the backend supplies the connection,
    the breaker and the error mapping it reads here."""

    name: str
    watched: dict[str, None]
    watch_changes: int
    _listeners: dict[Callable[[Any], Awaitable[None]], None]
    _link: Link | None

    if TYPE_CHECKING:
        from adapters.mcp.client.settings import McpBackendSettings
        from gateway.breaker import CircuitBreaker

        settings: McpBackendSettings
        breaker: CircuitBreaker
        holds: held.Holds

        def _admit(self, remaining: float | None) -> Any: ...
        async def _link_for(self, caller: relay.Caller | None, deadline: float | None) -> Link: ...
        def _exchange(self, context: CallContext | None) -> Any: ...
        async def _settle(self, exc: MCPError, link: Link) -> None: ...
        def _request_failure(self, exc: MCPError, exchange: Exchange, link: Link, method: str) -> Any: ...
        def unavailable(self, message: str, **fields: Any) -> GatewayError: ...

    async def operate(
        self, kind: str, operation: str, params: dict[str, Any], context: CallContext, payload: Any = None
    ) -> Any:
        """A request of the MCP front's pass-through (`OperationBackend`), after the pipeline's policy
        stages: relayed to this server under its breaker, with the caller's credentials when this backend
        forwards them. The server's own JSON-RPC error is noted for the MCP front to answer as it came
        (`UpstreamFailed`) and fails the request as its canonical kind."""
        if operation not in OPERATIONS.get(kind, ()):
            raise GatewayError.of(ErrorKind.MALFORMED, f"{operation} is not relayed as a {kind} request")
        caller = relay.caller_of(context.peer)
        permit = self._admit(context.remaining())
        try:
            if kind == RequestKind.SUBSCRIBE:
                link = await self._link_for(caller, context.deadline)
                if link.era == "modern":  # no resources/subscribe in 2026-07-28: the listen stream asks for it
                    await self.watch(str(params.get("uri")), operation == "resources/subscribe")
                    return {}
            return await self.pass_through(operation, params, caller, context)
        except MCPError as exc:  # the server's own answer: relayed as it came by the MCP front
            failure = codec.failure_of_error(self.name, exc.code, exc.message, exc.data)
            raise UpstreamFailed(failure, error_of(exc)) from None
        finally:
            self.breaker.release(permit)

    async def pass_through(
        self, method: str, params: dict[str, Any], caller: relay.Caller | None, context: CallContext | None = None
    ) -> dict[str, Any]:
        """One request of the MCP front's pass-through (`resources/*`, `prompts/*`, `completion/complete`,
        `tasks/*`) sent to this server, its result as the server gave it (JSON, by alias).

        The server's own JSON-RPC error is raised as it came (`MCPError`); a transport failure or an
        HTTP error status as the `GatewayError` a tool call would meet. Never sent twice. A handshake-era
        server's question during `resources/read` or `prompts/get` reaches a 2026-07-28 caller as a tool
        call's does (`held`; the context's principal is whose the held request is). With
        `forward_authorization`, the context's caller's credentials go upstream in place of the backend's.
        """
        principal = context.principal if context is not None else None
        remaining = self.settings.timeouts_s.read
        if context is not None and context.remaining() is not None:
            remaining = min(remaining, context.remaining() or 0.0)
        asker = caller if caller is not None and caller.modern and method in relay.HELD_METHODS else None  # may be held
        if asker is not None and relay.is_held(asker.request_state):
            hold = self.holds.resume(asker, principal, *held.identity(method, params))  # its MCPError as it is
            return await self._passed(method, hold.link, hold.exchange, hold.round(asker), remaining)
        link = await self._link_for(caller, time.monotonic() + remaining)
        assert link.client is not None
        async with self._exchange(context) as exchange:
            if asker is not None and link.era == "legacy" and self.holds.limit > 0:
                caller = asker
                if caller.request_state is not None:  # a state no hold issued (answers alone are ignored: re-asked)
                    raise relay.invalid_state()
                hold = held.Hold(self.holds, principal, *held.identity(method, params), link, exchange, caller)
                hold.start(held_call(link, caller, hold.pending, _relayed(link, method, params, caller)))
                return await self._passed(method, link, exchange, hold.round(caller), remaining)
            async with calling(link, caller):
                return await self._passed(method, link, exchange, _relayed(link, method, params, caller), remaining)

    async def _passed(
        self, method: str, link: Link, exchange: Exchange, work: Awaitable[Any], remaining: float
    ) -> dict[str, Any]:
        """`pass_through`'s answer, once `work` (the request, or a held request's round) ends in `remaining`."""
        try:
            async with asyncio.timeout(remaining):
                result = await work
        except TimeoutError:
            raise GatewayError.of(
                ErrorKind.DEADLINE, f"Upstream {self.name!r} did not answer {method} within {remaining:g} s"
            ) from None
        except MCPError as exc:
            await self._settle(exc, link)
            if answered(exc, exchange):
                raise  # the server's own answer: relayed as it is
            failure = self._request_failure(exc, exchange, link, method)
            raise (failure.error if isinstance(failure, SendAgain) else failure) from None
        except (ValidationError, RuntimeError) as exc:
            self.breaker.failure()
            raise self.unavailable(f"its answer to {method} is malformed: {exc}") from None
        self.breaker.success()
        if isinstance(result, tasks.TaskAnswer):
            return tasks.wire(result)
        return result.model_dump(by_alias=True, mode="json", exclude_unset=True)  # type: ignore[no-any-return]

    @property
    def era(self) -> str | None:
        """The protocol era of the live connection ("modern" or "legacy"), None while there is none."""
        link = self._link
        return link.era if link is not None and link.alive else None

    async def watch(self, uri: str, on: bool) -> None:
        """2026 era: ask the listen stream for updates of `uri` (or stop); returns once the server took the
        new filter, or after the read timeout (the stream then takes it when it opens again)."""
        if on:
            self.watched.pop(uri, None)
            self.watched[uri] = None
            while len(self.watched) > MAX_WATCHED:
                del self.watched[next(iter(self.watched))]
        elif self.watched.pop(uri, False) is False:
            return
        self.watch_changes += 1
        link = self._link
        if link is None or not link.alive or link.era != "modern":
            return
        link.relisten.set()
        if not await link.listening(self.watch_changes, self.settings.timeouts_s.read):
            log.info("mcp_watch_not_acknowledged", backend=self.name, uri=uri[:200])

    def listen(self, listener: Callable[[Any], Awaitable[None]]) -> None:
        """Have `listener` hear what the server says of its resources and prompts (`NOTICES`)."""
        self._listeners[listener] = None

    async def announce(self, notice: Any) -> None:
        for listener in list(self._listeners):
            try:
                await listener(notice)
            except Exception as exc:  # one listener's failure is not the connection's
                log.warning("mcp_notice_not_relayed", backend=self.name, error=repr(exc))


async def _relayed(link: Link, method: str, params: dict[str, Any], caller: relay.Caller | None) -> Any:
    """`method` sent through the SDK session's typed request (it validates the answer for the era)."""
    session = link.client.session if link.client is not None else None
    assert session is not None
    meta = relay.request_meta(caller)
    answers = caller is not None and caller.modern and link.era == "modern"
    page = types.PaginatedRequestParams(cursor=params.get("cursor"))
    if method == "resources/list":
        return await session.list_resources(params=page)
    if method == "resources/templates/list":
        return await session.list_resource_templates(params=page)
    if method == "prompts/list":
        return await session.list_prompts(params=page)
    if method == "resources/read":
        return await session.read_resource(
            params["uri"],
            input_responses=params.get("inputResponses"),
            request_state=params.get("requestState"),
            meta=meta,  # type: ignore[arg-type]
            allow_input_required=answers,
        )
    if method == "prompts/get":
        return await session.get_prompt(
            params["name"],
            params.get("arguments"),
            input_responses=params.get("inputResponses"),
            request_state=params.get("requestState"),
            meta=meta,  # type: ignore[arg-type]
            allow_input_required=answers,
        )
    if method == "completion/complete":
        request = types.CompleteRequestParams.model_validate(params, by_name=False)
        context = request.context.arguments if request.context is not None else None
        return await session.complete(request.ref, request.argument.model_dump(), context_arguments=context)
    if method in tasks.METHODS:
        if not answers:
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data=method)  # no tasks off 2026-07-28
        request = tasks.TaskRequest(method=method, params=tasks.TaskParams.model_validate(params, by_name=False))
        if meta:
            request.params.meta = {**(request.params.meta or {}), **meta}  # type: ignore[typeddict-item]
        return await session.send_request(request, tasks.TaskAnswer)
    if method in ("resources/subscribe", "resources/unsubscribe"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if method == "resources/subscribe":
                return await session.subscribe_resource(params["uri"])
            return await session.unsubscribe_resource(params["uri"])
    raise ValueError(f"{method} is not relayed")
