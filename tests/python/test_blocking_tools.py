"""`@tool(blocking=False)`: a plain function declared quick runs on the event loop, not in a thread.

Plain functions stay in a worker thread by default (one that waits must not stall other calls);
async tools run on the loop as before.
"""

from __future__ import annotations

import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.python.backend import PythonBackend
from adapters.python.decorator import tool_of
from adapters.python.settings import PythonBackendSettings
from adapters.python.toolkits import arithmetic
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.errors import ErrorKind
from gateway.model import Call

TOOLS = '''
import asyncio
import threading

from adapters.python import ToolError, tool


@tool(toolkit="Where", blocking=False)
def quick() -> int:
    """Declared quick: the thread it runs on."""
    return threading.get_ident()


@tool(toolkit="Where")
def plain() -> int:
    """A plain function with the default: the thread it runs on."""
    return threading.get_ident()


@tool(toolkit="Where", blocking=True)
def waits() -> int:
    """Declared blocking: the thread it runs on."""
    return threading.get_ident()


@tool(toolkit="Where")
async def awaited() -> int:
    """An async tool: the thread it runs on."""
    await asyncio.sleep(0)
    return threading.get_ident()


@tool(toolkit="Where", blocking=False)
def quick_refusal(n: int) -> int:
    """Declared quick, and refuses negative numbers."""
    if n < 0:
        raise ToolError("n must not be negative")
    return n * 2


@tool(toolkit="Where", blocking=False)
def quick_bug() -> int:
    """Declared quick, and has a bug."""
    raise RuntimeError("quick tool bug")


@tool(toolkit="Where", blocking=False)
def quick_awaitable() -> object:
    """Declared quick, and returns an awaitable: it is awaited on the loop."""

    async def later() -> int:
        return threading.get_ident()

    return later()
'''


@pytest.fixture
def tools_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[str]:
    """A throwaway module of tools on sys.path, gone from sys.modules afterwards."""
    name = f"blocking_probe_{request.node.name.replace('[', '_').replace(']', '_').replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TOOLS))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield name
    finally:
        sys.modules.pop(name, None)


async def dispatcher_for(module: str) -> tuple[Dispatcher, PythonBackend]:
    settings = PythonBackendSettings.model_validate({"name": "where", "kind": "python", "module": module})
    backend = PythonBackend(settings, BackendContext())
    return Dispatcher(Catalog(await backend.discover()), {"where": backend}, default_timeout=10), backend


async def run_on(tools_module: str, tool: str) -> int:
    dispatcher, backend = await dispatcher_for(tools_module)
    try:
        outcome = await dispatcher.call(Call(tool, {}))
    finally:
        await backend.close()
    assert outcome.error is None, outcome.error
    return int(outcome.value)


async def test_a_plain_function_declared_quick_runs_on_the_loop_thread(tools_module: str) -> None:
    assert await run_on(tools_module, "Where_Quick") == threading.get_ident()


async def test_a_plain_function_runs_in_another_thread_by_default(tools_module: str) -> None:
    assert await run_on(tools_module, "Where_Plain") != threading.get_ident()
    assert await run_on(tools_module, "Where_Waits") != threading.get_ident()


async def test_an_async_tool_runs_on_the_loop_thread(tools_module: str) -> None:
    assert await run_on(tools_module, "Where_Awaited") == threading.get_ident()


async def test_an_awaitable_from_a_quick_tool_is_awaited(tools_module: str) -> None:
    assert await run_on(tools_module, "Where_QuickAwaitable") == threading.get_ident()


async def test_a_quick_tool_fails_like_any_other(tools_module: str) -> None:
    dispatcher, backend = await dispatcher_for(tools_module)
    try:
        doubled = await dispatcher.call(Call("Where_QuickRefusal", {"n": 4}))
        refused = await dispatcher.call(Call("Where_QuickRefusal", {"n": -1}))
        invalid = await dispatcher.call(Call("Where_QuickRefusal", {"n": "four"}))
        bug = await dispatcher.call(Call("Where_QuickBug", {}))
    finally:
        await backend.close()
    assert doubled.value == 8
    assert refused.error is not None and refused.error.kind == ErrorKind.TOOL_FAILED
    assert refused.error.message == "n must not be negative"
    assert invalid.error is not None and invalid.error.kind == ErrorKind.INVALID_ARGUMENTS
    assert bug.error is not None and bug.error.kind == ErrorKind.INTERNAL
    assert "quick tool bug" not in bug.error.message


def test_the_declaration_is_kept_on_the_tool(tools_module: str) -> None:
    module = __import__(tools_module)
    assert tool_of(module.quick).blocking is False
    assert tool_of(module.plain).blocking is True
    assert tool_of(module.waits).blocking is True
    assert tool_of(module.awaited).is_async is True
    assert tool_of(module.quick).is_async is False


def test_the_arithmetic_tools_are_declared_quick() -> None:
    for func in (arithmetic.add, arithmetic.subtract, arithmetic.multiply, arithmetic.divide):
        assert tool_of(func).blocking is False, func.__name__


async def test_the_arithmetic_tools_still_answer() -> None:
    dispatcher, backend = await dispatcher_for("adapters.python.toolkits.arithmetic:toolkit")
    try:
        added = await dispatcher.call(Call("Math_Add", {"a": 10, "b": 5}))
        divided = await dispatcher.call(Call("Math_Divide", {"a": 10, "b": 4}))
        by_zero = await dispatcher.call(Call("Math_Divide", {"a": 1, "b": 0}))
    finally:
        await backend.close()
    assert added.error is None and added.value == 15 and isinstance(added.value, int)
    assert divided.value == 2.5
    assert by_zero.value is None
    assert by_zero.error is not None and by_zero.error.kind == ErrorKind.TOOL_FAILED
