"""Per-backend routing: what a backend exposes and under which names."""

from __future__ import annotations

from typing import Any

from gateway import routing
from gateway.catalog import Catalog
from gateway.model import ToolSpec
from gateway.settings import BackendSettings

SCHEMA = {"type": "object", "properties": {}}


def apply_routing(tools: list[ToolSpec], rules: dict[str, Any]) -> list[ToolSpec]:
    """The routing rules as a backend's validated settings, as the gateway passes them."""
    return routing.apply_routing(tools, BackendSettings.model_validate({"kind": "any", **rules}))


def specs(*names: str, toolkit: str = "Kit") -> list[ToolSpec]:
    return [ToolSpec(toolkit, name, "1.0.0", "d", SCHEMA) for name in names]


def names(routed: list[ToolSpec]) -> list[str]:
    return [s.versioned_id for s in routed]


def test_no_rules_keeps_everything_and_names_the_backend() -> None:
    routed = apply_routing(specs("Add", "Sub"), {"name": "b"})
    assert names(routed) == ["Kit.Add@1.0.0", "Kit.Sub@1.0.0"]
    assert {s.backend for s in routed} == {"b"}


def test_toolkit_and_prefix() -> None:
    assert names(apply_routing(specs("Add"), {"name": "b", "toolkit": "Calc"})) == ["Calc.Add@1.0.0"]
    assert names(apply_routing(specs("Add"), {"name": "b", "prefix": "Up"})) == ["UpKit.Add@1.0.0"]


def test_include_and_exclude_globs() -> None:
    tools = specs("Add", "AddMany", "Sub")
    assert names(apply_routing(tools, {"name": "b", "include": ["Add*"], "exclude": ["AddMany"]})) == ["Kit.Add@1.0.0"]
    assert names(apply_routing(tools, {"name": "b", "include": ["Kit.S*"]})) == ["Kit.Sub@1.0.0"]


def test_rename_hide_version_and_timeouts() -> None:
    routed = apply_routing(
        specs("Add", "Sub"),
        {"name": "b", "rename": {"Sub": "Minus"}, "hide": ["Add"], "version": "2.1.0", "timeouts": {"Minus": 9}},
    )
    by_name = {s.name: s for s in routed}
    assert set(by_name) == {"Add", "Minus"}
    assert by_name["Add"].visible is False and by_name["Minus"].visible is True
    assert {s.version for s in routed} == {"2.1.0"}
    assert by_name["Minus"].timeout is None  # timeouts name the tool as the backend calls it
    timed = apply_routing(specs("Sub"), {"name": "b", "timeouts": {"Sub": 9}})
    assert timed[0].timeout == 9.0


def test_names_do_not_depend_on_other_backends() -> None:
    alone = Catalog(apply_routing(specs("Add"), {"name": "one", "toolkit": "Calc"}))
    together = Catalog(
        apply_routing(specs("Add"), {"name": "one", "toolkit": "Calc"})
        + apply_routing(specs("Echo", toolkit="Other"), {"name": "two"})
    )
    assert alone.resolve("Calc_Add").versioned_id == together.resolve("Calc_Add").versioned_id
