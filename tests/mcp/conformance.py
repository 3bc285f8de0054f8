"""Run the official MCP conformance suite's server scenarios against a URL and tabulate the results.

The suite is npm `@modelcontextprotocol/conformance` 0.2.0-alpha.12 on Node >= 22, both installed into
`.tools/` by `tests/mcp/install_conformance.sh`. For each protocol version it runs the scenario set the
issue names, reads the `checks.json` every scenario writes, and reports one row per scenario: passed
when no check failed (warnings do not fail a scenario, so they are counted and shown). The suite's
own summary is not trusted for the verdict: a scenario it lists but never wrote counts as failed.

    python -m tests.mcp.conformance --url http://127.0.0.1:8931/mcp [--versions 2025-06-18 2025-11-25 2026-07-28]
        [--out DIR] [--include-extensions]
    python -m tests.mcp.conformance --target reference [--target ...] [--out DIR]

`--target NAME` starts what `TARGETS` names, on a free loopback port, runs the suite against it and stops
it: `reference` (tests/mcp/reference_server.py, graded directly), `toolplex-reference` (Toolplex fronting
it as a `kind: mcp` backend), `toolplex-legacy-reference` (the same over the handshake era only), `toolplex`
(Toolplex's own tools), `decorated` (tests/mcp/decorated_server.py, a server written with the SDK's
`MCPServer` decorators, graded directly) and `toolplex-decorated` (Toolplex fronting it as a `kind: mcp`
backend, `era: auto`: it must pass every scenario the server passes directly)
(`make conformance CONFORMANCE_TARGETS=...`).

Exit status 0 when every counted scenario passed (for the targets in `EXPECTED_FAILURES`: all but those listed
there, each needing a feature that target lacks), 1 otherwise, 2 when the suite is not installed.
As a library, `run_versions(url, versions, out_dir)` returns the rows, so a test can run the same
versions directly and through Toolplex and compare them key by key.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tests.support import free_port, stop, wait_for_port

ROOT: Final = Path(__file__).resolve().parents[2]
TOOLS: Final = ROOT / ".tools"
SUITE_PACKAGE: Final = "@modelcontextprotocol/conformance"
SUITE_VERSION: Final = "0.2.0-alpha.12"
SUITE_ENTRY: Final = TOOLS / "node_modules" / SUITE_PACKAGE / "dist" / "index.js"
INSTALL_SCRIPT: Final = "tests/mcp/install_conformance.sh"

# How each version's scenario set is selected: 2025-06-18 has no frozen requirement set, so it is
# every scenario applicable at that version (run at its wire); the two later ones are frozen sets.
VERSION_FLAGS: Final[dict[str, tuple[str, ...]]] = {
    "2025-06-18": ("--spec-version", "2025-06-18"),
    "2025-11-25": ("--requirements", "2025-11-25"),
    "2026-07-28": ("--requirements", "2026-07-28"),
}
VERSIONS: Final = tuple(VERSION_FLAGS)
STATELESS_VERSIONS: Final = frozenset({"2026-07-28"})

# Bounds: one scenario's own timeout inside the suite, and the whole run of one version.
SCENARIO_TIMEOUT_MS: Final = 30_000
RUN_TIMEOUT_S: Final = 600.0
LIST_TIMEOUT_S: Final = 60.0

REQUIRED: Final = "required"
EXTENSION: Final = "extension"

_NODE_ARCH: Final = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "armv7l"}
_RESULT_DIR: Final = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


class SuiteMissing(RuntimeError):
    """Node >= 22 or the pinned suite is not in .tools/ (run the install script)."""


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario at one protocol version, as its checks.json tells it."""

    version: str
    scenario: str
    category: str  # "required", or why the suite does not score it: pending, extension, added-after-release
    passed: bool
    checks_passed: int
    checks_failed: int
    warnings: int
    failures: tuple[str, ...] = ()  # "check-id: message" for each failed check

    @property
    def key(self) -> tuple[str, str]:
        return (self.version, self.scenario)

    @property
    def era(self) -> str:
        return "stateless" if self.version in STATELESS_VERSIONS else "handshake"


@dataclass
class Selection:
    """The scenarios a version runs, each with its category."""

    categories: dict[str, str] = field(default_factory=dict)


def node_binary() -> Path:
    arch = _NODE_ARCH.get(platform.machine().lower(), platform.machine().lower())
    return TOOLS / "node_modules" / f"node-linux-{arch}" / "bin" / "node"


