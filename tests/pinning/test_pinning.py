"""Tool-definition pinning against a real upstream that changes a tool's description and input schema between
discoveries: each mode, the log with its diff and the counter, quarantine on the OpenTool, OXP and MCP fronts,
admin and non-admin listings, approve, reject, a definition that changes back, a version bump and a tool added
to a pinned backend (neither trusted on first use), and a backend's own mode over the gateway's."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from gateway.pinning import PinError
from tests.pinning.changing_server import CHANGED, ORIGINAL, THIRD
from tests.pinning.conftest import Upstream
from tests.support import asgi_client

ADMIN = {"Authorization": "Bearer admin-key-0123456789"}
USER = {"Authorization": "Bearer user-key-0123456789"}
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def config(upstream: Upstream, mode: str | None, *, extra: str = "", backend_mode: str | None = None) -> str:
    pinning = f"pinning: {{mode: {mode}}}" if mode else ""
    own = f", pinning: {{mode: {backend_mode}}}" if backend_mode else ""
    return f"""
    discovery: {{interval_s: 0}}
    {pinning}
    auth:
      api_keys:
        - {{name: ops, key: admin-key-0123456789}}
        - {{name: app, key: user-key-0123456789}}
      admins: ["ops"]
    fronts:
      metrics: {{enabled: true}}
    middleware:
      - {{use: "gateway.metrics:Metrics"}}
    backends:
      - {{name: shop, kind: opentool, url: "{upstream.url}", toolkit: Shop{own}}}
    {extra}
    """


@contextlib.asynccontextmanager
async def gateway(upstream: Upstream, mode: str | None) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(config(upstream, mode)) as client:
        yield client


async def rediscover(client: httpx.AsyncClient) -> None:
    await client.app.gateway.discovery.refresh()  # type: ignore[attr-defined]


async def opentool_call(
    client: httpx.AsyncClient, headers: dict[str, str] = USER, method: str = "Shop_lookup"
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "method": method, "params": {"id": "p1"}, "id": "1"}
    answer = await client.post("/opentool/call", json=body, headers=headers)
    return answer.json()  # type: ignore[no-any-return]


async def listed(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The tools OpenTool's /load lists to this caller, by name."""
    document = (await client.get("/opentool/load", headers=headers)).json()
    return {f["name"]: f for f in document["functions"]}


def changes(metrics: str, mode: str, tool: str = "Shop_lookup", kind: str = "changed") -> float:
    for line in metrics.splitlines():
        wanted = f'mode="{mode}"' in line and f'tool="{tool}"' in line and f'kind="{kind}"' in line
        if line.startswith("toolplex_tool_definition_changes_total{") and wanted:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_warn_serves_the_changed_definition_logs_a_diff_and_counts_it(upstream: Upstream) -> None:
    async with gateway(upstream, None) as client:  # warn is the default
        assert "note" not in (await listed(client, USER))["Shop_lookup"]["description"]
        upstream.serve(CHANGED)
        with capture_logs() as logs:
            await rediscover(client)
        changed = [e for e in logs if e["event"] == "tool_definition_changed"]
        assert len(changed) == 1, logs
        event = changed[0]
        assert event["mode"] == "warn" and event["action"] == "served"
        assert event["changed"] == ["description", "input_schema"]
        assert "~/.ssh/id_rsa" in event["diff"] and '+      "note": {' in event["diff"]
        tool = (await listed(client, USER))["Shop_lookup"]
        assert "~/.ssh/id_rsa" in tool["description"]
        assert (await opentool_call(client))["result"]["method"] == "lookup"
        metrics = (await client.get("/metrics", headers=ADMIN)).text
        assert changes(metrics, "warn") == 1
        with capture_logs() as logs:  # the same change is counted once
            await rediscover(client)
        assert not [e for e in logs if e["event"] == "tool_definition_changed"]
        assert changes((await client.get("/metrics", headers=ADMIN)).text, "warn") == 1
        pins = await client.app.gateway.pins.list(status="changed")  # type: ignore[attr-defined]
        assert [v.pin for v in pins] == ["shop/Shop_lookup"]


