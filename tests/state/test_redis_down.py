"""Redis going away is answered in each front's own way, retryable; the old key name still works."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import pytest

from gateway.config import parse_config
from gateway.errors import ConfigError
from gateway.runtime import Gateway
from tests.state.redis_server import redis_server
from tests.support import asgi_client, refused_port

CONFIG = """
state: {store: redis, url: "%s", key_prefix: "down:"}
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
"""


async def test_every_front_answers_a_lost_redis_with_its_own_retryable_error() -> None:
    async with contextlib.AsyncExitStack() as stack:
        with redis_server() as url:
            client = await stack.enter_async_context(asgi_client(CONFIG % url))
            cookie = (await client.post("/get_cookie")).cookies["node_id"]
            client.cookies.clear()
            ready = (await client.get("/readyz")).json()
            assert ready["status"] == "ready" and ready["state_store"]["state"] == "up"
        # Redis is stopped from here on; the gateway goes on running.
        ready = (await client.get("/readyz")).json()
        assert ready["status"] == "degraded"
        assert ready["state_store"] == {"store": "redis", "state": "unreachable", "error": "Redis: ConnectionError"}
        session = {"Cookie": f"node_id={cookie}"}
        tsn = await client.post(
            "/execute_tool", json={"tool_name": "Math_Add", "arguments": {"a": 1, "b": 2}}, headers=session
        )
        assert tsn.status_code == 503, tsn.text
        assert "state store is unreachable" in tsn.json()["detail"]
        assert "retry-after" in tsn.headers

        oxp = await client.post(
            "/tools/call", json={"call_id": "c-1", "tool_id": "Math.Add", "input": {"a": 1, "b": 2}}
        )
        assert oxp.headers["content-type"].startswith("application/json")
        assert oxp.status_code == 400  # OXP's server-error answer, as for any unavailable dependency
        assert "state store is unreachable" in oxp.json()["message"]
        assert oxp.headers["retry-after"] == "1"

        # A call that needs no shared state (no session, no call_id) still runs.
        rpc = await client.post(
            "/rpc",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tool.execute",
                "params": {"tool": "Math.Add", "parameters": {"a": 1, "b": 2}},
            },
        )
        assert rpc.status_code == 200 and rpc.json()["result"] is not None, rpc.text


async def test_start_up_without_redis_is_refused_with_the_url_and_no_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.runtime.STORE_WAIT_S", 0.3)
    url = f"redis://user:s3cret-pass@127.0.0.1:{refused_port()}/0"
    gateway = Gateway(parse_config(textwrap.dedent(CONFIG % url), "test.yaml"))
    with pytest.raises(ConfigError) as caught:
        await gateway.start()
    problem = caught.value.problems[0]
    assert "did not answer" in problem and "127.0.0.1" in problem
    assert "s3cret-pass" not in problem and "***" in problem
    await gateway.close()


def test_the_old_key_state_kind_is_read_with_a_warning(tmp_path: Path) -> None:
    config = parse_config("state: {kind: memory, max_entries: 50}\n", "old.yaml")
    assert config.settings.state.store == "memory"
    assert config.settings.state.max_entries == 50
    assert len(config.warnings) == 1 and "state.kind is now called state.store" in config.warnings[0]
    assert parse_config("state: {store: memory}\n", "new.yaml").warnings == ()


def test_redis_needs_a_url_and_workers_need_redis() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config("state: {store: redis}\n", "t.yaml")
    assert "needs url" in " ".join(caught.value.problems)
    with pytest.raises(ConfigError) as caught:
        parse_config("server: {workers: 2}\n", "t.yaml")
    assert "state.store: redis" in " ".join(caught.value.problems)
    parse_config("server: {workers: 2}\nstate: {store: redis, url: 'redis://127.0.0.1:1/0'}\n", "t.yaml")
    with pytest.raises(ConfigError) as caught:
        parse_config(
            "server: {workers: 2}\nstate: {store: redis, url: 'redis://h:1/0', advertise_url: 'http://h:8080'}\n",
            "t.yaml",
        )
    assert "one address cannot name 2 workers" in " ".join(caught.value.problems)
