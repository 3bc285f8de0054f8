"""Pinning across two real replicas sharing Redis (approved on one with `toolplex pins`, served by both), and a
pin file written by `toolplex pins approve --write-file` that a deployment starts from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx

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


def test_two_replicas_share_the_pins_an_approval_on_one_is_served_by_both(
    upstream: Upstream, redis_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(
        textwrap.dedent(f"""
        state: {{store: redis, url: "{redis_url}", key_prefix: "pins-{os.getpid()}-{time.monotonic_ns()}:"}}
        discovery: {{interval_s: 0.2}}
        pinning: {{mode: enforce}}
        fronts:
          metrics: {{enabled: true}}
        middleware:
          - {{use: "gateway.metrics:Metrics"}}
        backends:
          - {{name: shop, kind: opentool, url: "{upstream.url}", toolkit: Shop}}
        """)
    )
    with served_gateway(config) as (one, _), served_gateway(config) as (two, _):
        assert served(one) and served(two)
        upstream.serve(CHANGED)
        until(lambda: quarantined(one) and quarantined(two), "both replicas quarantine the changed tool")
        assert changes_counted(one) + changes_counted(two) == 1  # recorded once, by one replica
        listing = pins(config, "list", "--changed", "--json")
        assert listing.returncode == 0, listing.stderr
        (pending,) = json.loads(listing.stdout)
        assert pending["pin"] == "shop/Shop_lookup" and pending["mode"] == "enforce"
        diff = pins(config, "diff", "Shop_lookup")
        assert diff.returncode == 0 and "~/.ssh/id_rsa" in diff.stdout, diff.stderr
        approved = pins(config, "approve", "shop/Shop_lookup", "--by", "ops")
        assert approved.returncode == 0, approved.stderr
        until(lambda: served(one) and served(two), "both replicas serve the approved definition")
        assert json.loads(pins(config, "list", "--changed", "--json").stdout) == []


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
