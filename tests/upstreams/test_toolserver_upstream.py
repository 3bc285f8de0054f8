"""The `toolserver` backend against real ToolServerNode servers on loopback (protocols.md §3).

Upstreams: `tests.upstreams.toolserver_manager` (a Manager whose sessions each get a node),
`tests.upstreams.toolserver_node` (a bare node: no session endpoints, one workspace), both
answering as the real servers do, another `toolplex serve` with the built-in tools, and the
faulty server.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

from adapters.toolserver import codec
from adapters.toolserver.backend import ToolServerBackend
from adapters.toolserver.settings import ToolServerBackendSettings
from gateway.app import create_app
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.config import parse_config
from gateway.dispatch import Dispatcher
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import Call, CallContext, RequestKind, UpstreamAnswer
from gateway.routing import apply_routing
from tests.support import BUILTIN_BACKENDS, free_port, gateway_process, python_server, refused_port, server_process
from tests.toolserver.test_xagent_client import ToolCallStatusCode, XAgentClient
from tests.upstreams.faults import FAULTS

NODE = "tests.upstreams.toolserver_manager"  # most tests need sessions: a Manager
BARE = "tests.upstreams.toolserver_node"
RELAY = "Toolplex_continue_node"
DEADLINE = 1.0
MARGIN = 3.0  # generous: a 2-core CI machine under load


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    with python_server(NODE) as port:
        yield f"http://127.0.0.1:{port}"


def settings(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "node", "kind": "toolserver", "url": url, "follow_backoff_s": 0.01, **extra}


def backend_of(config: dict[str, Any]) -> ToolServerBackend:
    return ToolServerBackend(ToolServerBackendSettings.model_validate(config), BackendContext())


async def connect(url: str, timeout: float = 10, **extra: Any) -> tuple[Dispatcher, ToolServerBackend]:
    backend = backend_of(settings(url, **extra))
    specs = apply_routing(await backend.discover(), backend.settings)
    return Dispatcher(Catalog(specs), {"node": backend}, default_timeout=timeout), backend


def live_nodes(url: str) -> list[str]:
    return httpx.get(f"{url}/debug/nodes", timeout=5).json()  # type: ignore[no-any-return]


def kind(outcome: Any) -> ErrorKind | None:
    return outcome.error.kind if outcome.error else None


# ---- discovery, results, error mapping ----


async def test_discovery(node: str) -> None:
    dispatch, backend = await connect(node)
    try:
        listed = [s.flat_name for s in dispatch.catalog.latest(visible_only=True)]
        assert "EchoEnv_echo" in listed and "ShellEnv_run" in listed  # the gateway name is the node's own
        assert "ShellEnv_read_stdout" not in listed  # hidden upstream tools stay hidden
        spec = dispatch.catalog.resolve("EchoEnv_echo")
        assert (spec.toolkit, spec.name, spec.language) == ("EchoEnv", "echo", "remote")
        # Listed without a schema: looked up through /get_json_schema_for_tools.
        looked_up = dispatch.catalog.resolve("FileSystemEnv_read_from_file")
        assert looked_up.input_schema["required"] == ["filepath"]
        relay = dispatch.catalog.resolve(RELAY)
        assert not relay.visible and backend.relay_name == RELAY
    finally:
        await backend.close()


async def test_results_and_error_mapping(node: str) -> None:
    dispatch, backend = await connect(node)
    try:
        echo = await dispatch.call(Call("EchoEnv_echo", {"text": "hi"}))
        assert echo.value["echo"] == "hi"  # unwrapped from {"type": "simple", "data": ...}
        assert (await dispatch.call(Call("EchoEnv_add", {"a": 2, "b": 40}))).value == 42
        blob = (await dispatch.call(Call("EchoEnv_blob", {}))).value
        assert blob["type"] == "binary" and blob["name"] == "blob.bin"  # binary stays an object
        assert (await dispatch.call(Call("EchoEnv_pair", {}))).value == [{"left": 1}, "right"]

        failed = await dispatch.call(Call("EchoEnv_fail", {"message": "kaputt"}))
        assert kind(failed) == ErrorKind.TOOL_FAILED and failed.error.message == "RuntimeError: kaputt"
        invalid = await dispatch.call(Call("MathEnv_divide", {"a": 1, "b": 0}))
        assert kind(invalid) == ErrorKind.INVALID_ARGUMENTS
        assert invalid.error.parameter_errors == {"b": "Value error, b must not be zero"}
        gone = await dispatch.call(Call("EchoEnv_retired", {}))
        assert kind(gone) == ErrorKind.NOT_FOUND and gone.error.message == "The tool EchoEnv_retired is not found!"
        down = await dispatch.call(Call("EchoEnv_down", {}))
        assert kind(down) == ErrorKind.UPSTREAM_UNAVAILABLE and "503" in down.error.message
    finally:
        await backend.close()


async def test_wrong_path_is_upstream_unavailable(node: str) -> None:
    backend = backend_of(settings(node, path="/nowhere", retries=0))
    with pytest.raises(GatewayError) as info:
        await backend.discover()
    assert info.value.failure.kind == ErrorKind.UPSTREAM_UNAVAILABLE
    await backend.close()


# ---- the node's own answers, kept for a ToolServerNode front (a transparent hop) ----


def own(outcome: Any) -> UpstreamAnswer:
    assert outcome.upstream is not None and outcome.upstream.protocol == "toolserver", outcome
    return outcome.upstream  # type: ignore[no-any-return]


async def test_a_toolserver_front_is_a_transparent_hop(node: str) -> None:
    _dispatch, backend = await connect(node)
    try:
        assert backend.relays == "toolserver"  # no argument validation of the gateway's on that hop; node order
        # Listed in available_tools without a tools_json entry: that front leaves it out of its tools_json too.
        assert backend.schema_unlisted == {"FileSystemEnv_read_from_file"}
    finally:
        await backend.close()


async def test_results_keep_the_nodes_body(node: str) -> None:
    dispatch, backend = await connect(node)
    try:
        pair = await dispatch.call(Call("EchoEnv_pair", {}))
        assert pair.value == [{"left": 1}, "right"]  # the canonical value, for every other front
        assert own(pair).result == {"type": "composite", "data": [{"type": "simple", "data": {"left": 1}}, "right"]}
        added = await dispatch.call(Call("EchoEnv_add", {"a": 2, "b": 40}))
        assert (added.value, own(added).result, own(added).error) == (42, 42, None)
    finally:
        await backend.close()


async def test_errors_keep_the_nodes_status_and_detail(node: str) -> None:
    dispatch, backend = await connect(node)
    try:
        failed = await dispatch.call(Call("EchoEnv_object_error", {}))
        assert kind(failed) == ErrorKind.TOOL_FAILED and failed.error.message == '{"error":"quota","left":0}'
        assert own(failed).error == {"status": 500, "body": {"detail": {"error": "quota", "left": 0}}}
        limited = await dispatch.call(Call("EchoEnv_teapot", {}))
        assert kind(limited) == ErrorKind.RATE_LIMITED and limited.error.retry_after_ms == 7000
        assert own(limited).error == {"status": 429, "body": {"detail": "slow down"}, "headers": {"Retry-After": "7"}}
        down = await dispatch.call(Call("EchoEnv_down", {}))
        assert kind(down) == ErrorKind.UPSTREAM_UNAVAILABLE and own(down).error["status"] == 503
        assert own(down).error["body"]["detail"].startswith("node is not running: ")
        refused = await dispatch.call(Call("MathEnv_divide", {"a": 1, "b": 0}))
        assert own(refused).error["status"] == 422 and own(refused).error["body"]["detail"][0]["loc"][-1] == "b"
        gone = await dispatch.call(Call("EchoEnv_retired", {}))
        assert own(gone).error == {"status": 404, "body": {"detail": "The tool EchoEnv_retired is not found!"}}
        # A credential in the node's words is redacted, as in every error text a client reads.
        leaked = await dispatch.call(Call("EchoEnv_fail", {"message": "password=hunter2-secret"}))
        assert "hunter2" not in json.dumps(own(leaked).error) and "hunter2" not in leaked.error.message
        assert own(leaked).error["body"] == {"detail": "RuntimeError: password=[redacted]"}
    finally:
        await backend.close()


async def test_a_route_missing_upstream_is_the_gateways_to_answer(node: str) -> None:
    dispatch, backend = await connect(node, retries=0)
    try:
        backend.path = "/nowhere"  # the node moved: FastAPI's own 404 `Not Found`, not the node's word on the call
        moved = await dispatch.call(Call("EchoEnv_add", {"a": 1, "b": 1}))
        assert kind(moved) == ErrorKind.UPSTREAM_UNAVAILABLE and moved.upstream is None
    finally:
        await backend.close()


async def test_the_nodes_own_retrieval(node: str) -> None:
    backend = backend_of(settings(node))
    try:
        await backend.discover()
        question = {"question": "divide two numbers", "top_k": 2}
        context = CallContext(front="toolserver", session_id="mine")
        answered = await backend.operate(RequestKind.LIST, "/retrieving_tools", question, context)
        direct = httpx.post(f"{node}/get_cookie", timeout=5).cookies["node_id"]
        expected = httpx.post(f"{node}/retrieving_tools", json=question, cookies={"node_id": direct}, timeout=5).json()
        assert answered.value == expected and answered.upstream == UpstreamAnswer("toolserver", result=expected)
        with pytest.raises(GatewayError) as refused:
            await backend.operate(RequestKind.LIST, "/get_available_tools", {}, context)
        assert refused.value.failure.kind == ErrorKind.MALFORMED  # the one listing asked for a caller
    finally:
        await backend.close()


# ---- sessions ----


async def test_one_upstream_session_per_front_session(node: str) -> None:
    dispatch, backend = await connect(node)
    try:

        async def node_of(session: str | None) -> str:
            outcome = await dispatch.call(Call("EchoEnv_echo", {"text": "x"}, CallContext(session_id=session)))
            return str(outcome.value["node"])

        first, second = await node_of("front-session-1"), await node_of("front-session-2")
        assert first != second and await node_of("front-session-1") == first
        shared = await node_of(None)
        assert shared not in (first, second) and await node_of(None) == shared
        await backend.release_session("", str(CallContext(session_id="front-session-1").session_key))
        assert first not in live_nodes(node) and second in live_nodes(node)
    finally:
        await backend.close()
    assert second not in live_nodes(node) and shared not in live_nodes(node)  # close releases them all


async def test_shared_mode_uses_one_upstream_session(node: str) -> None:
    dispatch, backend = await connect(node, sessions="shared")
    try:
        seen = set()
        for session in ("a", "b", None):
            outcome = await dispatch.call(Call("EchoEnv_echo", {"text": "x"}, CallContext(session_id=session)))
            seen.add(outcome.value["node"])
        assert len(seen) == 1
    finally:
        await backend.close()


async def test_idle_sessions_are_released(node: str) -> None:
    dispatch, backend = await connect(node, session_idle_s=0.2)
    try:
        idle = (await dispatch.call(Call("EchoEnv_echo", {"text": "x"}, CallContext(session_id="idle")))).value["node"]
        deadline = time.monotonic() + 10
        while idle in live_nodes(node) and time.monotonic() < deadline:  # any later call sweeps idle sessions
            await dispatch.call(Call("EchoEnv_echo", {"text": "x"}, CallContext(session_id="busy")))
            await asyncio.sleep(0.05)
        assert idle not in live_nodes(node)
    finally:
        await backend.close()


async def test_excess_sessions_are_released(node: str) -> None:
    dispatch, backend = await connect(node, max_sessions=2)
    try:
        nodes = []
        for session in ("s1", "s2", "s3"):
            outcome = await dispatch.call(Call("EchoEnv_echo", {"text": "x"}, CallContext(session_id=session)))
            nodes.append(outcome.value["node"])
        deadline = time.monotonic() + 10
        while nodes[0] in live_nodes(node) and time.monotonic() < deadline:  # released in the background
            await asyncio.sleep(0.05)
        assert nodes[0] not in live_nodes(node) and nodes[2] in live_nodes(node)
    finally:
        await backend.close()


async def test_upstream_restart_gets_a_new_cookie(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", NODE, "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with server_process(command, port):
        dispatch, backend = await connect(url)
        before = await dispatch.call(Call("EchoEnv_echo", {"text": "x"}))
    try:
        with server_process(command, port):  # a new process: every node_id it issued is gone
            after = await dispatch.call(Call("EchoEnv_echo", {"text": "y"}))
            assert after.error is None, after.error  # 403 invalid node_id -> new cookie -> sent again
            assert after.value["node"] != before.value["node"]
            assert live_nodes(url) == [after.value["node"]]  # exactly one new node: sent once more, not more
    finally:
        await backend.close()


# ---- upstream 450 ----


async def test_other_fronts_follow_next_calling(node: str) -> None:
    dispatch, backend = await connect(node)
    try:
        ctx = CallContext(front="opentool", session_id="follow")
        outcome = await dispatch.call(Call("ShellEnv_run", {"steps": 4}, ctx))
        assert outcome.value["output"] == "done after 4 reads"
        started = time.monotonic()
        endless = await dispatch.call(
            Call("ShellEnv_run", {"steps": 10**6}, CallContext(front="oxp"), timeout=DEADLINE)
        )
        assert kind(endless) == ErrorKind.DEADLINE and time.monotonic() - started < DEADLINE + MARGIN
    finally:
        await backend.close()
    dispatch, backend = await connect(node, follow_max_calls=2)
    try:
        capped = await dispatch.call(Call("ShellEnv_run", {"steps": 10}, CallContext(front="opentool")))
        assert kind(capped) == ErrorKind.DEADLINE and "after 2 calls" in capped.error.message
    finally:
        await backend.close()


async def test_toolserver_front_gets_the_450_in_gateway_names(node: str) -> None:
    dispatch, backend = await connect(node)
    try:
        ctx = CallContext(front="toolserver", session_id="mine")
        pending = await dispatch.call(Call("ShellEnv_run", {"steps": 1}, ctx))
        assert kind(pending) == ErrorKind.PENDING and pending.error.details["next_calling"] == RELAY
        assert pending.upstream is None  # a hidden node tool is in no catalog: the relay, never the node's 450
        arguments = pending.error.details["arguments"]
        other = await dispatch.call(Call(RELAY, arguments, CallContext(front="toolserver", session_id="theirs")))
        assert kind(other) == ErrorKind.NOT_FOUND  # a continuation belongs to its session
        done = await dispatch.call(Call(RELAY, arguments, CallContext(front="toolserver", session_id="mine")))
        assert done.value["output"] == "done after 1 reads", done.error
        again = await dispatch.call(Call(RELAY, arguments, CallContext(front="toolserver", session_id="mine")))
        assert kind(again) == ErrorKind.NOT_FOUND  # used once
    finally:
        await backend.close()


async def test_next_calling_of_a_listed_tool_gets_its_routed_name(node: str) -> None:
    dispatch, backend = await connect(node, prefix="Up")
    try:
        ctx = CallContext(front="toolserver", session_id="mine")
        pending = await dispatch.call(Call("UpShellEnv_start", {"steps": 1}, ctx))
        assert kind(pending) == ErrorKind.PENDING
        assert pending.error.details["next_calling"] == "UpShellEnv_status"  # the node said ShellEnv_status
        assert pending.upstream is None  # renamed: not the node's 450 as it came
        done = await dispatch.call(Call("UpShellEnv_status", pending.error.details["arguments"], ctx))
        assert done.value["output"] == "done after 1 reads", done.error
        assert backend.relay_name == "UpToolplex_continue_node"
    finally:
        await backend.close()


async def test_the_nodes_own_450_when_the_gateway_has_next_calling_by_its_name(node: str) -> None:
    dispatch, backend = await connect(node)
    try:
        ctx = CallContext(front="toolserver", session_id="mine")
        pending = await dispatch.call(Call("ShellEnv_start", {"steps": 2}, ctx))
        detail = own(pending).error["body"]["detail"]
        assert own(pending).error["status"] == 450 and detail["next_calling"] == "ShellEnv_status"
        assert pending.error.details == {"next_calling": "ShellEnv_status", "arguments": detail["arguments"]}
        # The node's job is in the caller's own node session: another session's node does not know it.
        theirs = await dispatch.call(
            Call("ShellEnv_status", detail["arguments"], CallContext(front="toolserver", session_id="theirs"))
        )
        assert kind(theirs) == ErrorKind.TOOL_FAILED and "no job" in own(theirs).error["body"]["detail"]
        again = await dispatch.call(Call("ShellEnv_status", detail["arguments"], ctx))
        assert own(again).error["status"] == 450  # the second of the two reads
        done = await dispatch.call(Call("ShellEnv_status", detail["arguments"], ctx))
        assert done.value["output"] == "done after 2 reads", done.error
    finally:
        await backend.close()


async def test_relay_dropped_by_routing_means_following(node: str) -> None:
    dispatch, backend = await connect(node, include=["EchoEnv.*", "ShellEnv.*"])
    try:
        assert backend.relay_name is None  # no gateway name for a hidden upstream tool: follow instead
        ctx = CallContext(front="toolserver", session_id="mine")
        outcome = await dispatch.call(Call("ShellEnv_run", {"steps": 2}, ctx))
        assert outcome.value["output"] == "done after 2 reads", outcome.error
    finally:
        await backend.close()


# ---- through real gateways ----


def gateway_config(tmp_path: Path, url: str, extra: str = "", keys: str = "") -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(
        "backends:\n"
        f"  - {{name: node, kind: toolserver, url: '{url}', follow_backoff_s: 0.05{keys}}}\n"
        "fronts:\n"
        "  toolserver: {patience_s: 0.5}\n"
        "  opentool: {prefix: /opentool}\n" + extra
    )
    return path


def opentool_call(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": "c1", "method": tool, "params": arguments}
    return requests.post(f"{url}/opentool/call", json=body, timeout=30).json()  # type: ignore[no-any-return]


def test_xagent_client_loop_and_opentool_front_through_the_gateway(node: str, tmp_path: Path) -> None:
    with gateway_process(gateway_config(tmp_path, node)) as url:
        client = XAgentClient(url)
        result, code, retries = client.handle_tool_call("ShellEnv_run", {"steps": 3})
        assert code == ToolCallStatusCode.TOOL_CALL_SUCCESS and result["output"] == "done after 3 reads"
        assert retries == 3  # the node's three 450s (run, then two reads), passed through
        continued = [payload["tool_name"] for _, payload in client.requests_sent[1:]]
        assert continued == [RELAY, RELAY, RELAY]

        assert client.handle_tool_call("EchoEnv_add", {"a": 2, "b": 40})[:2] == (
            42,
            ToolCallStatusCode.TOOL_CALL_SUCCESS,
        )
        assert client.handle_tool_call("EchoEnv_retired", {})[1] == ToolCallStatusCode.HALLUCINATE_NAME
        assert client.handle_tool_call("MathEnv_divide", {"a": 1, "b": 0})[1] == ToolCallStatusCode.FORMAT_ERROR
        failed, code, _ = client.handle_tool_call("EchoEnv_fail", {"message": "kaputt"})
        assert code == ToolCallStatusCode.TOOL_CALL_FAILED and "kaputt" in failed
        with pytest.raises(Exception, match="Server Error"):
            client.handle_tool_call("EchoEnv_down", {})

        other = XAgentClient(url)
        mine = client.handle_tool_call("EchoEnv_echo", {"text": "a"})[0]["node"]
        theirs = other.handle_tool_call("EchoEnv_echo", {"text": "b"})[0]["node"]
        assert mine != theirs
        requests.post(f"{url}/release_session", cookies=other.cookies, timeout=10)
        assert theirs not in live_nodes(node) and mine in live_nodes(node)

        answer = opentool_call(url, "ShellEnv_run", {"steps": 3})
        assert answer["result"]["output"] == "done after 3 reads", answer  # followed by the backend


def test_file_passthrough(node: str, tmp_path: Path) -> None:
    with gateway_process(gateway_config(tmp_path, node)) as url:
        client, other = XAgentClient(url), XAgentClient(url)
        uploaded = requests.post(
            f"{url}/upload_file", files={"file": ("notes.txt", b"hello node")}, cookies=client.cookies, timeout=10
        )
        assert uploaded.status_code == 200 and uploaded.json() == {"message": "Upload Success!"}
        tree = requests.post(f"{url}/get_workspace_structure", cookies=client.cookies, timeout=10).json()
        assert [c["name"] for c in tree["children"]] == ["notes.txt"]
        empty = requests.post(f"{url}/get_workspace_structure", cookies=other.cookies, timeout=10).json()
        assert empty["children"] == []  # another session, another node

        download = requests.post(
            f"{url}/download_file", json={"file_path": "workspace/notes.txt"}, cookies=client.cookies, timeout=10
        )
        assert download.content == b"hello node" and "notes.txt" in download.headers["content-disposition"]
        missing = requests.post(f"{url}/download_file", json={"file_path": "nope"}, cookies=client.cookies, timeout=10)
        assert (missing.status_code, missing.text) == (500, "Internal Server Error")  # the node's own, passed on
        bad = requests.post(f"{url}/download_file", json={}, cookies=client.cookies, timeout=10)
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "file_path"]
        archive = requests.post(f"{url}/download_workspace", cookies=client.cookies, timeout=10)
        assert zipfile.ZipFile(io.BytesIO(archive.content)).read("notes.txt") == b"hello node"

        # The tools run on the same node as the files.
        read = client.handle_tool_call("FileSystemEnv_read_from_file", {"filepath": "notes.txt"})
        assert read[:2] == ("    1: hello node", ToolCallStatusCode.TOOL_CALL_SUCCESS)


def test_workspace_backend_picks_the_node(node: str, tmp_path: Path) -> None:
    config = tmp_path / "two.yaml"
    config.write_text(
        "backends:\n"
        f"  - {{name: first, kind: toolserver, url: '{node}'}}\n"
        f"  - {{name: second, kind: toolserver, url: '{node}', prefix: B}}\n"
        "fronts:\n  toolserver: {workspace_backend: second}\n"
    )
    with gateway_process(config) as url:
        client = XAgentClient(url)
        files = {"file": ("notes.txt", b"for the second")}
        assert requests.post(f"{url}/upload_file", files=files, cookies=client.cookies, timeout=10).status_code == 200
        read = client.handle_tool_call("BFileSystemEnv_read_from_file", {"filepath": "notes.txt"})
        assert read[:2] == ("    1: for the second", ToolCallStatusCode.TOOL_CALL_SUCCESS)
        other = client.handle_tool_call("FileSystemEnv_read_from_file", {"filepath": "notes.txt"})
        assert other[1] == ToolCallStatusCode.TOOL_CALL_FAILED  # the first backend's node has no such file


def test_without_a_toolserver_backend_the_gateway_serves_its_own_workspaces(tmp_path: Path) -> None:
    config = tmp_path / "plain.yaml"
    config.write_text(
        BUILTIN_BACKENDS + '  - {name: files, kind: python, module: "adapters.python.toolkits.filesystem:toolkit"}\n'
    )
    source = tmp_path / "report.md"
    source.write_text("# Report\nall good\n")
    with gateway_process(config) as url:
        client, other = XAgentClient(url), XAgentClient(url)
        assert client.upload_file(str(source)) == {"message": "Upload Success!"}
        assert client.get_workspace_structure()["children"] == [{"name": "report.md", "type": "file"}]
        assert other.get_workspace_structure()["children"] == []
        read = client.handle_tool_call("FileSystemEnv_read_from_file", {"filepath": "report.md"})
        assert read[:2] == ("    1: # Report\n    2: all good\n", ToolCallStatusCode.TOOL_CALL_SUCCESS)
        saved = client.download_file("workspace/report.md", tmp_path / "record")
        assert saved.read_bytes() == source.read_bytes()
        zipped = zipfile.ZipFile(client.download_all_files(tmp_path / "record"))
        assert zipped.read("report.md") == source.read_bytes()


def test_toolplex_fronting_toolplex(tmp_path: Path) -> None:
    upstream_config = tmp_path / "upstream.yaml"
    upstream_config.write_text(
        BUILTIN_BACKENDS + "fronts:\n  toolserver: {patience_s: 0.3}\nauth: {api_keys: [{key: inner-secret-key}]}\n"
    )
    with gateway_process(upstream_config) as upstream:
        assert requests.post(f"{upstream}/get_cookie", timeout=10).status_code == 401  # the key is needed
        (tmp_path / "down").mkdir()
        with gateway_process(gateway_config(tmp_path / "down", upstream, keys=", api_key: inner-secret-key")) as url:
            client = XAgentClient(url)
            tools = client.get_available_tools()["available_tools"]
            assert "Math_Add" in tools and "Demo_Sleep" in tools
            assert client.handle_tool_call("Math_Add", {"a": 2, "b": 40})[:2] == (
                42,
                ToolCallStatusCode.TOOL_CALL_SUCCESS,
            )
            assert client.handle_tool_call("Math_Add", {"a": "two"})[1] == ToolCallStatusCode.FORMAT_ERROR
            failed, code, _ = client.handle_tool_call("Demo_Fail", {"message": "kaputt"})
            assert code == ToolCallStatusCode.TOOL_CALL_FAILED and "kaputt" in failed

            # The upstream gateway answers 450 with its own hidden collect tool; the downstream one
            # passes that on in its own names, and the client's loop finishes the call.
            result, code, retries = client.handle_tool_call("Demo_Sleep", {"seconds": 1.5})
            assert (result, code) == ({"slept": 1.5}, ToolCallStatusCode.TOOL_CALL_SUCCESS) and retries >= 1
            names = {payload["tool_name"] for _, payload in client.requests_sent[-retries:]}
            assert names <= {RELAY, "Toolplex_collect_result"} and RELAY in names

            answer = opentool_call(url, "Demo_Sleep", {"seconds": 1.0})
            assert answer["result"] == {"slept": 1.0}, answer  # the backend followed the upstream's 450s


# ---- faults ----

FAULT_LISTING = {
    "available_envs": [{"name": "EchoEnv", "description": "", "tools": ["EchoEnv_echo"]}],
    "available_tools": ["EchoEnv_echo"],
    "tools_json": [
        {"name": "EchoEnv_echo", "description": "", "parameters": {"type": "object", "properties": {}, "required": []}}
    ],
}


@pytest.mark.parametrize(("mode", "expected"), FAULTS)
async def test_fault(mode: str, expected: ErrorKind, tmp_path: Path) -> None:
    document = tmp_path / "listing.json"
    document.write_text(json.dumps(FAULT_LISTING))
    args = ["--mode", mode, "--document", str(document), "--delay", str(DEADLINE + 1)]
    with python_server("tests.upstreams.faulty_server", *args) as port:
        dispatch, backend = await connect(f"http://127.0.0.1:{port}", timeout=DEADLINE, retries=2, retry_backoff_s=0.01)
        try:
            for front in ("toolserver", "opentool"):
                started = time.monotonic()
                outcome = await dispatch.call(Call("EchoEnv_echo", {}, CallContext(front=front)))
                assert kind(outcome) == expected, (mode, front, outcome.error)
                assert time.monotonic() - started < DEADLINE + MARGIN
        finally:
            await backend.close()


async def test_refused_connection() -> None:
    url = f"http://127.0.0.1:{refused_port()}"  # nothing listens there
    backend = backend_of(settings(url, retries=1, retry_backoff_s=0.01))
    with pytest.raises(GatewayError) as info:
        await backend.discover()
    assert info.value.failure.kind == ErrorKind.UPSTREAM_UNAVAILABLE  # the runtime marks it down; not fatal
    await backend.close()


def test_gateway_starts_with_its_toolserver_upstream_down(tmp_path: Path) -> None:
    with gateway_process(gateway_config(tmp_path, f"http://127.0.0.1:{refused_port()}")) as url:
        states = requests.get(f"{url}/readyz", timeout=10).json()["backends"]
        assert [(s["name"], s["state"]) for s in states] == [("node", "down")]


# ---- configuration ----


def test_configuration_keys() -> None:
    text = BUILTIN_BACKENDS.replace(
        "backends:\n",
        "backends:\n  - {name: node, kind: toolserver, url: 'http://127.0.0.1:1', path: /ts, sessions: shared,"
        " api_key: k, session_idle_s: 60, max_sessions: 10, follow_max_calls: 5, follow_backoff_s: 0.1}\n",
    )
    parse_config(text + "fronts:\n  toolserver: {workspace_backend: node}\n")
    with pytest.raises(ConfigError, match="workspace_backend"):
        create_app(parse_config(BUILTIN_BACKENDS + "fronts:\n  toolserver: {workspace_backend: math}\n"))
    with pytest.raises(ConfigError, match="sessions"):
        parse_config("backends:\n  - {name: n, kind: toolserver, url: 'http://x', sessions: sometimes}\n")


# ---- the codec's reading side ----


def test_unwrap_result_as_the_xagent_client_does() -> None:
    assert codec.unwrap_result({"type": "simple", "data": {"a": 1}}) == {"a": 1}
    assert codec.unwrap_result({"type": "composite", "data": [{"type": "simple", "data": 1}, "x"]}) == [1, "x"]
    binary = {"type": "binary", "media_type": "image/png", "name": "a.png", "data": "AA=="}
    assert codec.unwrap_result(binary) == binary
    assert codec.unwrap_result(codec.wrap_result(b"\x00")) == codec.wrap_result(b"\x00")  # a round trip keeps bytes
    for raw in ("text", 3, 2.5, True, None, [1, {"a": 2}]):
        assert codec.unwrap_result(raw) == raw
    with pytest.raises(ValueError):
        codec.unwrap_result({"items": []})


def test_parameter_errors_of_a_fastapi_detail_list() -> None:
    detail = [
        {"type": "missing", "loc": ["body", "arguments", "path"], "msg": "Field required", "input": None},
        {"type": "int_type", "loc": ["body", "arguments", "opts", "depth"], "msg": "Input should be a valid integer"},
        {"type": "missing", "loc": ["body", "tool_name"], "msg": "Field required"},
        {"type": "dict_type", "loc": ["body", "arguments"], "msg": "Input should be a valid dictionary"},
        "not an item",
    ]
    assert codec.parameter_errors_of(detail) == {
        "path": "Field required",
        "opts": "depth: Input should be a valid integer",
        "tool_name": "Field required",
        "(arguments)": "Input should be a valid dictionary",
    }


# ---- a bare node (no session endpoints), error meaning, isolation, fidelity across a Toolplex hop ----


@pytest.fixture(scope="module")
def bare() -> Iterator[str]:
    with python_server(BARE) as port:
        yield f"http://127.0.0.1:{port}"


async def test_a_bare_node_is_detected_and_serves_every_session(bare: str) -> None:
    assert requests.post(f"{bare}/get_cookie", timeout=10).status_code == 404  # as the real node
    dispatch, backend = await connect(bare)
    try:
        assert backend.sessionless
        one = await dispatch.call(Call("EchoEnv_echo", {"text": "a"}, CallContext(front="toolserver", session_id="1")))
        two = await dispatch.call(Call("EchoEnv_echo", {"text": "b"}, CallContext(front="toolserver", session_id="2")))
        assert one.error is None and one.value["node"] == two.value["node"]  # one node, one workspace
        followed = await dispatch.call(Call("ShellEnv_run", {"steps": 2}, CallContext(front="opentool")))
        assert followed.value["output"] == "done after 2 reads", followed.error
        looked_up = dispatch.catalog.resolve("FileSystemEnv_read_from_file")  # via the bare-array schema look-up
        assert looked_up.input_schema["required"] == ["filepath"]
        await backend.release_session("", str(CallContext(front="toolserver", session_id="1").session_key))
    finally:
        await backend.close()


async def test_sessions_none_never_asks_for_a_cookie(node: str) -> None:
    before = live_nodes(node)
    backend = backend_of(settings(node, sessions="none", retries=0))
    try:
        with pytest.raises(GatewayError) as info:
            await backend.discover()  # a Manager wants a cookie: refused, and none was asked for
        assert info.value.failure.kind == ErrorKind.UPSTREAM_UNAVAILABLE
        assert live_nodes(node) == before
    finally:
        await backend.close()


async def test_statuses_without_a_node_meaning_keep_their_http_meaning(node: str) -> None:
    dispatch, backend = await connect(node)
    try:
        object_error = await dispatch.call(Call("EchoEnv_object_error", {}))
        assert kind(object_error) == ErrorKind.TOOL_FAILED
        assert object_error.error.message == '{"error":"quota","left":0}'  # JSON, never a Python repr
        limited = await dispatch.call(Call("EchoEnv_teapot", {}))
        assert kind(limited) == ErrorKind.RATE_LIMITED and limited.error.retry_after_ms == 7000
        assert "slow down" in limited.error.message
    finally:
        await backend.close()


def test_downloads_are_not_upstream_faults(node: str, tmp_path: Path) -> None:
    config = gateway_config(tmp_path, node, keys=", circuit_breaker: {failures: 2, cooldown_s: 600}")
    with gateway_process(config) as url:
        client = XAgentClient(url)
        files = {"file": ("plain.txt", b"just text")}
        assert requests.post(f"{url}/upload_file", files=files, cookies=client.cookies, timeout=10).status_code == 200
        for _ in range(4):  # twice the breaker's threshold of non-JSON answers
            r = requests.post(
                f"{url}/download_file", json={"file_path": "plain.txt"}, cookies=client.cookies, timeout=10
            )
            assert r.content == b"just text" and r.headers["content-type"].startswith("text/plain")
            assert requests.post(f"{url}/download_workspace", cookies=client.cookies, timeout=10).status_code == 200
        assert client.handle_tool_call("EchoEnv_add", {"a": 1, "b": 2})[:2] == (3, ToolCallStatusCode.TOOL_CALL_SUCCESS)


def test_a_jsonrpc_session_id_equal_to_a_node_id_gets_its_own_upstream_session(node: str, tmp_path: Path) -> None:
    with gateway_process(gateway_config(tmp_path, node)) as url:
        client = XAgentClient(url)
        node_id = client.cookies["node_id"]
        files = {"file": ("private.txt", b"mine only")}
        requests.post(f"{url}/upload_file", files=files, cookies=client.cookies, timeout=10).raise_for_status()
        mine = client.handle_tool_call("EchoEnv_echo", {"text": "x"})[0]["node"]

        def rpc(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            params = {"tool": tool, "parameters": arguments, "context": {"sessionId": node_id}}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": params}
            return requests.post(f"{url}/rpc", json=body, timeout=30).json()  # type: ignore[no-any-return]

        theirs = rpc("EchoEnv_echo", {"text": "x"})
        assert theirs["result"]["metadata"]["value"]["node"] != mine, theirs  # another upstream node session
        stolen = rpc("FileSystemEnv_read_from_file", {"filepath": "private.txt"})
        assert "result" not in stolen and "not found" in json.dumps(stolen["error"])


def test_xagent_client_sequence_through_toolplex_to_a_bare_node(bare: str, tmp_path: Path) -> None:
    """The real client's calls, in its order: cookie, upload, a call answered with 450 then collected, download."""
    source = tmp_path / "task.txt"
    source.write_text("write a poem\n")
    with gateway_process(gateway_config(tmp_path, bare)) as url:
        client = XAgentClient(url)
        assert client.cookies.get("node_id")  # the gateway's own session; the node has none
        assert client.upload_file(str(source)) == {"message": "Upload Success!"}
        names = [c["name"] for c in client.get_workspace_structure()["children"]]
        assert "task.txt" in names
        tools = client.get_available_tools()
        assert "ShellEnv_run" in tools["available_tools"]
        assert {e["name"]: e["description"] for e in tools["available_envs"]}["ShellEnv"] == "Long-running jobs"

        result, code, retries = client.handle_tool_call("ShellEnv_run", {"steps": 2})
        assert (code, result["output"]) == (ToolCallStatusCode.TOOL_CALL_SUCCESS, "done after 2 reads")
        assert retries == 2 and {p["tool_name"] for _, p in client.requests_sent[1:]} == {RELAY}
        read = client.handle_tool_call("FileSystemEnv_read_from_file", {"filepath": "task.txt"})
        assert read[:2] == ("    1: write a poem\n", ToolCallStatusCode.TOOL_CALL_SUCCESS)

        saved = client.download_file("workspace/task.txt", tmp_path / "record")
        assert saved.read_bytes() == b"write a poem\n"
        zipped = zipfile.ZipFile(client.download_all_files(tmp_path / "record"))
        assert zipped.read("task.txt") == b"write a poem\n"
        client.close()


