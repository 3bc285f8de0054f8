"""The dispatch core: resolve, authorize, middleware, validate, cache, run under a deadline.

Every front calls `Dispatcher.call`; every failure on the way comes back as
one canonical `Failure` inside the `Outcome`, never as an exception. Recording
(the per-call log event, metrics) is done by middleware `after` hooks.
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
from gateway.middleware import CallLog
from gateway.model import Call, CallContext, Outcome, Principal, ToolSpec, permitted
from gateway.validation import ValidatorCache, parameter_errors

log = structlog.get_logger("toolplex.call")


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

    def deadline_for(self, call: Call, spec: ToolSpec) -> float:
        wanted = call.timeout if call.timeout is not None else spec.timeout
        if wanted is None:
            wanted = self.default_timeout
        return min(wanted, self.max_timeout)

    async def call(self, call: Call) -> Outcome:
        started = time.monotonic()
        ctx = call.context
        spec: ToolSpec | None = None
        value: Any = None
        failure: Failure | None = None
        cached = False
        try:
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
        except Exception:
            log.exception("internal_error", call_id=ctx.call_id, tool=call.tool)
            failure = Failure(
                kind=ErrorKind.INTERNAL,
                message=f"Internal error; quote call id {ctx.call_id} to the operator",
            )
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

    def _check_requirements(self, spec: ToolSpec, ctx: CallContext) -> None:
        needs = spec.requirements
        if needs.empty:
            return
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
            if auth.id in ctx.authorization:
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

    def visible_tools(self, principal: Principal | None, *, latest_only: bool = True) -> list[ToolSpec]:
        """The listed tools this caller may call: what every front's listing shows (one decision, here)."""
        specs = self.catalog.latest(visible_only=True) if latest_only else self.catalog.all_versions()
        return [s for s in specs if s.visible and permitted(principal, s)]

    def effective_secrets(self, ctx: CallContext) -> dict[str, str]:
        """Caller-supplied secrets win over configured ones."""
        return {**self.secrets, **ctx.secrets}
