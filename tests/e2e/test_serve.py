"""`toolplex serve` as a subprocess on a free port, driven over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.support import DEFAULT_CONFIG, gateway_process


def test_default_config_serves_the_builtin_tools(tmp_path: Path) -> None:
    log = tmp_path / "gateway.log"
    with gateway_process(DEFAULT_CONFIG, log_path=log) as base, httpx.Client(base_url=base, timeout=10) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        r = http.post(
            "/opentool/call",
            json={"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": 2, "b": 3}, "id": "e2e-1"},
        )
        assert r.json() == {"jsonrpc": "2.0", "result": {"result": 5}, "error": None, "id": "e2e-1"}
        r = http.post(
            "/opentool/call",
            json={"jsonrpc": "2.0", "method": "Demo_Fail", "params": {"message": "x"}, "id": "e2e-2"},
        )
        assert r.json()["error"]["code"] == 500
        names = {f["name"] for f in http.get("/opentool/load").json()["functions"]}
        assert {"Math_Add", "Text_WordCount", "Time_Now", "Demo_Sleep", "Demo_Fail"} <= names
        assert http.get("/opentool/version").json()["version"] == "0.1.0"
    lines = log.read_text().splitlines()
    events = [json.loads(line) for line in lines]  # every line JSON, the first included (a log collector's rule)
    calls = [e for e in events if e.get("event") == "call"]
    assert len(calls) == 2  # one event per call
    ok = next(e for e in calls if e["tool"] == "Math_Add")
    assert ok["outcome"] == "ok" and ok["front"] == "opentool" and ok["backend"] == "math"
    assert ok["version"] == "1.0.0" and ok["call_id"] and isinstance(ok["duration_ms"], float)
    failed = next(e for e in calls if e["tool"] == "Demo_Fail")
    assert failed["outcome"] == "tool_failed"
    assert "Traceback" not in log.read_text()
