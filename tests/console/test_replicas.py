"""Any replica's console shows the whole gateway: two real gateway processes sharing a real Redis, a call made on
one seen (with its failure) in the other's traffic, both replicas in each one's backends and state pages, and a
second principal seeing none of the first one's calls on either."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import served_gateway, until

ALICE = {"Authorization": "Bearer alice-key-0123456789"}
BOB = {"Authorization": "Bearer bob-key-0123456789"}

CONFIG = """
state: {store: redis, url: "${REDIS_URL}", key_prefix: "${KEY_PREFIX}"}
fronts:
  console: {enabled: true}
auth:
  api_keys:
    - {key: alice-key-0123456789, name: alice}
    - {key: bob-key-0123456789, name: bob}
backends:
  - name: demo
    kind: python
    module: adapters.python.toolkits.demo:toolkit
"""


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    from tests.state.redis_server import redis_server

    with redis_server() as url:
        yield url


def test_each_replica_shows_the_others_calls_failures_and_status(redis_url: str, tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(CONFIG)
    env = {"REDIS_URL": redis_url, "KEY_PREFIX": f"console-{secrets.token_hex(4)}:"}
    with served_gateway(config, env) as (one, _), served_gateway(config, env) as (two, _):
        failed = httpx.post(
            f"{one}/opentool/call",
            json={"jsonrpc": "2.0", "method": "Demo_Fail", "params": {"message": "on replica one"}, "id": "1"},
            headers=ALICE,
        )
        assert failed.json()["error"] is not None

        def seen_on_two() -> dict[str, Any] | None:
            body = httpx.get(f"{two}/console/api/traffic", headers=ALICE).json()
            return body if body["totals"]["calls"] == 1 and body["failures"] else None

        traffic = until(seen_on_two, "replica two to show replica one's call")
        (failure,) = traffic["failures"]
        assert (failure["tool"], failure["front"], failure["kind"]) == ("Demo_Fail", "opentool", "tool_failed")
        one_id = httpx.get(f"{one}/console/api/me", headers=ALICE).json()["replica"]
        assert failure["replica"] == one_id
        bob = httpx.get(f"{two}/console/api/traffic", headers=BOB).json()
        assert bob["totals"]["calls"] == 0 and bob["failures"] == []

        def both_replicas() -> list[dict[str, Any]] | None:
            replicas = httpx.get(f"{two}/console/api/backends", headers=BOB).json()["replicas"]
            return replicas if len(replicas) == 2 else None

        replicas = until(both_replicas, "replica two to list both replicas")
        assert [r["self"] for r in replicas] == [True, False] and replicas[1]["id"] == one_id
        assert all(b["state"] == "up" for r in replicas for b in r["backends"])
        alice_view = httpx.get(f"{two}/console/api/backends", headers=ALICE).json()["replicas"]
        assert [b["stats"]["calls"] if b["stats"] else 0 for r in alice_view for b in r["backends"]] == [0, 1]
        state = httpx.get(f"{one}/console/api/state", headers=ALICE).json()
        assert len(state["replicas"]) == 2 and state["replicas"][0]["self"] is True
        for replica in state["replicas"]:
            assert replica["lease"]["expires"] > replica["lease"]["renewed"] and replica["config"]["generation"] == 1
