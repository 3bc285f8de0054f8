"""Every documented configuration example that fronts a real server runs as printed (issue 11).

The examples are read from README.md and every docs/**/*.md page (issue 12 moved most of them
to docs/); messages name the page and line of each block.

Each ```yaml block with a remote backend (opentool, oxp, toolserver, jsonrpc, arcade, http)
is run against the project's test server of that protocol: only the host:port of its `url:`
changes (to a free loopback port), every `${VAR}` gets a value in the environment as a user
would set it, and the upstream is given the same credentials. `toolplex check` must report
every backend of the block `up` with tools, and a `toolplex serve` of the block must answer
one call through its OXP front. A block printed side by side (upstream gateway | front
gateway) runs its left column as the upstream.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
import yaml

from gateway.config import parse_config
from gateway.errors import ConfigError
from tests.docs.pages import doc_pages, name
from tests.support import (
    BUILTIN_BACKENDS,
    DEFAULT_CONFIG,
    ROOT,
    free_port,
    gateway_process,
    stop,
    wait_for_http,
    wait_for_port,
)

# README.md held this many such blocks before it was split into docs/ (issue 12): none may be lost.
EXAMPLES_BEFORE_SPLIT = 9
FENCE = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)
URL = re.compile(r"(?P<head>\burl:\s*https?://)(?P<host>[^/\s\"']+)")
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
REMOTE_KINDS = {"opentool", "oxp", "toolserver", "jsonrpc", "arcade", "http"}
SIDE_BY_SIDE = "# front gateway"
# A block that opens with this comment is not run (it needs, say, an identity provider): it names the test that
# runs the same keys against a real server, and its page's test parses it (tests/security/test_permissions_docs.py).
ILLUSTRATION = "# illustration"  # the right column's heading in a two-column block
ARCADE_PYTHON = ROOT / ".venv-arcade" / "bin" / "python"
LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}
STATE = re.compile(r"^\s+(?P<name>\S+)\s+(?P<kind>\S+)\s+(?P<state>\S+)\s+(?P<tools>\d+) tool\(s\)", re.M)


@dataclass(frozen=True)
class Probe:
    """Which test server stands in for a documented backend, and one call that must succeed through it."""

    server: str  # opentool | opentool-typescript | arcade | rest | toolplex | toolplex-default | tsn-manager
    tool_id: str
    arguments: dict[str, Any]
    value: Any


MATH_ADD = {"tool_id": "Math.Add", "arguments": {"a": 2, "b": 3}, "value": 5}
LONDON = {"lat": 51.5074, "lon": -0.1278}
PROBES: dict[tuple[str, str], Probe] = {
    ("opentool", "geo"): Probe(
        "opentool", "GeoTools.distance", {"from": {"lat": 48.8566, "lon": 2.3522}, "to": LONDON}, 343.556
    ),
    ("opentool", "mock"): Probe("opentool-typescript", "MockTextStore.count", {}, 0),
    ("arcade", "arcade"): Probe("arcade", "Arcade.Add", {"a": "10", "b": "5"}, "15"),
    ("jsonrpc", "inner"): Probe("toolplex", **MATH_ADD),
    ("http", "library"): Probe(
        "rest",
        "Library.GetBook",
        {"book_id": "42", "fields": "title"},
        {"id": "42", "fields": ["title"], "title": "Book 42"},
    ),
    ("oxp", "tools_upstream"): Probe("toolplex", **MATH_ADD),
    ("oxp", "inner"): Probe("toolplex", **MATH_ADD),
    ("toolserver", "xagent"): Probe("tsn-manager", "EchoEnv.add", {"a": 2, "b": 3}, 5),
    ("toolserver", "inner"): Probe("toolplex-default", **MATH_ADD),
}


@dataclass
class Example:
    """One documented block: the configuration as printed (a bare list wrapped under `backends:`)."""

    where: str  # page:line of the opening fence, unique across the pages
    config: str
    upstream_config: str | None  # a side-by-side block's left column
    backends: list[dict[str, Any]]  # its remote entries, as printed (before `${VAR}` expansion)
    env: dict[str, str] = field(default_factory=dict)


def _user_value(name: str) -> str:
    """What a user would export: long enough for any secret (JWT secrets need 32 bytes)."""
    return f"readme-{name.lower()}-0123456789abcdefghijklmnopqrstuvwxyz"


def examples() -> list[Example]:
    """The pages' ```yaml blocks with a remote backend, in order (a side-by-side block split in two)."""
    found: list[Example] = []
    for page in doc_pages():
        found += _page_examples(name(page), page.read_text())
    return found


