"""The `mcp` backend against the test MCP server over Streamable HTTP on loopback, in both protocol eras."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.mcp import codec
from adapters.mcp.client.backend import McpBackend
from adapters.mcp.client.settings import McpBackendSettings
from gateway.backends import BackendContext
from gateway.errors import ErrorKind, GatewayError
from gateway.model import CallContext, ToolSpec
from tests.mcp.backend.support import SERVER_MODULE, TEST_TOOLS, call, dispatcher_for, http_server, mcp_backend
from tests.support import free_port, refused_port, server_process

ERAS = {"modern": ((), "2026-07-28"), "legacy": (("--legacy-only",), "2025-11-25")}


@pytest.fixture(scope="module", params=sorted(ERAS))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(endpoint, the protocol version the backend must find), once per era."""
    flags, version = ERAS[request.param]
    with http_server(*flags) as url:
        yield url, version


def spec_for(backend: McpBackend, mcp_name: str) -> ToolSpec:
    """A catalog entry for an upstream tool name, as discovery would make it (for tools the server does not list)."""
    entry = {"name": mcp_name, "inputSchema": {"type": "object"}}
    return codec.spec_from_tool(entry, backend=backend.name, toolkit=backend.toolkit, source="test")


async def test_discovery_reads_every_page_and_finds_the_era(
    served: tuple[str, str], events: list[dict[str, Any]]
) -> None:
    url, version = served
    backend = mcp_backend(url=url)
    try:
        specs = await backend.discover()
        assert [s.binding.name for s in specs] == TEST_TOOLS  # six pages of two
        assert {s.flat_name for s in specs} >= {"up_add", "up_echo__text", "up_pair___2e___sum"}
        assert backend.protocol_version == version
        connected = [e for e in events if e["event"] == "mcp_connected"]
        era = "modern" if version == "2026-07-28" else "legacy"
        assert connected and connected[0]["era"] == era and connected[0]["transport"] == "http"
        assert connected[0]["server"] == "toolplex-test-mcp" and connected[0]["server_version"] == "1.4.2"
        add = next(s for s in specs if s.name == "add")
        assert add.output_schema == {
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"],
            "additionalProperties": False,
        }
        assert add.side_effects is False and "idempotent" in add.tags
        pair = next(s for s in specs if s.binding.name == "pair.sum")
        assert pair.input_schema["properties"]["pair"]["prefixItems"] == [{"$ref": "#/$defs/n"}] * 2
    finally:
        await backend.close()


async def test_calls_map_results_and_errors(served: tuple[str, str]) -> None:
    url, _version = served
    backend = mcp_backend(url=url)
    try:
        dispatcher = await dispatcher_for(backend)
        assert (await call(dispatcher, "up_add", {"a": 2, "b": 3.5})).value == {"sum": 5.5}
        assert (await call(dispatcher, "up_echo__text", {"text": "héllo"})).value == "héllo"
        assert (await call(dispatcher, "up_pair___2e___sum", {"pair": [4, 5]})).value == "9"
        picture = (await call(dispatcher, "up_picture")).value
        assert picture["content"][0] == {"type": "text", "text": "one pixel"}
        assert picture["content"][1]["type"] == "image" and picture["content"][1]["mimeType"] == "image/png"

        failed = await call(dispatcher, "up_fail", {"reason": "disk full"})
        assert failed.error is not None and failed.error.kind is ErrorKind.TOOL_FAILED
        assert failed.error.message == "it failed: disk full"

        invalid = await call(dispatcher, "up_pair___2e___sum", {"pair": [1, 2, 3]})  # the 2020-12 schema, applied
        assert invalid.error is not None and invalid.error.kind is ErrorKind.INVALID_ARGUMENTS

        with pytest.raises(GatewayError) as raised:
            await backend.call(spec_for(backend, "grown"), {}, CallContext())  # not listed (yet)
        assert raised.value.failure.kind is ErrorKind.NOT_FOUND
    finally:
        await backend.close()


