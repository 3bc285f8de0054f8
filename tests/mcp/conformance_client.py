"""The conformance suite's client scenarios, with Toolplex's `kind: mcp` backend as the client under test.

    python -m tests.mcp.conformance_client [--out DIR] [--scenario NAME ...] [--jobs N]

Each applicable client scenario runs at every protocol version the suite's `list --client` names for it:
`conformance client --command "<python> -m tests.mcp.backend_client" --scenario NAME --spec-version V`.
The suite starts the scenario's server, runs the command with the server's URL, and writes a
`checks.json`; this harness reads it, as `tests.mcp.conformance` does for the server scenarios. A row
passes when no check failed and the client ran its script to the end (exit 0, within the suite's
timeout); warnings do not fail it, so they are counted. A scenario whose every check was skipped (the
client never reached what it tests) is shown as skipped.

Which scenarios apply: every one but those in `NOT_APPLICABLE_SCENARIOS` (each with its reason). The
`auth/*` scenarios grade the backend as an OAuth client (`oauth:`, `gateway.oauth.client`), configured by
`tests.mcp.backend_client.oauth_settings` from what each scenario gives. The `[extension]` scenarios
(the `auth/client-credentials-*` ones among them) are run and shown, not counted.

`EXPECTED_FAILURES` names each scenario the backend does not pass today and why; the exit status (and
`tests/mcp/test_conformance_client.py`) holds the run to exactly that: 0 when every other counted
scenario passed and each expected failure still failed, 1 when any row differs (a new failure, or a
fixed one whose entry should go), 2 when the suite is not installed.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.mcp.conformance import (
    LIST_TIMEOUT_S,
    RUN_TIMEOUT_S,
    SCENARIO_TIMEOUT_MS,
    _suite,
    failed_checks,
    missing_reason,
)

CLIENT_COMMAND: Final = f"{sys.executable} -m tests.mcp.backend_client"

CORE: Final = "core"
EXTENSION: Final = "extension"
NOT_APPLICABLE: Final = "not applicable"

# Scenarios not run, and why (none of the spec timeline's: every auth/* scenario of 2025-11-25 and 2026-07-28 runs).
NOT_APPLICABLE_SCENARIOS: Final[dict[str, str]] = {}

# Why an extension scenario the backend does not pass fails (extensions are shown, not counted).
EXTENSION_NOTES: Final[dict[str, str]] = {
    "auth/enterprise-managed-authorization": "extension, not counted: no ID-JAG (SEP-990) grant in `oauth:`",
    "auth/dpop": "extension, not counted: tokens are Bearer only, no DPoP proofs (SEP-1932)",
    "auth/dpop-nonce": "extension, not counted: tokens are Bearer only, no DPoP proofs (SEP-1932)",
    "auth/wif-jwt-bearer": "extension, not counted: no workload identity (jwt-bearer) grant in `oauth:`",
}

# (scenario, version) -> why the backend does not pass it. Keep in step with docs/protocols/mcp.md.
EXPECTED_FAILURES: Final[dict[tuple[str, str], str]] = {
    ("elicitation-sep1034-client-defaults", "2025-11-25"): (
        "no end user: the server's elicitation/create reaches the backend with no MCP caller attached, so "
        "the backend declines it (-32600) and never accepts with the schema's defaults"
    ),
    ("sep-2322-client-request-state", "2026-07-28"): (
        "no end user: the InputRequiredResult asks for elicitation, which the backend declines with no "
        "caller attached, so there is no retry to carry requestState (3 of 5 checks fail)"
    ),
    ("http-custom-headers", "2026-07-28"): (
        "the call pipeline validates arguments before a call leaves: `verbose: null` is not a boolean, so "
        "test_custom_headers_null is refused (invalid_arguments) and the omit-null check never sees it; "
        "every Mcp-Param-* header of the other call is right (17 of 18 checks)"
    ),
}


@dataclass(frozen=True)
class Scenario:
    """One client scenario as `list --client` names it."""

    name: str
    versions: tuple[str, ...]  # empty for an extension scenario (not on the spec timeline)
    category: str  # core, extension or not applicable


@dataclass(frozen=True)
class ClientResult:
    """One client scenario at one version, from its checks.json and the suite's report of the client."""

    scenario: str
    version: str  # "-" for an extension scenario (run at the suite's default wire)
    category: str
    ran: bool
    checks_passed: int = 0
    checks_failed: int = 0
    warnings: int = 0
    skipped: int = 0
    exit_code: int | None = None
    timed_out: bool = False
    failures: tuple[str, ...] = ()
    # The scenario expects the client to give up (`allowClientError`: a negative auth scenario, where refusing
    # to go on is the right behaviour): the suite judged the run passed whatever the exit status.
    error_allowed: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.scenario, self.version)

    @property
    def all_skipped(self) -> bool:
        return self.ran and self.skipped > 0 and self.checks_passed + self.checks_failed + self.warnings == 0

    @property
    def passed(self) -> bool:
        """No failed check, and the client ran to its end (a run without checks.json failed)."""
        return (
            self.ran
            and self.checks_failed == 0
            and (self.exit_code == 0 or self.error_allowed)
            and not self.timed_out
            and not any(f.startswith("(no checks.json") for f in self.failures)
        )

    @property
    def counted(self) -> bool:
        return self.category == CORE

    @property
    def verdict(self) -> str:
        if self.category == NOT_APPLICABLE:
            return NOT_APPLICABLE
        if self.all_skipped:
            return "skipped"
        return "pass" if self.passed else "**fail**"


