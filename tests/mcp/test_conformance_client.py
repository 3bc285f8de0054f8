"""The conformance suite's client scenarios with Toolplex's `kind: mcp` backend as the client under test.

Every applicable client scenario runs once per module (about four minutes on two cores), each at
every version the suite lists for it, through `tests.mcp.backend_client`: a real `McpBackend` against
the suite's own scenario servers. They skip, saying why, when `.tools/` lacks the suite (`make install-test`
installs it, through tests/mcp/install_conformance.sh). The parsing tests need no suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp import conformance
from tests.mcp.conformance_client import (
    CORE,
    EXPECTED_FAILURES,
    EXTENSION,
    NOT_APPLICABLE,
    ClientResult,
    Scenario,
    format_table,
    parse_client_listing,
    read_client_result,
    run_client_scenarios,
    unexpected,
)
from tests.support import ROOT, refused_port

MISSING = conformance.missing_reason()
needs_suite = pytest.mark.skipif(MISSING is not None, reason=f"MCP conformance suite not installed: {MISSING}")

# What the backend passes today, scenario by version: everything the suite lists but the extensions and the
# three EXPECTED_FAILURES (each with its reason there), every auth/* scenario of the spec timeline included
# (the backend as an OAuth client, `oauth:`; the negative ones pass by refusing to go on).
EXPECTED_PASSES = {
    ("initialize", "2025-06-18"),
    ("initialize", "2025-11-25"),
    ("tools_call", "2025-06-18"),
    ("tools_call", "2025-11-25"),
    ("tools_call", "2026-07-28"),
    ("sse-retry", "2025-11-25"),
    ("request-metadata", "2026-07-28"),
    ("http-standard-headers", "2026-07-28"),
    ("http-invalid-tool-headers", "2026-07-28"),
    ("json-schema-2020-12-preservation", "2025-11-25"),
    ("json-schema-2020-12-preservation", "2026-07-28"),
    ("json-schema-ref-no-deref", "2026-07-28"),  # a network $ref is never fetched (gateway/validation.py)
    ("auth/metadata-default", "2025-11-25"),
    ("auth/metadata-default", "2026-07-28"),
    ("auth/metadata-var1", "2025-11-25"),
    ("auth/metadata-var1", "2026-07-28"),
    ("auth/metadata-var2", "2025-11-25"),
    ("auth/metadata-var2", "2026-07-28"),
    ("auth/metadata-var3", "2025-11-25"),
    ("auth/metadata-var3", "2026-07-28"),
    ("auth/basic-cimd", "2025-11-25"),
    ("auth/basic-cimd", "2026-07-28"),
    ("auth/scope-from-www-authenticate", "2025-11-25"),
    ("auth/scope-from-www-authenticate", "2026-07-28"),
    ("auth/scope-from-scopes-supported", "2025-11-25"),
    ("auth/scope-from-scopes-supported", "2026-07-28"),
    ("auth/scope-omitted-when-undefined", "2025-11-25"),
    ("auth/scope-omitted-when-undefined", "2026-07-28"),
    ("auth/scope-step-up", "2025-11-25"),
    ("auth/scope-step-up", "2026-07-28"),
    ("auth/scope-retry-limit", "2025-11-25"),
    ("auth/scope-retry-limit", "2026-07-28"),
    ("auth/token-endpoint-auth-basic", "2025-06-18"),
    ("auth/token-endpoint-auth-basic", "2025-11-25"),
    ("auth/token-endpoint-auth-basic", "2026-07-28"),
    ("auth/token-endpoint-auth-post", "2025-06-18"),
    ("auth/token-endpoint-auth-post", "2025-11-25"),
    ("auth/token-endpoint-auth-post", "2026-07-28"),
    ("auth/token-endpoint-auth-none", "2025-06-18"),
    ("auth/token-endpoint-auth-none", "2025-11-25"),
    ("auth/token-endpoint-auth-none", "2026-07-28"),
    ("auth/pre-registration", "2025-11-25"),
    ("auth/pre-registration", "2026-07-28"),
    ("auth/2025-03-26-oauth-metadata-backcompat", "2025-03-26"),
    ("auth/2025-03-26-oauth-endpoint-fallback", "2025-03-26"),
    ("auth/resource-mismatch", "2026-07-28"),
    ("auth/offline-access-scope", "2026-07-28"),
    ("auth/offline-access-not-supported", "2026-07-28"),
    ("auth/authorization-server-migration", "2026-07-28"),
    ("auth/iss-supported", "2026-07-28"),
    ("auth/iss-not-advertised", "2026-07-28"),
    ("auth/iss-supported-missing", "2026-07-28"),
    ("auth/iss-wrong-issuer", "2026-07-28"),
    ("auth/iss-unexpected", "2026-07-28"),
    ("auth/iss-normalized", "2026-07-28"),
    ("auth/metadata-issuer-mismatch", "2026-07-28"),
}
# The OAuth client credentials extension (SEP-1046), run and shown but not counted: both must pass.
CLIENT_CREDENTIALS = {"auth/client-credentials-basic", "auth/client-credentials-jwt"}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[ClientResult]:
    if MISSING is not None:
        pytest.skip(f"MCP conformance suite not installed: {MISSING}")
    return run_client_scenarios(tmp_path_factory.mktemp("client-scenarios"), jobs=3)  # partly waiting on I/O


def by_key(rows: list[ClientResult]) -> dict[tuple[str, str], ClientResult]:
    return {row.key: row for row in rows}


@needs_suite
def test_the_backend_passes_exactly_the_expected_scenarios(rows: list[ClientResult]) -> None:
    counted = [row for row in rows if row.category == CORE]
    passed = {row.key for row in counted if row.passed}
    failed = {row.key for row in counted if not row.passed}
    assert passed == EXPECTED_PASSES, format_table(rows)
    assert failed == set(EXPECTED_FAILURES), format_table(rows)
    assert unexpected(rows) == []
    for key in EXPECTED_PASSES:
        row = by_key(rows)[key]
        assert row.checks_passed >= 1 and (row.exit_code == 0 or row.error_allowed) and not row.timed_out, row


@needs_suite
def test_each_expected_failure_fails_for_the_reason_it_gives(rows: list[ClientResult]) -> None:
    found = by_key(rows)

    def failed_ids(key: tuple[str, str]) -> set[str]:
        return {failure.split(":", 1)[0] for failure in found[key].failures}

    # No end user: the elicitation is declined (JSON-RPC -32600), not accepted with defaults.
    elicitation = found[("elicitation-sep1034-client-defaults", "2025-11-25")]
    assert any("-32600" in failure for failure in elicitation.failures), elicitation.failures
    assert elicitation.exit_code == 0  # the client ran its script; the tool's failure is the scenario's to judge
    # No end user either: no retry, so the three retry checks fail and the other two pass.
    assert failed_ids(("sep-2322-client-request-state", "2026-07-28")) == {
        "sep-2322-client-request-state-echoed",
        "sep-2322-client-jsonrpc-id-different",
        "sep-2322-client-no-state-omitted",
    }
    assert found[("sep-2322-client-request-state", "2026-07-28")].checks_passed == 2
    # The null argument is refused before the call leaves; every header of the other call is right.
    assert failed_ids(("http-custom-headers", "2026-07-28")) == {"sep-2243-client-omit-null"}


@needs_suite
def test_auth_scenarios_run_and_extensions_are_not_counted(rows: list[ClientResult]) -> None:
    auth = [row for row in rows if row.scenario.startswith("auth/")]
    assert auth and all(row.ran and row.category != NOT_APPLICABLE for row in auth)
    extensions = [row for row in rows if row.category == EXTENSION]
    assert {row.scenario for row in extensions} >= {"sep-2640-client-no-prefetch", *CLIENT_CREDENTIALS}
    assert all(row.ran for row in extensions)
    assert all(row.passed for row in extensions if row.scenario in CLIENT_CREDENTIALS), format_table(rows)
    table = format_table(rows)
    assert "not applicable" not in table
    assert "| json-schema-ref-no-deref | 2026-07-28 | pass |" in table
    assert "| auth/scope-step-up | 2026-07-28 | pass |" in table


def test_the_backend_client_says_why_when_discovery_fails() -> None:
    """Nothing listens on the port: exit 1 and a `discovery_failed` line, the backend's own error."""
    url = f"http://127.0.0.1:{refused_port()}/mcp"
    done = subprocess.run(
        [sys.executable, "-m", "tests.mcp.backend_client", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MCP_CONFORMANCE_SCENARIO": "tools_call"},
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    failed = [event for event in events if event["event"] == "discovery_failed"]
    assert failed and failed[0]["kind"] == "upstream_unavailable", events


def test_the_listing_is_read_into_applicable_scenarios() -> None:
    listing = """Client scenarios (test against a client):
  - initialize [2025-06-18,2025-11-25]
  - request-metadata [2026-07-28]
  - auth/basic-cimd [2025-11-25,2026-07-28]
  - sep-2640-client-no-prefetch [extension]
"""
    assert parse_client_listing(listing) == [
        Scenario("initialize", ("2025-06-18", "2025-11-25"), CORE),
        Scenario("request-metadata", ("2026-07-28",), CORE),
        Scenario("auth/basic-cimd", ("2025-11-25", "2026-07-28"), CORE),
        Scenario("sep-2640-client-no-prefetch", (), EXTENSION),
    ]


def test_a_row_fails_on_a_failed_check_a_client_error_or_a_missing_checks_json(tmp_path: Path) -> None:
    scenario = Scenario("tools_call", ("2025-11-25",), CORE)
    run = tmp_path / "run" / "tools_call-2026-01-01T00-00-00-000Z"
    run.mkdir(parents=True)
    checks = [{"id": "a", "status": "SUCCESS"}, {"id": "b", "status": "WARNING"}]
    (run / "checks.json").write_text(json.dumps(checks))
    clean = read_client_result(scenario, "2025-11-25", tmp_path / "run", "")
    assert clean.passed and clean.warnings == 1 and clean.verdict == "pass"
    crashed = read_client_result(scenario, "2025-11-25", tmp_path / "run", "\nClient exited with code 1\n")
    assert not crashed.passed and crashed.exit_code == 1
    # A negative auth scenario expects the client to give up: the suite then judges the run passed.
    said = "Client exited with code 1\nOVERALL: PASSED\n"
    refused = read_client_result(scenario, "2025-11-25", tmp_path / "run", said)
    assert refused.passed and refused.error_allowed and refused.failures == ()
    (run / "checks.json").write_text(json.dumps([*checks, {"id": "c", "status": "FAILURE", "errorMessage": "x"}]))
    failing = read_client_result(scenario, "2025-11-25", tmp_path / "run", "")
    assert not failing.passed and failing.failures == ("c: x",) and failing.verdict == "**fail**"
    missing = read_client_result(scenario, "2025-11-25", tmp_path / "empty", "")
    assert not missing.passed
