"""The documentation's curl examples work as printed against the default configuration.

Every ```sh block that uses curl, in README.md and every docs/**/*.md page, runs as one bash
script (in order, so cookie jars and ids carry from line to line) against a real `toolplex
serve` of config/gateway.yaml; a `# {...}` comment right after a command is the exact JSON it
must print. Blocks run page by page (README first), each page's in order.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.docs.pages import doc_pages, name
from tests.support import DEFAULT_CONFIG, ROOT, gateway_process

# README.md held this many curl blocks before it was split into docs/ (issue 12): none may be lost.
BLOCKS_BEFORE_SPLIT = 16
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


@dataclass(frozen=True)
class CurlBlock:
    """One ```sh block: where it is printed, and its (command, expected JSON or None) pairs."""

    where: str  # page:line of the opening fence
    commands: list[tuple[str, str | None]]


def curl_blocks() -> list[CurlBlock]:
    """Blocks that use curl against the default configuration (a first line `# needs ...` opts out)."""
    found: list[CurlBlock] = []
    for page in doc_pages():
        text = page.read_text()
        for match in BLOCK.finditer(text):
            if match.group(1).startswith("# needs "):
                continue
            parsed = commands(match.group(1))
            if any(cmd.lstrip().startswith("curl") for cmd, _ in parsed):
                line = text.count("\n", 0, match.start()) + 1
                found.append(CurlBlock(f"{name(page)}:{line}", parsed))
    return found


def test_readme_has_curl_examples() -> None:
    assert len(curl_blocks()) >= BLOCKS_BEFORE_SPLIT, [block.where for block in curl_blocks()]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_examples_work_as_printed(tmp_path: Path) -> None:
    with gateway_process(DEFAULT_CONFIG) as base:
        port = base.rsplit(":", 1)[1]
        for number, found in enumerate(curl_blocks()):
            block = found.commands
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
            assert result.returncode == 0, f"{found.where}: {block}\n{result.stderr}"
            for index, (command, expected) in enumerate(block):
                output = (tmp_path / f"out-{number}-{index}.txt").read_text()
                if command.lstrip().startswith("curl"):
                    assert output.strip(), f"{found.where}: no output from: {command}"
                if expected is not None:
                    assert steady(json.loads(output)) == steady(json.loads(expected)), f"{found.where}: {command}"
