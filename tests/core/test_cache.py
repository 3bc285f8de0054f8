"""Result caching: opt-in per backend and tool, keyed by tool, version and arguments, never for side effects."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from gateway.cache import MISS, CacheRule, ResultCache
from gateway.config import parse_config
from gateway.errors import ConfigError
from gateway.model import Requirements, ToolSpec
from gateway.settings import CacheSettings
from tests.support import BUILTIN_BACKENDS, asgi_client

PURE = ToolSpec(
    toolkit="Kit", name="Pure", version="1.0.0", description="", input_schema={}, backend="b", side_effects=False
)
EFFECT = dataclasses.replace(PURE, name="Effect", side_effects=True)
OTHER = dataclasses.replace(PURE, name="Other")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cache_of(clock: Clock | None = None, **rule: Any) -> ResultCache:
    return ResultCache({"b": CacheRule.from_settings(CacheSettings(**rule))}, timer=clock or Clock())


def value_of(hit: Any) -> Any:
    """A hit's value (a hit is (value, upstream answer)); MISS as it is."""
    return hit if hit is MISS else hit[0]


def test_hit_needs_same_tool_version_and_arguments() -> None:
    cache = cache_of(ttl_s=60)
    assert cache.get(PURE, {"a": 1}) is MISS
    cache.put(PURE, {"a": 1, "b": [1, 2]}, {"sum": 3})
    assert value_of(cache.get(PURE, {"b": [1, 2], "a": 1})) == {"sum": 3}  # member order does not matter
    assert cache.get(PURE, {"a": 1, "b": [2, 1]}) is MISS
    assert cache.get(dataclasses.replace(PURE, version="2.0.0"), {"a": 1, "b": [1, 2]}) is MISS
    assert cache.get(OTHER, {"a": 1, "b": [1, 2]}) is MISS


def test_entries_expire_after_their_ttl() -> None:
    clock = Clock()
    cache = cache_of(clock, ttl_s=10)
    cache.put(PURE, {}, "v")
    clock.now += 9.9
    assert value_of(cache.get(PURE, {})) == "v"
    clock.now += 0.2
    assert cache.get(PURE, {}) is MISS


def test_tools_with_side_effects_are_never_cached() -> None:
    cache = cache_of(ttl_s=60, tools={"Effect": 60})
    cache.put(EFFECT, {}, "v")
    assert cache.ttl_for(EFFECT) is None and cache.get(EFFECT, {}) is MISS


def test_tools_with_requirements_are_never_cached() -> None:
    for needs in (Requirements(user_id=True), Requirements(secrets=("KEY",))):
        personal = dataclasses.replace(PURE, name="Personal", requirements=needs)
        cache = cache_of(ttl_s=60, tools={"Personal": 60})
        cache.put(personal, {}, "alice's data")
        assert cache.get(personal, {}) is MISS
        assert "has requirements" in cache.problems([personal])[0]


def test_per_tool_ttl_overrides_and_zero_turns_off() -> None:
    cache = cache_of(ttl_s=60, tools={"Kit.Other": 5, "Pure": 0})
    assert cache.ttl_for(OTHER) == 5
    assert cache.ttl_for(PURE) is None
    only_listed = cache_of(tools={"Oth*": 7})
    assert only_listed.ttl_for(OTHER) == 7 and only_listed.ttl_for(PURE) is None
    assert cache_of(ttl_s=1).ttl_for(dataclasses.replace(PURE, backend="elsewhere")) is None


def test_the_store_is_bounded_and_evicts_the_least_recently_used() -> None:
    cache = cache_of(ttl_s=60, max_entries=2)
    cache.put(PURE, {"n": 1}, 1)
    cache.put(PURE, {"n": 2}, 2)
    assert value_of(cache.get(PURE, {"n": 1})) == 1  # now the most recently used
    cache.put(PURE, {"n": 3}, 3)
    assert cache.get(PURE, {"n": 2}) is MISS
    assert (value_of(cache.get(PURE, {"n": 1})), value_of(cache.get(PURE, {"n": 3}))) == (1, 3)


def test_a_caller_cannot_change_what_the_next_caller_gets() -> None:
    cache = cache_of(ttl_s=60)
    cache.put(PURE, {}, {"items": [1]})
    first = value_of(cache.get(PURE, {}))
    first["items"].append(2)
    assert value_of(cache.get(PURE, {})) == {"items": [1]}


def test_values_or_arguments_that_are_not_json_are_not_cached() -> None:
    cache = cache_of(ttl_s=60)
    cache.put(PURE, {}, {1, 2})
    assert cache.get(PURE, {}) is MISS
    cache.put(PURE, {"x": object()}, 1)
    assert cache.get(PURE, {"x": object()}) is MISS


def test_problems_name_dead_patterns_and_side_effect_tools() -> None:
    cache = cache_of(tools={"Nothing*": 5, "Effect": 5, "Eff*": 5, "Pure": 5})
    assert cache.problems([PURE, EFFECT]) == [
        "backend 'b': cache.tools['Nothing*'] matches no tool of this backend",
        "backend 'b': cache.tools['Effect']: tool Kit.Effect declares side effects; its results are never cached",
    ]
    assert cache.problems([], backends=set()) == []  # backend 'b' is down: its rules wait until it is up
    assert len(cache.problems([], backends={"b"})) == 4  # up but without tools: every rule matches nothing


