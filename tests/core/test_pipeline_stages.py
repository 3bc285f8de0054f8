"""Middleware hooks inherited from `BaseMiddleware` do nothing, so they add no stage to the pipeline.

Only an overridden `before` (or a whole `stage`) is a stage; an overridden `after` runs once per
call from the outermost stage, whatever else the middleware inherits.
"""

from __future__ import annotations

from typing import Any

from adapters.python.backend import PythonBackend
from adapters.python.settings import PythonBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.errors import ErrorKind
from gateway.middleware import BaseMiddleware, CallLog
from gateway.model import Call, Outcome, ToolSpec


class AfterOnly(BaseMiddleware):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def after(self, call: Call, outcome: Outcome) -> None:
        self.seen.append("ok" if outcome.error is None else outcome.error.kind.value)


class BeforeOnly(BaseMiddleware):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def before(self, call: Call, spec: ToolSpec) -> None:
        self.seen.append(spec.flat_name)


class Both(AfterOnly, BeforeOnly):
    def __init__(self) -> None:
        self.seen = []


class Inherits(AfterOnly):
    """Overrides nothing itself: its `after` is AfterOnly's, a real hook, not BaseMiddleware's."""


class NothingOverridden(BaseMiddleware):
    pass


class DuckAfter:
    """No base class at all: its `after` is its own."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def after(self, call: Call, outcome: Outcome) -> None:
        self.seen.append(call.tool)


async def arithmetic_dispatcher(middleware: list[Any]) -> Dispatcher:
    settings = PythonBackendSettings.model_validate(
        {"name": "math", "kind": "python", "module": "adapters.python.toolkits.arithmetic:toolkit"}
    )
    backend = PythonBackend(settings, BackendContext())
    return Dispatcher(Catalog(await backend.discover()), {"math": backend}, middleware=middleware)


async def stage_count(middleware: list[Any]) -> int:
    return len((await arithmetic_dispatcher(middleware)).pipeline.stages)


async def test_a_middleware_that_only_overrides_after_adds_no_stage() -> None:
    bare = await stage_count([])
    assert await stage_count([AfterOnly()]) == bare
    assert await stage_count([Inherits()]) == bare
    assert await stage_count([DuckAfter()]) == bare
    assert await stage_count([NothingOverridden()]) == bare
    assert await stage_count([CallLog()]) == bare  # the call log itself is an after hook


async def test_a_middleware_that_overrides_before_adds_one_stage() -> None:
    bare = await stage_count([])
    assert await stage_count([BeforeOnly()]) == bare + 1
    assert await stage_count([Both()]) == bare + 1
    assert await stage_count([CallLog(), BeforeOnly(), AfterOnly(), BeforeOnly()]) == bare + 2


async def test_after_still_runs_for_every_call() -> None:
    after, inherited, duck = AfterOnly(), Inherits(), DuckAfter()
    dispatcher = await arithmetic_dispatcher([after, inherited, duck])
    added = await dispatcher.call(Call("Math_Add", {"a": 10, "b": 5}))
    by_zero = await dispatcher.call(Call("Math_Divide", {"a": 1, "b": 0}))
    invalid = await dispatcher.call(Call("Math_Add", {"a": "ten"}))
    unknown = await dispatcher.call(Call("Nope", {}))
    assert added.value == 15
    assert by_zero.error is not None and by_zero.error.kind == ErrorKind.TOOL_FAILED
    assert invalid.error is not None and invalid.error.kind == ErrorKind.INVALID_ARGUMENTS
    assert unknown.error is not None and unknown.error.kind == ErrorKind.NOT_FOUND
    expected = ["ok", "tool_failed", "invalid_arguments", "not_found"]
    assert after.seen == expected
    assert inherited.seen == expected
    assert duck.seen == ["Math_Add", "Math_Divide", "Math_Add", "Nope"]


async def test_before_and_after_of_one_middleware_both_run() -> None:
    both = Both()
    dispatcher = await arithmetic_dispatcher([both])
    assert (await dispatcher.call(Call("Math_Multiply", {"a": 3, "b": 2}))).value == 6
    assert both.seen == ["Math_Multiply", "ok"]


async def test_a_middleware_with_only_inherited_hooks_changes_nothing() -> None:
    dispatcher = await arithmetic_dispatcher([NothingOverridden()])
    assert dispatcher.pipeline._after == []
    assert (await dispatcher.call(Call("Math_Subtract", {"a": 3, "b": 2}))).value == 1
