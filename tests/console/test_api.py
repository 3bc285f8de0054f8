"""The console's JSON API (gateway/console): who sees what, CSRF, bad input, pins, assets, and the per-principal
bounds of its traffic record. The pages themselves are driven in Chromium by tests/console/test_browser.py."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

from gateway.console.traffic import FAILURES_PER_PRINCIPAL, OTHER, SERIES_PER_PRINCIPAL, TrafficRecorder, percentile
from gateway.errors import ErrorKind, Failure
from gateway.fronts import enabled
from gateway.model import Call, CallContext, Outcome, Principal, ToolSpec
from tests.pinning.changing_server import CHANGED
from tests.pinning.conftest import Upstream, upstream  # noqa: F401  (the fixture)
from tests.support import asgi_client

ROOT = {"Authorization": "Bearer root-key-0123456789"}
ALICE = {"Authorization": "Bearer alice-key-0123456789"}
BOB = {"Authorization": "Bearer bob-key-0123456789"}
POST = {"X-Toolplex-Console": "1"}

CONFIG = """
fronts:
  console: {enabled: true}
  toolserver: {prefix: /ts}
auth:
  api_keys:
    - {key: root-key-0123456789, name: root}
    - {key: alice-key-0123456789, name: alice}
    - {key: bob-key-0123456789, name: bob, tools: ["Math_*"]}
  admins: [root]
backends:
  - name: math
    kind: python
    module: adapters.python.toolkits.arithmetic:toolkit
  - name: demo
    kind: python
    module: adapters.python.toolkits.demo:toolkit
