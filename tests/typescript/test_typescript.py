"""TypeScript tools: real Node.js sidecars, called through dispatch and the OpenTool front."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from gateway.config import parse_config
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import CallContext
from gateway.runtime import Gateway
from tests.isolation.processes import children_of, eventually, running, wait_until
from tests.support import DEFAULT_CONFIG, ROOT, asgi_client, call_tool, free_port, started_gateway, wait_for_http

TOOLS = ROOT / "tests" / "typescript" / "tools"
URL_TOOLKIT = ROOT / "config" / "typescript" / "url.ts"
CONFIG = f"""
backends:
  - {{name: bad, kind: typescript, modules: ["{TOOLS}"], pool_size: 1, cancel_grace_s: 2}}
  - {{name: url, kind: typescript, modules: ["{URL_TOOLKIT}"]}}
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
"""

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = await started_gateway(CONFIG)
    try:
        yield gw
    finally:
        await gw.close()


async def sidecar_pid(gw: Gateway) -> int:
    outcome = await call_tool(gw, "BadTs_Pid")
    assert outcome.ok, outcome.error
    return int(outcome.value)


async def test_tools_are_discovered_with_schemas_from_zod(gateway: Gateway) -> None:
    specs = {s.flat_name: s for s in gateway.catalog.latest()}
    parse = specs["Url_Parse"]
    assert parse.language == "typescript" and parse.backend == "url" and not parse.side_effects
    assert parse.input_schema["required"] == ["url"]
    assert parse.input_schema["properties"]["base"]["type"] == "string"
    assert "$schema" not in parse.input_schema
    assert parse.output_schema is not None and "query" in parse.output_schema["properties"]
    assert specs["Url_SetQuery"].input_schema["required"] == ["url"]  # fields with defaults are optional
    plain = specs["Plain_Add"]  # a plain JavaScript module, toolkit named after its file
    assert (plain.version, plain.language, plain.side_effects) == ("2.1.0", "typescript", False)
    assert specs["BadTs_Echo"].side_effects  # not declared: assumed


async def test_calls_reach_the_tool_with_their_context(gateway: Gateway) -> None:
    context = CallContext(session_id="s-1", message_id="m-1")
    outcome = await call_tool(gateway, "BadTs_Echo", {"text": "ab", "times": 2}, context=context)
    assert outcome.value == {
        "text": "abab",
        "sessionId": "s-1",
        "messageId": "m-1",
        "callId": context.call_id,
        "hasTimeout": True,
    }  # console.log inside the tool did not disturb the protocol
    assert (await call_tool(gateway, "Plain_Add", {"a": 2, "b": 40})).value == 42


async def test_concurrent_calls_share_one_pooled_sidecar(gateway: Gateway) -> None:
    outcomes = await asyncio.gather(*(call_tool(gateway, "BadTs_Echo", {"text": str(i)}) for i in range(8)))
    assert [o.value["text"] for o in outcomes] == [str(i) for i in range(8)]
    assert len(gateway.backends["bad"].pids) == 1  # type: ignore[attr-defined]


async def test_a_tool_that_throws(gateway: Gateway) -> None:
    outcome = await call_tool(gateway, "BadTs_Throws")
    assert outcome.error is not None
    assert (outcome.error.kind, outcome.error.message) == (ErrorKind.TOOL_FAILED, "the tool refused")
    assert outcome.error.can_retry and outcome.error.retry_after_ms == 250
    assert outcome.error.additional_prompt_content == "Try again later."


async def test_a_tool_that_never_resolves_is_aborted_at_the_deadline(gateway: Gateway) -> None:
    before = await sidecar_pid(gateway)
    context = CallContext()

    outcome = await call_tool(gateway, "BadTs_Hangs", context=context, timeout=0.5)

    assert outcome.error is not None and outcome.error.kind is ErrorKind.DEADLINE
    aborted = await call_tool(gateway, "BadTs_Aborted")
    assert aborted.value == [context.call_id]  # the tool's AbortSignal fired
    assert await sidecar_pid(gateway) == before  # it let go, so its sidecar lives on


async def test_the_sidecar_aborts_by_itself_if_the_cancellation_never_comes(gateway: Gateway) -> None:
    """Called without dispatch's timer: the deadline still reaches the tool, as its own AbortSignal."""
    spec = gateway.catalog.resolve("BadTs_Hangs", None)
    context = CallContext(deadline=time.monotonic() + 0.2)
    with pytest.raises(GatewayError) as raised:
        await asyncio.wait_for(gateway.backends["bad"].call(spec, {}, context), 10)
    assert raised.value.failure.kind is ErrorKind.DEADLINE
    assert "deadline" in raised.value.failure.message
    assert (await call_tool(gateway, "BadTs_Aborted")).value == [context.call_id]


