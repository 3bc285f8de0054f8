"""bench/catalog_scale.py at a small size: every figure is there and the generated tool answers.

No timing is asserted (times depend on the machine); only that the measurement works.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench import catalog_scale, catalog_tools

ROOT = Path(__file__).resolve().parents[2]
TOOLS = 300


def test_blueprints_are_deterministic_distinct_and_typed() -> None:
    first, again = catalog_tools.blueprints(TOOLS), catalog_tools.blueprints(TOOLS)
    assert first == again
    assert len({(b.toolkit, b.name) for b in first}) == TOOLS
    assert all(1 <= len(b.parameters) <= 4 for b in first)
    assert len({b.description for b in first}) > TOOLS * 0.9


def test_a_generated_function_is_a_real_tool() -> None:
    blueprint = catalog_tools.blueprints(1)[0]
    fn = catalog_tools.build(blueprint)
    declared = fn.__toolplex_tool__
    assert declared.name == blueprint.name and declared.toolkit == blueprint.toolkit
    assert declared.blocking is False
    assert set(declared.schemas.input_schema["properties"]) == {p[0] for p in blueprint.parameters}
    assert fn(a=1) == {"tool": blueprint.name, "arguments": {"a": 1}}


def test_run_catalog_at_a_small_size() -> None:
    result = catalog_scale.run_catalog(
        ROOT, time.monotonic() + 120, tools=TOOLS, rounds=1, listing_requests=2, retrieval_requests=3, show=False
    )
    assert result["tools"] == TOOLS
    assert len(result["startup_s"]["catalog"]) == len(result["startup_s"]["baseline"]) == 1
    assert set(result["listing"]) == set(catalog_scale.LISTINGS)
    for figures in result["listing"].values():
        assert figures["n"] == 2 and figures["bytes"] > 0
        assert {"p50_ms", "p95_ms", "first_ms"} <= set(figures)
    assert result["retrieval"]["n"] == 3 and "first_ms" in result["retrieval"]
    assert result["call"]["ok"] is True
    assert set(result["targets"]) == {"start-up", "retrieval top-5", *(f"listing {n}" for n in catalog_scale.LISTINGS)}
    assert "| start-up" in catalog_scale.table(result)


def test_the_written_module_declares_the_same_tools_as_the_blueprints(tmp_path: Path) -> None:
    import importlib
    import sys

    name = catalog_tools.write_module(tmp_path, 40)
    assert (tmp_path / f"{name}.py").exists() and list((tmp_path / "__pycache__").glob(f"{name}.*.pyc"))
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)
    assert len(module.toolkit) == 40
    for fn, blueprint in zip(module.toolkit, catalog_tools.blueprints(40), strict=True):
        written, built = fn.__toolplex_tool__, catalog_tools.build(blueprint).__toolplex_tool__
        assert (written.toolkit, written.name, written.description) == (built.toolkit, built.name, built.description)
        assert written.schemas.input_schema == built.schemas.input_schema
        assert written.schemas.output_schema == built.schemas.output_schema and written.blocking is False
    arguments = {p: "x" for p, _, _, _ in catalog_tools.blueprints(40)[0].parameters}
    assert module.toolkit[0](**arguments) == {"tool": catalog_tools.blueprints(40)[0].name, "arguments": arguments}


def test_two_trees_are_compared_in_one_run() -> None:
    compared = catalog_scale.run_catalog(
        ROOT,
        time.monotonic() + 180,
        tools=60,
        rounds=1,  # one start of each tree: the comparison's shape (rounds alternate trees: bench/catalog_scale.py)
        listing_requests=1,
        retrieval_requests=1,
        show=False,
        before=ROOT,  # the same tree twice: the comparison's shape, not a speed-up, is under test
    )
    assert set(compared) == {"tools", "before", "after"}
    for side in ("before", "after"):
        assert len(compared[side]["startup_s"]["catalog"]) == 1  # each tree started in every round
        assert compared[side]["call"]["ok"] is True
    text = catalog_scale.comparison(compared)
    assert "| start-up |" in text and "| retrieval top-5 |" in text and "after/before" in text