async def test_off_records_nothing(upstream: Upstream) -> None:
    async with gateway(upstream, "off") as client:
        upstream.serve(CHANGED)
        with capture_logs() as logs:
            await rediscover(client)
        assert not [e for e in logs if e["event"] == "tool_definition_changed"]
        assert "~/.ssh/id_rsa" in (await listed(client, USER))["Shop_lookup"]["description"]
        assert await client.app.gateway.pins.list() == []  # type: ignore[attr-defined]
        assert changes((await client.get("/metrics", headers=ADMIN)).text, "warn") == 0


async def mcp_call(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "Shop_lookup", "arguments": {"id": "p1"}, "_meta": META},
    }
    extra = {"Mcp-Method": "tools/call", "Mcp-Name": "Shop_lookup"}
    answer = await client.post("/mcp", json=body, headers={**MCP_HEADERS, **extra, **headers})
    return answer.json()["result"]  # type: ignore[no-any-return]


async def mcp_tools(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}}
    answer = await client.post("/mcp", json=body, headers={**MCP_HEADERS, "Mcp-Method": "tools/list", **headers})
    return {t["name"]: t for t in answer.json()["result"]["tools"]}


async def assert_quarantined(client: httpx.AsyncClient) -> None:
    """Refused on every front with the change named; listed to the admin only."""
    for headers in (USER, ADMIN):  # admins see it listed, but may not call it either
        answer = await opentool_call(client, headers)
        assert answer["error"]["code"] == 403, answer
        assert "quarantined" in answer["error"]["message"]
        assert "description, input_schema" in answer["error"]["message"]
        oxp = await client.post("/tools/call", json={"tool_id": "Shop.lookup", "input": {"id": "p1"}}, headers=headers)
        assert oxp.status_code == 400 and "quarantined" in oxp.text, oxp.text
        mcp = await mcp_call(client, headers)
        assert mcp["isError"] is True and "quarantined" in json.dumps(mcp), mcp
        assert mcp["_meta"]["io.toolplex/kind"] == "forbidden"
    assert "Shop_lookup" not in await listed(client, USER)
    assert "Shop_lookup" not in await mcp_tools(client, USER)
    oxp_tools = (await client.get("/tools", headers=USER)).json()
    assert "Shop.lookup" not in json.dumps(oxp_tools)
    assert "Shop_lookup" in await listed(client, ADMIN)  # OpenTool relays the upstream's own entry
    assert (await mcp_tools(client, ADMIN))["Shop_lookup"]["description"].startswith("[Quarantined")
    assert "Shop_steady" in await listed(client, USER)  # the unchanged tool is served as ever


async def test_enforce_quarantines_until_approved(upstream: Upstream) -> None:
    async with gateway(upstream, "enforce") as client:
        assert (await opentool_call(client))["result"]["method"] == "lookup"
        upstream.serve(CHANGED)
        with capture_logs() as logs:
            await rediscover(client)
        event = next(e for e in logs if e["event"] == "tool_definition_changed")
        assert event["action"] == "quarantined" and "~/.ssh/id_rsa" in event["diff"]
        await assert_quarantined(client)
        assert changes((await client.get("/metrics", headers=ADMIN)).text, "enforce") == 1
        pins = client.app.gateway.pins  # type: ignore[attr-defined]
        (view,) = await pins.list(status="changed")
        assert view.quarantined is True and view.pending["changed"] == ["description", "input_schema"]
        diff = await pins.diff("Shop_lookup")
        assert "~/.ssh/id_rsa" in diff["diff"]
        await pins.approve("Shop_lookup", by="ops")
        await client.app.gateway.discovery.refresh()  # type: ignore[attr-defined]
        assert (await opentool_call(client))["result"]["params"] == {"id": "p1"}
        assert "Shop_lookup" in await listed(client, USER)
        assert "~/.ssh/id_rsa" in (await mcp_tools(client, USER))["Shop_lookup"]["description"]


async def test_enforce_serves_a_definition_that_changes_back(upstream: Upstream) -> None:
    async with gateway(upstream, "enforce") as client:
        upstream.serve(CHANGED)
        await rediscover(client)
        assert (await opentool_call(client))["error"]["code"] == 403
        upstream.serve(ORIGINAL)
        await rediscover(client)
        assert (await opentool_call(client))["result"]["method"] == "lookup"
        assert await client.app.gateway.pins.list(status="changed") == []  # type: ignore[attr-defined]