async def test_a_tool_that_blocks_the_event_loop_gets_its_sidecar_killed(gateway: Gateway) -> None:
    before = await sidecar_pid(gateway)

    outcome = await call_tool(gateway, "BadTs_Spin", timeout=0.5)

    assert outcome.error is not None and outcome.error.kind is ErrorKind.DEADLINE
    assert await eventually(lambda: not running(before)), "the blocked sidecar is still running"
    after = await sidecar_pid(gateway)  # a fresh sidecar serves the next call
    assert after != before
    assert (await call_tool(gateway, "Math_Add", {"a": 1, "b": 1})).value == 2


async def test_process_exit_in_a_tool_fails_that_call_and_the_sidecar_is_restarted(gateway: Gateway) -> None:
    before = await sidecar_pid(gateway)

    outcome = await call_tool(gateway, "BadTs_Exit")

    assert outcome.error is not None and outcome.error.kind is ErrorKind.TOOL_FAILED
    assert "exit status 3" in outcome.error.message and outcome.error.can_retry
    assert await eventually(lambda: not running(before))
    assert await sidecar_pid(gateway) != before
    assert (await call_tool(gateway, "Url_Resolve", {"base": "https://a.org/x/", "reference": "y"})).ok


@pytest.mark.parametrize(
    ("what", "expected"),
    [
        ("function", "result.callback is a function"),
        ("bigint", "result.big is a bigint"),
        ("map", "result is a Map"),
        ("nan", "result[1] is NaN"),
        ("cycle", "result.self refers back to itself"),
    ],
)
async def test_a_result_that_is_not_json(gateway: Gateway, what: str, expected: str) -> None:
    outcome = await call_tool(gateway, "BadTs_NotJson", {"what": what})
    assert outcome.error is not None and outcome.error.kind is ErrorKind.TOOL_FAILED
    assert outcome.error.message.startswith("Tool BadTs_NotJson returned something that is not JSON: ")
    assert expected in outcome.error.message


async def test_a_result_that_breaks_its_returns_schema(gateway: Gateway) -> None:
    outcome = await call_tool(gateway, "BadTs_WrongResult")
    assert outcome.error is not None and outcome.error.kind is ErrorKind.TOOL_FAILED
    assert "does not match its `returns` schema" in outcome.error.message


async def test_zod_checks_beyond_json_schema_are_invalid_arguments(gateway: Gateway) -> None:
    assert (await call_tool(gateway, "BadTs_Half", {"n": 8})).value == 4
    outcome = await call_tool(gateway, "BadTs_Half", {"n": 3})
    assert outcome.error is not None and outcome.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert outcome.error.parameter_errors == {"n": "must be even"}


async def test_an_exception_outside_the_tool_still_gets_an_answer(gateway: Gateway) -> None:
    outcome = await call_tool(gateway, "BadTs_BrokenCheck", {"n": 1})
    assert outcome.error is not None and outcome.error.kind is ErrorKind.INTERNAL
    assert "the check crashed" in outcome.error.message
    assert (await call_tool(gateway, "BadTs_Half", {"n": 2})).value == 1


async def test_closing_the_gateway_stops_every_sidecar() -> None:
    gw = await started_gateway(CONFIG)
    pids = [*gw.backends["bad"].pids, *gw.backends["url"].pids]  # type: ignore[attr-defined]
    assert len(pids) == 2 and all(running(pid) for pid in pids)
    await gw.close()
    assert not any(running(pid) for pid in pids)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("export const x = 1;\n", "exports no tool"),
        (
            'export default { id: "t", description: "", parameters: { type: "object" }, execute: () => 1 };\n',
            "`parameters` must be a zod schema",
        ),
        (
            'import { z } from "zod";\nexport default { id: "t", parameters: z.string(), execute: () => 1 };\n',
            "`parameters` must be a z.object",
        ),
        ("export default {;\n", "cannot be loaded"),
    ],
)
async def test_broken_tool_modules_are_configuration_errors(tmp_path: Path, source: str, expected: str) -> None:
    module = tmp_path / "broken.mjs"
    module.write_text(source)  # outside the sidecar's folder: `zod` still resolves
    gw = Gateway(parse_config(f'backends:\n  - {{name: b, kind: typescript, modules: ["{module}"]}}\n'))
    with pytest.raises(ConfigError) as raised:
        await gw.start()
    assert expected in str(raised.value) and str(module) in str(raised.value)


