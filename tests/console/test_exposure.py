"""With auth off every console visitor is the local operator, who sees every caller's data and decides pins:
the console is refused on an address beyond loopback then (`FrontSettings.local_without_auth`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gateway.config import parse_config
from gateway.errors import ConfigError
from gateway.fronts import front_routes
from gateway.runtime import Gateway
from tests.support import ROOT, free_port

BACKENDS = """
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
"""
OPEN = "fronts:\n  console: {enabled: true}\n" + BACKENDS
WITH_KEYS = OPEN + "auth:\n  api_keys:\n    - {key: ops-key-0123456789, name: ops}\n"


def console_paths(config_yaml: str, bind_host: str | None) -> list[str]:
    config = parse_config(textwrap.dedent(config_yaml), "test.yaml", env={})
    gateway = Gateway(config)
    return [getattr(route, "path", "") for route in front_routes(gateway.services, config, bind_host)]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_the_console_with_auth_off_is_refused_beyond_loopback(host: str) -> None:
    with pytest.raises(ConfigError) as refused:
        console_paths(OPEN, host)
    assert f"fronts.console: enabled on {host}, which is not a loopback address, with auth off" in str(refused.value)


@pytest.mark.parametrize(("config", "host"), [(OPEN, "127.0.0.1"), (OPEN, "::1"), (WITH_KEYS, "0.0.0.0")])
def test_the_console_is_served_on_loopback_or_with_auth(config: str, host: str) -> None:
    assert "/console" in console_paths(config, host)


def test_serve_says_why_and_exits(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(OPEN)
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--no-reload"]
    command += ["--host", "0.0.0.0", "--port", str(free_port())]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "fronts.console: enabled on 0.0.0.0, which is not a loopback address, with auth off" in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_reload_to_an_open_console_beyond_loopback_is_refused_and_the_running_one_kept() -> None:
    from gateway.app import create_app

    app = create_app(parse_config(WITH_KEYS, "keys.yaml", env={}), bind_host="0.0.0.0")
    async with app.lifespan():
        assert await app.gateway.reload(parse_config(OPEN, "open.yaml", env={})) is False
        (refused,) = app.gateway.history.public()["reloads"]
        assert refused["ok"] is False and "which is not a loopback address, with auth off" in refused["message"]
        assert app.gateway.snapshot.authenticator.enabled  # the configuration with auth still runs
