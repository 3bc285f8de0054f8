"""The in-process Python backend: loads tools from an import path and runs them.

Three styles are accepted at `module:attribute`:
- `@tool` functions, a `Toolkit`, or a list/module of them;
- an object with seed 000's `Tool` interface (`call(name, arguments)`, `load()`);
- a module with seed 002's `tool_info()` / `tool_function(**parameters)`.
Synchronous tools run in this backend's own thread pool, never on the event loop.
With `isolation: process` every call runs in a pooled worker subprocess instead
(see adapters/python/isolation.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import gc
import inspect
import types
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import structlog

from adapters.opentool.document import DocumentError, document_specs, parse_document
from adapters.python.decorator import PythonTool, Toolkit, camel_case, tool_of
from adapters.python.isolation import WorkerPool
from adapters.python.settings import PythonBackendSettings
from gateway.backends import BackendContext, BaseBackend
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import CallContext, ToolSpec
from gateway.plugins import load_object

log = structlog.get_logger("toolplex.python")


@dataclass(frozen=True)
class _OpenToolBinding:
    """A function of a seed-000 `Tool` object."""

    tool: Any
    function: str


@dataclass(frozen=True)
class _InfoFunctionBinding:
    """A seed-002 module's `tool_function`."""

    func: Callable[..., Any]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: it would scan the growing heap again and again.

    Declaring 10,000 tools allocates a couple of hundred thousand objects that all live
    on; each collection meanwhile rescans them (a third of the time spent). The work
    inside is synchronous (no other task runs meanwhile), and the collector is back on
    after it, as it was, so any cycle made meanwhile is still collected.

    Afterwards everything sits in the youngest generation, which the next collections
    would scan whole, twice, before it ages. `gc.freeze()` then `gc.unfreeze()` moves
    every object to the oldest generation without a scan (CPython documents both), where
    the next full collection looks at them once (after start-up, the server's `settle_heap`
    freezes them instead). Only when nothing was frozen before: `unfreeze` would release
    that too.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def decorated_functions(target: Any) -> list[Any]:
    """The functions a `@tool` target offers: a Toolkit's, a module's, a list's, or itself."""
    if isinstance(target, Toolkit):
        return list(target.tools)
    if isinstance(target, types.ModuleType):
        return [v for v in vars(target).values() if tool_of(v) is not None]
    if isinstance(target, (list, tuple)):
        return list(target)
    return [target]