async def test_the_deadline_ends_a_call_that_is_never_sent_twice(served: tuple[str, str]) -> None:
    url, _version = served
    backend = mcp_backend(url=url)
    try:
        dispatcher = await dispatcher_for(backend)
        before = int((await call(dispatcher, "up_count", {"tool": "slow"})).value)
        slow = await call(dispatcher, "up_slow", {"seconds": 5}, timeout=0.5)
        assert slow.error is not None and slow.error.kind is ErrorKind.DEADLINE
        assert int((await call(dispatcher, "up_count", {"tool": "slow"})).value) == before + 1
        assert (await backend.health()).breaker == "closed"  # one timeout is below the breaker's threshold
    finally:
        await backend.close()


@pytest.mark.parametrize("era", sorted(ERAS))
async def test_list_changed_is_heard_and_the_next_discovery_has_the_tool(era: str) -> None:
    flags, _version = ERAS[era]
    with http_server(*flags) as url:
        backend = mcp_backend(url=url)
        try:
            dispatcher = await dispatcher_for(backend)
            assert not backend.tools_changed.is_set()
            assert (await call(dispatcher, "up_grow")).value == "grown"
            await asyncio.wait_for(backend.tools_changed.wait(), timeout=10)
            dispatcher = await dispatcher_for(backend)
            assert (await call(dispatcher, "up_grown")).value == "hello from grown"
        finally:
            await backend.close()


async def test_max_pages_bounds_a_listing(events: list[dict[str, Any]]) -> None:
    with http_server() as url:
        backend = mcp_backend(url=url, max_pages=2)
        try:
            assert [s.binding.name for s in await backend.discover()] == TEST_TOOLS[:4]
        finally:
            await backend.close()
    assert any(e["event"] == "mcp_tools_list_truncated" and e["pages"] == 2 for e in events)


async def test_an_unreachable_server_is_unavailable_and_opens_the_breaker() -> None:
    url = f"http://127.0.0.1:{refused_port()}/mcp"
    backend = mcp_backend(url=url, retries=0, circuit_breaker={"failures": 2, "cooldown_s": 60})
    try:
        with pytest.raises(GatewayError) as raised:
            await backend.discover()
        assert raised.value.failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert "handshake failed" in raised.value.failure.message
        spec = spec_for(backend, "add")
        with pytest.raises(GatewayError) as raised:
            await backend.call(spec, {}, CallContext())
        assert raised.value.failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert (await backend.health()).breaker == "open"
        with pytest.raises(GatewayError) as raised:
            await backend.call(spec, {}, CallContext())
        assert "circuit open" in raised.value.failure.message and raised.value.failure.retry_after_ms
    finally:
        await backend.close()


async def test_a_server_that_went_away_is_unavailable() -> None:
    with http_server() as url:
        backend = mcp_backend(url=url, retries=0)
        dispatcher = await dispatcher_for(backend)
    try:  # the server is stopped now: the link made at discovery meets a closed port
        gone = await call(dispatcher, "up_add", {"a": 1, "b": 2})
        assert gone.error is not None and gone.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert "cannot reach it" in gone.error.message
    finally:
        await backend.close()


TOKEN = "mcp-upstream-token-0123456789"


@pytest.fixture(scope="module")
def guarded() -> Iterator[str]:
    with http_server("--require-token", TOKEN) as url:
        yield url


async def test_the_gateways_own_credentials(guarded: str) -> None:
    refused = mcp_backend(url=guarded, retries=0)
    try:
        with pytest.raises(GatewayError) as raised:
            await refused.discover()
        assert raised.value.failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert "answered HTTP 401 to the gateway's own credentials" in raised.value.failure.message
    finally:
        await refused.close()
    backend = mcp_backend(url=guarded, api_key=TOKEN)
    try:
        dispatcher = await dispatcher_for(backend)
        context = CallContext(
            client_credentials={"Authorization": "Bearer the-callers-own"}
        )  # not forwarded: never leaves
        assert (await call(dispatcher, "up_whoami", context=context)).value == f"Bearer {TOKEN}"
    finally:
        await backend.close()


