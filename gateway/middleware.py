"""Middleware: async hooks around every dispatched call, loaded by import path.

A middleware has up to two coroutine methods:

- `before(call, spec)` runs once the tool is resolved and the caller is
  permitted, before argument validation. It may reject the call by raising
  `GatewayError` (the canonical failure reaches the client on every front),
  or rewrite the arguments by returning a new dict (None keeps them). It sees
  every request, not only tool calls: for another kind (`call.kind`: an MCP
  resource read, a prompt, a file...) `spec` is None, `call.backend` names the
  backend and `call.tool` the operation (`resources/read`).
- `after(call, outcome)` sees every outcome, failures included; it cannot
  change it, and an exception inside it is logged, never sent to the client.

A middleware may instead be a whole pipeline stage: `stage(call, next)`
returns the outcome of `await next(call)` (or its own), and can wrap, retry,
time or short-circuit the rest of the pipeline (see `gateway.pipeline`).

`before` hooks and stages run in configured order, `after` hooks in reverse (an onion).
The per-call log event is itself a middleware (`CallLog`), always the
outermost one, so it records the final outcome of every call exactly once.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import structlog

from gateway.errors import ConfigError
from gateway.model import Call, Outcome, ToolSpec
from gateway.observability import own_chain
from gateway.plugins import load_object

call_log = structlog.get_logger("toolplex.call")
log = structlog.get_logger("toolplex.middleware")


@runtime_checkable
class Middleware(Protocol):
    async def before(self, call: Call, spec: ToolSpec | None) -> dict[str, Any] | None:
        """New arguments, or None to keep them; raise GatewayError to reject the call (`spec`: None when the
        request is no tool call)."""
        ...

    async def after(self, call: Call, outcome: Outcome) -> None:
        """Inspect the outcome (for logs, metrics, audit)."""
        ...


class BaseMiddleware:
    """Both hooks do nothing: subclass and override the one you need."""

    async def before(self, call: Call, spec: ToolSpec | None) -> dict[str, Any] | None:
        return None

    async def after(self, call: Call, outcome: Outcome) -> None:
        return None


class CallLog(BaseMiddleware):
    """One structured `call` event per request: who, which tool (or operation), how long, which outcome."""

    def __init__(self) -> None:
        self._config: tuple[Any, ...] = ()
        self._logger: Any = None
        self._direct: tuple[tuple[Any, ...], Any] | None = None  # the gateway's own processors and printer
        self._quiet = False  # the gateway's own set-up, at a level above info

    def _bound(self) -> Any:
        """`toolplex.call` bound once per structlog configuration: the lazy proxy builds a logger (and,
        with the gateway's factory, a PrintLogger) on every use, even for a line its level drops."""
        config = structlog.get_config()
        # The processors one by one: a list changed in place (structlog.testing.capture_logs does) is another set-up.
        parts = (*config["processors"], config["wrapper_class"], config["logger_factory"], config["context_class"])
        if len(parts) != len(self._config) or any(a is not b for a, b in zip(parts, self._config, strict=True)):
            self._config, self._logger = parts, call_log.bind()
            own = own_chain(config)
            self._quiet = own is not None and own.level > logging.INFO
            self._direct = (own.processors, config["logger_factory"]()) if own and not self._quiet else None
        return self._logger

    async def after(self, call: Call, outcome: Outcome) -> None:
        logger = self._bound()
        if self._quiet:
            return
        ctx = call.context
        spec = outcome.spec
        event: dict[str, Any] = {
            "call_id": ctx.call_id,
            "front": ctx.front,
            "kind": str(call.kind),
            "tool": spec.flat_name if spec else call.tool,
            "version": spec.version if spec else call.version,
            "backend": spec.backend if spec else call.backend,
            "duration_ms": outcome.duration_ms,
            "outcome": "ok" if outcome.error is None else outcome.error.kind.value,
            "cached": outcome.cached,
            "principal": ctx.principal.name if ctx.principal else None,
            "session_id": ctx.session_id,
            "message_id": ctx.message_id,
            "trace_id": ctx.trace_id,
        }
        if self._direct is None:  # another set-up (a test's capture, an operator's): structlog as configured
            logger.info("call", **event)
            return
        processors, printer = self._direct  # what structlog's wrapper would do, without the wrapper
        event["event"] = "call"
        line: Any = event
        for processor in processors:
            line = processor(printer, "info", line)
        printer.msg(line)


def _check_hooks(obj: Any, where: str) -> list[str]:
    hooks = [name for name in ("stage", "before", "after") if callable(getattr(obj, name, None))]
    if not hooks:
        return [f"{where}: {obj!r} has neither a before nor an after hook (nor a stage)"]
    return [
        f"{where}: {type(obj).__name__}.{name} must be an async method (async def)"
        for name in hooks
        if not inspect.iscoroutinefunction(getattr(obj, name))
    ]


def load_middleware(entries: Sequence[Any]) -> list[Any]:
    """Instantiate each configured `{use: "module:Factory", options: {...}}` as `Factory(**options)`."""
    loaded: list[Any] = []
    problems: list[str] = []
    for index, entry in enumerate(entries):
        where = f"middleware[{index}] ({entry.use})"
        try:
            factory = load_object(entry.use)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{where}: cannot import it: {exc}")
            continue
        try:
            instance = factory(**(entry.options or {}))
        except Exception as exc:  # the operator's code: report, never crash with a traceback
            problems.append(f"{where}: creating it with the given options failed: {type(exc).__name__}: {exc}")
            continue
        found = _check_hooks(instance, where)
        if found:
            problems.extend(found)
            continue
        loaded.append(instance)
    if problems:
        raise ConfigError(problems)
    return loaded


def build_middleware(entries: Sequence[Any], *, call_log: bool = True) -> list[Any]:
    """The call log first (outermost, unless `logging.calls` is off), then the configured middleware in order."""
    return [*([CallLog()] if call_log else []), *load_middleware(entries)]