async def test_missing_modules_and_node_are_configuration_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.ts"
    gw = Gateway(
        parse_config(f'backends:\n  - {{name: b, kind: typescript, modules: ["{missing}"], node: /nonexistent/node}}\n')
    )
    with pytest.raises(ConfigError) as raised:
        await gw.start()
    message = str(raised.value)
    assert "nowhere.ts' not found" in message and "Node.js ('/nonexistent/node') not found" in message


async def test_the_url_toolkit_from_the_default_configuration() -> None:
    async with asgi_client(DEFAULT_CONFIG.read_text()) as client:

        async def opentool(method: str, params: dict) -> dict:
            answer = await client.post(
                "/opentool/call", json={"jsonrpc": "2.0", "method": method, "params": params, "id": "1"}
            )
            return answer.json()

        parsed = await opentool("Url_Parse", {"url": "https://user@Example.COM:8443/a/../b?x=1&x=2&y#top"})
        assert parsed["result"] == {
            "href": "https://user@example.com:8443/b?x=1&x=2&y#top",
            "origin": "https://example.com:8443",
            "protocol": "https",
            "username": "user",
            "password": "",
            "hostname": "example.com",
            "port": 8443,
            "pathname": "/b",
            "search": "?x=1&x=2&y",
            "query": {"x": ["1", "2"], "y": [""]},
            "hash": "#top",
        }
        resolved = await opentool("Url_Resolve", {"base": "https://a.org/docs/guide/", "reference": "../api?v=2"})
        assert resolved["result"] == {"href": "https://a.org/docs/api?v=2"}
        change = {"url": "https://a.org/?page=1&debug=1", "set": {"page": "2", "tag": ["a", "b"]}, "remove": ["debug"]}
        edited = await opentool("Url_SetQuery", change)
        assert edited["result"] == {"href": "https://a.org/?page=2&tag=a&tag=b"}
        invalid = await opentool("Url_Parse", {"url": "not a url"})
        assert invalid["error"] is not None and "is not a valid URL" in invalid["error"]["message"]


def test_no_sidecar_outlives_the_gateway_process(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(f'backends:\n  - {{name: url, kind: typescript, modules: ["{URL_TOOLKIT}"]}}\n')
    port = free_port()
    gateway = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_http(f"{base}/healthz", gateway)
        params = {"base": "https://a/", "reference": "b"}
        body = {"jsonrpc": "2.0", "method": "Url_Resolve", "params": params, "id": "1"}
        assert httpx.post(f"{base}/opentool/call", json=body, timeout=10).json()["result"]["href"]
        sidecars = children_of(gateway.pid)
        assert len(sidecars) == 1

        gateway.send_signal(signal.SIGTERM)
        gateway.wait(timeout=15)

        assert wait_until(lambda: not any(running(pid) for pid in sidecars)), "a sidecar outlived the gateway"
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait(timeout=5)


def test_make_installs_the_node_side_on_a_fresh_clone(tmp_path: Path) -> None:
    """Without node_modules, `make test` and `make run` first run `npm ci` in adapters/typescript."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    clone = tmp_path / "clone"
    (clone / "adapters" / "typescript").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, clone / name)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "adapters" / "typescript" / name, clone / "adapters" / "typescript" / name)
    installs = [
        "upstreams/install_arcade.sh",
        "state/install_redis.sh",
        "mcp/install_conformance.sh",
        "oauth/install_auth_server.sh",
        "oauth/auth_server/package.json",
        "oauth/auth_server/package-lock.json",
        "openapi/install_openapi_fixtures.sh",
        "openapi/fixtures/package.json",
        "openapi/fixtures/package-lock.json",
        "console/install_browser.sh",
    ]
    for script in installs:
        (clone / "tests" / script).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "tests" / script, clone / "tests" / script)
    for target in ("test", "run"):
        plan = subprocess.run(["make", "-n", target], cwd=clone, capture_output=True, text=True, timeout=30)
        assert plan.returncode == 0, plan.stderr
        assert "cd adapters/typescript && npm ci" in plan.stdout
