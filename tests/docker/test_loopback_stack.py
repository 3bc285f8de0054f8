"""The compose stack without Docker: docker/nginx.conf in front of two replicas serving docker/gateway.yaml.

Everything is real and on loopback: nginx runs docker/nginx.conf, with only what Docker provides
swapped for a loopback equivalent (its DNS at 127.0.0.11 for tests/docker/dns.py, the container
ports for free ones); the replicas are `toolplex serve` configured from the environment alone, as
the image runs them, on 127.0.0.2 and 127.0.0.3 (one address each, as containers have); Redis is a
real redis-server; the upstream is the `tools` service's configuration. Needs nginx 1.27.3+ and
redis-server; skipped, saying which is missing, otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.docker.dns import LoopbackDNS
from tests.docker.loopback import (
    START_TIMEOUT_S,
    compose_backing,
    loopback_nginx_conf,
    missing,
    nginx,
    toolplex,
)
from tests.docker.stack import wait_until_ok
from tests.support import free_port

REPLICAS = ("127.0.0.2", "127.0.0.3")
RESOLVE_TIMEOUT_S = 45.0  # nginx re-asks every 2 s (valid=2s)


def served_by(access: Path, marker: str, timeout: float = 10.0) -> list[str]:
    """The replica (upstream address) that served the request whose path held `marker`, from nginx's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # nginx logs after it has answered: wait for the line
        for line in access.read_text().splitlines():
            if marker in line:
                found = re.search(r"upstream=(\S+(?:, \S+)*)", line)
                assert found, line
                return found.group(1).split(", ")
        time.sleep(0.02)
    raise TimeoutError(f"nginx logged no request with {marker}")


def post(client: httpx.Client, path: str, body: dict[str, object], access: Path) -> tuple[httpx.Response, str]:
    """One POST through nginx, marked in its query string; the answer and the replica that gave it."""
    marker = uuid.uuid4().hex
    response = client.post(f"{path}?probe={marker}", json=body)
    return response, served_by(access, marker)[-1]


def probe(base: str, access: Path) -> str:
    """One request through nginx; the replica that answered it."""
    marker = uuid.uuid4().hex
    response = httpx.get(f"{base}/healthz?probe={marker}", timeout=10)
    assert response.status_code == 200, response.text
    return served_by(access, marker)[-1]


@pytest.mark.skipif(missing() is not None, reason=missing() or "")
def test_stack_on_loopback(tmp_path: Path) -> None:
    gateway_port = free_port(*REPLICAS)
    replica = {address: f"{address}:{gateway_port}" for address in REPLICAS}
    with (
        compose_backing(tmp_path) as backing,
        LoopbackDNS({"gateway": [REPLICAS[0]]}) as dns,
        contextlib.ExitStack() as replicas,
    ):
        for index, address in enumerate(REPLICAS):
            env = {**backing, "TOOLPLEX_HOST": address, "TOOLPLEX_PORT": str(gateway_port)}
            log = tmp_path / f"gateway-{index}.log"
            replicas.enter_context(toolplex(env, f"http://{address}:{gateway_port}", log))
        conf = functools.partial(loopback_nginx_conf, dns.port, gateway_port)
        with nginx(conf, tmp_path / "nginx") as (nginx_port, access):
            base = f"http://127.0.0.1:{nginx_port}"
            wait_until_ok(f"{base}/healthz", START_TIMEOUT_S)

            # Docker's DNS knows one replica: nginx sends everything there.
            assert {probe(base, access) for _ in range(6)} == {replica[REPLICAS[0]]}

            # A second replica joins (`--scale gateway=2`): nginx follows the DNS answer, no reload.
            dns.set("gateway", list(REPLICAS))
            deadline = time.monotonic() + RESOLVE_TIMEOUT_S
            while probe(base, access) != replica[REPLICAS[1]]:
                assert time.monotonic() < deadline, f"nginx never sent a request to {REPLICAS[1]}"
                time.sleep(0.2)
            served = [probe(base, access) for _ in range(10)]
            assert set(served) == set(replica.values()), served  # round robin over both

            # Calls through nginx: a local tool, and one of the upstream `tools`.
            with httpx.Client(base_url=base, timeout=30) as client:
                added = client.post(
                    "/opentool/call",
                    json={"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": 10, "b": 5}, "id": "1"},
                )
                assert added.json()["result"] == {"result": 15}, added.text
                counted = client.post(
                    "/tools/call", json={"tool_id": "Text.WordCount", "input": {"text": "one two three"}}
                )
                assert counted.json()["value"] == 3, counted.text

                # State in Redis: the same call_id answers the same, whichever replica nginx picks.
                call = {"tool_id": "Math.Add", "input": {"a": 2, "b": 3}, "call_id": uuid.uuid4().hex}
                answers = [post(client, "/tools/call", call, access) for _ in range(4)]
                assert {who for _, who in answers} == set(replica.values())
                assert {a.status_code for a, _ in answers} == {200}
                assert len({a.content for a, _ in answers}) == 1, [a.text for a, _ in answers]
                assert answers[0][0].json()["value"] == 5

                # A ToolServerNode session begun on one replica goes on, on both.
                assert client.post("/get_cookie").status_code == 200
                assert client.cookies.get("node_id"), "an unknown node_id would get 403: the session is shared"
                step = {"tool_name": "Math_Add", "arguments": {"a": 1, "b": 1}}
                steps = [post(client, "/execute_tool", step, access) for _ in range(4)]
                assert {who for _, who in steps} == set(replica.values())
                assert [done.status_code for done, _ in steps] == [200] * 4, [done.text for done, _ in steps]
