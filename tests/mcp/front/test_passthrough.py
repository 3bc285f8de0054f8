"""The MCP front passes an MCP backend's resources, templates, prompts and completions through, and relays
what the upstream says during a request (logs, progress, questions) to that request's caller only.

Real processes: tests/mcp/reference_server.py upstream, `toolplex serve` in front of it as `kind: mcp`,
the `mcp` SDK's client in both eras against Toolplex.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp import conformance
from tests.mcp.reference_server import PNG_BASE64
from tests.mcp.reference_server import WATCHED_URI as WATCHED

WAIT_S = 20.0
ERAS = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="2025-11-25")]

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with conformance.toolplex_reference_server() as served:
        yield served


@pytest.mark.parametrize("mode", ERAS)
async def test_resources_templates_prompts_and_completions_pass_through_under_their_own_names(
    url: str, mode: str
) -> None:
    async with Client(url, mode=mode, read_timeout_seconds=WAIT_S, cache=None) as mcp:  # type: ignore[arg-type]
        assert mcp.server_capabilities.resources is not None and mcp.server_capabilities.prompts is not None
        uris = {str(r.uri) for r in (await mcp.list_resources()).resources}
        assert {"test://static-text", "test://static-binary"} <= uris
        text = (await mcp.read_resource("test://static-text")).contents[0]
        assert isinstance(text, types.TextResourceContents)
        assert text.text == "This is the content of the static text resource."
        binary = (await mcp.read_resource("test://static-binary")).contents[0]
        assert isinstance(binary, types.BlobResourceContents) and binary.blob == PNG_BASE64

        templates = (await mcp.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
        item = (await mcp.read_resource("test://template/42/data")).contents[0]
        assert isinstance(item, types.TextResourceContents) and '"id": "42"' in item.text

        prompts = {p.name for p in (await mcp.list_prompts()).prompts}
        assert {"test_simple_prompt", "test_prompt_with_arguments"} <= prompts
        got = await mcp.get_prompt("test_prompt_with_arguments", {"arg1": "one", "arg2": "two"})
        assert "one" in got.messages[0].content.text and "two" in got.messages[0].content.text  # type: ignore[union-attr]

        done = await mcp.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), {"name": "arg1", "value": ""}
        )
        assert done.completion.values  # the reference server's candidates, as it gave them

        tools = {tool.name for tool in (await mcp.list_tools()).tools}
        assert "test_simple_text" in tools  # an MCP upstream's tools keep their own names here too


@pytest.mark.parametrize("mode", ERAS)
async def test_an_unknown_resource_is_the_servers_own_error(url: str, mode: str) -> None:
    async with Client(url, mode=mode, read_timeout_seconds=WAIT_S, cache=None) as mcp:  # type: ignore[arg-type]
        with pytest.raises(MCPError) as raised:
            await mcp.read_resource("test://no-such-thing")
    assert raised.value.code == types.INVALID_PARAMS
    assert raised.value.data == {"uri": "test://no-such-thing"}


@pytest.mark.parametrize("mode", ERAS)
async def test_logs_progress_and_questions_reach_the_caller_whose_call_caused_them(url: str, mode: str) -> None:
    """Two callers at once, each with its own callbacks: each hears only its own call's upstream messages."""

    async def caller(tag: str) -> dict[str, Any]:
        heard: dict[str, Any] = {"logs": [], "progress": [], "asked": []}

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            heard["logs"].append(params.data)

        async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            heard["asked"].append("sampling")
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text=f"answer of {tag}"), model="m"
            )

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            heard["progress"].append(value)

        async with Client(
            url,
            mode=mode,  # type: ignore[arg-type]
            read_timeout_seconds=WAIT_S,
            cache=None,
            logging_callback=on_log,
            sampling_callback=on_sampling,
            log_level="debug",
        ) as mcp:
            logged = await mcp.call_tool("test_tool_with_logging", {})
            sampled = await mcp.call_tool("test_sampling", {"prompt": f"question of {tag}"})
            progressed = await mcp.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        heard["results"] = [logged, sampled, progressed]
        return heard

    first, second = await asyncio.gather(caller("A"), caller("B"))
    for tag, heard in (("A", first), ("B", second)):
        logged, sampled, progressed = heard["results"]
        assert not logged.is_error and len(heard["logs"]) >= 2
        assert sampled.content[0].text == f"LLM response: answer of {tag}"  # type: ignore[union-attr]
        assert heard["asked"] == ["sampling"]  # asked once: its own call's question, not the other's
        assert not progressed.is_error and len(heard["progress"]) >= 2
    assert len(first["logs"]) == len(second["logs"])  # nobody heard the other's log lines twice


