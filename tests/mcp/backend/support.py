"""Plumbing of the `kind: mcp` backend tests: the test MCP server over HTTP or stdio, and backends on it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from adapters.mcp.client.backend import McpBackend
from adapters.mcp.client.settings import McpBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.model import Call, Outcome
from gateway.routing import apply_routing
from tests.support import ROOT, python_server

SERVER_MODULE = "tests.mcp.backend.mcp_server"
EVERYTHING = (
    ROOT / ".tools" / "npm" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
# Every tool the test server lists before `grow` ran, in its order (pages of two).
TEST_TOOLS = [
    "add",
    "echo-text",
    "fail",
    "get-env",
    "slow",
    "count",
    "picture",
    "pair.sum",
    "grow",
    "whoami",
    "crash",
]


@contextlib.contextmanager
def http_server(*flags: str) -> Iterator[str]:
    """The test server over Streamable HTTP on a free loopback port; yields its MCP endpoint."""
    with python_server(SERVER_MODULE, "--transport", "http", *flags) as port:
        yield f"http://127.0.0.1:{port}/mcp"


def stdio_config(**extra: Any) -> dict[str, Any]:
    """The backend keys of the test server as a stdio child of the gateway."""
    return {"command": sys.executable, "args": ["-m", SERVER_MODULE], "cwd": str(ROOT), **extra}


def everything_config(**extra: Any) -> dict[str, Any]:
    """The npm reference server, installed by install_everything.sh, as a stdio child."""
    install_everything()
    return {"command": "node", "args": [str(EVERYTHING), "stdio"], **extra}


def install_everything() -> None:
    subprocess.run([str(ROOT / "tests" / "mcp" / "backend" / "install_everything.sh")], check=True, timeout=600)


def mcp_backend(name: str = "up", **config: Any) -> McpBackend:
    settings = McpBackendSettings.model_validate({"name": name, "kind": "mcp", **config})
    return McpBackend(settings, BackendContext())


async def dispatcher_for(backend: McpBackend, *, default_timeout: float = 20) -> Dispatcher:
    """The call pipeline over what `backend` discovered (routing applied, as the gateway does)."""
    specs = apply_routing(await backend.discover(), backend.settings)
    return Dispatcher(Catalog(specs), {backend.name: backend}, default_timeout=default_timeout)


async def call(dispatcher: Dispatcher, tool: str, arguments: dict[str, Any] | None = None, **fields: Any) -> Outcome:
    return await dispatcher.call(Call(tool, arguments or {}, **fields))
