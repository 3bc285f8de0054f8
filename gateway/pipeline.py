"""One call pipeline: stages `async (call, next) -> Outcome`, assembled once from the config.

Every request a front makes of a backend or of a caller's state passes the same stages: a tool call,
and every other kind of request (`RequestKind`: an MCP server's resources, prompts, completions,
listings, tasks and subscriptions, a workspace file, a result handle). A kind the pipeline does not know
is refused; one that is not a tool call skips only what concerns tools (requirements, argument
validation, the result cache). Outermost first:

    (span)        with `tracing.enabled` only: the call's OpenTelemetry span, around all the rest
    observe       the after-hooks (call log, metrics, user middleware): see every final outcome
    frame         timing, shutdown tracking; a GatewayError anywhere inside becomes the outcome's failure
    limits        concurrency limits, gateway-wide and per principal
    resolve       name and version -> the catalog's ToolSpec; another kind: its backend serves it
    permissions   may this principal call this tool (another kind: reach this backend)
    rate          token buckets per principal and per backend (only when limits.rate sets one)
    requirements  secrets, user and authorizations the tool needs (the call's auth context)
    middleware    the configured user middleware, in order (before-hooks, or whole stages)
    validate      arguments against the tool's input schema (left to the upstream on a same-protocol hop)
    deadline      the call's deadline: asked, per tool, per backend, capped
    cache         a cached result of a side-effect-free tool (per caller when the answer may depend on it)
    dispatch      the backend runs the tool (or serves the request) under the deadline

A stage may raise `GatewayError` to fail the call; `frame` turns it into the
outcome's canonical failure. The chain is composed once per snapshot, never
per call; stages read the snapshot's catalog and backends through `parts`.

What a call pays for is decided then too: steps that only check and go on run in one coroutine
(`frame` with `limits`; `resolve` to `requirements`; `validate` with `deadline`), a stage with
nothing to do is left out (`rate` without buckets, `cache` when no backend caches, user middleware
without a `before` or `stage`), and a call to a tool whose backend does not cache skips the cache's
key work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast
from urllib.parse import quote

import structlog

from gateway import tracing
from gateway.backends import Backend, Feature, OperationBackend
from gateway.cache import MISS, ResultCache
from gateway.catalog import Catalog
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.limits import CallLimiter, RateLimiter
from gateway.middleware import BaseMiddleware
from gateway.model import (
    GATEWAY_KINDS,
    Answered,
    Call,
    CallContext,
    Outcome,
    RequestKind,
    ToolSpec,
    UpstreamAnswer,
    permitted,
    principal_name,
)
from gateway.oauth.scopes import note_allowed, note_insufficient_scope
from gateway.validation import ValidatorCache

log = structlog.get_logger("toolplex.call")

SHUTDOWN_RETRY_AFTER_MS = 1000

Next = Callable[[Call], Awaitable[Outcome]]
Stage = Callable[[Call, Next], Awaitable[Outcome]]


class Parts(Protocol):
    """What the stages read per call: the catalog and the running backends (a snapshot, or a Dispatcher)."""

    @property
    def catalog(self) -> Catalog: ...

    @property
    def backends(self) -> Mapping[str, Backend]: ...


@dataclass(frozen=True)
class CallPolicy:
    """Deadlines and server-side secrets, from `limits` and `secrets`."""

    default_timeout: float = 30.0
    max_timeout: float = 300.0
    secrets: Mapping[str, str] = field(default_factory=dict)


def shutting_down() -> GatewayError:
    """What a call gets when the gateway stops before (or while) running it."""
    return GatewayError.of(
        ErrorKind.UPSTREAM_UNAVAILABLE,
        "The gateway is shutting down; the call did not complete, retry it shortly",
        can_retry=True,
        retry_after_ms=SHUTDOWN_RETRY_AFTER_MS,
    )


class Admission:
    """Which calls are running (by task), so a shutdown can wait for them, then end the rest with an answer.

    One per gateway, shared by every snapshot's pipeline: a reload never loses count.
    """

    def __init__(self) -> None:
        self._running: dict[asyncio.Task[Any], int] = {}  # task -> calls it is inside
        self._aborting: set[asyncio.Task[Any]] = set()  # of those, the ones the shutdown cancelled
        self._idle = asyncio.Event()
        self._idle.set()
        self._hurry = asyncio.Event()  # set by a second Ctrl-C: end the running calls now
        self.shutting_down = False

    @property
    def running(self) -> int:
        """Calls in progress right now (in any front, or in the background)."""
        return sum(self._running.values())

    def enter(self, task: asyncio.Task[Any] | None) -> None:
        if self.shutting_down:
            raise shutting_down()
        if task is not None:
            self._running[task] = self._running.get(task, 0) + 1
            self._idle.clear()

    def leave(self, task: asyncio.Task[Any] | None) -> None:
        if task is None or task not in self._running:
            return
        self._running[task] -= 1
        if self._running[task]:
            return
        del self._running[task]
        self._aborting.discard(task)
        if not self._running:
            self._idle.set()

    def cancelled_by_shutdown(self, task: asyncio.Task[Any] | None) -> bool:
        """True when the only cancellation pending on `task` is the shutdown's: it is then withdrawn."""
        if task is None or task not in self._aborting or task.cancelling() != 1:
            return False
        task.uncancel()
        return True

    async def drain(self, grace: float, answer_within: float = 5.0, quiet: asyncio.Event | None = None) -> int:
        """Give running calls `grace` seconds, then end the rest with "shutting down"; refuse new calls after.

        Until then a new call is admitted: the server stopped accepting connections, so a new call is a request
        it had accepted already (its body still on its way when the stop began), which deserves its answer.
        `quiet` (set once the server's connections are all closed) says that no such request is left: without
        it the drain ends as soon as no call runs. An ended call is answered by its front like any failed
        call (no dropped connection); `answer_within` bounds the wait for those answers. Returns how many
        calls had to be ended.
        """
        waits = [asyncio.ensure_future(self._settled(quiet)), asyncio.ensure_future(self._hurry.wait())]
        try:
            await asyncio.wait(waits, timeout=max(0.0, grace), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            self.shutting_down = True
        if not self._running:
            return 0
        left = list(self._running)
        log.warning("shutdown_ending_calls", calls=len(left), grace_s=grace)
        for task in left:
            self._aborting.add(task)
            task.cancel()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=answer_within)
        except TimeoutError:
            log.error("shutdown_calls_did_not_end", calls=self.running)
        return len(left)

    async def _settled(self, quiet: asyncio.Event | None) -> None:
        """No call runs, and (with `quiet`) no connection is left that could bring one."""
        while True:
            await self._idle.wait()
            if quiet is None:
                return
            await quiet.wait()
            if self._idle.is_set():
                return

    def hurry(self) -> None:
        """Stop waiting for running calls: a draining gateway ends them now."""
        self._hurry.set()