def _page_examples(page: str, text: str) -> list[Example]:
    """One page's examples, each named `page:line`."""
    found: list[Example] = []
    for match in FENCE.finditer(text):
        block, upstream = match.group(1), None
        rows = block.splitlines()
        if rows and rows[0].startswith(ILLUSTRATION):
            continue  # needs a server no test here stands in for; its page's own test parses it
        if rows and SIDE_BY_SIDE in rows[0]:
            column = rows[0].index(SIDE_BY_SIDE)
            upstream = "\n".join(row[:column].rstrip() for row in rows) + "\n"
            block = "\n".join(row[column:] for row in rows) + "\n"
        data = yaml.safe_load(block)
        config = block if isinstance(data, dict) else "backends:\n" + block
        entries = (yaml.safe_load(config) or {}).get("backends") or []
        remote = [entry for entry in entries if entry.get("kind") in REMOTE_KINDS]
        if not remote:
            continue
        names = set(VAR.findall(block + (upstream or "")))
        line = text.count("\n", 0, match.start()) + 1
        env = {name: _user_value(name) for name in sorted(names)}
        found.append(Example(f"{page}:{line}", config, upstream, remote, env))
    return found


EXAMPLES = examples()


def _ids(example: Example) -> str:
    return f"{example.where}:" + "+".join(b["name"] for b in example.backends)


def test_readme_examples_found() -> None:
    assert len(EXAMPLES) >= EXAMPLES_BEFORE_SPLIT, [example.where for example in EXAMPLES]
    kinds = {b["kind"] for example in EXAMPLES for b in example.backends}
    assert kinds == REMOTE_KINDS, kinds
    for example in EXAMPLES:
        for backend in example.backends:
            assert (backend["kind"], backend["name"]) in PROBES, f"no test server for {example.where}"


def test_readme_examples_point_at_loopback() -> None:
    """Printed as they run: every upstream of an example is on this machine."""
    for example in EXAMPLES:
        hosts = [m.group("host").rsplit(":", 1)[0] for m in URL.finditer(example.config)]
        assert hosts and set(hosts) <= LOOPBACK, f"{example.where}: {hosts}"


@dataclass
class Launch:
    command: list[str]
    port: int
    health: str | None  # a path answering 200 once ready; None: wait for the port
    env: dict[str, str] = field(default_factory=dict)


def _gateway_launch(config: Path, port: int, env: dict[str, str]) -> Launch:
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)]
    return Launch(command, port, "/healthz", env)


def _toolplex_upstream(backend: dict[str, Any], upstream_config: str | None) -> tuple[str, dict[str, str]]:
    """A Toolplex serving the built-in tools, wanting the credentials the backend sends."""
    if upstream_config is not None:  # the page's own upstream column, with tools to serve
        return upstream_config + BUILTIN_BACKENDS, {}
    auth: dict[str, Any] = {}
    env: dict[str, str] = {}
    if backend.get("api_key"):
        auth["api_keys"] = [{"name": "front", "key": backend["api_key"]}]
    if jwt := backend.get("jwt"):
        env["UPSTREAM_JWT_SECRET"] = jwt["secret"]
        auth["jwt"] = {"secret_env": "UPSTREAM_JWT_SECRET"}
        if jwt.get("audience"):
            auth["jwt"]["audience"] = jwt["audience"]
    return (yaml.safe_dump({"auth": auth}) if auth else "") + BUILTIN_BACKENDS, env


def _launch(example: Example, backend: dict[str, Any], scratch: Path) -> Launch | None:
    """How to start the test server for `backend` (its `${VAR}`s expanded); None: not available here."""
    port = free_port()
    server = PROBES[(backend["kind"], backend["name"])].server
    python = [sys.executable, "-m"]
    if server in ("opentool", "opentool-typescript"):
        command = [*python, "tests.upstreams.opentool_server", "--port", str(port)]
        if server == "opentool-typescript":
            command += ["--flavor", "typescript"]
        if backend.get("api_key"):
            command += ["--api-key", backend["api_key"]]
        return Launch(command, port, None)
    if server == "rest":
        return Launch([*python, "tests.upstreams.rest_server", "--port", str(port)], port, None)
    if server == "tsn-manager":
        return Launch([*python, "tests.upstreams.toolserver_manager", "--port", str(port)], port, None)
    if server == "arcade":
        if not ARCADE_PYTHON.exists():
            return None
        script = str(ROOT / "tests" / "upstreams" / "arcade_worker.py")
        command = [str(ARCADE_PYTHON), script, "--port", str(port), "--secret", backend["secret"]]
        return Launch(command, port, None, {"ARCADE_USAGE_TRACKING": "0"})
    if server == "toolplex-default":
        return _gateway_launch(DEFAULT_CONFIG, port, example.env)
    text, env = _toolplex_upstream(backend, example.upstream_config)
    config = scratch / f"upstream-{re.sub(r'[^A-Za-z0-9]+', '-', example.where)}-{backend['name']}.yaml"
    config.write_text(text)
    return _gateway_launch(config, port, {**example.env, **env})


