"""What a non-admin sees of the gateway on the console: the backends of the tools it may call, no replica
address and no reload message (they quote the configuration); an admin sees all of it."""

from __future__ import annotations

import asyncio
import time

from gateway.config import parse_config
from tests.console.test_api import ALICE, BOB, CONFIG, POST, ROOT, console
from tests.support import refused_port


async def test_a_non_admin_sees_only_the_backends_of_its_tools_and_no_address() -> None:
    async with console() as client:
        root = (await client.get("/console/api/backends", headers=ROOT)).json()
        bob = (await client.get("/console/api/backends", headers=BOB)).json()  # Math_* only
        alice = (await client.get("/console/api/backends", headers=ALICE)).json()  # every tool
        assert {b["name"] for b in root["replicas"][0]["backends"]} == {"math", "demo"}
        assert "url" in root["replicas"][0]
        assert {b["name"] for b in bob["replicas"][0]["backends"]} == {"math"}
        assert {b["name"] for b in alice["replicas"][0]["backends"]} == {"math", "demo"}
        assert "url" not in bob["replicas"][0] and "url" not in alice["replicas"][0]


async def test_a_non_admin_sees_how_many_reloads_were_refused_but_not_their_messages() -> None:
    async with console() as client:
        gateway = client.app.gateway  # type: ignore[attr-defined]
        broken = parse_config(CONFIG.replace("arithmetic:toolkit", "no_such_module:toolkit"), "next.yaml")
        assert await gateway.reload(broken) is False
        root = (await client.get("/console/api/state", headers=ROOT)).json()
        alice = (await client.get("/console/api/state", headers=ALICE)).json()
        assert "no_such_module" in root["config"]["reloads"][0]["message"]
        assert alice["config"] == {
            "generation": 1,
            "loaded_at": root["config"]["loaded_at"],
            "applied": 0,
            "refused": 1,
        }
        assert all("url" not in replica for replica in alice["replicas"])
        assert alice["replicas"][0]["config"]["refused"] == 1
        assert "no_such_module" not in str(alice) and "next.yaml" not in str(alice)


async def test_an_upstream_that_fails_calls_shows_its_open_breaker() -> None:
    port = refused_port()
    config = f"""
fronts:
  console: {{enabled: true}}
backends:
  - name: gone
    kind: http
    url: http://127.0.0.1:{port}
    toolkit: Gone
    retries: 0
    circuit_breaker: {{failures: 2, cooldown_s: 600}}
    tools:
      - {{name: Ping, description: Ping the upstream, method: POST, path: /ping}}
"""
    async with console(config) as client:

        async def breaker() -> object:
            (replica,) = (await client.get("/console/api/backends")).json()["replicas"]
            return {b["name"]: b["breaker"] for b in replica["backends"]}["gone"]

        assert await breaker() == "closed"
        for _ in range(2):
            answer = await client.post("/console/api/tools/Gone_Ping/call", json={"arguments": {}}, headers=POST)
            assert answer.status_code == 200 and answer.json()["ok"] is False
        assert await breaker() == "open"


async def test_calls_in_flight_are_counted_while_they_run_across_a_reload() -> None:
    async with console() as client:
        gateway = client.app.gateway  # type: ignore[attr-defined]

        async def in_flight() -> dict[str, object]:
            return (await client.get("/console/api/traffic", headers=ALICE)).json()["in_flight"]

        assert (await in_flight())["total"] == 0
        running = asyncio.ensure_future(
            client.post(
                "/console/api/tools/Demo_Sleep/call", json={"arguments": {"seconds": 1.5}}, headers={**ALICE, **POST}
            )
        )
        deadline = time.monotonic() + 10
        while (await in_flight())["total"] != 1:
            assert time.monotonic() < deadline and not running.done()
            await asyncio.sleep(0.01)
        assert (await in_flight())["by_front"] == {"console": 1}
        # a reload starts a new configuration; the call still running on the old one is still in flight
        assert await gateway.reload(parse_config(CONFIG, "next.yaml")) is True
        assert (await in_flight())["total"] == 1
        answer = await asyncio.wait_for(running, 10)
        assert answer.json()["ok"] is True
        assert await in_flight() == {"total": 0, "by_front": {}, "by_replica": {gateway.replicas.id: 0}}
