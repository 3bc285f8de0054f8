"""npm's reference MCP server (`@modelcontextprotocol/server-everything`) as a stdio upstream of a gateway."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator

import pytest

from gateway.errors import ErrorKind
from gateway.runtime import Gateway
from tests.mcp.backend.support import EVERYTHING, install_everything
from tests.support import call_tool, started_gateway

pytestmark = pytest.mark.skipif(shutil.which("npm") is None, reason="npm (Node.js 20+) is not installed")

SECRET = "everything-env-value-7f3a9c"


@pytest.fixture
async def gateway(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    install_everything()
    monkeypatch.setenv("MCP_EVERYTHING_TEST_SECRET", SECRET)
    started = await started_gateway(
        f"""
        backends:
          - name: everything
            kind: mcp
            command: node
            args: ["{EVERYTHING}", "stdio"]
            env: {{UPSTREAM_API_KEY: "${{MCP_EVERYTHING_TEST_SECRET}}"}}
            rename: {{get__env: environment}}
        """
    )
    try:
        yield started
    finally:
        await started.close()


async def test_its_tools_join_the_catalog_in_the_handshake_era(gateway: Gateway) -> None:
    names = {spec.flat_name for spec in gateway.catalog.latest()}
    assert {"everything_echo", "everything_get__sum", "everything_get__tiny__image", "everything_environment"} <= names
    backend = gateway.backends["everything"]
    assert backend.protocol_version is not None and backend.protocol_version < "2026"  # it fell back to initialize
    echo = gateway.catalog.resolve("everything_echo")
    assert echo.binding.name == "echo" and echo.input_schema["required"] == ["message"]
    structured = gateway.catalog.resolve("everything_get__structured__content")
    assert structured.side_effects is False and structured.output_schema is not None


async def test_calls_and_its_env(gateway: Gateway) -> None:
    assert (await call_tool(gateway, "everything_echo", {"message": "hi"})).value == "Echo: hi"
    assert (await call_tool(gateway, "everything_get__sum", {"a": 2, "b": 40})).value == "The sum of 2 and 40 is 42."
    weather = (await call_tool(gateway, "everything_get__structured__content", {"location": "Chicago"})).value
    assert weather == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}
    image = (await call_tool(gateway, "everything_get__tiny__image")).value
    assert [block["type"] for block in image["content"]] == ["text", "image", "text"]
    environment = json.loads((await call_tool(gateway, "everything_environment")).value)
    assert environment["UPSTREAM_API_KEY"] == SECRET  # `env:`, ${VAR} expanded, reached the process
    assert "MCP_EVERYTHING_TEST_SECRET" not in environment  # the gateway's own environment did not
    refused = await call_tool(gateway, "everything_get__sum", {"a": "two", "b": 1})
    assert refused.error is not None and refused.error.kind is ErrorKind.INVALID_ARGUMENTS  # checked here first


def test_the_installed_server_is_the_pinned_one() -> None:
    install_everything()
    package = json.loads((EVERYTHING.parent.parent / "package.json").read_text())
    assert package["name"] == "@modelcontextprotocol/server-everything" and package["version"] == "2026.8.31"
