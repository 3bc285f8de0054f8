"""The reference MCP server, spoken to by the `mcp` SDK's own client in both protocol eras.

One real server process on a free loopback port serves every test of this module. `mode="auto"`
probes `server/discover` and lands on 2026-07-28 (stateless, InputRequiredResult); `mode="legacy"`
runs the `initialize` handshake (2025-11-25: sessions, server-to-client requests, SSE streams).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import ResourceUpdated

from tests.support import python_server

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ERAS = [pytest.param("auto", MODERN, id="auto-2026-07-28"), pytest.param("legacy", HANDSHAKE, id="legacy-2025-11-25")]
WAIT_S = 10.0  # bound on waiting for a notification that must arrive

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with python_server("tests.mcp.reference_server") as port:
        yield f"http://127.0.0.1:{port}/mcp"


def texts(result: types.CallToolResult | types.GetPromptResult) -> str:
    """Every text block of a tool result or prompt, joined."""
    if isinstance(result, types.GetPromptResult):
        blocks: list[Any] = [message.content for message in result.messages]
    else:
        blocks = list(result.content)
    return " ".join(block.text for block in blocks if isinstance(block, types.TextContent))


class Answers:
    """Client-side callbacks that answer the server's questions and record them."""

    def __init__(self) -> None:
        self.elicitations: list[types.ElicitRequestParams] = []
        self.samplings: list[types.CreateMessageRequestParams] = []

    async def elicit(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicitations.append(params)
        message = params.message
        if "color" in message:
            return types.ElicitResult(action="accept", content={"color": "blue"})
        if "name" in message:
            return types.ElicitResult(action="accept", content={"name": "Alice"})
        return types.ElicitResult(action="accept", content={"username": "alice", "email": "alice@example.com"})

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.samplings.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model"
        )

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


def client(url: str, mode: str, answers: Answers | None = None, **kwargs: Any) -> Client:
    if answers is not None:
        kwargs |= {
            "elicitation_callback": answers.elicit,
            "sampling_callback": answers.sample,
            "list_roots_callback": answers.list_roots,
        }
    return Client(url, mode=mode, read_timeout_seconds=WAIT_S, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_both_eras_list_call_read_and_get(url: str, mode: str, version: str) -> None:
    async with client(url, mode) as mcp:
        assert mcp.protocol_version == version
        assert mcp.server_info is not None and mcp.server_info.name == "toolplex-mcp-reference"

        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert {"test_simple_text", "test_error_handling", "json_schema_2020_12_tool"} <= set(tools)
        assert all(tool.description for tool in tools.values())

        result = await mcp.call_tool("test_simple_text", {})
        assert result.is_error is False
        assert texts(result) == "This is a simple text response for testing."

        read = await mcp.read_resource("test://static-text")
        assert [(c.uri, c.mime_type, getattr(c, "text", None)) for c in read.contents] == [
            ("test://static-text", "text/plain", "This is the content of the static text resource.")
        ]
        binary = await mcp.read_resource("test://static-binary")
        assert isinstance(binary.contents[0], types.BlobResourceContents)
        assert binary.contents[0].mime_type == "image/png"
        templated = await mcp.read_resource("test://template/42/data")
        assert json.loads(templated.contents[0].text) == {  # type: ignore[union-attr]
            "id": "42",
            "templateTest": True,
            "data": "Data for ID: 42",
        }

        prompt = await mcp.get_prompt("test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"})
        assert texts(prompt) == "Prompt with arguments: arg1='hello', arg2='world'"


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_tool_errors_are_results_and_protocol_errors_are_errors(url: str, mode: str, version: str) -> None:
    async with client(url, mode) as mcp:
        failed = await mcp.call_tool("test_error_handling", {})
        assert failed.is_error is True
        assert texts(failed) == "This tool intentionally returns an error for testing"

        invalid = await mcp.call_tool("test_structured_content", {"a": "two", "b": 3})
        assert invalid.is_error is True and "a: 'two' is not of type 'number'" in texts(invalid)

        with pytest.raises(MCPError) as missing:
            await mcp.read_resource("test://no-such-resource")
        assert missing.value.code == types.INVALID_PARAMS
        assert missing.value.data == {"uri": "test://no-such-resource"}


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_structured_content_matches_the_output_schema(url: str, mode: str, version: str) -> None:
    async with client(url, mode) as mcp:
        tool = next(t for t in (await mcp.list_tools()).tools if t.name == "test_structured_content")
        assert tool.output_schema is not None and tool.output_schema["required"] == ["sum", "operands"]
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        result = await mcp.call_tool("test_structured_content", {"a": 2, "b": 3.5})
        assert result.structured_content == {"sum": 5.5, "operands": [2, 3.5]}
        assert json.loads(texts(result)) == result.structured_content


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_elicitation_and_sampling_reach_the_client_in_either_era(url: str, mode: str, version: str) -> None:
    """Handshake era: live server-to-client requests. 2026-07-28: InputRequiredResult, retried by the client."""
    answers = Answers()
    async with client(url, mode, answers) as mcp:
        elicited = await mcp.call_tool("test_elicitation", {"message": "Who are you?"})
        assert texts(elicited) == (
            'User response: action=accept, content={"email": "alice@example.com", "username": "alice"}'
        )
        assert [p.message for p in answers.elicitations] == ["Who are you?"]

        sampled = await mcp.call_tool("test_sampling", {"prompt": "Capital of France?"})
        assert texts(sampled) == "LLM response: Paris"
        assert answers.samplings[0].max_tokens == 100

        several = await mcp.call_tool("test_input_required_result_multiple_inputs", {})
        assert texts(several) == "All inputs received."

        rounds = await mcp.call_tool("test_input_required_result_multi_round", {})
        assert texts(rounds) == "Alice likes blue."

        prompt = await mcp.get_prompt("test_input_required_result_prompt", {})
        assert texts(prompt).startswith("Use the following context:")


