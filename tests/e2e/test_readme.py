"""The README's curl examples work as printed against the default configuration.

Every ```sh block that uses curl runs as one bash script (in order, so cookie jars and
ids carry from line to line) against a real `toolplex serve` of config/gateway.yaml; a
`# {...}` comment right after a command is the exact JSON it must print.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import DEFAULT_CONFIG, ROOT, gateway_process

README = ROOT / "README.md"
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)


def _complete(command: str) -> bool:
    """A command is complete when bash can parse it alone (quotes, loops and continuations closed)."""
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command)
    except ValueError:
        return False
    return subprocess.run(["bash", "-n", "-c", command], capture_output=True, timeout=10).returncode == 0


def commands(block: str) -> list[tuple[str, str | None]]:
    """(command, expected JSON or None) pairs; continuation lines and multi-line quotes are joined."""
    out: list[tuple[str, str | None]] = []
    current = ""
    for line in block.splitlines():
        if current:
            current += "\n" + line
        elif line.startswith("#") and out and out[-1][1] is None and line[1:].strip().startswith(("{", "[")):
            out[-1] = (out[-1][0], line[1:].strip())
            continue
        elif line.strip() and not line.startswith("#"):
            current = line
        if current and _complete(current):
            out.append((current, None))
            current = ""
    return out


VARYING = {"duration", "durationMs", "duration_ms", "iso", "unix", "call_id", "callId"}


def steady(value: Any) -> Any:
    """The answer without what differs from run to run (timings, clocks, generated ids)."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def curl_blocks() -> list[list[tuple[str, str | None]]]:
    """Blocks that use curl against the default configuration (a first line `# needs ...` opts out)."""
    blocks = [b for b in BLOCK.findall(README.read_text()) if not b.startswith("# needs ")]
    parsed = [commands(b) for b in blocks]
    return [b for b in parsed if any(cmd.lstrip().startswith("curl") for cmd, _ in b)]


def test_readme_has_curl_examples() -> None:
    assert len(curl_blocks()) >= 5


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_examples_work_as_printed(tmp_path: Path) -> None:
    with gateway_process(DEFAULT_CONFIG) as base:
        port = base.rsplit(":", 1)[1]
        for number, block in enumerate(curl_blocks()):
            # One script per block, so variables and cookie jars carry from one command to the next;
            # each command's output goes to its own file to be checked afterwards.
            script = ["set -euo pipefail"]
            for index, (command, _) in enumerate(block):
                local = command.replace("127.0.0.1:8080", f"127.0.0.1:{port}").replace(
                    ".venv/bin/", f"{ROOT}/.venv/bin/"
                )
                script.append(f"{{\n{local}\n}} > out-{number}-{index}.txt")
            result = subprocess.run(
                ["bash", "-c", "\n".join(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180
            )
            assert result.returncode == 0, f"block {number}: {block}\n{result.stderr}"
            for index, (command, expected) in enumerate(block):
                output = (tmp_path / f"out-{number}-{index}.txt").read_text()
                if command.lstrip().startswith("curl"):
                    assert output.strip(), f"no output from: {command}"
                if expected is not None:
                    assert steady(json.loads(output)) == steady(json.loads(expected)), command