async def test_a_2026_caller_without_sampling_gets_the_servers_capability_error(url: str) -> None:
    async with Client(url, mode="auto", read_timeout_seconds=WAIT_S, cache=None) as mcp:
        assert mcp.protocol_version == "2026-07-28"
        with pytest.raises(MCPError) as raised:
            await mcp.call_tool("test_missing_capability", {})
    assert raised.value.code == -32021  # MissingRequiredClientCapability, as the server sent it


async def test_a_handshake_era_subscription_is_accepted_and_an_unknown_uri_refused(url: str) -> None:
    async with Client(url, mode="legacy", read_timeout_seconds=WAIT_S, cache=None) as mcp:
        await mcp.subscribe_resource("test://static-text")
        await mcp.unsubscribe_resource("test://static-text")
        with pytest.raises(MCPError) as raised:
            await mcp.subscribe_resource("test://no-such-thing")
    assert raised.value.code == types.INVALID_PARAMS


async def test_a_2026_upstreams_resource_updates_and_list_changes_reach_handshake_era_subscribers(url: str) -> None:
    """The upstream speaks 2026-07-28 (changes on its listen stream); the caller subscribed the handshake way."""
    updated: list[str] = []
    heard = {"updated": asyncio.Event(), "prompts": asyncio.Event()}

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            heard["updated"].set()
        elif isinstance(message, types.PromptListChangedNotification):
            heard["prompts"].set()

    async with Client(url, mode="legacy", read_timeout_seconds=WAIT_S, cache=None, message_handler=on_message) as mcp:
        await mcp.subscribe_resource(WATCHED)
        changed = await mcp.call_tool("test_update_watched_resource", {"text": "new words"})
        assert changed.is_error is False
        await asyncio.wait_for(heard["updated"].wait(), WAIT_S)
        read = await mcp.read_resource(WATCHED)
        assert read.contents[0].text == "new words"  # type: ignore[union-attr]
        await mcp.call_tool("test_trigger_prompt_change", {})
        await asyncio.wait_for(heard["prompts"].wait(), WAIT_S)
        await mcp.unsubscribe_resource(WATCHED)
    assert updated == [WATCHED]


MISSING = conformance.missing_reason()


@pytest.mark.skipif(MISSING is not None, reason=f"MCP conformance suite not installed: {MISSING}")
@pytest.mark.parametrize(
    ("version", "scenario"),
    [
        ("2025-06-18", "resources-subscribe"),
        ("2025-11-25", "tools-call-elicitation"),
        ("2025-11-25", "tools-call-with-logging"),
        ("2025-11-25", "completion-complete"),
        ("2026-07-28", "prompts-get-with-args"),
        ("2026-07-28", "sep-2164-resource-not-found"),
        ("2026-07-28", "input-required-result-multi-round"),
        ("2026-07-28", "input-required-result-tampered-state"),
        ("2026-07-28", "server-stateless"),
    ],
)
def test_pass_through_scenarios_of_the_suite_pass_through_toolplex(
    url: str, version: str, scenario: str, tmp_path: Path
) -> None:
    result = conformance.run_scenario(url, version, scenario, tmp_path)
    assert result.passed, result.failures
    assert result.checks_failed == 0