async def test_a_client_without_sampling_gets_missing_required_client_capability(url: str) -> None:
    async with client(url, "auto") as mcp:
        with pytest.raises(MCPError) as refused:
            await mcp.call_tool("test_missing_capability", {})
    assert refused.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": {"sampling": {}}}


async def test_a_tampered_request_state_is_rejected(url: str) -> None:
    """requestState goes back to the server sealed; one changed character and the retry is refused."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    name = "test_input_required_result_tampered_state"
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    async with httpx.AsyncClient(headers={"Accept": "application/json, text/event-stream"}) as http:

        async def call(**extra: Any) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "_meta": meta, **extra}}
            response = await http.post(url, json=body, headers=headers)
            return response.json()  # type: ignore[no-any-return]

        first = (await call())["result"]
        assert first["resultType"] == "input_required" and first["requestState"] != "round-1"
        answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
        honest = await call(inputResponses=answer, requestState=first["requestState"])
        assert honest["result"]["content"][0]["text"].startswith("state-ok")
        tampered = await call(inputResponses=answer, requestState=first["requestState"] + "-TAMPERED")
        assert tampered["error"]["code"] == types.INVALID_PARAMS


@pytest.mark.parametrize(("mode", "version"), ERAS)
async def test_progress_notifications_follow_the_request(url: str, mode: str, version: str) -> None:
    seen: list[tuple[float, float | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total))

    async with client(url, mode) as mcp:
        await mcp.call_tool("test_tool_with_progress", {}, progress_callback=progress)
    assert seen == [(0, 100), (50, 100), (100, 100)]


async def test_log_levels_filter_in_both_eras(url: str) -> None:
    """2026-07-28: the level each request opts in to; handshake era: logging/setLevel on the session."""

    async def delivered(mode: str, **kwargs: Any) -> list[str]:
        levels: list[str] = []

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            levels.append(params.level)

        async with client(url, mode, logging_callback=on_log, **kwargs) as mcp:
            if mode == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await mcp.set_logging_level("warning")
            await mcp.call_tool("test_logging_tool", {})
        return levels

    assert await delivered("auto") == []
    assert await delivered("auto", log_level="info") == ["info", "warning"]
    assert await delivered("legacy") == ["warning"]


async def test_resource_subscriptions_in_both_eras(url: str) -> None:
    async with client(url, "auto") as mcp, mcp.listen(resource_subscriptions=["test://watched-resource"]) as sub:
        await mcp.call_tool("test_update_watched_resource", {"text": "modern"})
        with anyio.fail_after(WAIT_S):
            event = await sub.__anext__()
        assert event == ResourceUpdated(uri="test://watched-resource")
        read = await mcp.read_resource("test://watched-resource")
        assert read.contents[0].text == "modern"  # type: ignore[union-attr]

    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.set()

    async with client(url, "legacy", message_handler=on_message) as mcp:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await mcp.subscribe_resource("test://watched-resource")
        await mcp.call_tool("test_update_watched_resource", {"text": "handshake"})
        with anyio.fail_after(WAIT_S):
            await updated.wait()


async def test_completion_ranks_candidates_by_prefix(url: str) -> None:
    async with client(url, "auto") as mcp:
        result = await mcp.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "par"},
        )
    assert result.completion.values == ["paris", "park", "party"]


async def test_dns_rebinding_is_refused_and_loopback_accepted(url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as http:
        evil_host = await http.post(url, json=body, headers={**accept, "Host": "evil.example.com"})
        evil_origin = await http.post(url, json=body, headers={**accept, "Origin": "http://evil.example.com"})
        loopback = await http.post(url, json=body, headers={**accept, "Origin": url.rsplit("/", 1)[0]})
    assert 400 <= evil_host.status_code < 500
    assert evil_origin.status_code == 403
    assert loopback.status_code == 200 and loopback.headers["mcp-session-id"].isascii()


class Modern:
    """Raw 2026-07-28 requests (the SDK's client has no tasks extension): envelope `_meta` and routing headers."""

    def __init__(self, http: httpx.AsyncClient, url: str, capabilities: dict[str, Any]) -> None:
        self.http, self.url, self.capabilities = http, url, capabilities

    async def send(self, method: str, params: dict[str, Any], name: str | None = None) -> tuple[int, dict[str, Any]]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
        response = await self.http.post(self.url, json=body, headers=headers)
        return response.status_code, response.json()

    async def task(self, method: str, task_id: str, **params: Any) -> tuple[int, dict[str, Any]]:
        return await self.send(method, {"taskId": task_id, **params}, name=task_id)

    async def until(self, task_id: str, status: str) -> dict[str, Any]:
        """tasks/get until the task reaches `status` (bounded: the tool's own work takes under a second)."""
        with anyio.fail_after(WAIT_S):
            while True:
                _, got = await self.task("tasks/get", task_id)
                if got["result"]["status"] == status:
                    return got["result"]
                await anyio.sleep(0.05)


TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}


