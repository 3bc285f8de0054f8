"""The console's pages (gateway/console/static) driven in a real Chromium against a real gateway process.

Debian's `chromium` (tests/console/install_browser.sh; Playwright never downloads a browser) opens the console of
`toolplex serve` on a free loopback port, with API-key auth, an admin and a non-admin, a few in-process Python
tools and an OpenTool upstream whose tool a test changes (a pinned definition). Each test signs in and checks
what a person sees: the catalog and its search, a tool's generated form, a call and each front's answer, a
failed call in Traffic, Backends, State with a refused reload, a changed definition side by side and approved,
and that a non-admin sees no admin-only content and no other principal's failures. Every request a page makes
is recorded: none may go to another origin.

With TOOLPLEX_SCREENSHOTS=1 the pages are photographed (1280x800) into docs/console/ for docs/console.md:

    TOOLPLEX_SCREENSHOTS=1 .venv/bin/python -m pytest -q tests/console/test_browser.py
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.pinning.changing_server import CHANGED, ORIGINAL, write
from tests.support import ROOT, free_port, served_gateway, server_process, until

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is in the test extra: pip install -e '.[test]'"
)
see = sync_api.expect

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}
SHOTS = ROOT / "docs" / "console"
SCREENSHOTS = os.environ.get("TOOLPLEX_SCREENSHOTS") == "1"
WAIT_MS = 15_000  # the longest any step of a page may take

ADA_KEY = "ada-key-7f3c0e2b9d41a6"  # an admin (auth.admins)
BOB_KEY = "bob-key-52d8a1c6e07f39"  # not one

TOOLS = '''
"""Tools for the console's browser test: one with an enum and numbers, one that always fails, JSON fields."""

from typing import Annotated, Literal

from pydantic import Field

from adapters.python import ToolError, Toolkit, tool


@tool(name="Convert", version="1.2.0", side_effects=False)
def convert(
    amount: Annotated[float, Field(ge=0), "The distance to convert"],
    unit: Annotated[Literal["km", "mi"], "The unit the amount is in"] = "km",
    digits: Annotated[int, Field(ge=0, le=6), "Decimals of the result"] = 2,
) -> dict:
    """Convert a distance between kilometres and miles."""
    factor = 0.621371 if unit == "km" else 1 / 0.621371
    return {"value": round(amount * factor, digits), "unit": "mi" if unit == "km" else "km"}


@tool(name="Explode")
def explode(reason: Annotated[str, "What the error says"]) -> None:
    """Always fail with a tool error carrying `reason`."""
    raise ToolError(reason)


@tool(name="Label", side_effects=True)
def label(
    names: Annotated[list[str], "The names to label"],
    loud: Annotated[bool, "Upper case"] = False,
    weights: Annotated[dict[str, int] | None, "A weight per name"] = None,
) -> list[str]:
    """Label each name with its length (and its weight)."""
    weights = weights or {}
    return [f"{n.upper() if loud else n}:{len(n)}:{weights.get(n, 0)}" for n in names]


