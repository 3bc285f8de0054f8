"""The `toolplex` conformance target: `toolplex serve` with tests/mcp/front/conformance_tools.py.

The SDK's client checks what the suite's tool scenarios need, in both eras (content blocks passed
through, `isError`, progress, the server's own Origin accepted); when the suite is installed, one
tool scenario per era runs against the target as `make conformance` would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.mcp import conformance
from tests.mcp.front.conformance_tools import PNG_BASE64, WAV_BASE64

WAIT_S = 20.0
ERAS = [pytest.param("auto", id="auto-2026-07-28"), pytest.param("legacy", id="legacy-2025-11-25")]

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with conformance.TARGETS["toolplex"]() as served:
        yield served


@pytest.mark.parametrize("mode", ERAS)
async def test_the_suites_tools_answer_as_its_scenarios_expect(url: str, mode: str) -> None:
    reports: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        reports.append(value)

    async with Client(url, mode=mode, read_timeout_seconds=WAIT_S) as mcp:  # type: ignore[arg-type]
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        assert {"test_simple_text", "test_image_content", "test_error_handling", "test_tool_with_progress"} <= names

        text = await mcp.call_tool("test_simple_text", {})
        assert text.content == [types.TextContent(type="text", text="This is a simple text response for testing.")]
        image = (await mcp.call_tool("test_image_content", {})).content
        assert image == [types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")]
        audio = (await mcp.call_tool("test_audio_content", {})).content
        assert audio == [types.AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")]
        embedded = (await mcp.call_tool("test_embedded_resource", {})).content
        assert isinstance(embedded[0], types.EmbeddedResource)
        assert str(embedded[0].resource.uri) == "test://embedded-resource"
        mixed = (await mcp.call_tool("test_multiple_content_types", {})).content
        assert [block.type for block in mixed] == ["text", "image", "resource"]

        failed = await mcp.call_tool("test_error_handling", {})
        assert failed.is_error is True
        assert failed.content[0].text == "This tool intentionally returns an error for testing"  # type: ignore[union-attr]

        done = await mcp.call_tool("test_tool_with_progress", {}, progress_callback=progress)
        assert done.is_error is False and len(reports) >= 2 and reports == sorted(reports)


async def test_the_servers_own_origin_is_accepted_and_another_refused(url: str) -> None:
    base = url.removesuffix("/mcp")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body["params"] = {"_meta": meta}
    async with httpx.AsyncClient(headers={**headers, "Mcp-Method": "tools/list"}, timeout=WAIT_S) as http:
        own = await http.post(url, json=body, headers={"Origin": base})
        other = await http.post(url, json=body, headers={"Origin": "http://evil.example"})
    assert own.status_code == 200 and "test_simple_text" in own.text
    assert other.status_code == 403


MISSING = conformance.missing_reason()


@pytest.mark.skipif(MISSING is not None, reason=f"MCP conformance suite not installed: {MISSING}")
@pytest.mark.parametrize(
    ("version", "scenario"),
    [
        pytest.param("2025-11-25", "tools-call-mixed-content", id="handshake"),
        pytest.param("2026-07-28", "tools-call-with-progress", id="stateless"),
    ],
)
def test_one_tool_scenario_per_era_passes_through_toolplex(
    url: str, version: str, scenario: str, tmp_path: Path
) -> None:
    result = conformance.run_scenario(url, version, scenario, tmp_path)
    assert result.passed, result.failures
    assert result.checks_failed == 0
