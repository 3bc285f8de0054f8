"""Rate limits per principal and per backend, answered by every front in its own way.

A refused call is `rate_limited` with the bucket's wait: HTTP 429 with
`Retry-After` (OpenTool, OXP, ToolServerNode), JSON-RPC `-32003` with
`data.retryAfterMs`. Buckets refill at 0.001 tokens/s here, so nothing
refills while a test runs. The last tests run real `toolplex serve`
processes: one alone, and two sharing a real Redis, whose buckets are shared.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import gateway.state
from tests.support import BUILTIN_BACKENDS, asgi_client, free_port, gateway_process, stop, wait_for_port

KEYS = """
auth:
  api_keys:
    - {name: a, key: key-of-a-0001}
    - {name: b, key: key-of-b-0002}
"""
A = {"Authorization": "Bearer key-of-a-0001"}
B = {"Authorization": "Bearer key-of-b-0002"}
PER_PRINCIPAL = "limits: {rate: {per_principal: {rate_per_s: 0.001, burst: 2}}}\n"
PER_BACKEND = (
    "limits: {rate: {per_backend: {rate_per_s: 0.001, burst: 3}, backends: {text: {rate_per_s: 0.001, burst: 1}}}}\n"
)


async def call(
    client: httpx.AsyncClient, front: str, headers: dict[str, str], tool: str = "Math_Add"
) -> httpx.Response:
    """One call of `tool` (Math_Add with 1 + 2, or Text_WordCount) through `front`."""
    params: dict[str, Any] = {"a": 1, "b": 2} if tool == "Math_Add" else {"text": "a b"}
    if front == "opentool":
        body = {"jsonrpc": "2.0", "method": tool, "params": params, "id": "1"}
        return await client.post("/opentool/call", json=body, headers=headers)
    if front == "oxp":
        return await client.post(
            "/tools/call", json={"tool_id": tool.replace("_", "."), "input": params}, headers=headers
        )
    if front == "toolserver":
        client.cookies.clear()
        assert (await client.post("/get_cookie", headers=headers)).status_code == 200
        return await client.post("/execute_tool", json={"tool_name": tool, "arguments": params}, headers=headers)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": tool, "parameters": params}}
    return await client.post("/rpc", json=body, headers=headers)


def succeeded(front: str, answer: httpx.Response) -> bool:
    if answer.status_code != 200:
        return False
    body = answer.json()
    if front == "opentool":
        return body.get("error") is None
    if front == "oxp":
        return body.get("success") is True
    if front == "toolserver":
        return True  # its failures are never 200s
    return "result" in body


def rate_limited(front: str, answer: httpx.Response) -> tuple[str, int]:
    """The refusal's message and retry-after in ms, checked against the front's wire; fails on anything else."""
    body = answer.json()
    if front == "jsonrpc":
        assert answer.status_code == 200, answer.text
        error = body["error"]
        assert error["code"] == -32003, body
        return str(error["message"]), int(error["data"]["retryAfterMs"])
    assert answer.status_code == 429, (front, answer.status_code, answer.text)
    seconds = int(answer.headers["Retry-After"])
    if front == "opentool":
        assert body["error"]["code"] == 429 and body["result"] == {}, body
        message = str(body["error"]["message"])
    elif front == "oxp":
        message = str(body["message"])
        assert seconds == max(1, math.ceil(body["retry_after_ms"] / 1000)), (seconds, body)
    else:
        message = str(body["detail"])
    return message, seconds * 1000


FRONTS = ["opentool", "oxp", "toolserver", "jsonrpc"]


@pytest.mark.parametrize("front", FRONTS)
async def test_a_principal_over_its_rate_gets_the_fronts_busy_answer(front: str) -> None:
    async with asgi_client(PER_PRINCIPAL + KEYS + BUILTIN_BACKENDS) as client:
        for _ in range(2):
            answer = await call(client, front, A)
            assert succeeded(front, answer), answer.text
        message, retry_after_ms = rate_limited(front, await call(client, front, A))
        assert "Caller 'a' is over its rate limit of 0.001 calls/s (burst 2); retry in " in message
        assert retry_after_ms > 0
        assert succeeded(front, await call(client, front, B))  # b's bucket is its own
        rate_limited(front, await call(client, front, A, tool="Text_WordCount"))  # a's bucket, whatever the tool


async def test_a_backend_bucket_is_one_for_every_principal_and_front() -> None:
    async with asgi_client(PER_BACKEND + KEYS + BUILTIN_BACKENDS) as client:
        assert succeeded("opentool", await call(client, "opentool", A))
        assert succeeded("oxp", await call(client, "oxp", B))
        assert succeeded("jsonrpc", await call(client, "jsonrpc", A))
        message, _ = rate_limited("toolserver", await call(client, "toolserver", B))
        assert "Backend 'math' is over its rate limit of 0.001 calls/s (burst 3)" in message
        for front in FRONTS:
            rate_limited(front, await call(client, front, A))
        assert succeeded("oxp", await call(client, "oxp", A, tool="Text_WordCount"))  # text: its own bucket of 1
        message, _ = rate_limited("jsonrpc", await call(client, "jsonrpc", B, tool="Text_WordCount"))
        assert "Backend 'text' is over its rate limit of 0.001 calls/s (burst 1)" in message


async def test_with_auth_off_every_caller_shares_one_bucket() -> None:
    async with asgi_client(PER_PRINCIPAL + BUILTIN_BACKENDS) as client:
        assert succeeded("opentool", await call(client, "opentool", {}))
        assert succeeded("jsonrpc", await call(client, "jsonrpc", {}))
        message, _ = rate_limited("oxp", await call(client, "oxp", {}))
        assert message.startswith("This caller is over its rate limit")


class FakeTime:
    """Stands for the `time` module inside gateway.state: the store's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