def _expanded(example: Example) -> dict[str, dict[str, Any]]:
    """The block's backends as the gateway reads them (validated, `${VAR}`s expanded)."""
    parsed = parse_config(example.config, example.where, env={**os.environ, **example.env})
    return {b["name"]: b for b in parsed.data["backends"]}


def _wait(launch: Launch, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    try:
        if launch.health:
            wait_for_http(f"http://127.0.0.1:{launch.port}{launch.health}", process, timeout=60)
        else:
            wait_for_port(launch.port, process, timeout=60)
    except (RuntimeError, TimeoutError) as exc:
        log.seek(0)
        raise RuntimeError(f"{launch.command}: {exc}\n{log.read()[-3000:].decode(errors='replace')}") from exc


@dataclass
class Started:
    """The examples' test servers: (page:line, backend name) -> host:port, None when absent here."""

    addresses: dict[tuple[str, str], str | None] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)  # page:line -> why the block does not validate


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    """Every example's test servers, started together (a block that does not validate gets none)."""
    scratch = tmp_path_factory.mktemp("upstreams")
    started = Started()
    with contextlib.ExitStack() as stack:
        running: list[tuple[Launch, subprocess.Popen[bytes], IO[bytes]]] = []
        for example in EXAMPLES:
            try:
                expanded = _expanded(example)
            except ConfigError as exc:
                started.invalid[example.where] = "\n".join(exc.problems)
                continue
            for backend in example.backends:
                launch = _launch(example, expanded[backend["name"]], scratch)
                address = None if launch is None else f"127.0.0.1:{launch.port}"
                started.addresses[(example.where, backend["name"])] = address
                if launch is None:
                    continue
                log = stack.enter_context(tempfile.TemporaryFile())
                env = {**os.environ, **launch.env}
                process = subprocess.Popen(launch.command, cwd=ROOT, env=env, stdout=log, stderr=log)
                stack.callback(stop, process)
                running.append((launch, process, log))
        for launch, process, log in running:
            _wait(launch, process, log)
        yield started


def _pointed(example: Example, addresses: dict[tuple[str, str], str | None]) -> str:
    """The block as printed, each backend's url host:port replaced by its test server's."""
    urls = list(URL.finditer(example.config))
    assert len(urls) == len(example.backends), f"{example.where}: one url per remote backend"
    out, last = [], 0
    for found, backend in zip(urls, example.backends, strict=True):
        address = addresses[(example.where, backend["name"])]
        assert address is not None
        out += [example.config[last : found.start("host")], address]
        last = found.end("host")
    return "".join(out) + example.config[last:]


@pytest.mark.parametrize("example", EXAMPLES, ids=_ids)
def test_readme_example_runs(example: Example, upstreams: Started, tmp_path: Path) -> None:
    assert example.where not in upstreams.invalid, f"{example.where}: {upstreams.invalid[example.where]}"
    if any(upstreams.addresses[(example.where, b["name"])] is None for b in example.backends):
        pytest.skip(f"no Arcade worker: {ARCADE_PYTHON} is absent (run tests/upstreams/install_arcade.sh)")
    config = tmp_path / "readme-example.yaml"
    config.write_text(_pointed(example, upstreams.addresses))
    env = {**os.environ, **example.env}
    check = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "check", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, f"{config.read_text()}\n{check.stdout}\n{check.stderr}"
    states = {m["name"]: m for m in STATE.finditer(check.stdout.split("BACKEND STATES", 1)[1])}
    entries = yaml.safe_load(config.read_text())["backends"]
    assert set(states) == {entry["name"] for entry in entries}, check.stdout
    for state in states.values():
        assert state["state"] == "up" and int(state["tools"]) >= 1, check.stdout

    with gateway_process(config, env=example.env) as base:
        for backend in example.backends:
            probe = PROBES[(backend["kind"], backend["name"])]
            body = {"tool_id": probe.tool_id, "input": probe.arguments}
            answer = httpx.post(f"{base}/tools/call", json=body, timeout=30)
            assert answer.status_code == 200, answer.text
            result = answer.json()
            assert result["success"] is True, json.dumps(result)
            expected = pytest.approx(probe.value, abs=0.001) if isinstance(probe.value, float) else probe.value
            assert result["value"] == expected, json.dumps(result)
