"""bench/run.py's comparison of each front with the OpenTool front: ratios taken within a round, then the median.

The figures here are made up (no load runs): what is checked is the arithmetic a reader relies on.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import run


def _round(rps: float, cpu_us: float) -> dict[str, Any]:
    return {"rps": rps, "cpu_us": cpu_us, "p50_ms": 1.0, "p99_ms": 2.0, "max_ms": 3.0, "bad": 0}


def test_ratios_are_taken_within_each_round_and_the_median_reported() -> None:
    # The machine's speed halves in round 2: each round's own ratio is 0.9, whatever the speed.
    opentool = [_round(1000, 100), _round(500, 200), _round(1000, 100), _round(1000, 100)]
    mcp = [_round(900, 110), _round(450, 220), _round(950, 105), _round(800, 125)]
    runs = {
        "rounds": {
            "1": {
                "in-process: OpenTool /opentool/call": opentool,
                "in-process: MCP /mcp": mcp,
                "baseline: bare Starlette": [_round(5000, 50)] * 4,  # not a front: not compared
            }
        }
    }
    rows = run.against_reference(runs)
    assert [(r["case"], r["concurrency"], r["rounds"]) for r in rows] == [("in-process: MCP /mcp", 1, 4)]
    row = rows[0]
    assert row["rps_ratio"] == pytest.approx(0.9)  # rounds: 0.9, 0.9, 0.95, 0.8
    assert row["rps_quartiles"] == pytest.approx((0.875, 0.9125))
    assert row["cpu_ratio"] == pytest.approx(1.1)  # rounds: 1.1, 1.1, 1.05, 1.25
    table = run.reference_markdown(rows)
    assert "| in-process: MCP /mcp | 1 | 4 | 0.90x | 0.88 to 0.91 | 1.10x |" in table


def test_no_reference_case_gives_no_rows() -> None:
    runs = {"rounds": {"32": {"proxied: MCP /mcp": [_round(1, 1)]}}}
    assert run.against_reference(runs) == []


def test_rounds_where_the_reference_answered_nothing_are_left_out() -> None:
    runs = {
        "rounds": {
            "1": {
                "proxied: OpenTool /opentool/call": [_round(0, 0), _round(100, 100)],
                "proxied: MCP /mcp": [_round(50, 200), _round(90, 110)],
            },
            "32": {
                "proxied: OpenTool /opentool/call": [_round(0, 0)],
                "proxied: MCP /mcp": [_round(50, 200)],
            },
        }
    }
    rows = run.against_reference(runs)
    assert [(r["concurrency"], r["rounds"], r["rps_ratio"]) for r in rows] == [(1, 1, pytest.approx(0.9))]