class PythonBackend(BaseBackend):
    """Runs the tools of one Python module; none of them streams partial results, so no features."""

    settings: PythonBackendSettings

    def __init__(self, settings: PythonBackendSettings, context: BackendContext) -> None:
        self.settings = settings
        self.name = settings.name
        self.module_path = settings.module
        self._executor = ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix=f"tool-{self.name}")
        self.pool: WorkerPool | None = None
        if settings.isolation == "process":
            self.pool = WorkerPool(self.name, self.module_path, settings)

    # ---- discovery ----

    async def discover(self) -> list[ToolSpec]:
        try:
            with collector_paused():  # importing declares every tool: thousands of objects, all kept
                target = load_object(self.module_path)
        except (ImportError, AttributeError) as exc:
            raise ConfigError([f"backend {self.name!r}: cannot import {self.module_path!r}: {exc}"]) from None
        if self.pool is not None:
            await self.pool.warm()
        source = f"backend {self.name!r} ({self.module_path})"
        toolkit = self.settings.toolkit
        if hasattr(target, "call") and hasattr(target, "load") and not isinstance(target, types.ModuleType):
            return await self._opentool_object(target, toolkit, source)
        if isinstance(target, types.ModuleType) and hasattr(target, "tool_info") and hasattr(target, "tool_function"):
            return self._info_module(target, toolkit, source)
        with collector_paused():
            return self._decorated(target, toolkit, source)

    def _decorated(self, target: Any, toolkit: str | None, source: str) -> list[ToolSpec]:
        kit_name = toolkit or (target.name if isinstance(target, Toolkit) else None)
        functions = decorated_functions(target)
        specs = []
        for fn in functions:
            declared = tool_of(fn)
            if declared is None:
                raise ConfigError([f"{source}: {fn!r} is not a @tool function, a Toolkit or a Tool object"])
            kit = kit_name or declared.toolkit
            if kit is None:
                raise ConfigError([f"{source}: tool {declared.name!r} has no toolkit; set 'toolkit' in the backend"])
            specs.append(
                ToolSpec(
                    toolkit=kit,
                    name=declared.name,
                    version=declared.version,
                    description=declared.description,
                    input_schema=declared.schemas.input_schema,
                    output_schema=declared.schemas.output_schema,
                    requirements=declared.requirements,
                    visible=declared.visible,
                    backend=self.name,
                    language="python",
                    timeout=declared.timeout,
                    side_effects=declared.side_effects,
                    source=source,
                    binding=declared,
                )
            )
        return specs

    async def _opentool_object(self, target: Any, toolkit: str | None, source: str) -> list[ToolSpec]:
        loaded = target.load()
        if inspect.isawaitable(loaded):
            loaded = await loaded
        if loaded is None:
            return []
        if hasattr(loaded, "to_json"):
            loaded = loaded.to_json()
        try:
            document = parse_document(loaded)
        except DocumentError as exc:
            raise ConfigError([f"{source}: its load() returned an invalid OpenTool document: {exc}"]) from None
        specs = document_specs(document, toolkit=toolkit, backend=self.name, source=source, language="python")
        return [dataclasses.replace(spec, binding=_OpenToolBinding(target, spec.binding)) for spec in specs]

    def _info_module(self, module: types.ModuleType, toolkit: str | None, source: str) -> list[ToolSpec]:
        info = module.tool_info()
        if not isinstance(info, dict):
            raise ConfigError([f"{source}: tool_info() must return a dict"])
        name = info.get("name") or info.get("id")
        schema = info.get("parameters") or info.get("schema") or info.get("input_schema")
        if not isinstance(name, str) or not isinstance(schema, dict):
            raise ConfigError([f"{source}: tool_info() needs 'name' (or 'id') and a 'parameters' JSON Schema"])
        kit = toolkit or info.get("toolkit") or camel_case(module.__name__.rsplit(".", 1)[-1])
        return [
            ToolSpec(
                toolkit=kit,
                name=camel_case(name.replace("-", "_")),
                version=info.get("version", "1.0.0"),
                description=info.get("description", ""),
                input_schema=schema,
                output_schema=info.get("output_schema"),
                backend=self.name,
                source=source,
                binding=_InfoFunctionBinding(module.tool_function),
            )
        ]

    # ---- invocation ----

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        binding = spec.binding
        if self.pool is not None:
            return await self.pool.execute(spec.flat_name, self._worker_binding(spec), arguments, context)
        if isinstance(binding, PythonTool):
            return await self._call_decorated(binding, arguments, context)
        if isinstance(binding, _OpenToolBinding):
            return await self._run(binding.tool.call, context, binding.function, arguments)
        if isinstance(binding, _InfoFunctionBinding):
            return await self._run(binding.func, context, **arguments)
        raise GatewayError.of(ErrorKind.INTERNAL, f"Tool {spec.flat_name} has no Python binding")

    @staticmethod
    def _worker_binding(spec: ToolSpec) -> dict[str, Any]:
        """How a worker, which imported the same module, finds this tool again."""
        binding = spec.binding
        if isinstance(binding, PythonTool):
            return {"style": "decorated", "name": binding.name}
        if isinstance(binding, _OpenToolBinding):
            return {"style": "opentool", "function": binding.function}
        if isinstance(binding, _InfoFunctionBinding):
            return {"style": "info"}
        raise GatewayError.of(ErrorKind.INTERNAL, f"Tool {spec.flat_name} has no Python binding")

    async def _call_decorated(self, declared: PythonTool, arguments: dict[str, Any], context: CallContext) -> Any:
        kwargs = declared.keyword_arguments(arguments, context)
        if declared.is_async:
            value = await declared.func(**kwargs)
        elif not declared.blocking:  # declared quick: a thread hop would cost more than the function
            value = declared.func(**kwargs)
            if inspect.isawaitable(value):
                value = await value
        else:
            value = await self._run(declared.func, context, **kwargs)
        return declared.schemas.output(value)

    async def _run(self, func: Callable[..., Any], context: CallContext, /, *args: Any, **kwargs: Any) -> Any:
        if inspect.iscoroutinefunction(func):
            return await func(*args, **kwargs)
        loop = asyncio.get_running_loop()
        job = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
        future = loop.run_in_executor(self._executor, job)
        try:
            result = await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():
                # A thread cannot be stopped: the call is answered, the thread runs on, flagged.
                context.notes["abandoned"] = "thread"
                log.warning("thread_abandoned", call_id=context.call_id, function=getattr(func, "__name__", "?"))
            raise
        if inspect.isawaitable(result):
            result = await result
        return result

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