def missing_reason() -> str | None:
    """Why the suite cannot run here, or None when Node and the pinned suite are installed."""
    node = node_binary()
    if not node.is_file():
        return f"{node.relative_to(ROOT)} is missing: run {INSTALL_SCRIPT} (or make conformance)"
    package = SUITE_ENTRY.parents[1] / "package.json"
    if not SUITE_ENTRY.is_file() or not package.is_file():
        return f"{SUITE_PACKAGE} is not in .tools/: run {INSTALL_SCRIPT} (or make conformance)"
    installed = json.loads(package.read_text()).get("version")
    if installed != SUITE_VERSION:
        return f"{SUITE_PACKAGE} {installed} is installed, {SUITE_VERSION} is pinned: run {INSTALL_SCRIPT}"
    return None


def _suite(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    reason = missing_reason()
    if reason is not None:
        raise SuiteMissing(reason)
    command = [str(node_binary()), str(SUITE_ENTRY), *args]
    try:
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as expired:
        # What finished before the bound still has its checks.json; the rest reads as not run (failed).
        output = [part.decode() if isinstance(part, bytes) else part or "" for part in (expired.stdout, expired.stderr)]
        note = f"\n(conformance {args[0]} stopped after {timeout:g} s)\n"
        return subprocess.CompletedProcess(command, -1, output[0], output[1] + note)


def list_scenarios(version: str) -> Selection:
    """The server scenarios `version` runs, from the suite's own `list --server`, with their categories."""
    done = _suite("list", "--server", *VERSION_FLAGS[version], timeout=LIST_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"conformance list failed ({done.returncode}): {done.stderr.strip()}")
    return parse_listing(done.stdout)


def parse_listing(text: str) -> Selection:
    """Read `list --server` output: scenario lines, under headings that say whether the suite scores them."""
    selection = Selection()
    category = REQUIRED
    in_server_block = False
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if stripped.startswith("Server scenarios"):
            in_server_block, category = True, REQUIRED
        elif stripped.startswith("Client scenarios"):
            in_server_block = False
        elif stripped.startswith("Run and reported, but never scored"):
            in_server_block = True
        elif (heading := re.match(r"^\s{2}([a-z-]+) \(\d+\):$", line)) and in_server_block:
            category = heading.group(1)
        elif stripped.startswith("- ") and in_server_block:
            item = re.match(r"^- (?P<name>\S+)(?: \[(?P<tags>[^\]]*)\])?$", stripped)
            if item is None:
                continue
            tags = item.group("tags") or ""
            if category != REQUIRED and tags and tags != "server":
                continue  # an unscored client scenario
            selection.categories[item.group("name")] = category
    return selection


def read_results(version: str, out_dir: Path, selection: Selection) -> list[ScenarioResult]:
    """One row per listed scenario, from the checks.json files under out_dir; a scenario without one failed."""
    found: dict[str, Path] = {}
    for directory in sorted(out_dir.iterdir()) if out_dir.is_dir() else []:
        match = _RESULT_DIR.match(directory.name)
        if match and (directory / "checks.json").is_file():
            found[match["scenario"]] = directory / "checks.json"
    names = list(selection.categories) + sorted(set(found) - set(selection.categories))
    rows = []
    for name in names:
        category = selection.categories.get(name, REQUIRED)
        path = found.get(name)
        if path is None:
            rows.append(ScenarioResult(version, name, category, False, 0, 0, 0, ("(no checks.json: not run)",)))
            continue
        checks = json.loads(path.read_text())
        statuses = [check.get("status") for check in checks]
        failures = tuple(
            f"{check.get('id')}: {check.get('errorMessage') or check.get('description')}"
            for check in checks
            if check.get("status") == "FAILURE"
        )
        rows.append(
            ScenarioResult(
                version=version,
                scenario=name,
                category=category,
                passed=not failures,
                checks_passed=statuses.count("SUCCESS"),
                checks_failed=len(failures),
                warnings=statuses.count("WARNING"),
                failures=failures,
            )
        )
    return rows


def run_version(url: str, version: str, out_dir: Path, timeout: float = RUN_TIMEOUT_S) -> list[ScenarioResult]:
    """Every server scenario of `version` against `url`; checks.json files land under out_dir/<version>.

    The run is stopped after `timeout` seconds; the scenarios it had not finished then count as failed.
    """
    selection = list_scenarios(version)
    target = out_dir / version
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.iterdir():
        if _RESULT_DIR.match(stale.name) and (stale / "checks.json").is_file():
            (stale / "checks.json").unlink()
    args = ("server", "--url", url, *VERSION_FLAGS[version], "--timeout", str(SCENARIO_TIMEOUT_MS), "-o", str(target))
    done = _suite(*args, timeout=timeout)
    (target / "suite-output.log").write_text(done.stdout + done.stderr)
    return read_results(version, target, selection)


def run_scenario(url: str, version: str, scenario: str, out_dir: Path) -> ScenarioResult:
    """One scenario at `version`'s wire (`--scenario` with `--spec-version`): for quick checks in tests."""
    target = out_dir / version / scenario
    target.mkdir(parents=True, exist_ok=True)
    args = ("server", "--url", url, "--scenario", scenario, "--spec-version", version, "-o", str(target))
    done = _suite(*args, "--timeout", str(SCENARIO_TIMEOUT_MS), timeout=RUN_TIMEOUT_S)
    (target / "suite-output.log").write_text(done.stdout + done.stderr)
    rows = read_results(version, target, Selection({scenario: REQUIRED}))
    return next(row for row in rows if row.scenario == scenario)


def run_versions(url: str, versions: Iterable[str] = VERSIONS, out_dir: Path | None = None) -> list[ScenarioResult]:
    """All rows for all versions (a temporary directory holds the checks.json files unless out_dir is given)."""
    if out_dir is not None:
        return [row for version in versions for row in run_version(url, version, out_dir)]
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as tmp:
        return [row for version in versions for row in run_version(url, version, Path(tmp))]


def counted(rows: Iterable[ScenarioResult], include_extensions: bool = False) -> list[ScenarioResult]:
    """The rows that decide the verdict: all but the opt-in extension scenarios, unless asked."""
    return [row for row in rows if include_extensions or row.category != EXTENSION]


def format_table(rows: Sequence[ScenarioResult], include_extensions: bool = False) -> str:
    """A markdown table, one row per scenario, then per-version totals and every failed check."""
    lines = [
        "| scenario | version | era | category | result | checks passed | checks failed | warnings |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        verdict = "pass" if row.passed else "**fail**"
        lines.append(
            f"| {row.scenario} | {row.version} | {row.era} | {row.category} | {verdict} "
            f"| {row.checks_passed} | {row.checks_failed} | {row.warnings} |"
        )
    lines.append("")
    lines.append("| version | scenarios | passed | failed | warnings | not counted (extensions) |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for version in dict.fromkeys(row.version for row in rows):
        mine = [row for row in rows if row.version == version]
        kept = counted(mine, include_extensions)
        left = [row for row in mine if row not in kept]
        lines.append(
            f"| {version} | {len(kept)} | {sum(r.passed for r in kept)} | {sum(not r.passed for r in kept)} "
            f"| {sum(r.warnings for r in kept)} | {len(left)} ({sum(not r.passed for r in left)} failing) |"
        )
    lines.extend(failed_checks(rows))
    return "\n".join(lines)


def failed_checks(rows: Iterable[Any]) -> list[str]:
    """The lines naming each failed check of the rows that failed (none when all passed); a row is a
    server `ScenarioResult` or a client scenario's result (version, scenario, passed, failures)."""
    failed = [row for row in rows if not row.passed]
    if not failed:
        return []
    return ["", "Failed checks:", *(f"- {row.version} {row.scenario}: {f}" for row in failed for f in row.failures)]


def reference_server() -> contextlib.AbstractContextManager[str]:
    """tests/mcp/reference_server.py on a free loopback port; yields its MCP URL, stops it after."""
    return _python_server("tests.mcp.reference_server")


@contextlib.contextmanager
def _python_server(module: str) -> Iterator[str]:
    """`python -m <module> --port P` on a free loopback port; yields its MCP URL, stops it after."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", module, "--port", str(port)],
            cwd=ROOT,
            stdout=log,
            stderr=log,
        )
        try:
            wait_for_port(port, process)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop(process)


# What `--target` can start. Each yields the MCP URL to grade and stops what it started.
# The suite's dns-rebinding-protection scenario sends the server's own origin and expects 2xx: the gateway's
# guard accepts its own origin (http://<Host>) once the Host is one of its allowed hosts (loopback here).
TOOLPLEX_CONFIG: Final = """
fronts:
  mcp: {progress_interval_s: 0.1}
backends:
  - {name: test, kind: python, module: "tests.mcp.front.conformance_tools:toolkit"}
"""


@contextlib.contextmanager
def toolplex_server() -> Iterator[str]:
    """`toolplex serve` with the suite's tools (tests/mcp/front/conformance_tools.py); yields its MCP URL."""
    with gateway_with(TOOLPLEX_CONFIG) as url:
        yield url


# Toolplex fronting the reference server: its tools, resources, prompts and completions under their own
# names, its logs, progress and questions relayed to the suite's client (`era: auto`: the newest era).
FRONTING_CONFIG: Final = """
backends:
  - {name: reference, kind: mcp, url: "{upstream}"}
"""


@contextlib.contextmanager
def gateway_with(config_text: str) -> Iterator[str]:
    """`toolplex serve` with `config_text` (`{port}` filled in) on a free loopback port; yields its MCP URL."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-toolplex-") as tmp:
        config = Path(tmp) / "gateway.yaml"
        config.write_text(config_text.replace("{port}", str(port)))
        serve = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)]
        with open(Path(tmp) / "gateway.log", "wb") as log:
            process = subprocess.Popen([*serve, "--no-reload"], cwd=ROOT, stdout=log, stderr=log)
            try:
                wait_for_port(port, process)
                yield f"http://127.0.0.1:{port}/mcp"
            finally:
                stop(process)


@contextlib.contextmanager
def toolplex_reference_server() -> Iterator[str]:
    """Toolplex with the reference server as its one `kind: mcp` backend; yields Toolplex's MCP URL."""
    with reference_server() as upstream, gateway_with(FRONTING_CONFIG.replace("{upstream}", upstream)) as url:
        yield url


# The same, but the gateway speaks only the handshake era to the reference server (`era: legacy`): a
# 2026-07-28 client's questions then cross eras (adapters/mcp/client/held.py holds the upstream's call open).
LEGACY_FRONTING_CONFIG: Final = """
backends:
  - {name: reference, kind: mcp, url: "{upstream}", era: legacy}
"""


@contextlib.contextmanager
def toolplex_legacy_reference_server() -> Iterator[str]:
    """Toolplex fronting the reference server over the handshake era only; yields Toolplex's MCP URL."""
    with reference_server() as upstream, gateway_with(LEGACY_FRONTING_CONFIG.replace("{upstream}", upstream)) as url:
        yield url


def decorated_server() -> contextlib.AbstractContextManager[str]:
    """tests/mcp/decorated_server.py (`MCPServer` decorators) on a free loopback port; yields its MCP URL."""
    return _python_server("tests.mcp.decorated_server")


# Toolplex fronting the decorated server, as `toolplex-reference` fronts the reference (`era: auto`): the
# upstream speaks both eras, so the gateway's connection to it is 2026-07-28 whatever era the suite speaks.
DECORATED_FRONTING_CONFIG: Final = """
backends:
  - {name: decorated, kind: mcp, url: "{upstream}", era: auto}
"""


@contextlib.contextmanager
def toolplex_decorated_server() -> Iterator[str]:
    """Toolplex with the decorated server as its one `kind: mcp` backend; yields Toolplex's MCP URL."""
    with decorated_server() as upstream, gateway_with(DECORATED_FRONTING_CONFIG.replace("{upstream}", upstream)) as url:
        yield url


# What a target is not expected to pass, and why: Toolplex's own tools lack these features (resources,
# prompts and completions come from MCP backends only; a catalog tool cannot log to the client or ask it
# anything; Python tools have no hand-written 2020-12 schema; the canonical model has no x-mcp-header
# parameters). Any other failure fails `make conformance`; so does one of these when the target passes it
# (then this list is out of date).
_OWN_TOOLS_LACK: Final = {
    "completion-complete": "completion",
    "tools-call-with-logging": "logging",
    "tools-call-sampling": "sampling",
    "tools-call-elicitation": "elicitation",
    "elicitation-sep1034-defaults": "elicitation",
    "elicitation-sep1330-enums": "elicitation",
    "resources-read-text": "resources",
    "resources-read-binary": "resources",
    "resources-templates-read": "resources",
    "resources-subscribe": "resources",
    "resources-unsubscribe": "resources",
    "prompts-get-simple": "prompts",
    "prompts-get-with-args": "prompts",
    "prompts-get-embedded-resource": "prompts",
    "prompts-get-with-image": "prompts",
    "json-schema-2020-12": "a hand-written 2020-12 input schema",
    "server-stateless": "a tool that needs a client capability (test_missing_capability)",
    "http-custom-header-server-validation": "x-mcp-header parameters",
    **{
        f"input-required-result-{name}": "asking the client for input"
        for name in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "non-tool-request",
            "result-type",
            "tampered-state",
            "capability-check",
        )
    },
    # The tasks extension (counted with --include-extensions): relayed from MCP backends, no catalog tool runs
    # a task. `tasks-status-notifications` is skipped by the suite itself, so it passes.
    **{
        f"tasks-{name}": "a tool that runs as a task (io.modelcontextprotocol/tasks)"
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "required-task-error",
            "mrtr-composition",
        )
    },
}
# What a handshake-era upstream cannot give a 2026-07-28 client, whatever the gateway does: it sees the
# capabilities its connection declared, not each request's; its questions come one at a time with no key
# of their own (adapters/mcp/client/held.py names them); and it has no tasks extension.
_HANDSHAKE_UPSTREAM_LACKS: Final = {
    "server-stateless": "per-request client capabilities (test_missing_capability runs for a client without sampling)",
    "input-required-result-basic-elicitation": "the server's own key for a question (user_name; the gateway's is q0)",
    "input-required-result-multiple-input-requests": "several questions at once (it asks them one per round)",
    **{name: "the tasks extension" for name in _OWN_TOOLS_LACK if name.startswith("tasks-")},
}
# What the SDK's `MCPServer` does not implement (tests/mcp/decorated_server.py): the tasks extension. Through
# Toolplex the decorated server is expected to fail exactly these too, and nothing else.
_MCPSERVER_LACKS: Final = {
    name: "the tasks extension (MCPServer has none)" for name in _HANDSHAKE_UPSTREAM_LACKS if name.startswith("tasks-")
}
EXPECTED_FAILURES: Final[dict[str, dict[str, str]]] = {
    "toolplex": _OWN_TOOLS_LACK,
    "toolplex-legacy-reference": _HANDSHAKE_UPSTREAM_LACKS,
    "decorated": _MCPSERVER_LACKS,
    "toolplex-decorated": _MCPSERVER_LACKS,
}


def verdict(target: str | None, rows: Iterable[ScenarioResult], include_extensions: bool) -> list[str]:
    """What makes a target's run fail: an unexpected failure, or an expected one that passed."""
    expected = EXPECTED_FAILURES.get(target or "", {})
    problems = []
    for row in counted(rows, include_extensions):
        if not row.passed and row.scenario not in expected:
            problems.append(f"{row.version} {row.scenario} failed")
        elif row.passed and row.scenario in expected:
            problems.append(f"{row.version} {row.scenario} passed, but is listed as lacking {expected[row.scenario]}")
    return problems


TARGETS: Final[dict[str, Callable[[], contextlib.AbstractContextManager[str]]]] = {
    "reference": reference_server,
    "toolplex": toolplex_server,
    "toolplex-reference": toolplex_reference_server,
    "toolplex-legacy-reference": toolplex_legacy_reference_server,
    "decorated": decorated_server,
    "toolplex-decorated": toolplex_decorated_server,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the MCP endpoint to grade, e.g. http://127.0.0.1:8931/mcp")
    where.add_argument("--target", action="append", choices=sorted(TARGETS), help="start and grade a known server")
    parser.add_argument("--versions", nargs="+", choices=VERSIONS, default=list(VERSIONS))
    parser.add_argument("--out", type=Path, help="keep each scenario's checks.json under this directory")
    parser.add_argument(
        "--include-extensions",
        action="store_true",
        help="count the opt-in extension scenarios (io.modelcontextprotocol/tasks) in the verdict",
    )
    args = parser.parse_args(argv)
    reason = missing_reason()
    if reason is not None:
        print(f"conformance suite not installed: {reason}", file=sys.stderr)
        return 2
    ok = True
    for name in args.target or [None]:
        if name is None:
            rows = run_versions(args.url, args.versions, args.out)
        else:
            with TARGETS[name]() as url:
                rows = run_versions(url, args.versions, args.out / name if args.out else None)
            print(f"## {name}\n")
        print(format_table(rows, args.include_extensions))
        print()
        problems = verdict(name, rows, args.include_extensions)
        for problem in problems:
            print(f"unexpected: {problem}")
        if name in EXPECTED_FAILURES:
            lacked = len(EXPECTED_FAILURES[name])
            print(f"expected to fail ({name}: features it lacks, listed in EXPECTED_FAILURES): {lacked}\n")
        ok = ok and not problems
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
