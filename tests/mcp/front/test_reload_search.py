"""The MCP front after a reload (notifications/tools/list_changed) and with `search: true` (the meta-tools)."""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.support import served_gateway

WAIT_S = 20.0
MATH = '  - {name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}\n'
TEXT = '  - {name: text, kind: python, module: "adapters.python.toolkits.text:toolkit"}\n'

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def config(*backends: str, search: bool = False) -> str:
    front = "fronts:\n  mcp: {list_changed_poll_s: 0.1, search: %s}\n" % ("true" if search else "false")
    return front + "backends:\n" + "".join(backends)


async def test_a_reload_that_adds_a_tool_tells_open_sessions(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(config(MATH))
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            changed.set()

    with served_gateway(path, extra_args=["--no-reload"]) as (base, process):
        async with Client(f"{base}/mcp", mode="legacy", message_handler=on_message) as mcp:
            assert mcp.server_capabilities is not None and mcp.server_capabilities.tools is not None
            assert mcp.server_capabilities.tools.list_changed is True
            before = {tool.name for tool in (await mcp.list_tools()).tools}
            assert not any(name.startswith("Text_") for name in before)
            path.write_text(config(MATH, TEXT))
            process.send_signal(signal.SIGHUP)
            with anyio.fail_after(WAIT_S):
                await changed.wait()
            after = {tool.name for tool in (await mcp.list_tools()).tools}
    assert before < after and any(name.startswith("Text_") for name in after)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_search_lists_two_meta_tools_that_find_and_call(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(textwrap.dedent(config(MATH, TEXT, search=True)))
    with served_gateway(path) as (base, _process):
        async with Client(f"{base}/mcp", mode=mode, read_timeout_seconds=WAIT_S) as mcp:  # type: ignore[arg-type]
            names = [tool.name for tool in (await mcp.list_tools()).tools]
            assert names == ["search_tools", "call_tool"]
            found = await mcp.call_tool("search_tools", {"query": "add two numbers", "top_k": 3})
            assert found.is_error is False and found.structured_content is not None
            tools = found.structured_content["tools"]
            assert 1 <= len(tools) <= 3 and tools[0]["name"] == "Math_Add" and "inputSchema" in tools[0]
            called = await mcp.call_tool("call_tool", {"name": "Math_Add", "arguments": {"a": 4, "b": 5}})
            assert called.is_error is False and called.content[0].text == "9"  # type: ignore[union-attr]
            failed = await mcp.call_tool("call_tool", {"name": "Math_Add", "arguments": {"a": 4}})
            assert failed.is_error is True
