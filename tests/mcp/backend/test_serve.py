"""A real `toolplex serve` with MCP upstreams: every other protocol's client calls their tools, and the
stdio servers are gone within 5 s of the gateway's SIGTERM.

The HTTP upstream is the test server on loopback (2026 era), the stdio ones the test
server (forced into the handshake era) and npm's server-everything. Each client sends
the bytes it really sends (Python `requests`/`httpx` JSON), parsed back only to read them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.isolation.processes import wait_until
from tests.mcp.backend.support import SERVER_MODULE, everything_config, http_server
from tests.support import ROOT, free_port, wait_for_http

needs_npm = pytest.mark.skipif(shutil.which("npm") is None, reason="npm (Node.js 20+) is not installed")
MARK = "TOOLPLEX_MCP_TEST_MARK"
JSON = {"content-type": "application/json"}


@contextlib.contextmanager
def serve(config: str, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """`toolplex serve` on a free port with `config`; yields its base URL, the process and its log file."""
    path = tmp_path / "gateway.yaml"
    path.write_text(config)
    port = free_port()
    log = tmp_path / "gateway.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--config", str(path), "--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/readyz", process, timeout=60)
        yield f"http://127.0.0.1:{port}", process, log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def config_for(url: str, mark: str) -> str:
    everything = everything_config(env={MARK: mark})
    return f"""
logging: {{level: info}}
fronts: {{metrics: {{enabled: true}}}}
middleware: [{{use: "gateway.metrics:Metrics"}}]
backends:
  - {{name: web, kind: mcp, url: "{url}"}}
  - name: local
    kind: mcp
    command: {sys.executable}
    args: ["-m", "{SERVER_MODULE}"]
    cwd: {ROOT}
    era: legacy
    env: {{{MARK}: "{mark}"}}
  - name: everything
    kind: mcp
    command: node
    args: {json.dumps(everything["args"])}
    env: {{{MARK}: "{mark}"}}
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    tmp_path = tmp_path_factory.mktemp("mcp-serve")
    with http_server() as url, serve(config_for(url, uuid.uuid4().hex), tmp_path) as (base, _process, log):
        yield base, log


