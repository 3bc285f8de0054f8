"""Pinning across two real replicas sharing Redis, in each mode (approved with `toolplex pins`, served by both),
`toolplex pins reject`, and a pin file written by `toolplex pins approve --write-file` that a deployment starts
from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from tests.pinning.changing_server import CHANGED
from tests.pinning.conftest import Upstream
from tests.support import ROOT, asgi_client, served_gateway, until


def call(base: str) -> dict:  # type: ignore[type-arg]
    body = {"jsonrpc": "2.0", "method": "Shop_lookup", "params": {"id": "p1"}, "id": "1"}
    return httpx.post(f"{base}/opentool/call", json=body, timeout=10).json()  # type: ignore[no-any-return]


def quarantined(base: str) -> bool:
    answer = call(base)
    return answer.get("error") is not None and "quarantined" in answer["error"]["message"]


def served(base: str) -> bool:
    return (call(base).get("result") or {}).get("method") == "lookup"


def pins(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "pins", *args, "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


def changes_counted(base: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("toolplex_tool_definition_changes_total{") and 'tool="Shop_lookup"' in line
    )


def description(base: str) -> str:
    """Shop_lookup's description as the replica lists it (OpenTool's /load)."""
    document = httpx.get(f"{base}/opentool/load", timeout=10).json()
    return next(f["description"] for f in document["functions"] if f["name"] == "Shop_lookup")  # type: ignore[no-any-return]


def changes_logged(*logs: Path) -> list[str]:
    return [line for log in logs for line in log.read_text().splitlines() if "tool_definition_changed" in line]


def redis_config(tmp_path: Path, upstream: Upstream, redis_url: str, mode: str) -> Path:
    config = tmp_path / "gateway.yaml"
    config.write_text(
        textwrap.dedent(f"""
        state: {{store: redis, url: "{redis_url}", key_prefix: "pins-{os.getpid()}-{time.monotonic_ns()}:"}}
        discovery: {{interval_s: 0.2}}
        pinning: {{mode: {mode}}}
        fronts:
          metrics: {{enabled: true}}
        middleware:
          - {{use: "gateway.metrics:Metrics"}}
        backends:
          - {{name: shop, kind: opentool, url: "{upstream.url}", toolkit: Shop}}
        """)
    )
    return config


@pytest.mark.parametrize("mode", ["off", "warn", "enforce"])
def test_two_replicas_share_the_pins_in_each_mode(
    upstream: Upstream, redis_url: str, tmp_path: Path, mode: str
) -> None:
    """The upstream changes Shop_lookup's description and input schema (CHANGED) under two replicas."""
    config = redis_config(tmp_path, upstream, redis_url, mode)
    logs = (tmp_path / "one.log", tmp_path / "two.log")
    with served_gateway(config, log_path=logs[0]) as (one, _), served_gateway(config, log_path=logs[1]) as (two, _):
        assert served(one) and served(two)
        upstream.serve(CHANGED)
        if mode != "enforce":  # served on both, as changed
            until(lambda: all("~/.ssh/id_rsa" in description(b) for b in (one, two)), "both serve the new definition")
            until(lambda: "note" in json.dumps(httpx.get(f"{one}/opentool/load", timeout=10).json()), "new schema")
            assert served(one) and served(two)
            listing = json.loads(pins(config, "list", "--changed", "--json").stdout)
            if mode == "off":  # nothing recorded, nothing counted, nothing logged
                assert listing == [] and json.loads(pins(config, "list", "--json").stdout) == []
                assert changes_counted(one) + changes_counted(two) == 0 and changes_logged(*logs) == []
                return
            until(lambda: changes_counted(one) + changes_counted(two) == 1, "the change counted")
            assert [(v["pin"], v["mode"], v["pending"]["changed"]) for v in listing] == [
                ("shop/Shop_lookup", "warn", ["description", "input_schema"])
            ]
            (line,) = until(lambda: changes_logged(*logs), "the change logged")  # by the replica that recorded it
            event = json.loads(line)
            assert event["action"] == "served" and "~/.ssh/id_rsa" in event["diff"]
            pins(config, "list", "--json")  # a second or so: discoveries on both replicas go on (every 0.2 s)
            assert changes_counted(one) + changes_counted(two) == 1  # neither counted nor logged again
            assert len(changes_logged(*logs)) == 1
            return
        until(lambda: quarantined(one) and quarantined(two), "both replicas quarantine the changed tool")
        assert "description, input_schema" in call(one)["error"]["message"]
        assert changes_counted(one) + changes_counted(two) == 1  # recorded once, by one replica
        assert len(changes_logged(*logs)) == 1
        listing = pins(config, "list", "--changed", "--json")
        assert listing.returncode == 0, listing.stderr
        (pending,) = json.loads(listing.stdout)
        assert pending["pin"] == "shop/Shop_lookup" and pending["mode"] == "enforce"
        diff = pins(config, "diff", "Shop_lookup")
        assert diff.returncode == 0 and "~/.ssh/id_rsa" in diff.stdout, diff.stderr
        approved = pins(config, "approve", "shop/Shop_lookup", "--by", "ops")
        assert approved.returncode == 0, approved.stderr
        until(lambda: served(one) and served(two), "both replicas serve the approved definition")
        assert "~/.ssh/id_rsa" in description(one) and "~/.ssh/id_rsa" in description(two)
        assert json.loads(pins(config, "list", "--changed", "--json").stdout) == []