async def test_forward_authorization_sends_the_callers_header(guarded: str) -> None:
    backend = mcp_backend(url=guarded, headers={"Authorization": f"Bearer {TOKEN}"}, forward_authorization=True)
    try:
        dispatcher = await dispatcher_for(backend)  # discovery: the backend's own header
        own = CallContext(client_credentials={"Authorization": f"Bearer {TOKEN}"})
        assert (await call(dispatcher, "up_whoami", context=own)).value == f"Bearer {TOKEN}"
        wrong = await call(
            dispatcher, "up_whoami", context=CallContext(client_credentials={"Authorization": "Bearer nope"})
        )
        assert wrong.error is not None and wrong.error.kind is ErrorKind.UNAUTHENTICATED  # the caller can fix it
        assert "401" in wrong.error.message
        # Nothing to forward: nothing of the backend's own either (its key never stands in for a caller).
        anonymous = await call(dispatcher, "up_whoami")
        assert anonymous.value is None
    finally:
        await backend.close()


async def test_an_answer_over_the_limit_is_refused(served: tuple[str, str]) -> None:
    url, _version = served
    settings = McpBackendSettings.model_validate({"name": "up", "kind": "mcp", "url": url})
    backend = McpBackend(settings, BackendContext(max_response_bytes=4096))
    try:
        dispatcher = await dispatcher_for(backend)
        assert (await call(dispatcher, "up_echo__text", {"text": "short"})).value == "short"
        big = await call(dispatcher, "up_echo__text", {"text": "x" * 10_000})
        assert big.error is not None and big.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE
        assert (await call(dispatcher, "up_echo__text", {"text": "still up"})).value == "still up"
    finally:
        await backend.close()


@pytest.mark.parametrize("era", sorted(ERAS))
async def test_a_restarted_server_is_reached_again(era: str) -> None:
    """The upstream restarts on the same port: in the handshake era its answer (404, session unknown) says it ran
    nothing, so a new session is made and the call sent once more; in the 2026 era there is no session to lose."""
    flags, _version = ERAS[era]
    port = free_port()
    command = [sys.executable, "-m", SERVER_MODULE, "--transport", "http", "--port", str(port), *flags]
    url = f"http://127.0.0.1:{port}/mcp"
    backend = mcp_backend(url=url)
    try:
        with server_process(command, port):
            dispatcher = await dispatcher_for(backend)
            assert (await call(dispatcher, "up_add", {"a": 1, "b": 1})).value == {"sum": 2}
        with server_process(command, port):
            assert (await call(dispatcher, "up_add", {"a": 2, "b": 2})).value == {"sum": 4}
            assert (await call(dispatcher, "up_count", {"tool": "add"})).value == "1"  # sent once to this one
    finally:
        await backend.close()


async def test_a_name_too_long_for_the_catalog_is_left_out_unless_renamed(
    served: tuple[str, str], events: list[dict[str, Any]]
) -> None:
    url, _version = served
    toolkit = "T" * 56  # 56 + "_" + "echo__text" is 67 characters; flat names have at most 64
    backend = mcp_backend(url=url, toolkit=toolkit, rename={"get__env": "env"})
    try:
        names = {spec.name for spec in await backend.discover()}
        assert "add" in names and "get__env" in names  # renamed to fit: kept under its own name, for routing
        assert "echo__text" not in names and "pair___2e___sum" not in names
        skipped = [e for e in events if e["event"] == "mcp_tool_skipped"]
        assert any("echo-text" in e["reason"] and "rename" in e["reason"] for e in skipped)
    finally:
        await backend.close()


@pytest.mark.parametrize("era", sorted(ERAS))
async def test_a_server_that_dies_during_a_call_is_unavailable(era: str) -> None:
    flags, _version = ERAS[era]
    port = free_port()
    command = [sys.executable, "-m", SERVER_MODULE, "--transport", "http", "--port", str(port), *flags]
    backend = mcp_backend(url=f"http://127.0.0.1:{port}/mcp")
    try:
        with server_process(command, port):
            dispatcher = await dispatcher_for(backend)
            running = asyncio.create_task(call(dispatcher, "up_slow", {"seconds": 30}))
            for _ in range(200):  # bounded: until the server has the call
                if (await call(dispatcher, "up_count", {"tool": "slow"})).value == "1":
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the call never reached the server")
        outcome = await asyncio.wait_for(running, timeout=30)  # the server is gone now
        assert outcome.error is not None and outcome.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE, outcome.error
    finally:
        await backend.close()