def opentool(http: httpx.Client, body: bytes) -> Any:
    response = http.post("/opentool/call", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    return response.json()


def oxp(http: httpx.Client, body: bytes) -> httpx.Response:
    return http.post("/tools/call", content=body, headers=JSON)


def toolserver(http: httpx.Client, body: bytes) -> httpx.Response:
    if "node_id" not in http.cookies:
        assert http.post("/get_cookie").status_code == 200
    return http.post("/execute_tool", content=body, headers=JSON)


def jsonrpc(http: httpx.Client, body: bytes) -> Any:
    response = http.post("/rpc", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    return response.json()


@needs_npm
@pytest.mark.parametrize("upstream", ["web", "local"])
def test_every_front_calls_an_mcp_tool(gateway: tuple[str, Path], upstream: str) -> None:
    base, _log = gateway
    with httpx.Client(base_url=base, timeout=30) as http:
        # OpenTool (seed 000): requests' JSON, a function name and its params
        body = f'{{"jsonrpc": "2.0", "method": "{upstream}_add", "params": {{"a": 2, "b": 3}}, "id": "1"}}'
        assert opentool(http, body.encode())["result"] == {"sum": 5}
        body = f'{{"jsonrpc": "2.0", "method": "{upstream}_echo__text", "params": {{"text": "hi"}}, "id": "2"}}'
        assert opentool(http, body.encode())["result"] == {"result": "hi"}

        # OXP: the PyPI client's wrapped request
        body = (
            f'{{"request":{{"call_id":"mcp-{upstream}-1","tool_id":"{upstream}.add@1.0.0","input":{{"a":2,"b":3}}}}}}'
        )
        response = oxp(http, body.encode())
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["call_id"] == f"mcp-{upstream}-1" and result["success"] is True and result["value"] == {"sum": 5}
        body = f'{{"request":{{"tool_id":"{upstream}.fail","input":{{"reason":"disk"}}}}}}'
        failed = oxp(http, body.encode()).json()["result"]
        assert failed["success"] is False and failed["error"]["message"] == "it failed: disk"

        # ToolServerNode: XAgent's requests, a cookie session, then /execute_tool
        body = f'{{"tool_name": "{upstream}_echo__text", "arguments": {{"text": "hi"}}}}'
        response = toolserver(http, body.encode())
        assert (response.status_code, response.json()) == (200, "hi")
        body = f'{{"tool_name": "{upstream}_add", "arguments": {{"a": 2, "b": 3}}}}'
        response = toolserver(http, body.encode())
        assert (response.status_code, response.json()) == (200, {"type": "simple", "data": {"sum": 5}})
        body = f'{{"tool_name": "{upstream}_fail", "arguments": {{"reason": "disk"}}}}'
        response = toolserver(http, body.encode())
        assert (response.status_code, response.json()) == (500, {"detail": "it failed: disk"})

        # JSON-RPC (seed 002): tool.execute
        body = (
            f'{{"jsonrpc": "2.0", "id": "req-1", "method": "tool.execute", '
            f'"params": {{"tool": "{upstream}_add", "parameters": {{"a": 2, "b": 3}}}}}}'
        )
        answer = jsonrpc(http, body.encode())
        assert answer["result"]["metadata"]["value"] == {"sum": 5}
        body = (
            f'{{"jsonrpc": "2.0", "id": "req-3", "method": "tool.execute", '
            f'"params": {{"tool": "{upstream}_echo__text", "parameters": {{"text": "hi"}}}}}}'
        )
        assert jsonrpc(http, body.encode())["result"]["output"] == "hi"
        body = (
            f'{{"jsonrpc": "2.0", "id": "req-2", "method": "tool.execute", '
            f'"params": {{"tool": "{upstream}_fail", "parameters": {{"reason": "disk"}}}}}}'
        )
        error = jsonrpc(http, body.encode())["error"]
        assert error["code"] == -32000 and "it failed: disk" in error["message"]


@needs_npm
def test_readiness_and_logs(gateway: tuple[str, Path]) -> None:
    base, log = gateway
    states = {b["name"]: b for b in httpx.get(f"{base}/readyz", timeout=10).json()["backends"]}
    assert {name: states[name]["state"] for name in ("web", "local", "everything")} == dict.fromkeys(
        ("web", "local", "everything"), "up"
    )
    assert states["web"]["breaker"] == "closed"
    metrics = httpx.get(f"{base}/metrics", timeout=10).text
    assert 'toolplex_upstream_breaker_state{backend="web"} 0.0' in metrics
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    eras = {e["backend"]: e["era"] for e in lines if e.get("event") == "mcp_connected"}
    assert eras == {"web": "modern", "local": "legacy", "everything": "legacy"}
    assert any(e.get("event") == "mcp_server_stderr" and e.get("backend") == "everything" for e in lines)


def marked(mark: str) -> list[int]:
    """Live processes carrying this test's marker in their environment (the stdio servers and their children)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(MARK) == mark and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
    return found


@needs_npm
def test_stdio_servers_are_gone_within_5_s_of_sigterm(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    with http_server() as url, serve(config_for(url, mark), tmp_path) as (_base, process, _log):
        servers = marked(mark)
        assert len(servers) >= 2, servers  # the test server and server-everything (node)
        assert any(psutil.Process(pid).ppid() == process.pid for pid in servers)  # started by the gateway
        process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        gone = wait_until(lambda: not marked(mark), timeout=5.0, interval=0.05)
        left = marked(mark)
        assert gone, f"still running {time.monotonic() - signalled:.1f} s after SIGTERM: {left}"
        assert process.wait(timeout=30) == 0
    for pid in marked(mark):  # never leave one behind, whatever the test found
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