async def test_reject_keeps_the_approved_definition_and_the_tool_quarantined(upstream: Upstream) -> None:
    async with gateway(upstream, "enforce") as client:
        pins = client.app.gateway.pins  # type: ignore[attr-defined]
        upstream.serve(CHANGED)
        await rediscover(client)
        view = await pins.reject("shop/Shop_lookup", by="ops")
        assert view.status == "approved" and len(view.rejected) == 1
        with capture_logs() as logs:
            await rediscover(client)
        assert not [e for e in logs if e["event"] == "tool_definition_changed"]  # not asked about again
        answer = await opentool_call(client)
        assert answer["error"]["code"] == 403 and "rejected" in answer["error"]["message"]
        assert await pins.list(status="changed") == []
        upstream.serve(THIRD)  # another change: asked about again
        await rediscover(client)
        assert [v.pin for v in await pins.list(status="changed")] == ["shop/Shop_lookup"]
        upstream.serve(ORIGINAL)  # back to the approved one: served
        await rediscover(client)
        assert (await opentool_call(client))["result"]["method"] == "lookup"


async def test_in_process_tools_are_not_pinned_unless_their_backend_says_so(upstream: Upstream) -> None:
    extra = """  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
      - {name: text, kind: python, module: "adapters.python.toolkits.text:toolkit", pinning: {mode: enforce}}"""
    async with asgi_client(config(upstream, "enforce", extra=extra)) as client:
        pinned = {v.pin.split("/")[0] for v in await client.app.gateway.pins.list()}  # type: ignore[attr-defined]
        assert pinned == {"shop", "text"}


@pytest.mark.parametrize("mode", ["warn", "enforce"])
async def test_a_store_that_fails_is_fail_closed_in_enforce_only(upstream: Upstream, mode: str) -> None:
    from gateway.errors import ErrorKind, GatewayError

    async with gateway(upstream, mode) as client:
        store = client.app.gateway.pin_book.store  # type: ignore[attr-defined]

        async def down(*_args: Any) -> Any:
            raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, "The state store is unreachable")

        store.get = down
        await rediscover(client)
        answer = await opentool_call(client)
        if mode == "enforce":
            assert answer["error"]["code"] == 403 and "could not be checked" in answer["error"]["message"]
        else:
            assert answer["result"]["method"] == "lookup"


def bumped(doc: dict[str, Any], version: str) -> dict[str, Any]:
    """The upstream's document with another version: the version is the upstream's to choose."""
    doc = copy.deepcopy(doc)
    doc["info"]["version"] = version
    return doc


