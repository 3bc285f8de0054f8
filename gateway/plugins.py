"""Adapters are plug-ins: each protocol package exports one `Adapter` record, found by entry point.

A package adds a protocol by declaring, in its own pyproject.toml,

    [project.entry-points."toolplex.adapters"]
    myproto = "myproto:ADAPTER"

where `ADAPTER = Adapter(name="myproto", front=..., backend=...)`. The core
never names a protocol: the front's settings live under `fronts.<name>`, and a
backend with `kind: <name>` is built by the adapter's backend factory. Routes and
factories may be given as "module:attribute" strings so that a configuration
that does not use a protocol never imports more of it than its settings models.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from gateway.errors import ConfigError

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.backends import Backend, BackendContext
    from gateway.model import Outcome, ToolSpec
    from gateway.services import FrontServices
    from gateway.settings import BackendSettings, FrontSettings

log = structlog.get_logger("toolplex.plugins")

ENTRY_POINT_GROUP = "toolplex.adapters"

RoutesFactory = Callable[["FrontServices", Any], "list[BaseRoute]"]
BackendFactory = Callable[[Any, "BackendContext"], "Backend"]


@dataclass(frozen=True)
class Presented:
    """One call as a front would have answered it on the wire: the HTTP status and the JSON body."""

    status: int
    body: Any


class Presenter(Protocol):
    """How a front shows a tool and a call's outcome to its clients, for the console (`gateway.console`): the
    protocol's own name for the tool, and the exact answer its call route would give for an outcome."""

    def name_of(self, spec: ToolSpec) -> str: ...

    def answer(self, spec: ToolSpec, outcome: Outcome, arguments: dict[str, Any]) -> Presented: ...


@dataclass(frozen=True)
class FrontPlugin:
    """A front: its settings model (every default lives there) and how to build its routes.

    `routes(services, settings)` gets the narrow `FrontServices` and a validated
    instance of `settings`; it returns Starlette routes with their full paths.
    It is called again on every reload, so a front keeps no state of its own
    beyond what the services hold.
    """

    settings: type[FrontSettings]
    routes: RoutesFactory | str
    # How this front names tools and answers calls (`Presenter`), or "module:attribute"; None: it calls no tools.
    presenter: Presenter | str | None = None


@dataclass(frozen=True)
class BackendPlugin:
    """A backend kind: its settings model (with `kind: Literal[<name>]`) and its factory.

    `factory(settings, context)` returns an object that satisfies `gateway.backends.Backend`.
    """

    settings: type[BackendSettings]
    factory: BackendFactory | str


@dataclass(frozen=True)
class Adapter:
    """What one protocol package provides: a front, a backend kind, or both, under one name."""

    name: str
    description: str = ""
    front: FrontPlugin | None = None
    backend: BackendPlugin | None = None


def load_object(path: str) -> Any:
    """Import `module:attribute` (or just `module`)."""
    module_name, _, attribute = path.partition(":")
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in filter(None, attribute.split(".")):
        obj = getattr(obj, part)
    return obj


def resolve(target: Any) -> Any:
    """A callable given directly, or by its "module:attribute" path."""
    return load_object(target) if isinstance(target, str) else target


@cache
def installed_adapters() -> dict[str, Adapter]:
    """Every adapter installed in this environment, by name (read once per process)."""
    found: dict[str, Adapter] = {}
    problems: list[str] = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            adapter = point.load()
        except Exception as exc:  # a broken third-party package must say so, not crash with a traceback
            problems.append(f"adapter {point.name!r} ({point.value}): cannot import it: {type(exc).__name__}: {exc}")
            continue
        if not isinstance(adapter, Adapter):
            problems.append(f"adapter {point.name!r} ({point.value}) is a {type(adapter).__name__}, not an Adapter")
            continue
        if adapter.name != point.name:
            problems.append(f"adapter {point.name!r} ({point.value}) calls itself {adapter.name!r}")
            continue
        if point.name in found:  # two distributions claim one name: refuse to guess which wins
            problems.append(f"adapter {point.name!r} is installed twice ({point.value})")
            continue
        found[point.name] = adapter
    if problems:
        raise ConfigError(problems)
    log.debug("adapters_found", adapters=sorted(found))
    return found


def fronts() -> dict[str, FrontPlugin]:
    return {name: a.front for name, a in installed_adapters().items() if a.front is not None}


def backend_kinds() -> dict[str, BackendPlugin]:
    return {name: a.backend for name, a in installed_adapters().items() if a.backend is not None}
