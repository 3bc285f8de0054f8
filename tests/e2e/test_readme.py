"""The README's curl examples work as printed against the default configuration.

Every ```sh block that uses curl runs as one bash script (in order, so cookie jars and
ids carry from line to line) against a real `toolplex serve` of config/gateway.yaml; a
`# {...}` comment right after a command is the exact JSON it must print.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import DEFAULT_CONFIG, ROOT, gateway_process

README = ROOT / "README.md"
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)


def commands(block: str) -> list[tuple[str, str | None]]:
    """(command, expected JSON or None) pairs; continuation lines are joined."""
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
        if current and not current.endswith("\\"):
            out.append((current, None))
            current = ""
    return out


def curl_blocks() -> list[list[tuple[str, str | None]]]:
    blocks = [commands(b) for b in BLOCK.findall(README.read_text())]
    return [b for b in blocks if any(cmd.lstrip().startswith("curl") for cmd, _ in b)]


def test_readme_has_curl_examples() -> None:
    assert len(curl_blocks()) >= 2


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_examples_work_as_printed(tmp_path: Path) -> None:
    with gateway_process(DEFAULT_CONFIG) as base:
        port = base.rsplit(":", 1)[1]
        for block in curl_blocks():
            for command, expected in block:
                if not command.lstrip().startswith(("curl", "TOKEN=", "export ")):
                    continue
                script = command.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
                result = subprocess.run(
                    ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=90
                )
                assert result.returncode == 0, f"{command}\n{result.stderr}"
                if command.lstrip().startswith("curl"):
                    assert result.stdout.strip(), f"no output from: {command}"
                if expected is not None:
                    assert json.loads(result.stdout) == json.loads(expected), command
