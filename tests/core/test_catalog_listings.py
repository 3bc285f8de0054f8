"""Listings are worked out once per catalog and permission view, and never outlive their catalog.

The catalog sorts and groups its tools once and keeps each permission view's tools;
`FrontServices.listing` keeps each front's encoded listing per snapshot and view. Both
must follow every change: a reload (SIGHUP) and a rediscovery (an upstream that gained a
tool) show the new tools on every front, and a caller with other permissions never sees
another's listing. Real gateways, real HTTP.
"""

from __future__ import annotations

import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.catalog import BoundedCache, Catalog
from gateway.model import Principal, ToolSpec
from tests.isolation.processes import wait_until
from tests.support import served_gateway

FULL_KEY = "full-access-key"
MATH_KEY = "math-only-key"
FRONTS = """
fronts:
  opentool: {prefix: /opentool}
  oxp: {prefix: ""}
  toolserver: {prefix: ""}
  jsonrpc: {path: /rpc}
"""
KEYS = f"""
auth:
  api_keys:
    - {{name: full, key: {FULL_KEY}}}
    - {{name: math-only, key: {MATH_KEY}, tools: ["Math_*"]}}
"""
MATH = "  - {name: math, kind: python, module: 'adapters.python.toolkits.arithmetic:toolkit'}\n"
TEXT = "  - {name: text, kind: python, module: 'adapters.python.toolkits.text:toolkit'}\n"


def spec(toolkit: str, name: str, version: str = "1.0.0", *, visible: bool = True) -> ToolSpec:
    return ToolSpec(toolkit=toolkit, name=name, version=version, description="d", input_schema={}, visible=visible)


# ---- the catalog's own views ----


def test_a_permission_view_is_worked_out_once_and_holds_only_its_tools() -> None:
    catalog = Catalog(
        [
            spec("Math", "Add"),
            spec("Math", "Add", "2.0.0"),
            spec("Text", "Count"),
            spec("Math", "Secret", visible=False),
        ]
    )
    math_only = Principal(name="a", tools=("Math_*",))
    same_globs = Principal(name="b", tools=("Math_*",))
    listed = catalog.listed(math_only)
    assert [s.versioned_id for s in listed] == ["Math.Add@2.0.0"]  # newest only, hidden never listed
    assert catalog.listed(same_globs) is listed  # decided by the globs alone: shared
    assert [s.versioned_id for s in catalog.listed(math_only, latest_only=False)] == [
        "Math.Add@2.0.0",
        "Math.Add@1.0.0",
    ]
    assert [s.flat_name for s in catalog.listed(None)] == ["Math_Add", "Text_Count"]
    assert catalog.listed(Principal(name="none", tools=())) == ()
    assert catalog.has_toolkit("Math") and not catalog.has_toolkit("Nope")
    assert catalog.has_toolkit("Math", visible_only=True)


def test_toolkits_keep_their_orders() -> None:
    # "AB_x" sorts before "A_y" (flat names), "A" before "AB" (toolkit names).
    catalog = Catalog([spec("A", "y"), spec("AB", "x")])
    assert list(catalog.listed_toolkits(None)) == ["AB", "A"]  # as listed: first appearance in flat-name order
    assert list(catalog.toolkits()) == ["A", "AB"]  # sorted by name, as before


def test_the_bounded_cache_keeps_its_bounds() -> None:
    cache: BoundedCache[bytes] = BoundedCache(max_entries=2, max_weight=10)
    built: list[str] = []

    def build(key: str, size: int) -> bytes:
        return cache.get(key, lambda: built.append(key) or b"x" * size, len)

    build("a", 4)
    build("a", 4)
    assert built == ["a"]  # the second is a lookup
    build("b", 4)
    build("c", 4)  # a third entry: the least recently used ("a") goes
    assert len(cache) == 2 and cache.weight == 8
    build("a", 4)
    assert built == ["a", "b", "c", "a"]
    build("d", 9)  # 9 + 4 > 10: only the newest stays
    assert len(cache) == 1 and cache.weight == 9
    build("huge", 11)  # bigger than the whole cache: answered, never kept
    build("huge", 11)
    assert built[-2:] == ["huge", "huge"] and cache.weight == 9


# ---- every front's listing through a real gateway ----