PROBE = '  - name: probe\n    kind: python\n    module: "tests.jsonrpc.probe:toolkit"\n'


def execute(tool: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tool.execute",
        "params": {"tool": tool, "parameters": arguments},
    }


async def test_cached_answers_through_the_gateway() -> None:
    config = BUILTIN_BACKENDS + PROBE + "    cache: {ttl_s: 60}\n"
    async with asgi_client(config) as client:
        first = (await client.post("/rpc", json=execute("Probe_Count", {"key": "k"}))).json()["result"]
        again = (await client.post("/rpc", json=execute("Probe_Count", {"key": "k"}))).json()["result"]
        other = (await client.post("/rpc", json=execute("Probe_Count", {"key": "j"}))).json()["result"]
        effect1 = (await client.post("/rpc", json=execute("Probe_Effect", {"key": "k"}))).json()["result"]
        effect2 = (await client.post("/rpc", json=execute("Probe_Effect", {"key": "k"}))).json()["result"]
        opentool = await client.post(
            "/opentool/call", json={"jsonrpc": "2.0", "id": "o", "method": "Probe_Count", "params": {"key": "k"}}
        )
    assert first["metadata"]["cached"] is False and again["metadata"]["cached"] is True
    assert again["metadata"]["value"] == first["metadata"]["value"]  # the tool did not run again
    assert again["metadata"]["callId"] != first["metadata"]["callId"]
    assert other["metadata"]["value"]["run"] != first["metadata"]["value"]["run"]
    assert effect2["metadata"]["value"]["run"] == effect1["metadata"]["value"]["run"] + 1
    assert effect2["metadata"]["cached"] is False
    assert opentool.json()["result"] == first["metadata"]["value"]  # the cache is shared by every front


async def test_failures_are_not_cached() -> None:
    config = BUILTIN_BACKENDS + PROBE + "    cache: {ttl_s: 60}\n"
    key = uuid.uuid4().hex
    async with asgi_client(config) as client:
        failed = (await client.post("/rpc", json=execute("Probe_Flaky", {"key": key}))).json()
        ran = (await client.post("/rpc", json=execute("Probe_Flaky", {"key": key}))).json()
        cached = (await client.post("/rpc", json=execute("Probe_Flaky", {"key": key}))).json()
    assert failed["error"]["code"] == -32000
    assert ran["result"]["metadata"]["cached"] is False
    assert cached["result"]["metadata"]["cached"] is True
    assert cached["result"]["metadata"]["value"] == ran["result"]["metadata"]["value"]


async def test_a_value_its_backend_calls_not_cacheable_is_not_cached() -> None:
    """An MCP backend clears `cacheable` when the value came of the caller's answers, or is a task handle."""
    config = BUILTIN_BACKENDS + PROBE + "    cache: {ttl_s: 60}\n"
    async with asgi_client(config) as client:
        first = (await client.post("/rpc", json=execute("Probe_Interim", {"key": "k"}))).json()["result"]
        again = (await client.post("/rpc", json=execute("Probe_Interim", {"key": "k"}))).json()["result"]
    assert again["metadata"]["cached"] is False
    assert again["metadata"]["value"]["run"] == first["metadata"]["value"]["run"] + 1  # it ran again


async def test_without_a_cache_block_nothing_is_cached() -> None:
    async with asgi_client(BUILTIN_BACKENDS + PROBE) as client:
        a = (await client.post("/rpc", json=execute("Probe_Count", {"key": "k"}))).json()["result"]
        b = (await client.post("/rpc", json=execute("Probe_Count", {"key": "k"}))).json()["result"]
    assert b["metadata"]["value"]["run"] == a["metadata"]["value"]["run"] + 1 and not b["metadata"]["cached"]


async def test_naming_a_tool_with_side_effects_is_a_startup_error() -> None:
    config = BUILTIN_BACKENDS + PROBE + "    cache: {tools: {Effect: 30, Typo: 5}}\n"
    with pytest.raises(ConfigError) as info:
        async with asgi_client(config):
            pass
    assert info.value.problems == [
        "backend 'probe': cache.tools['Effect']: tool Probe.Effect declares side effects; its results are never cached",
        "backend 'probe': cache.tools['Typo'] matches no tool of this backend",
    ]


def test_schema_of_the_cache_block() -> None:
    base = "backends:\n  - {name: m, kind: python, module: 'adapters.python.toolkits.arithmetic:toolkit', cache: %s}\n"
    parse_config(base % "{ttl_s: 5, max_entries: 10}", "g.yaml", env={})
    for bad, needle in (
        ("{}", "is not valid under any of the given schemas"),
        ("{ttl_s: 0}", "less than or equal to the minimum"),
        ("{ttl_s: 5, size: 3}", "unknown key 'size'"),
        ("{tools: {Add: -1}}", "less than the minimum"),
    ):
        with pytest.raises(ConfigError) as info:
            parse_config(base % bad, "g.yaml", env={})
        assert needle in "\n".join(info.value.problems), (bad, info.value.problems)