async def test_tasks_extension_runs_parks_resumes_and_cancels(url: str) -> None:
    async with httpx.AsyncClient() as http:
        modern = Modern(http, url, TASKS)
        _, created = await modern.send(
            "tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}, "confirm_delete"
        )
        task = created["result"]
        assert task["resultType"] == "task" and task["status"] == "working" and "result" not in task
        waiting = await modern.until(task["taskId"], "input_required")
        assert waiting["inputRequests"]["confirm_delete"]["method"] == "elicitation/create"
        _, ack = await modern.task(
            "tasks/update",
            task["taskId"],
            inputResponses={"confirm_delete": {"action": "accept", "content": {"confirm": True}}},
        )
        assert ack["result"]["resultType"] == "complete" and "status" not in ack["result"]
        done = await modern.until(task["taskId"], "completed")
        assert done["result"]["content"][0]["text"] == "Deleted a.txt"

        _, long = await modern.send(
            "tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}, "slow_compute"
        )
        long_id = long["result"]["taskId"]
        await modern.task("tasks/cancel", long_id)
        assert (await modern.until(long_id, "cancelled"))["taskId"] == long_id

        status, unknown = await modern.task("tasks/get", "no-such-task")
        assert status == 400 and unknown["error"]["code"] == types.INVALID_PARAMS
        status, mismatch = await modern.send("tasks/get", {"taskId": long_id}, name="another-task")
        assert status == 400 and mismatch["error"]["code"] == types.HEADER_MISMATCH


async def test_without_the_tasks_extension_tools_run_inline_or_are_refused(url: str) -> None:
    async with httpx.AsyncClient() as http:
        plain = Modern(http, url, {})
        _, inline = await plain.send(
            "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": "x"}}, "slow_compute"
        )
        assert inline["result"]["resultType"] == "complete"
        assert inline["result"]["content"][0]["text"] == "Computed x in 0 s"
        status, refused = await plain.send("tools/call", {"name": "failing_job", "arguments": {}}, "failing_job")
        assert status == 400 and refused["error"]["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY
        assert refused["error"]["data"] == {
            "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        }
        _, gated = await plain.task("tasks/get", "whatever")
        assert gated["error"]["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY

    async with client(url, "legacy") as mcp:
        assert "io.modelcontextprotocol/tasks" not in (mcp.server_capabilities.extensions or {})
        result = await mcp.call_tool("slow_compute", {"seconds": 0, "label": "legacy"})
        assert texts(result) == "Computed legacy in 0 s"