def listings(base: str, key: str) -> dict[str, set[str]]:
    """The flat names each front lists for this key (and its raw bytes, to compare repeats)."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=20) as client:
        oxp = client.get("/tools")
        load = client.get("/opentool/load")
        assert client.post("/get_cookie").status_code == 200
        node = client.post("/get_available_tools")
        rpc = client.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.list", "params": {}})
    for response in (oxp, load, node, rpc):
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
    return {
        "oxp": {item["name"].replace(".", "_", 1) for item in oxp.json()["items"]},
        "opentool": {f["name"] for f in load.json()["functions"]},
        "toolserver": set(node.json()["available_tools"]),
        "toolserver envs": {env["name"] for env in node.json()["available_envs"]},
        "jsonrpc": {t["id"] for t in rpc.json()["result"]["tools"]},
        "raw": {oxp.text, load.text, node.text, rpc.text},
    }


def all_list(base: str, key: str, tool: str) -> bool:
    """Every front lists `tool` (a new catalog may arrive between the requests of one look: no assertion here)."""
    found = listings(base, key)
    return all(tool in found[front] for front in ("oxp", "opentool", "toolserver", "jsonrpc"))


def names(found: dict[str, set[str]]) -> set[str]:
    """The tools every front agrees on (each must list the same)."""
    fronts = [found[k] for k in ("oxp", "opentool", "toolserver", "jsonrpc")]
    assert all(f == fronts[0] for f in fronts), found
    return fronts[0]


@pytest.fixture
def gateway_file(tmp_path: Path) -> Path:
    return tmp_path / "gateway.yaml"


def write(path: Path, *backends: str, extra: str = "") -> None:
    path.write_text(textwrap.dedent(FRONTS + KEYS + extra) + "backends:\n" + "".join(backends))


def test_a_reload_shows_new_tools_on_every_front_and_each_key_its_own(gateway_file: Path) -> None:
    write(gateway_file, MATH)
    with served_gateway(gateway_file, extra_args=["--no-reload"]) as (base, process):
        full, math = listings(base, FULL_KEY), listings(base, MATH_KEY)
        assert "Math_Add" in names(full) and not any(n.startswith("Text_") for n in names(full))
        assert names(math) == {n for n in names(full) if n.startswith("Math_")}
        assert listings(base, FULL_KEY)["raw"] == full["raw"]  # served again: the same bytes
        assert listings(base, MATH_KEY)["raw"] == math["raw"]  # ... and not the other key's

        write(gateway_file, MATH, TEXT)
        process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: all_list(base, FULL_KEY, "Text_WordCount"), timeout=20)
        full_after, math_after = listings(base, FULL_KEY), listings(base, MATH_KEY)
        assert "Text_WordCount" in names(full_after) and "Text" in full_after["toolserver envs"]
        assert names(math_after) == names(math)  # the restricted key still sees only its own tools
        assert "Text" not in math_after["toolserver envs"]


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[tuple[str, Any, Path]]:
    """A real gateway serving OXP, to be fronted by another; reloadable by SIGHUP."""
    path = tmp_path / "upstream.yaml"
    path.write_text(textwrap.dedent(FRONTS) + "backends:\n" + MATH)
    with served_gateway(path, extra_args=["--no-reload"]) as (base, process):
        yield base, process, path


def test_a_rediscovery_shows_an_upstreams_new_tools(upstream: tuple[str, Any, Path], gateway_file: Path) -> None:
    upstream_base, upstream_process, upstream_path = upstream
    inner = f"  - {{name: inner, kind: oxp, url: '{upstream_base}'}}\n"
    write(gateway_file, inner, extra="discovery: {interval_s: 0.2}\n")
    with served_gateway(gateway_file, extra_args=["--no-reload"]) as (base, _process):
        before = listings(base, FULL_KEY)
        assert "Math_Add" in names(before) and "Text_WordCount" not in names(before)
        restricted = listings(base, MATH_KEY)

        upstream_path.write_text(textwrap.dedent(FRONTS) + "backends:\n" + MATH + TEXT)
        upstream_process.send_signal(signal.SIGHUP)
        # No reload here: only the rediscovery (every 0.2 s) brings a new catalog.
        assert wait_until(lambda: all_list(base, FULL_KEY, "Text_WordCount"), timeout=30)
        assert names(listings(base, MATH_KEY)) == names(restricted)
