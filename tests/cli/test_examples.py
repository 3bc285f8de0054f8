"""Every example configuration under config/ is valid, and `toolplex check` accepts it with its upstreams down."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import load_config
from tests.support import ROOT

EXAMPLES = sorted((ROOT / "config").rglob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT)) for p in EXAMPLES])
def test_example_is_valid(path: Path) -> None:
    load_config(path, env={})


def test_check_reports_unreachable_upstreams_without_failing() -> None:
    example = ROOT / "config" / "examples" / "upstreams.yaml"
    env = {  # nothing listens on these ports: discovery fails at once
        "PATH": "/usr/bin:/bin",
        "GEO_URL": "http://127.0.0.1:9",
        "INNER_URL": "http://127.0.0.1:9",
        "XAGENT_URL": "http://127.0.0.1:9",
        "ARCADE_URL": "http://127.0.0.1:9",
        "LIBRARY_URL": "http://127.0.0.1:9",
    }
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "check", str(example)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "unreachable now: geo, inner, xagent, arcade" in result.stdout
    assert "Library_GetBook" in result.stdout and "Math_Add" in result.stdout
