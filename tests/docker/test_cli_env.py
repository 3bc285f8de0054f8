"""`toolplex serve` takes its config, host and port from TOOLPLEX_CONFIG, TOOLPLEX_HOST and TOOLPLEX_PORT.

That is how the image is configured (its ENV, or `environment:` in compose): a flag still wins over
the variable, and the variable over the file's `server` section.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gateway.cli import build_parser
from tests.support import BUILTIN_BACKENDS, ROOT, free_port, stop, wait_for_http

VARIABLES = ("TOOLPLEX_CONFIG", "TOOLPLEX_HOST", "TOOLPLEX_PORT")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_serve_reads_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("TOOLPLEX_CONFIG", "/etc/toolplex/gateway.yaml")
    clean_env.setenv("TOOLPLEX_HOST", "0.0.0.0")
    clean_env.setenv("TOOLPLEX_PORT", "8081")
    args = build_parser().parse_args(["serve"])
    assert (args.config, args.host, args.port) == ("/etc/toolplex/gateway.yaml", "0.0.0.0", 8081)


def test_flags_win_over_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("TOOLPLEX_CONFIG", "/etc/toolplex/gateway.yaml")
    clean_env.setenv("TOOLPLEX_PORT", "8081")
    args = build_parser().parse_args(["serve", "--config", "mine.yaml", "--port", "9000", "--host", "127.0.0.2"])
    assert (args.config, args.host, args.port) == ("mine.yaml", "127.0.0.2", 9000)


def test_without_either_the_file_decides(clean_env: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["serve", "--config", "mine.yaml"])
    assert (args.host, args.port) == (None, None)  # server.host and server.port then


def test_config_is_required_without_the_variable(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["serve"])
    assert exit_info.value.code == 2
    assert "--config" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["eighty", "70000", "-1"])
def test_a_bad_port_variable_is_named(
    value: str, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("TOOLPLEX_PORT", value)
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["serve", "--config", "mine.yaml"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{value!r} is not a port number" in err and "TOOLPLEX_PORT" in err


def test_a_gateway_started_from_the_environment_alone(tmp_path: Path) -> None:
    """What the image runs: `toolplex serve` with no flag; the port in the file is not the one used."""
    config = tmp_path / "gateway.yaml"
    config.write_text("server:\n  host: 203.0.113.1\n  port: 9\n" + BUILTIN_BACKENDS)
    port = free_port()
    env = {**os.environ, "TOOLPLEX_CONFIG": str(config), "TOOLPLEX_HOST": "127.0.0.1", "TOOLPLEX_PORT": str(port)}
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            wait_for_http(f"http://127.0.0.1:{port}/healthz", process)
        finally:
            stop(process)
