"""The `toolplex` command as a user runs it: a real process, its exit code and output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import DEFAULT_CONFIG, ROOT

CONSOLE_SCRIPT = Path(sys.executable).parent / "toolplex"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "gateway.cli"]
    return subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)


def test_check_prints_the_catalog() -> None:
    result = run("check", str(DEFAULT_CONFIG))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ID", "BACKEND", "VISIBLE"]
    assert any(line.split()[:3] == ["Math_Add", "Math.Add@1.0.0", "math"] for line in lines)
    assert any(line.split()[:3] == ["Time_Now", "Time.Now@1.0.0", "time"] for line in lines)
    assert "OK" in lines[-1]


def test_check_reports_every_error_with_its_location(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(
        "server:\n  port: 8080\n  colour: blue\n"
        "auth:\n  api_keys:\n    - key: ${TOOLPLEX_TEST_UNSET_KEY}\n"
        "backends:\n  - name: ghost\n    kind: python\n    module: no_such_package.tools:kit\n"
    )
    result = run("check", str(config))
    assert result.returncode == 1
    assert f"{config}:3:3: server.colour: unknown key 'colour'" in result.stderr
    assert f"{config}:6:" in result.stderr and "TOOLPLEX_TEST_UNSET_KEY is not set" in result.stderr
    assert result.stdout == ""


def test_check_reports_a_missing_import_path(tmp_path: Path) -> None:
    config = tmp_path / "import.yaml"
    config.write_text("backends:\n  - name: ghost\n    kind: python\n    module: no_such_package.tools:kit\n")
    result = run("check", str(config))
    assert result.returncode == 1
    assert f"{config}:2:5:" in result.stderr
    assert "cannot import 'no_such_package.tools:kit'" in result.stderr


def test_check_reports_invalid_yaml(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("server:\n  host: 'unterminated\n")
    result = run("check", str(config))
    assert result.returncode == 1 and "invalid YAML" in result.stderr


def test_tools_json() -> None:
    result = run("tools", "--config", str(DEFAULT_CONFIG), "--json")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    rows = {row["name"]: row for row in listing["tools"]}
    states = {b["name"]: b for b in listing["backends"]}
    assert states["math"]["state"] == "up" and states["math"]["tools"] == 4
    assert rows["Demo_Sleep"]["id"] == "Demo.Sleep@1.0.0"
    assert rows["Demo_Sleep"]["backend"] == "demo"
    assert {"Math_Add", "Math_Subtract", "Math_Multiply", "Math_Divide", "Text_WordCount"} <= set(rows)


def test_serve_refuses_a_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("nonsense: true\n")
    result = run("serve", "--config", str(config))
    assert result.returncode == 1 and "unknown key 'nonsense'" in result.stderr


def test_schema_prints_the_published_schema_and_nothing_else() -> None:
    result = run("schema")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (ROOT / "config" / "schema.json").read_text()
    reference = run("schema", "--markdown")
    assert reference.returncode == 0, reference.stderr
    assert reference.stdout == (ROOT / "docs" / "configuration-reference.md").read_text()
