"""`kind: mcp` in the configuration: one transport per backend, keys that fit it, and the published schema."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adapters.mcp.client.settings import McpBackendSettings
from gateway.config import parse_config
from gateway.errors import ConfigError
from tests.support import ROOT


def backend_of(entry: str, env: dict[str, str] | None = None) -> McpBackendSettings:
    config = parse_config(f"backends:\n  - {entry}\n", "test.yaml", env=env or {})
    settings = config.settings.backends[0]
    assert isinstance(settings, McpBackendSettings)
    return settings


def test_an_http_and_a_stdio_server() -> None:
    http = backend_of(
        '{name: web, kind: mcp, url: "http://127.0.0.1:9000/mcp", headers: {X-Team: "${TEAM}"}}', {"TEAM": "a"}
    )
    assert (http.transport, http.url, http.headers, http.era) == (
        "http",
        "http://127.0.0.1:9000/mcp",
        {"X-Team": "a"},
        "auto",
    )
    stdio = backend_of('{name: local, kind: mcp, command: npx, args: [-y, pkg], env: {KEY: "${KEY}"}}', {"KEY": "k1"})
    assert (stdio.transport, stdio.command, stdio.args, stdio.env) == ("stdio", "npx", ["-y", "pkg"], {"KEY": "k1"})
    assert (stdio.restarts_per_minute, stdio.restart_backoff_s, stdio.stop_timeout_s) == (5, 0.5, 2.0)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("{name: a, kind: mcp}", "give exactly one of url (a Streamable HTTP server) or command (a stdio server)"),
        ('{name: a, kind: mcp, url: "http://x/mcp", command: node}', "give exactly one of url"),
        ('{name: a, kind: mcp, url: "http://x/mcp", env: {A: b}}', "env applies only to a stdio server (command)"),
        ("{name: a, kind: mcp, command: node, headers: {A: b}, api_key: k}", "headers, api_key apply only to an HTTP"),
        ("{name: a, kind: mcp, command: node, forward_authorization: true}", "forward_authorization applies only"),
        ('{name: a, kind: mcp, url: "ftp://x"}', "url"),
        ("{name: a, kind: mcp, command: node, era: newest}", "era"),
        ("{name: a, kind: mcp, command: node, restarts_per_minute: -1}", "restarts_per_minute"),
    ],
)
def test_what_is_refused_is_named(entry: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        backend_of(entry)
    assert any("backends[0]" in p and problem in p for p in raised.value.problems), raised.value.problems


def test_the_published_schema_has_the_kind() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "schema"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    definitions = json.loads(printed)["$defs"]
    mcp = definitions["McpBackendSettings"]
    assert mcp["properties"]["kind"]["const"] == "mcp"
    assert {"url", "command", "args", "env", "cwd", "era", "restarts_per_minute", "forward_authorization"} <= set(
        mcp["properties"]
    )
    assert "url" not in mcp.get("required", [])
