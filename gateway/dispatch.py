"""The dispatch core: resolve, authorize, validate, run under a deadline, record.

Every front calls `Dispatcher.call`; every failure on the way comes back as
one canonical `Failure` inside the `Outcome`, never as an exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

import structlog

from gateway.backends import Backend
from gateway.catalog import Catalog
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import Call, CallContext, Outcome, ToolSpec
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
    ) -> None:
        self.catalog = catalog  # replaced whole on reload
        self.backends = backends
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.secrets = dict(secrets or {})  # server-side secrets from configuration
        self.validators = ValidatorCache()

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
        try:
            spec = self.catalog.resolve(call.tool, call.version)
            self._authorize(spec, ctx)
            self._check_requirements(spec, ctx)
            self._validate(spec, call.arguments)
            timeout = self.deadline_for(call, spec)
            ctx.deadline = started + timeout
            value = await self._run(spec, call.arguments, ctx, timeout)
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
        )
        self._record(call, outcome)
        return outcome

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
                details={"timeout_s": timeout},
            ) from None

    def _authorize(self, spec: ToolSpec, ctx: CallContext) -> None:
        principal = ctx.principal
        if principal is None or principal.tools is None:
            return
        if not any(fnmatchcase(spec.flat_name, pattern) for pattern in principal.tools):
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
            fill = {
                "provider": auth.id,
                "tool": spec.flat_name,
                "user_id": ctx.user_id or "",
                "scopes": " ".join(auth.scopes),
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

    def effective_secrets(self, ctx: CallContext) -> dict[str, str]:
        """Caller-supplied secrets win over configured ones."""
        return {**self.secrets, **ctx.secrets}

    def _record(self, call: Call, outcome: Outcome) -> None:
        ctx = call.context
        spec = outcome.spec
        log.info(
            "call",
            call_id=ctx.call_id,
            front=ctx.front,
            tool=spec.flat_name if spec else call.tool,
            version=spec.version if spec else call.version,
            backend=spec.backend if spec else None,
            duration_ms=outcome.duration_ms,
            outcome="ok" if outcome.ok else outcome.error.kind.value,  # type: ignore[union-attr]
            principal=ctx.principal.name if ctx.principal else None,
            session_id=ctx.session_id,
            message_id=ctx.message_id,
            trace_id=ctx.trace_id,
        )