class InFlight:
    """Calls running on one pipeline: a reload closes what only the old snapshot used once this is zero.
    Counted per front too (the console shows it); a `parent` counts the calls of every configuration at once
    (those still running on an older one after a reload included)."""

    def __init__(self, parent: InFlight | None = None) -> None:
        self.count = 0
        self.by_front: dict[str, int] = {}
        self.parent = parent
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self, front: str) -> None:
        self.count += 1
        self.by_front[front] = self.by_front.get(front, 0) + 1
        self._idle.clear()
        if self.parent is not None:
            self.parent.enter(front)

    def leave(self, front: str) -> None:
        if self.parent is not None:
            self.parent.leave(front)
        self.count -= 1
        left = self.by_front[front] - 1
        if left:
            self.by_front[front] = left
        else:
            del self.by_front[front]
        if not self.count:
            self._idle.set()

    async def idle(self, timeout: float) -> bool:
        """True once no call runs here, False when `timeout` seconds passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True


def deadline_for(parts: Parts, policy: CallPolicy, call: Call, spec: ToolSpec | None) -> float:
    """The call's deadline in seconds: asked for, else the tool's, else the default; capped by limits and backend."""
    wanted = call.timeout if call.timeout is not None else (spec.timeout if spec is not None else None)
    if wanted is None:
        wanted = policy.default_timeout
    backend = parts.backends.get(spec.backend if spec is not None else call.backend or "")
    cap = backend.settings.call_timeout_cap() if backend is not None else None
    return min(wanted, policy.max_timeout, cap if cap is not None else policy.max_timeout)


def authorize(spec: ToolSpec, ctx: CallContext) -> None:
    principal = ctx.principal
    if principal is None or permitted(principal, spec):
        if principal is not None:
            note_allowed()
        if spec.quarantine is not None:  # its definition changed since it was approved (`gateway.pinning`)
            raise spec.quarantine.failure(spec)
        return
    scopes = principal.scopes_for(spec)
    note_insufficient_scope(scopes)  # an OAuth caller is told which scopes would allow it (403 challenge)
    details = {"scopes_needed": list(scopes)} if scopes else {}
    raise GatewayError.of(
        ErrorKind.FORBIDDEN, f"Caller {principal.name!r} may not call tool {spec.flat_name}", details=details
    )


def target(parts: Parts, call: Call) -> None:
    """A request of another kind than a tool call may go on: its kind is one the pipeline knows, and its
    backend is running and serves that kind (or, for the gateway's own kinds, it brings its `run`)."""
    try:
        kind = RequestKind(call.kind)
    except ValueError:
        raise GatewayError.of(ErrorKind.MALFORMED, f"Requests of kind {call.kind!r} are not served") from None
    if call.backend is None:
        if kind not in GATEWAY_KINDS or call.run is None:
            raise GatewayError.of(ErrorKind.MALFORMED, f"A {kind} request names no backend")
        return
    backend = parts.backends.get(call.backend)
    if backend is None:
        raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {call.backend!r} is not running")
    if kind not in getattr(backend, "operations", ()):
        raise GatewayError.of(ErrorKind.MALFORMED, f"Backend {call.backend!r} serves no {kind} requests")


def reach(parts: Parts, call: Call) -> None:
    """May the caller make a request of another kind of this backend: it may call one of its tools."""
    principal = call.context.principal
    if call.backend is None or principal is None or principal.tools is None:
        return
    if not parts.catalog.reaches(principal, call.backend):
        raise GatewayError.of(ErrorKind.FORBIDDEN, f"Caller {principal.name!r} may not use backend {call.backend!r}")


def check_requirements(
    parts: Parts, policy: CallPolicy, spec: ToolSpec, ctx: CallContext, *, strict: bool = False
) -> None:
    """The secrets, user and authorizations the tool declares; fills `ctx.secrets` with what it may see."""
    needs = spec.requirements
    if needs.empty:
        return
    # A backend whose upstream checks requirements itself answers a missing authorization with the
    # upstream's challenge, URL included; this side, knowing no URL, leaves it to the upstream.
    backend = parts.backends.get(spec.backend)
    relayed = not strict and backend is not None and Feature.CHECKS_REQUIREMENTS in backend.features
    configured = policy.secrets
    missing = [s for s in needs.secrets if s not in ctx.secrets and s not in configured]
    if missing:
        raise GatewayError.of(
            ErrorKind.MISSING_REQUIREMENT,
            f"Tool {spec.flat_name} needs the secret(s) {', '.join(missing)}",
            developer_message="Supply them in the call context or in the gateway configuration",
            details={"secrets": missing},
        )
    # The tool sees the secrets it declared: the caller's, else the configured ones.
    ctx.secrets = {**{name: configured[name] for name in needs.secrets if name in configured}, **ctx.secrets}
    if needs.user_id and not ctx.user_id:
        raise GatewayError.of(
            ErrorKind.MISSING_REQUIREMENT, f"Tool {spec.flat_name} needs a user_id", details={"user_id": True}
        )
    challenges = []
    for auth in needs.authorization:
        if auth.id in ctx.authorization or (relayed and not auth.url):
            continue
        fill = {  # URL-encoded: the values land inside URLs
            "provider": quote(auth.id, safe=""),
            "tool": quote(spec.flat_name, safe=""),
            "user_id": quote(ctx.user_id or "", safe=""),
            "scopes": quote(" ".join(auth.scopes), safe=""),
        }
        challenge: dict[str, Any] = {"id": auth.id}
        if auth.url:
            challenge["url"] = auth.url.format(**fill)
        if auth.check_url:
            challenge["check_url"] = auth.check_url.format(**fill)
        challenges.append(challenge)
    if challenges:
        raise GatewayError.of(
            ErrorKind.AUTHORIZATION_REQUIRED,
            f"Tool {spec.flat_name} needs your authorization with {', '.join(c['id'] for c in challenges)}",
            details={"authorization": challenges},
        )


def _spec(call: Call) -> ToolSpec:
    assert call.spec is not None, "the resolve stage runs before this one"
    return call.spec


class Pipeline:
    """The composed stages of one snapshot; `await pipeline(call)` runs a call through all of them."""

    def __init__(
        self,
        parts: Parts,
        *,
        policy: CallPolicy,
        admission: Admission,
        limiter: CallLimiter,
        middleware: Sequence[Any] = (),
        cache: ResultCache | None = None,
        validators: ValidatorCache | None = None,
        in_flight: InFlight | None = None,
        rates: RateLimiter | None = None,
        recorders: Sequence[Callable[[Call, Outcome], None]] = (),
    ) -> None:
        self.parts = parts
        self.recorders = tuple(recorders)  # told of every outcome, synchronously (the console's traffic)
        self.policy = policy
        self.admission = admission
        self.limiter = limiter
        self.rates = rates  # None: rates are off, and the stage is left out
        self.middleware = list(middleware)
        self.cache = cache
        self.validators = validators if validators is not None else ValidatorCache()
        self.in_flight = in_flight if in_flight is not None else InFlight()  # shared by one config's pipelines
        self._after = [m.after for m in reversed(self.middleware) if _overrides(m, "after")]
        stages: list[Stage] = [
            *tracing.call_stages(),  # none when tracing is off: no cost per call
            self._observe,
            self._frame,  # with the concurrency limits
            self._checks if rates is None else self._checks_and_rate,  # resolve, permissions, [rate], requirements
            *(stage for m in self.middleware if (stage := _as_stage(m)) is not None),
            self._validate,  # with the deadline
        ]
        if cache is not None and cache.rules:
            stages.append(self._cache)
        self.stages = tuple(stages)
        self._run: Next = _compose(self.stages, self._dispatch)

    async def __call__(self, call: Call) -> Outcome:
        return await self._run(call)

    # ---- the stages, outermost first ----

    async def _observe(self, call: Call, next_: Next) -> Outcome:
        marked = tracing.mark_call(call.context.call_id)  # log lines of the call (its own included) name it
        try:
            outcome = await next_(call)
            for record in self.recorders:
                try:
                    record(call, outcome)
                except Exception:
                    log.exception("call_recorder_failed", call_id=outcome.call_id)
            for hook in self._after:
                try:
                    await hook(call, outcome)
                except Exception:
                    log.exception("middleware_after_failed", call_id=outcome.call_id, middleware=_owner(hook))
        finally:
            tracing.unmark_call(marked)
        return outcome

    async def _frame(self, call: Call, next_: Next) -> Outcome:
        started = time.monotonic()
        call.started = started
        ctx = call.context
        task = asyncio.current_task()
        outcome: Outcome | None = None
        failure: Failure | None = None
        upstream: UpstreamAnswer | None = None
        principal = principal_name(ctx.principal)
        limited = False
        front = ctx.front
        self.in_flight.enter(front)
        try:
            self.admission.enter(task)
            self.limiter.enter(principal)
            limited = True
            outcome = await next_(call)
        except GatewayError as exc:
            failure = exc.failure
            upstream = getattr(exc, "upstream", None)  # an `UpstreamFailed`: the upstream's own answer
        except asyncio.CancelledError:
            if not self.admission.cancelled_by_shutdown(task):
                raise
            failure = shutting_down().failure
        except Exception:
            log.exception("internal_error", call_id=ctx.call_id, tool=call.tool)
            failure = Failure(
                kind=ErrorKind.INTERNAL, message=f"Internal error; quote call id {ctx.call_id} to the operator"
            )
        finally:
            if limited:
                self.limiter.leave(principal)
            self.admission.leave(task)
            self.in_flight.leave(front)
        if outcome is None:
            outcome = Outcome(call_id=ctx.call_id, spec=call.spec, error=failure, upstream=upstream)
        outcome.duration_ms = round((time.monotonic() - started) * 1000, 3)
        return outcome

    def _check(self, call: Call) -> None:
        """resolve (name and version -> the catalog's spec; another kind: its backend serves it), permissions."""
        if call.kind is RequestKind.TOOL:
            call.spec = spec = self.parts.catalog.resolve(call.tool, call.version)
            authorize(spec, call.context)
        else:
            target(self.parts, call)
            reach(self.parts, call)

    async def _checks(self, call: Call, next_: Next) -> Outcome:
        self._check(call)
        if call.kind is RequestKind.TOOL:
            check_requirements(self.parts, self.policy, _spec(call), call.context)
        return await next_(call)

    async def _checks_and_rate(self, call: Call, next_: Next) -> Outcome:
        """`_checks` with the rate limits between the permissions and the requirements."""
        self._check(call)
        assert self.rates is not None
        backend = call.spec.backend if call.spec is not None else call.backend
        await self.rates.admit(principal_name(call.context.principal), backend)
        if call.kind is RequestKind.TOOL:
            check_requirements(self.parts, self.policy, _spec(call), call.context)
        return await next_(call)

    async def _validate(self, call: Call, next_: Next) -> Outcome:
        """The arguments against the tool's input schema, then the call's deadline."""
        if call.kind is RequestKind.TOOL:
            spec = _spec(call)
            if not self._same_protocol(spec, call.context.front):  # else a transparent hop: the upstream judges
                problems = self.validators.get(spec.input_schema).errors(call.arguments)
                if problems:
                    listed = "; ".join(f"{name}: {msg}" for name, msg in problems.items())
                    raise GatewayError.of(
                        ErrorKind.INVALID_ARGUMENTS,
                        f"Invalid arguments for {spec.flat_name}: {listed}",
                        parameter_errors=problems,
                    )
        call.deadline_s = deadline_for(self.parts, self.policy, call, call.spec)
        call.context.deadline = call.started + call.deadline_s
        return await next_(call)

    def _same_protocol(self, spec: ToolSpec, front: str) -> bool:
        """The call came through a front of the protocol its backend speaks upstream (OpenTool to OpenTool, MCP
        to MCP): the upstream's own answer, invalid arguments included, reaches the caller as it came."""
        backend = self.parts.backends.get(spec.backend)
        return backend is not None and getattr(backend, "relays", None) == front

    async def _cache(self, call: Call, next_: Next) -> Outcome:
        assert self.cache is not None
        if call.kind is not RequestKind.TOOL or self.cache.ttl_for(_spec(call)) is None:
            return await next_(call)  # not cached: no key to work out
        spec = _spec(call)
        backend = self.parts.backends.get(spec.backend)
        caller = self.cache.caller_of(spec, call.context, backend.settings if backend is not None else None)
        hit = self.cache.get(spec, call.arguments, caller)
        if hit is not MISS:
            value, upstream = hit
            return Outcome(call_id=call.context.call_id, spec=spec, value=value, cached=True, upstream=upstream)
        outcome = await next_(call)
        if outcome.error is None and call.context.cacheable:
            owner = principal_name(call.context.principal)
            self.cache.put(spec, call.arguments, outcome.value, caller, owner, upstream=outcome.upstream)
        return outcome

    async def _dispatch(self, call: Call) -> Outcome:
        if call.kind is not RequestKind.TOOL:
            return await self._serve(call)
        spec = _spec(call)
        ctx = call.context
        timeout = call.deadline_s if call.deadline_s is not None else self.policy.default_timeout
        backend = self.parts.backends.get(spec.backend)
        if backend is None:
            raise GatewayError.of(
                ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {spec.backend!r} of tool {spec.flat_name} is not running"
            )
        try:
            async with asyncio.timeout(timeout):
                value = await backend.call(spec, call.arguments, ctx)
            if type(value) is Answered:
                return Outcome(call_id=ctx.call_id, spec=spec, value=value.value, upstream=value.upstream)
        except TimeoutError:
            raise GatewayError.of(
                ErrorKind.DEADLINE,
                f"Tool {spec.flat_name} did not finish within {timeout:g} s",
                can_retry=True,
                details={"timeout_s": timeout, **ctx.notes},
            ) from None
        return Outcome(call_id=ctx.call_id, spec=spec, value=value)

    async def _serve(self, call: Call) -> Outcome:
        """A request of another kind: the backend serves it (`OperationBackend.operate`), or the gateway
        answers it from the caller's own state (`Call.run`), under the deadline."""
        ctx = call.context
        timeout = call.deadline_s if call.deadline_s is not None else self.policy.default_timeout
        try:
            async with asyncio.timeout(timeout):
                if call.run is not None and call.backend is None:
                    value = await call.run(ctx)
                else:
                    backend = self.parts.backends.get(call.backend or "")
                    if backend is None:
                        raise GatewayError.of(
                            ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {call.backend!r} is not running"
                        )
                    operate = cast(OperationBackend, backend).operate
                    value = await operate(call.kind, call.tool, call.arguments, ctx, call.payload)
            if type(value) is Answered:
                return Outcome(call_id=ctx.call_id, spec=None, value=value.value, upstream=value.upstream)
        except TimeoutError:
            raise GatewayError.of(
                ErrorKind.DEADLINE,
                f"{call.tool} did not finish within {timeout:g} s",
                can_retry=True,
                details={"timeout_s": timeout, **ctx.notes},
            ) from None
        return Outcome(call_id=ctx.call_id, spec=None, value=value)

    # ---- the checks without the run ----

    def precheck(self, call: Call) -> Failure | None:
        """The checks before a tool runs (exists, permitted, requirements present), without running it.

        For fronts that answer a repeated call from a record (OXP call_id replay): the
        record is handed out only to a call that would pass these checks now.
        """
        try:
            spec = self.parts.catalog.resolve(call.tool, call.version)
            authorize(spec, call.context)
            check_requirements(self.parts, self.policy, spec, call.context, strict=True)
        except GatewayError as exc:
            return exc.failure
        return None

    def deadline_for(self, call: Call, spec: ToolSpec | None) -> float:
        return deadline_for(self.parts, self.policy, call, spec)


def _as_stage(middleware: Any) -> Stage | None:
    """A configured middleware as a stage: its own `stage(call, next)`, or its `before` hook."""
    stage = getattr(middleware, "stage", None)
    if callable(stage):
        return stage  # type: ignore[no-any-return]
    before = getattr(middleware, "before", None)
    if not _overrides(middleware, "before"):
        return None
    assert callable(before)
    name = type(middleware).__name__

    async def run_before(call: Call, next_: Next) -> Outcome:
        rewritten = await before(call, call.spec)  # None for a request that is no tool call (`call.kind`)
        if rewritten is not None:
            if not isinstance(rewritten, dict):
                raise TypeError(f"{name}.before returned {type(rewritten).__name__}, not a dict")
            call.arguments = rewritten
        return await next_(call)

    return run_before


def _overrides(middleware: Any, hook: str) -> bool:
    """The middleware has this hook, and not BaseMiddleware's own that does nothing (no empty stage per call)."""
    found = getattr(middleware, hook, None)
    return callable(found) and getattr(type(middleware), hook, None) is not getattr(BaseMiddleware, hook)


def _compose(stages: Sequence[Stage], terminal: Next) -> Next:
    """Fold the stages around the terminal once: stage[0](call, stage[1](call, ... terminal))."""
    run = terminal
    for stage in reversed(stages):
        run = _link(stage, run)
    return run


def _link(stage: Stage, next_: Next) -> Next:
    """`stage` bound to what follows it; calling it returns the stage's own coroutine (no wrapper frame)."""
    return lambda call: stage(call, next_)


def _owner(hook: Any) -> str:
    return type(getattr(hook, "__self__", hook)).__name__