"""


@contextlib.asynccontextmanager
async def console(config: str = CONFIG) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(config) as client:
        yield client


async def call(client: httpx.AsyncClient, who: dict[str, str], tool: str, arguments: Any) -> httpx.Response:
    return await client.post(f"/console/api/tools/{tool}/call", json={"arguments": arguments}, headers={**who, **POST})


async def test_the_page_and_its_assets_come_from_the_gateway_with_a_strict_policy() -> None:
    async with console() as client:
        page = await client.get("/console")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assets = re.findall(r'(?:src|href)="(/console/assets/[0-9a-f]{16}/[^"]+)"', page.text)
        assert assets, "the page loads its script and style from versioned asset URLs"
        assert not re.search(r'(?:src|href)="(?:https?:)?//', page.text), "nothing from another origin"
        for url in assets:
            answer = await client.get(url)
            assert answer.status_code == 200
            assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
        stale = re.sub(r"/assets/[0-9a-f]{16}/", "/assets/0000000000000000/", assets[0])
        assert (await client.get(stale)).status_code == 404
        assert (await client.get("/console/assets/" + assets[0].split("/")[3] + "/index.html")).status_code == 404


async def test_credentials_are_the_fronts_own_and_admins_are_told_apart() -> None:
    async with console() as client:
        missing = await client.get("/console/api/me")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert missing.json()["error"]["kind"] == "unauthenticated"
        assert (await client.get("/console/api/me", headers={"Authorization": "Bearer nope"})).status_code == 401
        me = (await client.get("/console/api/me", headers=ALICE)).json()
        assert (me["principal"], me["admin"], me["auth"]) == ("alice", False, True)
        assert (await client.get("/console/api/me", headers=ROOT)).json()["admin"] is True
        assert "set-cookie" not in (await client.get("/console/api/me", headers=ROOT)).headers


async def test_without_auth_the_local_operator_sees_everything() -> None:
    config = CONFIG.split("auth:")[0] + "backends:" + CONFIG.split("backends:")[1]
    async with console(config) as client:
        me = (await client.get("/console/api/me")).json()
        assert (me["principal"], me["admin"], me["auth"]) == (None, True, False)
        assert (await client.get("/console/api/pins")).status_code == 200


async def test_the_catalog_is_what_the_principal_may_see_searchable_with_each_fronts_name() -> None:
    async with console() as client:
        alice = (await client.get("/console/api/tools", headers=ALICE)).json()
        bob = (await client.get("/console/api/tools", headers=BOB)).json()
        assert {t["name"] for t in alice["tools"]} >= {"Math_Add", "Demo_Fail"}
        assert {t["name"] for t in bob["tools"]} == {"Math_Add", "Math_Subtract", "Math_Multiply", "Math_Divide"}
        add = next(t for t in alice["tools"] if t["name"] == "Math_Add")
        assert add["id"] == "Math_Add@1.0.0" and add["origin"] == "python" and add["toolkit"] == "Math"
        assert add["names"]["opentool"] == "Math_Add" and add["names"]["oxp"] == "Math.Add@1.0.0"
        found = (await client.get("/console/api/tools", params={"q": "divide two numbers"}, headers=ALICE)).json()
        assert found["tools"][0]["name"] == "Math_Divide" and found["query"] == "divide two numbers"
        detail = (await client.get("/console/api/tools/Math_Add@1.0.0", headers=ALICE)).json()
        assert detail["input_schema"]["required"] == ["a", "b"] and detail["versions"] == ["1.0.0"]
        assert detail["pin"] is None
        hidden = await client.get("/console/api/tools/Demo_Fail", headers=BOB)  # not bob's: as a tool that is not
        unknown = await client.get("/console/api/tools/No_Such", headers=BOB)
        assert hidden.status_code == unknown.status_code == 404
        assert hidden.json()["error"]["kind"] == unknown.json()["error"]["kind"] == "not_found"
        assert (await client.get("/console/api/tools?q=x&limit=many", headers=ALICE)).status_code == 400


async def test_a_call_runs_through_the_pipeline_as_the_principal_and_shows_each_fronts_answer() -> None:
    async with console() as client:
        done = await call(client, ALICE, "Math_Add@1.0.0", {"a": 2, "b": 3})
        body = done.json()
        assert done.status_code == 200 and body["ok"] is True and body["value"] == 5
        assert re.fullmatch(r"[0-9a-f]{32}", body["call_id"]) and body["trace_id"]
        assert body["answers"]["opentool"] == {
            "status": 200,
            "body": {"jsonrpc": "2.0", "result": {"result": 5}, "error": None, "id": body["call_id"]},
        }
        assert set(body["answers"]) == set((await client.get("/console/api/me", headers=ALICE)).json()["fronts"])
        bad = (await call(client, ALICE, "Math_Add", {"a": "two"})).json()
        assert bad["ok"] is False and bad["error"]["kind"] == "invalid_arguments"
        assert bad["answers"]["opentool"]["body"]["error"] is not None
        denied = await call(client, BOB, "Demo_Fail@1.0.0", {"message": "x"})  # permissions: the pipeline's
        assert denied.status_code == 404


async def test_posts_need_the_console_header_and_json_and_bad_bodies_are_clear_errors() -> None:
    async with console() as client:
        url = "/console/api/tools/Math_Add/call"
        no_header = await client.post(url, json={"arguments": {}}, headers=ALICE)
        assert no_header.status_code == 403 and no_header.json()["error"]["kind"] == "forbidden"
        form = await client.post(url, content=b"arguments=1", headers={**ALICE, **POST, "Content-Type": "text/plain"})
        assert form.status_code == 415
        broken = await client.post(url, content=b"{", headers={**ALICE, **POST, "Content-Type": "application/json"})
        assert broken.status_code == 400 and broken.json()["error"]["kind"] == "malformed_request"
        listed = await client.post(url, json={"arguments": [1, 2]}, headers={**ALICE, **POST})
        assert listed.status_code == 400 and "object" in listed.json()["error"]["message"]
        assert (await client.get(url, headers=ALICE)).status_code == 405


async def test_traffic_and_failures_are_each_principals_own_and_all_of_them_for_an_admin() -> None:
    async with console() as client:
        await call(client, ALICE, "Demo_Fail", {"message": "alice's secret plan failed"})
        await call(client, ALICE, "Math_Add", {"a": 1, "b": 1})
        await call(client, BOB, "Math_Add", {"a": "x", "b": 1})
        alice = (await client.get("/console/api/traffic", headers=ALICE)).json()
        bob = (await client.get("/console/api/traffic", headers=BOB)).json()
        root = (await client.get("/console/api/traffic", headers=ROOT)).json()
        assert (alice["totals"]["calls"], bob["totals"]["calls"], root["totals"]["calls"]) == (2, 1, 3)
        assert [f["tool"] for f in alice["failures"]] == ["Demo_Fail"]
        assert [f["kind"] for f in bob["failures"]] == ["invalid_arguments"]
        assert "alice" not in str(bob) and "principal" not in alice["failures"][0]
        assert {f["principal"] for f in root["failures"]} == {"alice", "bob"}
        assert {s["key"] for s in root["series"]["tool"]} == {"Demo_Fail", "Math_Add"}
        assert {s["key"] for s in bob["series"]["backend"]} == {"math"}
        assert root["series"]["front"][0]["key"] == "console" and root["in_flight"]["total"] == 0
        stats = (await client.get("/console/api/backends", headers=BOB)).json()["stats"]
        assert set(stats) == {"math"}
        math = stats["math"]
        assert (math["calls"], math["errors"], math["error_rate"]) == (1, 1, 1.0)
        assert 0 < math["p50_ms"] <= math["p99_ms"] < 5_000  # one call's latency, from the histogram's buckets


async def test_backends_and_state_show_this_replica_its_sessions_and_refused_reloads(tmp_path: Any) -> None:
    async with console() as client:
        backends = (await client.get("/console/api/backends", headers=ROOT)).json()
        (replica,) = backends["replicas"]
        assert replica["self"] is True
        assert {b["name"]: (b["state"], b["tools"]) for b in replica["backends"]} == {
            "math": ("up", 4),
            "demo": ("up", 2),
        }
        for who in (ALICE, ALICE, BOB):  # ToolServerNode sessions, each owned by its principal
            assert (await client.post("/ts/get_cookie", headers=who)).status_code == 200
        root = (await client.get("/console/api/state", headers=ROOT)).json()
        bob = (await client.get("/console/api/state", headers=BOB)).json()
        assert {(r["principal"], r["count"]) for r in root["sessions"] if r["front"] == "toolserver"} == {
            ("alice", 2),
            ("bob", 1),
        }
        assert bob["sessions"] == [{"front": "toolserver", "principal": "bob", "count": 1}]
        assert root["config"]["generation"] == 1 and root["config"]["reloads"] == []
        gateway = client.app.gateway  # type: ignore[attr-defined]
        from gateway.config import parse_config

        broken = parse_config(CONFIG.replace("arithmetic:toolkit", "no_such_module:toolkit"), "next.yaml")
        assert await gateway.reload(broken) is False
        reloads = (await client.get("/console/api/state", headers=ROOT)).json()["config"]["reloads"]
        assert len(reloads) == 1 and reloads[0]["ok"] is False and reloads[0]["generation"] == 1
        assert "no_such_module" in reloads[0]["message"] and reloads[0]["source"] == "next.yaml"


@contextlib.asynccontextmanager
async def quarantined_change(upstream: Upstream) -> AsyncIterator[httpx.AsyncClient]:  # noqa: F811
    """A console over an upstream under `enforce` whose tool changed since it was pinned: quarantined."""
    config = f"""
    discovery: {{interval_s: 0}}
    pinning: {{mode: enforce}}
    fronts:
      console: {{enabled: true}}
    auth:
      api_keys:
        - {{key: root-key-0123456789, name: root}}
        - {{key: alice-key-0123456789, name: alice}}
      admins: [root]
    backends:
      - {{name: shop, kind: opentool, url: "{upstream.url}", toolkit: Shop}}
    """
    async with console(config) as client:
        upstream.serve(CHANGED)
        await client.app.gateway.discovery.refresh()  # type: ignore[attr-defined]
        yield client


async def test_pins_are_for_admins_who_see_the_change_side_by_side_and_decide(upstream: Upstream) -> None:  # noqa: F811
    async with quarantined_change(upstream) as client:
        shown = (await client.get("/console/api/tools", headers=ROOT)).json()["tools"]
        assert [t["quarantined"] for t in shown if t["name"] == "Shop_lookup"] == [True]
        assert "Shop_lookup" not in {
            t["name"] for t in (await client.get("/console/api/tools", headers=ALICE)).json()["tools"]
        }
        assert (await client.get("/console/api/tools/Shop_lookup", headers=ALICE)).status_code == 404
        for path in ("/console/api/pins", "/console/api/pins/shop%2FShop_lookup"):
            hidden = await client.get(path, headers=ALICE)
            assert (hidden.status_code, hidden.json()) == (404, {"detail": "Not Found"})  # as an unknown path
        refused = await client.post("/console/api/pins/shop%2FShop_lookup/approve", json={}, headers={**ALICE, **POST})
        assert refused.status_code == 404
        pin = (await client.get("/console/api/tools/Shop_lookup", headers=ROOT)).json()["pin"]
        assert pin["status"] == "changed" and "description" in pin["changed"]
        assert pin["approved_definition"]["description"] != pin["pending_definition"]["description"]
        assert pin["diff"].startswith("---")
        listed = (await client.get("/console/api/pins", headers=ROOT)).json()["pins"]
        assert {p["pin"]: p["status"] for p in listed}["shop/Shop_lookup"] == "changed"
        approved = await client.post("/console/api/pins/shop%2FShop_lookup/approve", json={}, headers={**ROOT, **POST})
        assert approved.status_code == 200 and approved.json()["pin"]["status"] == "approved"
        assert approved.json()["pin"]["approved"]["by"] == "root"
        await client.app.gateway.discovery.refresh()  # type: ignore[attr-defined]
        served = await call(client, ALICE, "Shop_lookup", {"id": "p1", "quantity": 2})
        assert served.json()["ok"] is True
        unknown = await client.get("/console/api/pins/shop%2FNo_such", headers=ROOT)
        assert unknown.status_code == 404


def test_unset_the_console_is_on_only_where_the_gateway_is_bound_to_loopback() -> None:
    from gateway.console.settings import ConsoleFrontSettings

    unset = ConsoleFrontSettings()
    assert enabled(unset, "127.0.0.1") and enabled(unset, "::1") and enabled(unset, "localhost")
    assert not enabled(unset, "0.0.0.0") and not enabled(unset, None)
    assert enabled(ConsoleFrontSettings(enabled=True), "0.0.0.0")
    assert not enabled(ConsoleFrontSettings(enabled=False), "127.0.0.1")


def _outcome(principal: str, tool: str, *, failed: bool = False, ms: float = 3.0) -> tuple[Call, Outcome]:
    spec = ToolSpec(toolkit="T", name=tool, version="1.0.0", description="", input_schema={}, backend="b")
    context = CallContext(front="oxp", principal=Principal(name=principal))
    error = Failure(kind=ErrorKind.TOOL_FAILED, message="boom") if failed else None
    return Call(tool, {}, context=context), Outcome(call_id="c", spec=spec, error=error, duration_ms=ms)


def test_one_principals_flood_folds_into_its_own_other_and_never_evicts_anothers_rows_or_failures() -> None:
    recorder = TrafficRecorder()
    recorder.record(*_outcome("quiet", "Kept", failed=True))
    for n in range(SERIES_PER_PRINCIPAL * 3):
        recorder.record(*_outcome("noisy", f"Tool{n}", failed=True))
    (minute,) = recorder._minutes.values()
    assert len(minute.rows["noisy"]) == SERIES_PER_PRINCIPAL + 1
    assert minute.rows["noisy"][("oxp", OTHER, OTHER)][0] == SERIES_PER_PRINCIPAL * 2
    assert minute.rows["quiet"][("oxp", "b", "T_Kept")][:2] == [1, 1]
    assert len(recorder._failures["noisy"]) == FAILURES_PER_PRINCIPAL
    assert [f["tool"] for f in recorder._failures["quiet"]] == ["T_Kept"]


def test_percentiles_come_from_the_latency_histogram() -> None:
    assert percentile([0] * 16, 0.5) is None
    histogram = [0] * 16
    histogram[3] = 100  # every call between 5 and 10 ms
    assert 5.0 <= percentile(histogram, 0.5) <= 10.0  # type: ignore[operator]
    histogram[-1] = 1  # one above the last bound
    assert percentile(histogram, 1.0) == 60_000.0


def test_minutes_a_store_never_took_are_not_kept_for_ever(monkeypatch: Any) -> None:
    import gateway.console.traffic as traffic

    recorder = TrafficRecorder()
    now = [1_000_000.0]
    monkeypatch.setattr(traffic.time, "time", lambda: now[0])
    for _ in range(30):  # half an hour of calls while nothing is published
        recorder.record(*_outcome("alice", "Add"))
        now[0] += 60
    assert len(recorder._minutes) <= 3


async def test_an_admin_rejects_a_change_from_the_console_and_the_tool_stays_quarantined(
    upstream: Upstream,  # noqa: F811
) -> None:
    async with quarantined_change(upstream) as client:
        path = "/console/api/pins/shop%2FShop_lookup/reject"
        refused = await client.post(path, json={}, headers={**ALICE, **POST})
        assert (refused.status_code, refused.json()) == (404, {"detail": "Not Found"})  # as an unknown path
        unsafe = await client.post(path, json={}, headers=ROOT)  # no X-Toolplex-Console: not the page
        assert unsafe.status_code == 403
        rejected = await client.post(path, json={}, headers={**ROOT, **POST})
        assert rejected.status_code == 200, rejected.text
        pin = rejected.json()["pin"]
        assert pin["status"] == "approved" and len(pin["rejected"]) == 1, pin  # the approved one stays
        assert pin["pending"] is None and (pin["approved"] or {}).get("hash") not in pin["rejected"], pin
        await client.app.gateway.discovery.refresh()  # type: ignore[attr-defined]
        shown = (await client.get("/console/api/tools", headers=ROOT)).json()["tools"]
        assert [t["quarantined"] for t in shown if t["name"] == "Shop_lookup"] == [True]
        assert (await call(client, ALICE, "Shop_lookup", {"id": "p1", "quantity": 2})).status_code == 404
