import threading

import pytest

from adapters.python.backend import PythonBackend
from adapters.python.settings import PythonBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.errors import ConfigError, ErrorKind
from gateway.model import Call, CallContext


async def dispatcher_for(*modules: str, **settings: object) -> Dispatcher:
    backends = {}
    specs = []
    for index, module in enumerate(modules):
        config = {"name": f"b{index}", "kind": "python", "module": module, **settings}
        backend = PythonBackend(PythonBackendSettings.model_validate(config), BackendContext())
        backends[backend.name] = backend
        specs += await backend.discover()
    return Dispatcher(Catalog(specs), backends, default_timeout=5)


async def test_seed000_tool_object() -> None:
    dispatcher = await dispatcher_for("tests.python.fixtures.seed000_tool:tool")
    spec = dispatcher.catalog.resolve("WeatherTools_forecast")
    assert spec.version == "2.1.0"
    assert spec.input_schema["properties"]["unit"] == {"type": "string", "enum": ["C", "F"]}  # $ref resolved
    assert spec.input_schema["required"] == ["city"]
    outcome = await dispatcher.call(Call("WeatherTools_forecast", {"city": "Oslo", "unit": "F"}))
    assert outcome.value == {"city": "Oslo", "high": 70}


async def test_seed002_module() -> None:
    dispatcher = await dispatcher_for("tests.python.fixtures.seed002_module")
    [spec] = dispatcher.catalog.latest()
    assert spec.flat_name == "Seed002Module_ReverseText"
    assert (await dispatcher.call(Call(spec.flat_name, {"text": "abc"}))).value == "cba"
    bad = await dispatcher.call(Call(spec.flat_name, {}))
    assert bad.error is not None and bad.error.parameter_errors == {"text": "Missing required parameter"}


async def test_sync_tools_run_in_worker_threads() -> None:
    dispatcher = await dispatcher_for("tests.python.fixtures.plain_functions")
    outcome = await dispatcher.call(Call("Probe_ThreadName", {}))
    assert outcome.value != threading.current_thread().name
    assert outcome.value.startswith("tool-b0")


async def test_context_reaches_the_tool() -> None:
    dispatcher = await dispatcher_for("tests.python.fixtures.plain_functions")
    ctx = CallContext(front="test", session_id="s-1")
    outcome = await dispatcher.call(Call("Probe_Whoami", {}, ctx))
    assert outcome.value == {"front": "test", "call_id": ctx.call_id, "session": "s-1"}


async def test_unexpected_exception_is_internal_without_details() -> None:
    dispatcher = await dispatcher_for("tests.python.fixtures.plain_functions")
    outcome = await dispatcher.call(Call("Probe_Boom", {}))
    assert outcome.error is not None and outcome.error.kind == ErrorKind.INTERNAL
    assert "secret internal detail" not in outcome.error.message
    assert outcome.call_id in outcome.error.message


async def test_builtin_tools() -> None:
    dispatcher = await dispatcher_for(
        "adapters.python.toolkits.arithmetic:toolkit",
        "adapters.python.toolkits.text:toolkit",
        "adapters.python.toolkits.clock:toolkit",
        "adapters.python.toolkits.demo:toolkit",
    )
    assert (await dispatcher.call(Call("Math_Add", {"a": 10, "b": 5}))).value == 15
    assert (await dispatcher.call(Call("Math.Subtract", {"a": 1.5, "b": 2}))).value == -0.5
    assert (await dispatcher.call(Call("Math_Multiply", {"a": 3, "b": 4}))).value == 12
    assert (await dispatcher.call(Call("Math_Divide", {"a": 1, "b": 4}))).value == 0.25
    zero = await dispatcher.call(Call("Math_Divide", {"a": 1, "b": 0}))
    assert zero.error is not None and zero.error.kind == ErrorKind.TOOL_FAILED
    assert (await dispatcher.call(Call("Text_WordCount", {"text": " two  words\n"}))).value == 2
    now = await dispatcher.call(Call("Time_Now", {"timezone": "Asia/Tokyo"}))
    assert now.value["timezone"] == "Asia/Tokyo" and now.value["iso"].endswith("+09:00")
    assert (await dispatcher.call(Call("Time_Now", {}))).value["timezone"] == "UTC"
    bad_zone = await dispatcher.call(Call("Time_Now", {"timezone": "Mars/Olympus"}))
    assert bad_zone.error is not None and bad_zone.error.kind == ErrorKind.TOOL_FAILED
    assert (await dispatcher.call(Call("Demo_Sleep", {"seconds": 0.01}))).value == {"slept": 0.01}
    too_long = await dispatcher.call(Call("Demo_Sleep", {"seconds": 61}))
    assert too_long.error is not None and too_long.error.kind == ErrorKind.INVALID_ARGUMENTS
    failed = await dispatcher.call(Call("Demo_Fail", {"message": "nope"}))
    assert failed.error is not None
    assert (failed.error.message, failed.error.can_retry, failed.error.retry_after_ms) == ("nope", True, 500)


async def test_missing_import_path_is_a_config_error() -> None:
    config = {"name": "x", "kind": "python", "module": "no_such_module.anywhere:kit"}
    backend = PythonBackend(PythonBackendSettings.model_validate(config), BackendContext())
    with pytest.raises(ConfigError) as info:
        await backend.discover()
    assert "no_such_module" in info.value.problems[0]
    config = {"name": "y", "kind": "python", "module": "adapters.python.toolkits.text:nothing_here"}
    backend = PythonBackend(PythonBackendSettings.model_validate(config), BackendContext())
    with pytest.raises(ConfigError) as info:
        await backend.discover()
    assert "nothing_here" in info.value.problems[0]