VERSIONED = '''
from adapters.python import Toolkit, tool


@tool(name="Greet", version="1.0.0")
def greet_v1(name: str) -> str:
    """Greets, tersely (v1)."""
    return f"hi {name} (v1)"


@tool(name="Greet", version="2.0.0")
def greet_v2(name: str, polite: bool = False) -> str:
    """Greets in full sentences.

    The second line of the description travels too.
    """
    return f"hello {name} (v2)"


toolkit = Toolkit("Hello", [greet_v1, greet_v2])
'''


def test_toolplex_behind_toolplex_over_toolserver_keeps_every_tool_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "versioned_tools.py").write_text(VERSIONED)
    inner = tmp_path / "inner.yaml"
    inner.write_text(
        BUILTIN_BACKENDS
        + "  - {name: hello, kind: python, module: 'versioned_tools:toolkit'}\n"
        + "auth: {api_keys: [{key: inner-secret-key}]}\n"
    )
    env = {"PYTHONPATH": str(tmp_path)}
    key = {"Authorization": "Bearer inner-secret-key"}
    fields = ("id", "name", "description", "version", "input_schema", "output_schema")
    with gateway_process(inner, env=env) as upstream:
        (tmp_path / "outer").mkdir()
        outer = gateway_config(tmp_path / "outer", upstream, keys=", api_key: inner-secret-key")
        with gateway_process(outer) as url:
            theirs = requests.get(f"{upstream}/tools", headers=key, timeout=10).json()["items"]
            ours = requests.get(f"{url}/tools", timeout=10).json()["items"]
            assert sorted(tuple(json.dumps(t[f], sort_keys=True) for f in fields) for t in ours) == sorted(
                tuple(json.dumps(t[f], sort_keys=True) for f in fields) for t in theirs
            )
            assert {t["id"] for t in ours} >= {"Hello.Greet@1.0.0", "Hello.Greet@2.0.0", "Math.Add@1.0.0"}
            old = requests.post(
                f"{url}/tools/call", json={"tool_id": "Hello.Greet@1.0.0", "input": {"name": "ada"}}, timeout=30
            )
            assert "hi ada (v1)" in old.text, old.text  # the exact version ran upstream
            new = requests.post(
                f"{url}/tools/call", json={"tool_id": "Hello.Greet", "input": {"name": "ada"}}, timeout=30
            )
            assert "hello ada (v2)" in new.text, new.text