def parse_client_listing(text: str) -> list[Scenario]:
    """Read `list --client`: `  - name [v1,v2]` lines; `[extension]` marks an extension scenario."""
    scenarios = []
    for raw in text.splitlines():
        item = re.match(r"^\s*- (?P<name>\S+) \[(?P<tags>[^\]]*)\]\s*$", raw)
        if item is None:
            continue
        name, tags = item["name"], [tag.strip() for tag in item["tags"].split(",") if tag.strip()]
        if name in NOT_APPLICABLE_SCENARIOS:
            category = NOT_APPLICABLE
        elif tags == ["extension"]:
            category = EXTENSION
        else:
            category = CORE
        versions = tuple(tag for tag in tags if re.fullmatch(r"\d{4}-\d{2}-\d{2}", tag))
        scenarios.append(Scenario(name, versions, category))
    return scenarios


def list_client_scenarios() -> list[Scenario]:
    """The client scenarios of the pinned suite, from its own `list --client`."""
    done = _suite("list", "--client", timeout=LIST_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"conformance list --client failed ({done.returncode}): {done.stderr.strip()}")
    return parse_client_listing(done.stdout)


def read_client_result(scenario: Scenario, version: str, directory: Path, output: str) -> ClientResult:
    """The row of one run: its checks.json (under directory) and what the suite said of the client."""
    found = sorted(directory.glob("**/checks.json"))
    exited = re.search(r"Client exited with code (-?\d+)", output)
    exit_code = int(exited.group(1)) if exited else 0
    timed_out = "Client timed out after" in output or "stopped after" in output
    # The suite's verdict counts a client's non-zero exit only when the scenario does not allow it.
    error_allowed = exit_code != 0 and "OVERALL: PASSED" in output
    if not found:
        return ClientResult(
            scenario.name,
            version,
            scenario.category,
            ran=True,
            exit_code=exit_code,
            timed_out=timed_out,
            failures=("(no checks.json: not run)",),
        )
    checks = json.loads(found[-1].read_text())
    statuses = [check.get("status") for check in checks]
    failures = tuple(
        f"{check.get('id')}: {check.get('errorMessage') or check.get('description')}"
        for check in checks
        if check.get("status") == "FAILURE"
    )
    if exit_code != 0 and not error_allowed:
        failures += (f"(the client exited with status {exit_code}; see stdout.txt beside checks.json)",)
    if timed_out:
        failures += ("(the client did not finish within the suite's timeout)",)
    return ClientResult(
        scenario=scenario.name,
        version=version,
        category=scenario.category,
        ran=True,
        checks_passed=statuses.count("SUCCESS"),
        checks_failed=statuses.count("FAILURE"),
        warnings=statuses.count("WARNING"),
        skipped=statuses.count("SKIPPED"),
        exit_code=exit_code,
        timed_out=timed_out,
        failures=failures,
        error_allowed=error_allowed,
    )


