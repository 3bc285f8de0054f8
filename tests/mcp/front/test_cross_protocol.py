"""An MCP client calls, through Toolplex's /mcp, tools that live behind the other protocols.

An inner `toolplex serve` serves Python tools over OpenTool, OXP and ToolServerNode; an outer one
fronts it three times (`kind: opentool`, `kind: oxp`, `kind: toolserver`, toolkits prefixed Ot, Ox
and Ts) and serves the lot over MCP. The `mcp` SDK's client, in both eras, lists and calls each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support import served_gateway

WAIT_S = 20.0
ERAS = [pytest.param("auto", "2026-07-28", id="auto-2026-07-28"), pytest.param("legacy", "2025-11-25", id="legacy")]
KINDS = [pytest.param("opentool", "Ot", id="opentool"), pytest.param("oxp", "Ox", id="oxp")]
KINDS.append(pytest.param("toolserver", "Ts", id="toolserver"))
INNER = """
fronts:
  opentool: {prefix: /opentool}
  oxp: {prefix: ""}
  toolserver: {prefix: ""}
backends:
  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}
  - {name: demo, kind: python, module: "adapters.python.toolkits.demo:toolkit"}
"""
OUTER = """
fronts:
  mcp: {{}}
backends:
  - {{name: ot, kind: opentool, url: "{inner}", prefix: Ot}}
  - {{name: ox, kind: oxp, url: "{inner}", prefix: Ox}}
  - {{name: ts, kind: toolserver, url: "{inner}", prefix: Ts}}
"""

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture(scope="module")
def outer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The outer gateway's base URL (the inner one runs as long as it does)."""
    tmp = tmp_path_factory.mktemp("mcp-cross")
    inner_config = tmp / "inner.yaml"
    inner_config.write_text(INNER)
    with served_gateway(inner_config, log_path=tmp / "inner.log") as (inner, _):
        outer_config = tmp / "outer.yaml"
        outer_config.write_text(OUTER.format(inner=inner))
        with served_gateway(outer_config, log_path=tmp / "outer.log") as (base, _):
            yield base


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize(("kind", "prefix"), KINDS)
@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_an_mcp_client_calls_a_tool_behind_another_protocol(
    outer: str, kind: str, prefix: str, mode: str, version: str
) -> None:
    async with Client(f"{outer}/mcp", mode=mode, read_timeout_seconds=WAIT_S) as mcp:  # type: ignore[arg-type]
        assert mcp.protocol_version == version
        names: set[str] = set()
        cursor: str | None = None
        for _ in range(50):
            page = await mcp.list_tools(cursor=cursor)
            names |= {tool.name for tool in page.tools}
            cursor = page.next_cursor
            if cursor is None:
                break
        assert {f"{prefix}Math_Add", f"{prefix}Demo_Sleep", f"{prefix}Demo_Fail"} <= names, sorted(names)

        added = await mcp.call_tool(f"{prefix}Math_Add", {"a": 2, "b": 40})
        assert added.is_error is False and json.loads(text_of(added)) == 42

        slept = await mcp.call_tool(f"{prefix}Demo_Sleep", {"seconds": 0})
        assert slept.is_error is False and slept.structured_content == {"slept": 0}

        failed = await mcp.call_tool(f"{prefix}Demo_Fail", {"message": f"failed behind {kind}"})
        assert failed.is_error is True and f"failed behind {kind}" in text_of(failed)

        invalid = await mcp.call_tool(f"{prefix}Math_Add", {"a": "two", "b": 1})
        assert invalid.is_error is True and "a:" in text_of(invalid), text_of(invalid)  # names the bad parameter

        with pytest.raises(MCPError) as unknown:
            await mcp.call_tool(f"{prefix}Math_Nothing", {})
        assert unknown.value.code == types.INVALID_PARAMS


def test_the_inner_gateway_is_really_another_process(outer: str) -> None:
    """The outer catalog holds no Python tool of its own: everything it serves came over the wire."""
    listed = httpx.get(f"{outer}/tools", timeout=WAIT_S).json()["items"]
    assert listed and all(item["id"].startswith(("Ot", "Ox", "Ts")) for item in listed)
