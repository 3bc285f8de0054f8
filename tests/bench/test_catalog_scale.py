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
