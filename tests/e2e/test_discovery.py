"""A backend down at start does not stop the gateway; its tools appear when it comes up; /readyz says so."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support import free_port, gateway_process, server_process


def wait_until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise TimeoutError("condition not met in time")


def test_upstream_that_starts_late_joins_the_catalog(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "discovery: {interval_s: 0.2}\n"
        "backends:\n"
        "  - {name: math, kind: python, module: 'adapters.python.toolkits.arithmetic:toolkit'}\n"
        f"  - {{name: geo, kind: opentool, url: 'http://127.0.0.1:{port}', retries: 0,"
        " timeouts_s: {connect: 1, read: 2, total: 3}}\n"
    )
    with gateway_process(config) as base, httpx.Client(base_url=base, timeout=10) as http:
        ready = http.get("/readyz").json()
        assert ready["status"] == "degraded"
        states = {b["name"]: b for b in ready["backends"]}
        assert states["math"]["state"] == "up" and states["geo"]["state"] == "down"
        assert "cannot connect" in states["geo"]["error"]
        assert states["geo"]["last_error"] == states["geo"]["error"] and states["geo"]["last_error_at"]
        assert states["math"]["last_error"] is None and states["math"]["last_error_at"] is None
        call = {"jsonrpc": "2.0", "method": "GeoTools_echo", "params": {"message": "hi"}, "id": "1"}
        assert http.post("/opentool/call", json=call).json()["error"]["code"] == -32601
        command = [sys.executable, "-m", "tests.upstreams.opentool_server", "--port", str(port)]
        with server_process(command, port):
            wait_until(lambda: http.get("/readyz").json()["status"] == "ready")
            answer = http.post("/opentool/call", json=call).json()
            assert answer["error"] is None and answer["result"]["echo"] == "hi"
            geo = {b["name"]: b for b in http.get("/readyz").json()["backends"]}["geo"]
            assert geo["state"] == "up" and geo["error"] is None  # up now, and what went wrong last is kept
            assert "cannot connect" in geo["last_error"] and geo["last_error_at"] <= geo["checked_at"]
        wait_until(lambda: http.get("/readyz").json()["status"] == "degraded")  # gone again
        assert http.get("/healthz").json() == {"status": "ok"}