def test_pins_reject_from_the_cli_keeps_the_tool_quarantined(
    upstream: Upstream, redis_url: str, tmp_path: Path
) -> None:
    config = redis_config(tmp_path, upstream, redis_url, "enforce")
    with served_gateway(config) as (base, _):
        nothing = pins(config, "reject", "Shop_lookup")
        assert nothing.returncode == 1 and "has no pending change to reject" in nothing.stderr
        upstream.serve(CHANGED)
        until(lambda: quarantined(base), "the changed tool quarantined")
        rejected = pins(config, "reject", "Shop_lookup", "--by", "ops")
        assert rejected.returncode == 0, rejected.stderr
        assert rejected.stdout.startswith("shop/Shop_lookup: rejected, approved sha256:")
        until(lambda: "rejected" in call(base)["error"]["message"], "refused as a rejected definition")
        assert json.loads(pins(config, "list", "--changed", "--json").stdout) == []
        view = {v["pin"]: v for v in json.loads(pins(config, "list", "--json").stdout)}["shop/Shop_lookup"]
        assert view["status"] == "approved" and len(view["rejected"]) == 1
        assert quarantined(base)
    memory = tmp_path / "memory.yaml"
    memory.write_text(f'backends:\n  - {{name: shop, kind: opentool, url: "{upstream.url}", toolkit: Shop}}\n')
    refused = pins(memory, "reject", "--all")  # the memory store: the gateway's pins are out of reach
    assert refused.returncode == 1 and "state.store: redis" in refused.stderr


async def test_a_pin_file_written_by_the_cli_is_where_a_deployment_starts(upstream: Upstream, tmp_path: Path) -> None:
    pin_file = tmp_path / "pins.yaml"
    text = textwrap.dedent(f"""
        discovery: {{interval_s: 0}}
        pinning: {{mode: enforce, file: pins.yaml}}
        backends:
          - {{name: shop, kind: opentool, url: "{upstream.url}", toolkit: Shop}}
        """)
    config = tmp_path / "gateway.yaml"
    config.write_text(text)
    refused = pins(config, "approve", "--all")  # the in-memory store: only the pin file can be written
    assert refused.returncode == 1 and "--write-file" in refused.stderr
    written = pins(config, "approve", "--all", "--write-file")
    assert written.returncode == 0, written.stderr
    assert "shop/Shop_lookup" in pin_file.read_text() and "sha256:" in pin_file.read_text()
    upstream.serve(CHANGED)
    listing = json.loads(pins(config, "list", "--json").stdout)
    assert {v["pin"]: v["status"] for v in listing}["shop/Shop_lookup"] == "changed"
    # A fresh gateway (its store empty) starts from the file: the first discovery is a change.
    async with asgi_client(text.replace("file: pins.yaml", f"file: {pin_file}")) as client:
        body = {"jsonrpc": "2.0", "method": "Shop_lookup", "params": {"id": "p1"}, "id": "1"}
        answer = (await client.post("/opentool/call", json=body)).json()
        assert answer["error"]["code"] == 403 and "quarantined" in answer["error"]["message"]
        steady = {"jsonrpc": "2.0", "method": "Shop_steady", "params": {"x": 1}, "id": "2"}
        assert (await client.post("/opentool/call", json=steady)).json()["result"]["method"] == "steady"
