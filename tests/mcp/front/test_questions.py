"""An upstream's questions (sampling) when no request context says whose they are (stdio), and when the caller
cannot answer them (another front's caller): the question reaches the one caller in flight, or the call
fails as the tool's failure, never as a fault of the server that would open its circuit.

Real processes: npm's `@modelcontextprotocol/server-everything` as a stdio upstream, the reference server
(tests/mcp/reference_server.py) as a handshake-era HTTP upstream, `toolplex serve` in front of both, the
`mcp` SDK's client and a JSON-RPC client over HTTP.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.mcp import conformance
from tests.mcp.backend.support import EVERYTHING, install_everything
from tests.support import served_gateway

WAIT_S = 20.0
CALLS = 8  # more than the breaker's failure threshold (5 by default)

pytestmark = [
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
    pytest.mark.skipif(shutil.which("npm") is None, reason="npm (Node.js 20+) is not installed"),
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    install_everything()
    with conformance.reference_server() as upstream:
        config = tmp_path_factory.mktemp("questions") / "gateway.yaml"
        config.write_text(
            textwrap.dedent(
                f"""
                fronts:
                  jsonrpc: {{path: /rpc}}
                backends:
                  - {{name: everything, kind: mcp, command: node, args: ["{EVERYTHING}", "stdio"]}}
                  - {{name: reference, kind: mcp, url: "{upstream}", era: legacy}}
                """
            )
        )
        with served_gateway(Path(config)) as (url, _process):
            yield url


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("legacy", id="handshake-era caller, asked directly"),
        pytest.param("2026-07-28", id="2026-07-28 caller, by InputRequiredResult (adapters/mcp/client/held.py)"),
    ],
)
async def test_a_stdio_servers_question_reaches_the_one_caller_in_flight(base: str, mode: str) -> None:
    """A 2026-07-28 caller's SDK client answers the `InputRequiredResult` and sends the call again, which
    answers the handshake-era server's question; a handshake-era caller is asked with a request."""
    asked: list[str] = []

    async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)  # type: ignore[union-attr]
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled by the caller"), model="m"
        )

    async with Client(
        f"{base}/mcp", mode=mode, sampling_callback=on_sampling, read_timeout_seconds=WAIT_S, cache=None
    ) as mcp:
        result = await mcp.call_tool("trigger-sampling-request", {"prompt": "what is two and two", "maxTokens": 5})
    assert result.is_error is False
    assert asked and "what is two and two" in asked[0]
    assert "sampled by the caller" in result.content[0].text  # type: ignore[union-attr]


def execute(base: str, tool: str, parameters: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": tool, "parameters": parameters}}
    answer = httpx.post(f"{base}/rpc", json=body, timeout=WAIT_S).json()
    assert isinstance(answer, dict)
    return answer


@pytest.mark.parametrize(
    ("tool", "parameters"),
    [
        pytest.param("reference_test_sampling", {"prompt": "hi"}, id="handshake-era HTTP"),
        pytest.param("everything_trigger__sampling__request", {"prompt": "hi"}, id="stdio"),
    ],
)
def test_a_question_no_caller_can_answer_fails_the_call_not_the_upstream(
    base: str, tool: str, parameters: dict[str, Any]
) -> None:
    """A JSON-RPC caller cannot answer sampling: each call is the tool's failure; the circuit stays closed."""
    for _ in range(CALLS):
        error = execute(base, tool, parameters)["error"]
        assert error["data"]["kind"] == "tool_failed", error
    backend = tool.split("_", 1)[0]
    ready = httpx.get(f"{base}/readyz", timeout=WAIT_S).json()
    assert {b["name"]: b["breaker"] for b in ready["backends"]}[backend] == "closed"
    echoed = execute(
        base, "reference_test_simple_text" if backend == "reference" else "everything_echo", {"message": "x"}
    )
    assert "result" in echoed, echoed  # the upstream still serves its other tools
