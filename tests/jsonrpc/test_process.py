"""The JSON-RPC front in a real `toolplex serve` process, spoken to over loopback HTTP byte for byte."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.jsonrpc.conftest import CONFIG
from tests.support import gateway_process


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = tmp_path_factory.mktemp("rpc") / "gateway.yaml"
    config.write_text(CONFIG + "fronts:\n  jsonrpc:\n    max_batch: 4\n")
    with gateway_process(config) as base:
        yield base


def post(base_url: str, raw: bytes) -> httpx.Response:
    return httpx.post(f"{base_url}/rpc", content=raw, headers={"Content-Type": "application/json"}, timeout=30)


def test_execute_exact_request_bytes(base_url: str) -> None:
    raw = (
        b'{"jsonrpc":"2.0","id":"unique-request-id","method":"tool.execute","params":{"tool":"Math_Add",'
        b'"language":"python","parameters":{"a":2,"b":40},"context":{"sessionId":"session-id",'
        b'"messageId":"message-id","timeout":120000}}}'
    )
    r = post(base_url, raw)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = orjson.loads(r.content)
    assert r.content.startswith(b'{"jsonrpc":"2.0","protocol":"1.0.0","id":"unique-request-id","result":{"output":"42"')
    assert body["result"]["metadata"]["value"] == 42 and body["result"]["diagnostics"] == []


def test_error_answer_exact_bytes(base_url: str) -> None:
    r = post(base_url, b'{"jsonrpc":"2.0","id":1,"method":"tool.run"}')
    assert r.status_code == 200
    assert r.content == (
        b'{"jsonrpc":"2.0","protocol":"1.0.0","id":1,"error":{"code":-32601,'
        b'"message":"Method \'tool.run\' not found; this server has tool.execute, tool.list",'
        b'"data":{"method":"tool.run","methods":["tool.execute","tool.list"]}}}'
    )


def test_parse_error_and_batch_limit(base_url: str) -> None:
    bad = post(base_url, b'{"jsonrpc":')
    assert bad.status_code == 200 and orjson.loads(bad.content)["error"]["code"] == -32700
    call = b'{"jsonrpc":"2.0","id":%d,"method":"tool.execute","params":{"tool":"Math_Add","parameters":{"a":%d,"b":1}}}'
    four = b"[" + b",".join(call % (i, i) for i in range(4)) + b"]"
    five = b"[" + b",".join(call % (i, i) for i in range(5)) + b"]"
    answers = orjson.loads(post(base_url, four).content)
    assert [(a["id"], a["result"]["output"]) for a in answers] == [(0, "1"), (1, "2"), (2, "3"), (3, "4")]
    refused = orjson.loads(post(base_url, five).content)
    assert refused["error"]["code"] == -32600 and refused["id"] is None


def test_notification_is_204_with_no_body(base_url: str, tmp_path: Path) -> None:
    marker = str(tmp_path / "note")
    raw = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "method": "tool.execute",
            "params": {"tool": "Probe_Hang", "parameters": {"marker": marker, "seconds": 0}},
        }
    )
    r = post(base_url, raw)
    assert r.status_code == 204 and r.content == b""
    assert Path(f"{marker}.finished").exists()


def test_async_tool_in_the_server_is_cancelled(base_url: str, tmp_path: Path) -> None:
    marker = str(tmp_path / "hang")
    raw = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tool.execute",
            "params": {"tool": "Probe_Hang", "parameters": {"marker": marker}, "context": {"timeout": 200}},
        }
    )
    answer = orjson.loads(post(base_url, raw).content)
    assert answer["error"]["code"] == -32001
    deadline = time.monotonic() + 10
    while not Path(f"{marker}.cancelled").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert Path(f"{marker}.cancelled").exists() and not Path(f"{marker}.finished").exists()
