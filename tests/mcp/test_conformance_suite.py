"""The official MCP conformance suite against the reference server: one fast scenario per protocol era.

`make test` does not install the suite (Node 22 and the pinned npm package into .tools/); these tests
skip, saying so, when it is missing. `make conformance` installs it and runs every server scenario.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp import conformance
from tests.support import python_server

MISSING = conformance.missing_reason()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"MCP conformance suite not installed: {MISSING}")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with python_server("tests.mcp.reference_server") as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize(
    ("version", "scenario"),
    [
        # Handshake era: a live elicitation/create request on the tools/call stream of a session.
        pytest.param("2025-11-25", "tools-call-elicitation", id="handshake"),
        # Stateless era: InputRequiredResult, requestState sealed by the server and echoed by the client.
        pytest.param("2026-07-28", "input-required-result-request-state", id="stateless"),
    ],
)
def test_one_scenario_per_era_passes(url: str, version: str, scenario: str, tmp_path: Path) -> None:
    result = conformance.run_scenario(url, version, scenario, tmp_path)
    assert result.passed, result.failures
    assert result.checks_passed >= 2 and result.checks_failed == 0 and result.warnings == 0


def test_the_suite_lists_the_scenario_counts_the_issue_names() -> None:
    """27 at --spec-version 2025-06-18, 33 at --requirements 2025-11-25, 40 (+ the tasks extension) at 2026-07-28."""
    counts = {}
    for version in conformance.VERSIONS:
        categories = conformance.list_scenarios(version).categories
        counts[version] = (
            len([c for c in categories.values() if c != conformance.EXTENSION]),
            len([c for c in categories.values() if c == conformance.EXTENSION]),
        )
    assert counts == {"2025-06-18": (27, 0), "2025-11-25": (33, 0), "2026-07-28": (40, 10)}


def test_a_run_cut_short_reports_what_it_did_not_finish_as_failed(url: str, tmp_path: Path) -> None:
    """The verdict comes from the checks.json files, not the suite's exit: a missing one is a failure.

    The 2026-07-28 set takes several seconds (its task scenarios wait on running tasks), so a run
    bounded at one second cannot finish it.
    """
    rows = conformance.run_version(url, "2026-07-28", tmp_path, timeout=1.0)
    unfinished = [row for row in rows if not row.passed]
    assert len(rows) == 50 and unfinished
    assert all(row.failures == ("(no checks.json: not run)",) for row in unfinished)
    assert "stopped after 1 s" in (tmp_path / "2026-07-28" / "suite-output.log").read_text()
    assert "| **fail** |" in conformance.format_table(rows)