def run_client_scenario(scenario: Scenario, version: str, out_dir: Path, command: str = CLIENT_COMMAND) -> ClientResult:
    """One scenario at `version` ("-": the suite's default wire, for an extension) with `command` as the client."""
    target = out_dir / version / scenario.name.replace("/", "_")
    if target.exists():
        shutil.rmtree(target)  # a stale checks.json must not stand for this run
    target.mkdir(parents=True)
    args = ["client", "--command", command, "--scenario", scenario.name, "--timeout", str(SCENARIO_TIMEOUT_MS)]
    if version != "-":
        args += ["--spec-version", version]
    done = _suite(*args, "-o", str(target), timeout=RUN_TIMEOUT_S)
    output = done.stdout + done.stderr
    (target / "suite-output.log").write_text(output)
    return read_client_result(scenario, version, target, output)


def runs_of(scenarios: Iterable[Scenario]) -> list[tuple[Scenario, str]]:
    """Every (scenario, version) pair to report: each version a scenario lists, "-" for an extension."""
    return [(s, v) for s in scenarios for v in (s.versions or ("-",))]


def run_client_scenarios(
    out_dir: Path | None = None,
    names: Sequence[str] | None = None,
    jobs: int = 1,
    command: str = CLIENT_COMMAND,
) -> list[ClientResult]:
    """Every applicable client scenario at each of its versions (the rest as not-applicable rows), in list order.

    `jobs` runs that many scenarios at once (each is its own suite process and scenario server on a free port).
    """
    scenarios = [s for s in list_client_scenarios() if names is None or s.name in names]
    pairs = runs_of(scenarios)
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-client-") as tmp:
        base = out_dir if out_dir is not None else Path(tmp)

        def one(pair: tuple[Scenario, str]) -> ClientResult:
            scenario, version = pair
            if scenario.category == NOT_APPLICABLE:
                return ClientResult(scenario.name, version, NOT_APPLICABLE, ran=False)
            return run_client_scenario(scenario, version, base, command)

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, pairs))


def unexpected(rows: Iterable[ClientResult]) -> list[str]:
    """How the counted rows differ from `EXPECTED_FAILURES`: failures it does not name, and names that passed."""
    problems = []
    for row in rows:
        if not row.counted:
            continue
        expected_to_fail = row.key in EXPECTED_FAILURES
        if not row.passed and not expected_to_fail:
            problems.append(f"{row.scenario} {row.version} failed: {'; '.join(row.failures) or 'see checks.json'}")
        elif row.passed and expected_to_fail:
            problems.append(f"{row.scenario} {row.version} passed: remove it from EXPECTED_FAILURES")
    return problems


def note_of(row: ClientResult) -> str:
    if row.category == NOT_APPLICABLE:
        return NOT_APPLICABLE_SCENARIOS.get(row.scenario, "")
    if row.category == EXTENSION and row.scenario in EXTENSION_NOTES and not row.passed:
        return EXTENSION_NOTES[row.scenario]
    if row.category == EXTENSION:
        why = ": every check skipped, the backend implements no skills (never calls skills/list)"
        return "extension, not counted" + (why if row.all_skipped else "")
    return EXPECTED_FAILURES.get(row.key, "")


def format_table(rows: Sequence[ClientResult]) -> str:
    """A markdown table, one row per (scenario, version)."""
    lines = [
        "| scenario | version | result | checks passed | checks failed | warnings | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row.scenario} | {row.version} | {row.verdict} | {row.checks_passed} | {row.checks_failed} "
            f"| {row.warnings} | {note_of(row)} |"
        )
    counted = [row for row in rows if row.counted]
    lines.append("")
    lines.append(
        f"Counted: {len(counted)} runs, {sum(r.passed for r in counted)} passed, "
        f"{sum(not r.passed for r in counted)} failed ({sum(r.key in EXPECTED_FAILURES for r in counted)} expected), "
        f"{sum(r.warnings for r in counted)} warnings."
    )
    lines.extend(failed_checks(counted))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep each scenario's checks.json (and the client's stdout) here")
    parser.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="scenarios run at once (default 2)")
    args = parser.parse_args(argv)
    reason = missing_reason()
    if reason is not None:
        print(f"conformance suite not installed: {reason}", file=sys.stderr)
        return 2
    rows = run_client_scenarios(args.out, args.scenario, args.jobs)
    print("## Client scenarios: Toolplex's kind: mcp backend as the client\n")
    print(format_table(rows))
    problems = unexpected(rows)
    if problems:
        print("\nNot as expected:")
        for problem in problems:
            print(f"- {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