toolkit = Toolkit("Units", [convert, explode, label], description="Unit conversions and friends")
'''

CONFIG = """
discovery: {{interval_s: 1}}
pinning: {{mode: enforce}}
limits: {{default_timeout_s: {timeout}}}
fronts:
  console: {{enabled: true}}
auth:
  api_keys:
    - {{name: ada, key: {ada}}}
    - {{name: bob, key: {bob}}}
  admins: [ada]
backends:
  - {{name: units, kind: python, module: "{module}"}}
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
  - {{name: shop, kind: opentool, url: "{upstream}", toolkit: Shop}}
"""


@dataclass
class Served:
    base: str
    process: Any
    config: Path
    upstream_document: Path
    render: Callable[..., str]

    def api(self, key: str, path: str) -> Any:
        response = httpx.get(f"{self.base}/console/api{path}", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's Chromium under Playwright (never a downloaded browser); skipped, saying why, where it is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: tests/console/install_browser.sh installs Debian's chromium (as root)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A real gateway with the console, its tools and an upstream, with some traffic through three fronts."""
    folder = tmp_path_factory.mktemp("console")
    (folder / "console_tools.py").write_text(TOOLS)
    document = folder / "document.json"
    write(document, ORIGINAL)
    port = free_port()
    upstream = [sys.executable, "-m", "tests.pinning.changing_server", "--port", str(port), "--document", str(document)]

    def render(timeout: int = 30, module: str = "console_tools:toolkit") -> str:
        values = {"ada": ADA_KEY, "bob": BOB_KEY, "upstream": f"http://127.0.0.1:{port}"}
        return textwrap.dedent(CONFIG.format(timeout=timeout, module=module, **values))

    config = folder / "gateway.yaml"
    config.write_text(render())
    path = os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with (
        server_process(upstream, port),
        served_gateway(config, env={"PYTHONPATH": path}, log_path=folder / "gateway.log") as (base, process),
    ):
        served = Served(base, process, config, document, render)
        seed_traffic(served)
        yield served


def seed_traffic(served: Served) -> None:
    """Calls through the OpenTool, OXP and MCP fronts (one failing), so Traffic and State have rows to show."""
    ada = {"Authorization": f"Bearer {ADA_KEY}"}
    with httpx.Client(base_url=served.base, headers=ada, timeout=10) as client:
        for n in range(3):
            client.post(
                "/opentool/call",
                json={"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": n, "b": 2}, "id": str(n)},
            ).raise_for_status()
            client.post("/tools/call", json={"tool_id": "Units.Convert", "input": {"amount": n}}).raise_for_status()
        client.post("/tools/call", json={"tool_id": "Math.Divide", "input": {"a": 1, "b": 0}}).raise_for_status()
        client.post(
            "/mcp",
            headers={"Accept": "application/json, text/event-stream"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
        ).raise_for_status()


@dataclass
class Console:
    """One browser context (its own sessionStorage) on the console, with every request its pages made."""

    page: Any
    base: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def open(self, route: str = "") -> None:
        self.page.goto(f"{self.base}/console/{'#/' + route if route else ''}")

    def sign_in(self, key: str, name: str) -> None:
        self.open()
        self.page.fill("#token", key)
        self.page.click("form.signin button[type=submit]")
        self.page.locator(".top .principal").filter(has_text=name).wait_for()

    def go(self, route: str) -> None:
        self.page.evaluate("route => { location.hash = route; }", "#/" + route)

    def shot(self, name: str) -> None:
        if SCREENSHOTS:
            SHOTS.mkdir(parents=True, exist_ok=True)
            self.page.wait_for_timeout(300)  # let the last repaint land
            self.page.screenshot(path=str(SHOTS / f"{name}.png"))


@pytest.fixture
def console(chromium: Any, served: Served) -> Iterator[Console]:
    context = chromium.new_context(viewport=VIEWPORT, device_scale_factor=1, locale="en-US", timezone_id="UTC")
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    opened = Console(page, served.base)
    page.on("request", lambda request: opened.requests.append(request.url))
    page.on("pageerror", lambda error: opened.errors.append(str(error)))
    # an error the page logs (a Content-Security-Policy refusal, say), but not the HTTP errors the flows expect
    page.on(
        "console",
        lambda message: (
            message.type == "error"
            and not message.text.startswith("Failed to load resource")
            and opened.errors.append(message.text)
        ),
    )
    try:
        yield opened
        assert context.cookies() == []  # the console sets none: the token lives in sessionStorage
    finally:
        context.close()
    # Everything came from the gateway: no CDN, font, analytics or any other origin.
    foreign = [url for url in opened.requests if not url.startswith(served.base + "/")]
    assert opened.requests and not foreign, foreign
    assert not opened.errors, opened.errors


# ---------------------------------------------------------------------------------------------------- the tests


def test_sign_in_asks_for_a_token_refuses_a_wrong_one_and_signs_out(console: Console, served: Served) -> None:
    page = console.page
    console.open()
    see(page.locator("form.signin")).to_be_visible()
    console.shot("sign-in")
    page.fill("#token", "not-a-key-of-this-gateway")
    page.click("form.signin button[type=submit]")
    see(page.locator(".signin-status")).to_contain_text("refused")
    assert page.evaluate("sessionStorage.getItem('toolplex.console.token')") is None

    console.sign_in(ADA_KEY, "ada")
    see(page.locator(".top .badge-admin")).to_have_text("admin")
    see(page.locator(".nav a")).to_have_text(["Catalog", "Backends", "Traffic", "State", "Pins"])
    assert page.evaluate("sessionStorage.getItem('toolplex.console.token')") == ADA_KEY
    page.reload()  # the token outlives a reload of the tab
    see(page.locator(".top .principal")).to_have_text("ada")

    page.click(".top .signout")
    see(page.locator("form.signin")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('toolplex.console.token')") is None
    # every API request carried the token as a bearer header, never a cookie
    assert any("/console/api/me" in url for url in console.requests)


def test_the_catalog_searches_and_a_generated_form_calls_the_tool(console: Console, served: Served) -> None:
    page = console.page
    console.sign_in(ADA_KEY, "ada")
    rows = page.locator("table.catalog tbody tr")
    see(rows.filter(has_text="Units_Convert")).to_have_count(1)
    convert = rows.filter(has_text="Units_Convert")
    see(convert).to_contain_text("Units")  # toolkit
    see(convert).to_contain_text("1.2.0")
    see(convert).to_contain_text("units")  # backend
    see(convert).to_contain_text("python")  # origin
    see(convert).to_contain_text("Units.Convert@1.2.0")  # its OXP name, among the names per front
    see(rows.filter(has_text="Shop_lookup").locator("td").nth(4)).to_have_text("opentool")  # an upstream's origin
    console.shot("catalog")

    page.fill("#catalog-search", "distance kilometres")
    see(rows.first).to_contain_text("Units_Convert")
    see(rows.filter(has_text="Math_Subtract")).to_have_count(0)
    assert "q=distance" in page.evaluate("location.hash")

    rows.first.locator(".tool-name a").click()
    see(page.locator(".tool-head h1")).to_have_text("Units_Convert")
    see(page.locator(".tool-head .description")).to_have_text("Convert a distance between kilometres and miles.")
    see(page.locator("pre.schema").first).to_contain_text('"amount"')
    declared = served.api(ADA_KEY, "/tools/Units_Convert")["output_schema"]  # from the function's return type
    assert declared, declared
    see(page.locator("pre.schema")).to_have_count(2)  # the input schema, then the output schema
    shown = json.loads(page.locator("pre.schema").nth(1).inner_text())
    assert shown == declared, shown
    # the form, from the input schema: a required number, an enum with its default, a bounded integer
    amount, unit, digits = (page.locator(f"[data-arg={name}]") for name in ("amount", "unit", "digits"))
    see(amount).to_have_attribute("type", "number")
    see(page.locator(".field", has=amount).locator(".required")).to_have_count(1)
    see(page.locator(".field", has=unit).locator(".required")).to_have_count(0)
    assert unit.evaluate("e => e.tagName") == "SELECT"
    see(unit.locator("option")).to_have_text(["— not set —", "km", "mi"])  # optional: may be left out
    see(unit.locator("option:checked")).to_have_text("km")  # the default
    see(digits).to_have_value("2")
    see(page.locator(".field", has=digits).locator(".hint")).to_contain_text("≤ 6")

    amount.fill("10")
    unit.select_option(label="mi")
    page.click("#call-button")
    result = page.locator("#call-result")
    see(result.locator(".result-head .badge")).to_have_text("ok")
    see(result.locator("pre.value-json")).to_contain_text('"value": 16.09')
    see(result.locator("pre.value-json")).to_contain_text('"unit": "km"')
    trace = result.locator("code.trace-id").inner_text()
    assert re.fullmatch(r"[0-9a-f]{16,}", trace), trace
    # a tab per front, each with the status and body that front would have answered
    fronts = served.api(ADA_KEY, "/me")["fronts"]
    see(result.locator(".tab")).to_have_count(len(fronts))
    for front in fronts:
        result.locator(f".tab[data-front={front}]").click()
        see(result.locator(".tab-panel")).to_have_attribute("data-front", front)
        see(result.locator(".tab-panel .status-code")).to_have_text("200")
        see(result.locator(".tab-panel pre.answer-body")).to_contain_text("16.09")
    result.locator(".tab[data-front=oxp]").click()
    see(result.locator(".tab-panel pre.answer-body")).to_contain_text('"success": true')
    console.shot("tool")

    # the raw JSON toggle: the form's arguments as one object, edited and called as they are
    page.check("#raw-toggle")
    raw = page.locator("#raw-arguments")
    assert json.loads(raw.input_value()) == {"amount": 10, "unit": "mi", "digits": 2}
    raw.fill('{"amount": 5, "digits": 0}')
    page.click("#call-button")
    see(result.locator("pre.value-json")).to_contain_text('"value": 3')
    page.uncheck("#raw-toggle")  # and back: the form shows what the JSON said
    see(amount).to_have_value("5")
    see(unit.locator("option:checked")).to_have_text("— not set —")  # absent from the JSON: unset

    # arrays and objects are JSON fields; a boolean is a checkbox
    console.go("tool/Units_Label")
    see(page.locator(".tool-head h1")).to_have_text("Units_Label")
    see(page.locator("[data-arg=names]")).to_have_attribute("data-kind", "json")
    see(page.locator("[data-arg=weights]")).to_have_attribute("data-kind", "json")
    see(page.locator("[data-arg=loud]")).to_have_attribute("type", "checkbox")
    page.fill("[data-arg=names]", '["ada", "bob"]')
    page.fill("[data-arg=weights]", '{"bob": 7}')
    page.check("[data-arg=loud]")
    page.click("#call-button")
    see(result.locator("pre.value-json")).to_contain_text('"BOB:3:7"')
    # invalid arguments come back as the gateway's error, shown as such
    page.fill("[data-arg=names]", '"not a list"')
    page.click("#call-button")
    see(result.locator(".result-head .badge")).to_have_text("error")
    see(result.locator(".result-head code.kind")).to_have_text("invalid_arguments")


def test_a_failed_call_shows_each_fronts_answer_and_lands_in_traffic(console: Console, served: Served) -> None:
    page = console.page
    console.sign_in(ADA_KEY, "ada")
    console.go("tool/Units_Explode")
    # markup in a message must stay text: nothing of it may run or load
    reason = '<img src="/x-injected.png" onerror="window.__injected = 1"> the reactor <b>melted</b>'
    page.fill("[data-arg=reason]", reason)
    page.click("#call-button")
    result = page.locator("#call-result")
    see(result.locator(".result-head .badge")).to_have_text("error")
    see(result.locator(".result-head code.kind")).to_have_text("tool_failed")
    see(result.locator(".error-message")).to_have_text(reason)
    trace = result.locator("code.trace-id").inner_text()
    statuses = {}
    for tab in result.locator(".tab").all():
        tab.click()
        front = tab.get_attribute("data-front")
        statuses[front] = int(result.locator(".tab-panel .status-code").inner_text())
        see(result.locator(".tab-panel pre.answer-body")).to_contain_text("the reactor")
    assert statuses["toolserver"] == 500 and statuses["opentool"] == 200, statuses  # docs/errors.md: tool raised
    console.shot("tool-error")

    console.go("traffic")
    failures = page.locator("table.failures tbody tr")
    mine = failures.filter(has_text=trace)
    see(mine).to_have_count(1)
    see(mine).to_contain_text("tool_failed")
    see(mine).to_contain_text("console")  # the front
    see(mine).to_contain_text("Units_Explode")
    see(mine).to_contain_text("ada")  # an admin sees whose failure it was
    see(mine.locator(".message")).to_have_text(reason)
    see(failures.filter(has_text="Math_Divide")).to_have_count(1)  # the seeded OXP call that failed
    # totals, charts and the breakdowns by front, backend and tool
    see(page.locator(".tile").first).to_contain_text("Calls")
    see(page.locator("svg.chart")).to_have_count(2)
    assert page.locator("svg.chart rect.fill-err").count() >= 1
    assert page.locator("svg.chart path.line-p99").count() + page.locator("svg.chart circle.dot-p99").count() >= 1
    for front in ("console", "opentool", "oxp"):
        see(page.locator("table.series-front tbody tr").filter(has_text=front)).to_have_count(1)
    see(page.locator("table.series-backend tbody tr").filter(has_text="units")).to_have_count(1)
    see(page.locator("table.series-tool tbody tr").filter(has_text="Units_Explode")).to_contain_text("1")
    for dimension in ("front", "backend", "tool"):  # each row: its calls and its latency per minute, as charts
        rows = page.locator(f"table.series-{dimension} tbody tr.series-row")
        assert rows.count() >= 1
        for index in range(rows.count()):
            row = rows.nth(index)
            assert row.locator("svg.spark:not(.spark-latency) rect.fill-ok").count() >= 1, dimension
            drawn = row.locator("svg.spark-latency .lat-p50").count(), row.locator("svg.spark-latency .lat-p99").count()
            assert drawn == (1, 1), (dimension, index, drawn)
    see(page.locator(".tile.in-flight")).to_contain_text("In flight")
    console.shot("traffic")

    assert page.evaluate("window.__injected") is None
    assert page.locator("img[src='/x-injected.png']").count() == 0
    assert not [url for url in console.requests if "x-injected" in url]


def test_backends_and_state_show_replicas_backends_sessions_and_a_refused_reload(
    console: Console, served: Served
) -> None:
    page = console.page
    # a reload the gateway refuses (a module that is not there), then one it applies
    served.config.write_text(served.render(module="no_such_console_module:toolkit"))
    served.process.send_signal(signal.SIGHUP)
    until(lambda: any(not r["ok"] for r in served.api(ADA_KEY, "/state")["config"]["reloads"]), "a refused reload")
    served.config.write_text(served.render(timeout=45))
    served.process.send_signal(signal.SIGHUP)
    until(lambda: served.api(ADA_KEY, "/state")["config"]["generation"] > 1, "an applied reload")

    console.sign_in(ADA_KEY, "ada")
    console.go("backends")
    replica = page.locator("section.replica").first
    see(replica.locator("h2")).to_contain_text("this one")
    for name, kind in (("units", "python"), ("math", "python"), ("shop", "opentool")):
        row = replica.locator("tbody tr").filter(has=page.locator("td:first-child", has_text=re.compile(f"^{name}$")))
        see(row).to_have_count(1)
        see(row).to_contain_text(kind)
        see(row.locator(".badge-ok").first).to_have_text("up")
    units = replica.locator("tbody tr").filter(has=page.locator("td:first-child", has_text=re.compile("^units$")))
    see(units.locator("td").nth(3)).to_have_text("3")  # its tools
    assert int(units.locator("td").nth(6).inner_text()) >= 3  # calls in the window, with their p50/p99
    see(units.locator("td").nth(9)).not_to_have_text("–")
    console.shot("backends")

    console.go("state")
    see(page.locator(".generation")).to_have_text(re.compile(r"^[2-9]$"))  # the file watcher may reload too
    failed = page.locator("tr.reload-failed")
    see(failed.first).to_contain_text("failed")
    see(failed.first.locator("pre.reload-message")).to_contain_text("no_such_console_module")
    see(
        page.locator("table.grid").filter(has_text="Principal").locator("tbody tr").filter(has_text="mcp")
    ).to_contain_text("ada")
    replica = page.locator("tr.replica-row")
    see(replica).to_have_count(1)
    see(replica).to_contain_text("this one")
    see(replica.locator(".lease")).to_contain_text("renewed")  # its lease in the store, and its expiry
    see(replica.locator(".lease")).to_contain_text("expires")
    see(replica).to_contain_text("reload")  # its own configuration: the refused reloads counted
    console.shot("state")


def test_a_changed_upstream_tool_is_shown_side_by_side_and_approved(console: Console, served: Served) -> None:
    page = console.page
    write(served.upstream_document, CHANGED)  # the rug pull: found at the next discovery (every second)

    def quarantined() -> bool:
        tools = served.api(ADA_KEY, "/tools")["tools"]
        return any(t["name"] == "Shop_lookup" and t["quarantined"] for t in tools)

    until(quarantined, "Shop_lookup quarantined")
    console.sign_in(ADA_KEY, "ada")
    row = page.locator("table.catalog tbody tr").filter(has_text="Shop_lookup")
    see(row.locator(".badge-error")).to_have_text("quarantined")

    console.go("pins")
    pin_row = page.locator("tr.pin-row").filter(has_text="shop/")
    see(pin_row.filter(has_text="shop/Shop_lookup")).to_contain_text("pending")
    see(pin_row.filter(has_text="shop/Shop_steady")).to_contain_text("approved")
    pin_row.filter(has_text="shop/Shop_lookup").locator("button").click()
    see(page.locator(".pin-detail pre.udiff")).to_contain_text("id_rsa")
    page.evaluate("window.scrollTo(0, 0)")  # the list, then the detail below it
    console.shot("pins")

    console.go("tool/Shop_lookup")
    block = page.locator("section.pin-block")
    see(block.locator("h2 .badge").first).to_have_text("pending")
    see(block).to_contain_text("description")  # a changed field
    see(block.locator("td.del").first).to_contain_text("Look up a product by its id")
    see(block.locator("td.ins").filter(has_text="id_rsa")).to_have_count(1)
    see(block.locator("td.ins").filter(has_text='"note"')).to_have_count(1)
    block.scroll_into_view_if_needed()
    console.shot("tool-pin")

    block.locator("button.approve").click()
    see(page.locator("section.pin-block h2 .badge").first).to_have_text("approved")
    see(page.locator("section.pin-block button.approve")).to_be_disabled()

    def served_again() -> bool:
        return not quarantined()

    until(served_again, "Shop_lookup served again")
    console.go("catalog")
    see(page.locator("table.catalog tbody tr").filter(has_text="Shop_lookup").locator(".badge-error")).to_have_count(0)


def test_a_non_admin_sees_no_admin_content_and_only_its_own_failures(console: Console, served: Served) -> None:
    page = console.page
    secret = "ada-only-failure-5b1e"
    ada = {"Authorization": f"Bearer {ADA_KEY}"}
    httpx.post(
        f"{served.base}/tools/call", json={"tool_id": "Units.Explode", "input": {"reason": secret}}, headers=ada
    ).raise_for_status()

    console.sign_in(BOB_KEY, "bob")
    see(page.locator(".top .badge-admin")).to_have_count(0)
    see(page.locator(".nav a")).to_have_text(["Catalog", "Backends", "Traffic", "State"])
    console.go("pins")
    see(page.locator(".view")).to_contain_text("admins only")
    see(page.locator("table")).to_have_count(0)

    console.go("tool/Units_Convert")
    see(page.locator(".tool-head h1")).to_have_text("Units_Convert")
    see(page.locator("section.pin-block")).to_have_count(0)

    console.go("tool/Units_Explode")
    page.fill("[data-arg=reason]", "bob's own failure")
    page.click("#call-button")
    see(page.locator("#call-result .result-head .badge")).to_have_text("error")
    bobs_trace = page.locator("#call-result code.trace-id").inner_text()

    console.go("traffic")
    failures = page.locator("table.failures tbody tr")
    see(failures.filter(has_text=bobs_trace)).to_have_count(1)
    see(failures).to_have_count(1)  # ada's failures (the seeded one, the secret) are not bob's to see
    see(page.locator(".view")).not_to_contain_text(secret)
    see(page.locator("table.failures thead")).not_to_contain_text("Principal")
    see(page.locator("table.series-front tbody tr")).to_have_count(1)  # his own calls: the console's only
    console.shot("traffic-non-admin")

    console.go("state")
    see(page.locator("section.panel").filter(has_text="Sessions")).not_to_contain_text("ada")
    for path in ("/pins", "/pins/shop%2FShop_lookup"):
        response = httpx.get(
            f"{served.base}/console/api{path}", headers={"Authorization": f"Bearer {BOB_KEY}"}, timeout=10
        )
        assert response.status_code == 404