async def test_an_oxp_call_id_refused_for_its_rate_is_not_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay needs no token; a refused call_id is not kept as its answer, so once a token is back it runs."""
    clock = FakeTime()
    monkeypatch.setattr(gateway.state, "time", clock)
    config = "limits: {rate: {per_principal: {rate_per_s: 0.01, burst: 1}}}\n" + BUILTIN_BACKENDS

    async def add(call_id: str) -> httpx.Response:
        body = {"call_id": call_id, "tool_id": "Math.Add", "input": {"a": 1, "b": 2}}
        return await client.post("/tools/call", json=body)

    async with asgi_client(config) as client:
        assert (await add("c-1")).json()["value"] == 3
        message, retry_after_ms = rate_limited("oxp", await add("c-2"))
        assert retry_after_ms == 100_000 and "retry in 100 s" in message
        replayed = await add("c-1")  # from its record: no token needed
        clock.now += 100
        retried = await add("c-2")
    assert replayed.status_code == 200 and replayed.json()["value"] == 3
    assert retried.status_code == 200 and retried.json()["value"] == 3, retried.text


# ---- real processes ----


def write_config(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_served_gateway_refuses_over_the_rate(tmp_path: Path) -> None:
    config = write_config(tmp_path, "gateway.yaml", PER_PRINCIPAL + KEYS + BUILTIN_BACKENDS)
    with gateway_process(config) as base, httpx.Client(base_url=base, timeout=10) as client:
        body = {"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": 1, "b": 2}, "id": "1"}
        answers = [client.post("/opentool/call", json=body, headers=A) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[2].json()["error"]["code"] == 429 and int(answers[2].headers["Retry-After"]) >= 1


@contextlib.contextmanager
def redis_server(tmp_path: Path) -> Iterator[str]:
    """A real redis-server on a free loopback port, nothing kept on disk; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (tests/state/install_redis.sh installs it)")
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(process)


def test_replicas_sharing_redis_share_the_buckets(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        text = f"state: {{store: redis, url: '{url}'}}\n" + PER_PRINCIPAL + KEYS + BUILTIN_BACKENDS
        config = write_config(tmp_path, "gateway.yaml", text)
        with gateway_process(config) as first, gateway_process(config) as second:
            rpc = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tool.execute",
                "params": {"tool": "Math_Add", "parameters": {"a": 1, "b": 2}},
            }
            one = httpx.post(f"{first}/rpc", json=rpc, headers=A, timeout=10)
            two = httpx.post(f"{second}/rpc", json=rpc, headers=A, timeout=10)
            three = [httpx.post(f"{base}/rpc", json=rpc, headers=A, timeout=10) for base in (first, second)]
            other = httpx.post(f"{second}/rpc", json=rpc, headers=B, timeout=10)
    assert "result" in one.json() and "result" in two.json(), (one.text, two.text)
    for answer in three:  # a's two tokens were taken, one on each replica
        assert answer.json()["error"]["code"] == -32003, answer.text
        assert "Caller 'a' is over its rate limit" in answer.json()["error"]["message"]
    assert "result" in other.json(), other.text
