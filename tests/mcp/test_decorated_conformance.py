"""Toolplex fronting an `MCPServer`-decorator server answers the conformance suite as the server does directly.

The server (tests/mcp/decorated_server.py) speaks both eras, so Toolplex (`era: auto`) reaches it in
2026-07-28; its tools ask their client mid-call on the handshake era's session (`ctx.elicit`,
`ctx.session.create_message`). A handshake-era caller must therefore be served upstream in its own era
(issue 26, era affinity), or those questions fail with "this transport context has no back-channel". These
are the scenarios that showed it, at 2025-11-25, and one plain tool call; `make conformance` (targets
`decorated` and `toolplex-decorated`) runs every scenario of every version.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp import conformance

MISSING = conformance.missing_reason()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"MCP conformance suite not installed: {MISSING}")

VERSION = "2025-11-25"
SCENARIOS = [
    "tools-call-simple-text",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
]


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    """The decorated server's URL, and Toolplex's fronting that same server."""
    with conformance.decorated_server() as direct:
        config = conformance.DECORATED_FRONTING_CONFIG.replace("{upstream}", direct)
        with conformance.gateway_with(config) as through:
            yield direct, through


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_handshake_era_caller_sees_what_it_sees_directly(
    urls: tuple[str, str], scenario: str, tmp_path: Path
) -> None:
    direct_url, through_url = urls
    direct = conformance.run_scenario(direct_url, VERSION, scenario, tmp_path / "direct")
    through = conformance.run_scenario(through_url, VERSION, scenario, tmp_path / "through")
    assert direct.passed, direct.failures  # the server itself implements the scenario
    assert through == direct, through.failures
