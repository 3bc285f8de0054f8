"""The dispatch core: admit, resolve, authorize, middleware, validate, cache, run under a deadline.

Every front calls `Dispatcher.call`; every failure on the way comes back as
one canonical `Failure` inside the `Outcome`, never as an exception. Recording
(the per-call log event, metrics) is done by middleware `after` hooks. Since
every call passes here, this is also where the concurrency limits are applied
and where a shutdown waits for running calls, then ends the rest with an answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import structlog

from gateway.backends import Backend
from gateway.cache import MISS, ResultCache
from gateway.catalog import Catalog
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.limits import CallLimiter
from gateway.middleware import CallLog
from gateway.model import Call, CallContext, Outcome, Principal, ToolSpec, permitted, principal_name
from gateway.upstream import backend_timeout_s
from gateway.validation import ValidatorCache, parameter_errors

log = structlog.get_logger("toolplex.call")

SHUTDOWN_RETRY_AFTER_MS = 1000


def shutting_down() -> GatewayError:
    """What a call gets when the gateway stops before (or while) running it."""
    return GatewayError.of(
        ErrorKind.UPSTREAM_UNAVAILABLE,
        "The gateway is shutting down; the call did not complete, retry it shortly",
        can_retry=True,
        retry_after_ms=SHUTDOWN_RETRY_AFTER_MS,
    )


class Dispatcher:
    def __init__(
        self,
        catalog: Catalog,
        backends: Mapping[str, Backend],
        *,
        default_timeout: float = 30.0,
        max_timeout: float = 300.0,
        secrets: Mapping[str, str] | None = None,
        middleware: Sequence[Any] | None = None,
        cache: ResultCache | None = None,
        limiter: CallLimiter | None = None,
    ) -> None:
        self.catalog = catalog  # replaced whole on reload
        self.backends = backends
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.secrets = dict(secrets or {})  # server-side secrets from configuration
        self.validators = ValidatorCache()
        # Hooks around every call (gateway.middleware); the call log alone unless configured.
        self.middleware: list[Any] = list(middleware) if middleware is not None else [CallLog()]
        self.cache = cache
        self.limiter = limiter if limiter is not None else CallLimiter()
        self._running: dict[asyncio.Task[Any], int] = {}  # task -> calls it is inside, for the shutdown
        self._aborting: set[asyncio.Task[Any]] = set()  # of those, the ones the shutdown cancelled
        self._idle = asyncio.Event()
        self._idle.set()
        self._hurry = asyncio.Event()  # set by a second Ctrl-C: end the running calls now
        self._shutting_down = False

    def deadline_for(self, call: Call, spec: ToolSpec) -> float:
        wanted = call.timeout if call.timeout is not None else spec.timeout
        if wanted is None:
            wanted = self.default_timeout
        cap = backend_timeout_s(self.backends.get(spec.backend))  # the backend's `timeout_s`
        return min(wanted, self.max_timeout, cap if cap is not None else self.max_timeout)

    async def call(self, call: Call) -> Outcome:
        started = time.monotonic()
        ctx = call.context
        spec: ToolSpec | None = None
        value: Any = None
        failure: Failure | None = None
        cached = False
        task = asyncio.current_task()
        try:
            self._enter(task)
            with self.limiter.slot(principal_name(ctx.principal)):
                spec = self.catalog.resolve(call.tool, call.version)
                self._authorize(spec, ctx)
                self._check_requirements(spec, ctx)
                await self._before(call, spec)
                self._validate(spec, call.arguments)
                timeout = self.deadline_for(call, spec)
                ctx.deadline = started + timeout
                hit = self.cache.get(spec, call.arguments) if self.cache is not None else MISS
                if hit is MISS:
                    value = await self._run(spec, call.arguments, ctx, timeout)
                    if self.cache is not None:
                        self.cache.put(spec, call.arguments, value)
                else:
                    value, cached = hit, True
        except GatewayError as exc:
            failure = exc.failure
        except asyncio.CancelledError:
            if not self._cancelled_by_shutdown(task):
                raise
            failure = shutting_down().failure
        except Exception:
            log.exception("internal_error", call_id=ctx.call_id, tool=call.tool)
            failure = Failure(
                kind=ErrorKind.INTERNAL,
                message=f"Internal error; quote call id {ctx.call_id} to the operator",
            )
        finally:
            self._leave(task)
        outcome = Outcome(
            call_id=ctx.call_id,
            spec=spec,
            value=value,
            error=failure,
            duration_ms=round((time.monotonic() - started) * 1000, 3),
            cached=cached,
        )
        await self._after(call, outcome)
        return outcome

    # ---- shutdown ----

    @property
    def running(self) -> int:
        """Calls in progress right now (in any front, or in the background)."""
        return sum(self._running.values())

    def _enter(self, task: asyncio.Task[Any] | None) -> None:
        if self._shutting_down:
            raise shutting_down()
        if task is not None:
            self._running[task] = self._running.get(task, 0) + 1
            self._idle.clear()

    def _leave(self, task: asyncio.Task[Any] | None) -> None:
        if task is None or task not in self._running:
            return
        self._running[task] -= 1
        if self._running[task]:
            return
        del self._running[task]
        self._aborting.discard(task)
        if not self._running:
            self._idle.set()

    def _cancelled_by_shutdown(self, task: asyncio.Task[Any] | None) -> bool:
        """True when the only cancellation pending on `task` is the shutdown's: it is then withdrawn."""
        if task is None or task not in self._aborting or task.cancelling() != 1:
            return False
        task.uncancel()
        return True

    async def drain(self, grace: float, answer_within: float = 5.0) -> int:
        """Refuse new calls; give running ones `grace` seconds, then end the rest with "shutting down".

        An ended call is answered by its front like any failed call (no dropped
        connection); `answer_within` bounds the wait for those answers. Returns
        how many calls had to be ended.
        """
        self._shutting_down = True
        waits = [asyncio.ensure_future(self._idle.wait()), asyncio.ensure_future(self._hurry.wait())]
        try:
            await asyncio.wait(waits, timeout=max(0.0, grace), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
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

    def hurry(self) -> None:
        """Stop waiting for running calls: a draining gateway ends them now."""
        self._hurry.set()

    async def _before(self, call: Call, spec: ToolSpec) -> None:
        for middleware in self.middleware:
            hook = getattr(middleware, "before", None)
            if hook is None:
                continue
            rewritten = await hook(call, spec)
            if rewritten is None:
                continue
            if not isinstance(rewritten, dict):
                raise TypeError(f"{type(middleware).__name__}.before returned {type(rewritten).__name__}, not a dict")
            call.arguments = rewritten

    async def _after(self, call: Call, outcome: Outcome) -> None:
        for middleware in reversed(self.middleware):
            hook = getattr(middleware, "after", None)
            if hook is None:
                continue
            try:
                await hook(call, outcome)
            except Exception:
                log.exception("middleware_after_failed", call_id=outcome.call_id, middleware=type(middleware).__name__)

    async def _run(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext, timeout: float) -> Any:
        backend = self.backends.get(spec.backend)
        if backend is None:
            raise GatewayError.of(
                ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {spec.backend!r} of tool {spec.flat_name} is not running"
            )
        try:
            async with asyncio.timeout(timeout):
                return await backend.invoke(spec, arguments, ctx)
        except TimeoutError:
            raise GatewayError.of(
                ErrorKind.DEADLINE,
                f"Tool {spec.flat_name} did not finish within {timeout:g} s",
                can_retry=True,
                details={"timeout_s": timeout, **ctx.notes},
            ) from None

    def _authorize(self, spec: ToolSpec, ctx: CallContext) -> None:
        principal = ctx.principal
        if principal is not None and not permitted(principal, spec):
            raise GatewayError.of(
                ErrorKind.FORBIDDEN,
                f"Caller {principal.name!r} may not call tool {spec.flat_name}",
            )

    def _check_requirements(self, spec: ToolSpec, ctx: CallContext, *, strict: bool = False) -> None:
        needs = spec.requirements
        if needs.empty:
            return
        # A backend whose upstream checks requirements itself answers a missing authorization with the
        # upstream's challenge, URL included; this side, knowing no URL, leaves it to the upstream.
        relayed = not strict and bool(getattr(self.backends.get(spec.backend), "checks_requirements", False))
        missing = [s for s in needs.secrets if s not in ctx.secrets and s not in self.secrets]
        if missing:
            raise GatewayError.of(
                ErrorKind.MISSING_REQUIREMENT,
                f"Tool {spec.flat_name} needs the secret(s) {', '.join(missing)}",
                developer_message="Supply them in the call context or in the gateway configuration",
                details={"secrets": missing},
            )
        # The tool sees the secrets it declared: the caller's, else the configured ones.
        ctx.secrets = {**{name: self.secrets[name] for name in needs.secrets if name in self.secrets}, **ctx.secrets}
        if needs.user_id and not ctx.user_id:
            raise GatewayError.of(
                ErrorKind.MISSING_REQUIREMENT,
                f"Tool {spec.flat_name} needs a user_id",
                details={"user_id": True},
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

    def _validate(self, spec: ToolSpec, arguments: Any) -> None:
        problems = parameter_errors(self.validators.get(spec.input_schema), arguments)
        if problems:
            listed = "; ".join(f"{name}: {msg}" for name, msg in problems.items())
            raise GatewayError.of(
                ErrorKind.INVALID_ARGUMENTS,
                f"Invalid arguments for {spec.flat_name}: {listed}",
                parameter_errors=problems,
            )

    def precheck(self, call: Call) -> Failure | None:
        """The checks before a tool runs (exists, permitted, requirements present), without running it.

        For fronts that answer a repeated call from a record (OXP call_id replay): the
        record is handed out only to a call that would pass these checks now.
        """
        try:
            spec = self.catalog.resolve(call.tool, call.version)
            self._authorize(spec, call.context)
            self._check_requirements(spec, call.context, strict=True)
        except GatewayError as exc:
            return exc.failure
        return None

    def visible_tools(self, principal: Principal | None, *, latest_only: bool = True) -> list[ToolSpec]:
        """The listed tools this caller may call: what every front's listing shows (one decision, here)."""
        specs = self.catalog.latest(visible_only=True) if latest_only else self.catalog.all_versions()
        return [s for s in specs if s.visible and permitted(principal, s)]

    def effective_secrets(self, ctx: CallContext) -> dict[str, str]:
        """Caller-supplied secrets win over configured ones."""
        return {**self.secrets, **ctx.secrets}