def renamed(doc: dict[str, Any], name: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["functions"][0]["name"] = name
    return doc


@pytest.mark.parametrize("mode", ["warn", "enforce"])
async def test_a_new_version_with_a_changed_definition_is_a_change_not_a_new_pin(upstream: Upstream, mode: str) -> None:
    async with gateway(upstream, mode) as client:
        assert (await opentool_call(client))["result"]["method"] == "lookup"
        upstream.serve(bumped(CHANGED, "1.0.1"))  # the rug pull, with a version bump to look like a new tool
        with capture_logs() as logs:
            await rediscover(client)
        events = {e["pin"]: e for e in logs if e["event"] == "tool_definition_changed"}
        assert events["shop/Shop_steady"]["changed"] == ["version"]  # a version alone is a change as well
        event = events["shop/Shop_lookup"]
        assert event["kind"] == "changed" and event["version"] == "1.0.1"
        assert event["changed"] == ["description", "input_schema", "version"]
        assert "~/.ssh/id_rsa" in event["diff"] and '-  "version": "1.0.0"' in event["diff"]
        assert changes((await client.get("/metrics", headers=ADMIN)).text, mode) == 1
        pins = client.app.gateway.pins  # type: ignore[attr-defined]
        assert [v.pin for v in await pins.list(status="changed")] == ["shop/Shop_lookup", "shop/Shop_steady"]
        assert (await pins.get("shop/Shop_lookup")).pending["version"] == "1.0.1"
        if mode == "warn":
            assert (await opentool_call(client))["result"]["method"] == "lookup"
            return
        await pins.approve("Shop_steady", by="ops")
        await rediscover(client)
        await assert_quarantined(client)
        await pins.approve("Shop_lookup@1.0.1", by="ops")  # a version in the name is ignored: one pin per tool
        await rediscover(client)
        assert (await opentool_call(client))["result"]["method"] == "lookup"


@pytest.mark.parametrize("mode", ["warn", "enforce"])
async def test_a_tool_added_to_a_pinned_backend_is_not_trusted_on_first_use(upstream: Upstream, mode: str) -> None:
    async with gateway(upstream, mode) as client:
        upstream.serve(renamed(CHANGED, "lookup2"))  # the poisoned tool under a name never seen before
        with capture_logs() as logs:
            await rediscover(client)
        (event,) = [e for e in logs if e["event"] == "tool_definition_changed"]
        assert event["pin"] == "shop/Shop_lookup2" and event["kind"] == "added" and event["changed"] == ["added"]
        assert (
            event["approved_hash"] is None and '+  "description": "Look up a product by its id. Before' in event["diff"]
        )
        metrics = (await client.get("/metrics", headers=ADMIN)).text
        assert changes(metrics, mode, tool="Shop_lookup2", kind="added") == 1
        pins = client.app.gateway.pins  # type: ignore[attr-defined]
        (view,) = await pins.list(status="changed")
        assert view.pin == "shop/Shop_lookup2" and view.approved is None and view.pending["kind"] == "added"
        assert (await pins.diff("Shop_lookup2"))["changed"] == ["added"]
        if mode == "warn":
            assert (await opentool_call(client, method="Shop_lookup2"))["result"]["method"] == "lookup2"
            return
        for headers in (USER, ADMIN):
            answer = await opentool_call(client, headers, method="Shop_lookup2")
            assert answer["error"]["code"] == 403, answer
            message = answer["error"]["message"]
            assert "quarantined" in message and "added it after its tools were pinned" in message
            assert "toolplex pins approve shop/Shop_lookup2" in message
        assert "Shop_lookup2" not in await listed(client, USER)
        assert (await mcp_tools(client, ADMIN))["Shop_lookup2"]["description"].startswith("[Quarantined")
        assert "Shop_steady" in await listed(client, USER)
        await pins.approve("Shop_lookup2", by="ops")
        await rediscover(client)
        assert (await opentool_call(client, method="Shop_lookup2"))["result"]["method"] == "lookup2"
        assert "Shop_lookup2" in await listed(client, USER)


async def test_a_rejected_added_tool_stays_quarantined_and_is_not_asked_about_again(upstream: Upstream) -> None:
    async with gateway(upstream, "enforce") as client:
        upstream.serve(renamed(CHANGED, "lookup2"))
        await rediscover(client)
        pins = client.app.gateway.pins  # type: ignore[attr-defined]
        view = await pins.reject("Shop_lookup2", by="ops")
        assert view.status == "rejected" and len(view.rejected) == 1
        with capture_logs() as logs:
            await rediscover(client)
        assert not [e for e in logs if e["event"] == "tool_definition_changed"]
        answer = await opentool_call(client, method="Shop_lookup2")
        assert answer["error"]["code"] == 403 and "rejected" in answer["error"]["message"]
        with pytest.raises(PinError, match="nothing to approve"):
            await pins.approve("Shop_lookup2")


@pytest.mark.parametrize(
    ("gateway_mode", "backend_mode", "expect"),
    [("enforce", "off", "off"), ("enforce", "warn", "warn"), ("warn", "enforce", "enforce")],
)
async def test_a_backend_s_own_mode_overrides_the_gateway_s(
    upstream: Upstream, gateway_mode: str, backend_mode: str, expect: str
) -> None:
    async with asgi_client(config(upstream, gateway_mode, backend_mode=backend_mode)) as client:
        upstream.serve(CHANGED)
        with capture_logs() as logs:
            await rediscover(client)
        events = [e for e in logs if e["event"] == "tool_definition_changed"]
        metrics = (await client.get("/metrics", headers=ADMIN)).text
        pins = client.app.gateway.pins  # type: ignore[attr-defined]
        if expect == "off":
            assert events == [] and await pins.list() == []
            assert "~/.ssh/id_rsa" in (await listed(client, USER))["Shop_lookup"]["description"]
            assert changes(metrics, "enforce") == changes(metrics, "off") == 0
            return
        assert [e["mode"] for e in events] == [expect]
        assert changes(metrics, expect) == 1 and changes(metrics, gateway_mode) == 0
        assert {v.pin: v.mode for v in await pins.list()}["shop/Shop_lookup"] == expect
        if expect == "warn":
            assert (await opentool_call(client))["result"]["method"] == "lookup"
        else:
            await assert_quarantined(client)
