"""The README's bearer-JWT example runs as printed (issue 14, point 6).

Its first block makes a copy of the default configuration with an `auth` section, generates the
secret and starts the gateway with `make run CONFIG=...`; the block after it mints a token and
calls. Here the first block runs as printed but for `make run`, in place of which the test serves
that configuration with that secret itself; the second block (which the general curl test skips:
it `# needs` this gateway) then runs against it, each `# {...}` its exact answer. The README's
start-up line is checked against the one this gateway logs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.docs.pages import README
from tests.e2e.test_readme import BLOCK, commands, steady
from tests.support import ROOT, served_gateway

MAKE_RUN = re.compile(r"^make run CONFIG=(?P<config>\S+)")
LISTENING = re.compile(
    r"Toolplex \S+ listening on http://127\.0\.0\.1:\d+ \((?P<counts>\d+ tools? from \d+ backends?)\)"
)


def jwt_blocks() -> tuple[str, str]:
    """The README block that starts the gateway with `make run CONFIG=...`, and the block after it."""
    blocks = BLOCK.findall(README.read_text())
    for index, block in enumerate(blocks[:-1]):
        if any(MAKE_RUN.match(line) for line in block.splitlines()):
            return block, blocks[index + 1]
    raise AssertionError("README.md has no block starting the gateway with `make run CONFIG=...`")


def local(command: str, port: int | None = None) -> str:
    """A README command as run here: the repository's files and venv by absolute path, the test's port."""
    command = command.replace("config/gateway.yaml", str(ROOT / "config" / "gateway.yaml"))
    command = command.replace(".venv/bin/", f"{ROOT}/.venv/bin/")
    return command if port is None else command.replace("127.0.0.1:8080", f"127.0.0.1:{port}")


def listening_line(log: Path, wait_s: float = 10.0) -> re.Match[str]:
    """The gateway's start-up line (logged as the port is bound, so at most moments after /healthz answers)."""
    deadline = time.monotonic() + wait_s
    while (found := LISTENING.search(log.read_text())) is None:
        assert time.monotonic() < deadline, f"no listening line in the gateway's log within {wait_s:g} s"
        time.sleep(0.05)
    return found


def test_readme_has_the_jwt_example() -> None:
    setup, calls = jwt_blocks()
    assert "auth:" in setup and "secret_env: TOOLPLEX_JWT_SECRET" in setup
    assert calls.startswith("# needs "), "the calls block must opt out of the default-configuration curl test"
    assert any(command.startswith("curl") for command, _ in commands(calls))


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_jwt_example_works_as_printed(tmp_path: Path) -> None:
    setup, calls = jwt_blocks()
    lines = setup.splitlines()
    (served,) = [m["config"] for m in map(MAKE_RUN.match, lines) if m]
    script = "\n".join(["set -euo pipefail", *(local(line) for line in lines if not MAKE_RUN.match(line))])
    script += '\nprintf %s "$TOOLPLEX_JWT_SECRET" > secret.txt\n'
    made = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    env = {"TOOLPLEX_JWT_SECRET": (tmp_path / "secret.txt").read_text()}
    log = tmp_path / "gateway.log"
    with served_gateway(tmp_path / served, env=env, log_path=log) as (base, _process):
        port = int(base.rsplit(":", 1)[1])
        parsed = commands(calls)
        steps = ["set -euo pipefail"]
        steps += [f"{{\n{local(command, port)}\n}} > out-{index}.txt" for index, (command, _) in enumerate(parsed)]
        result = subprocess.run(
            ["bash", "-c", "\n".join(steps)],
            cwd=tmp_path,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        checked = 0
        for index, (command, expected) in enumerate(parsed):
            output = (tmp_path / f"out-{index}.txt").read_text()
            if expected is not None:
                assert steady(json.loads(output)) == steady(json.loads(expected)), command
                checked += 1
        assert checked >= 2, "the example shows a call with the token and one without"
        started = listening_line(log)
        printed = LISTENING.search(README.read_text())
        assert printed is not None and printed["counts"] == started["counts"], "README's start-up line is stale"
