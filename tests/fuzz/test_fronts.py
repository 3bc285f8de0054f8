"""Generated requests against a real `toolplex serve`, per front: never a 5xx the protocol does not
define, a traceback, a hang or a dropped connection.

`make test` sends a few hundred (derandomized, so a failure reproduces); `make fuzz` sends
FUZZ_EXAMPLES (10,000) per front with fresh randomness, each front bounded by FUZZ_SECONDS.

The MCP front counts as two fronts, one per protocol era (`mcp-handshake`, `mcp-modern`; each mixes in a
few requests of the other era). Its upstream side is real too: tests/mcp/reference_server.py serves as two
`kind: mcp` backends, one reached at 2026-07-28 and one held to the handshake era (`Legacy_*`), so the
pass-through (resources, prompts, completions, tasks, questions across eras) is reachable. FUZZ_MCP_OUTCOMES=1
prints what the MCP run reached (method, status and answer, most common first).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.mcp_client import Failed, McpFuzzClient
from tests.fuzz.mcp_requests import MCP_ERAS, real
from tests.fuzz.requests import FRONTS, FuzzRequest, encode, nested
from tests.support import BUILTIN_BACKENDS, ROOT, free_port, gateway_process, stop, wait_for_port

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
SECONDS = float(os.environ.get("FUZZ_SECONDS", "120"))
RANDOM = os.environ.get("FUZZ_RANDOM") == "1"
CLIENT_TIMEOUT_S = 15.0  # every call is capped at 2 s by the config below: longer is a hang
MCP_SESSION_IDLE_S = 120  # fronts.mcp.session_idle_s in CONFIG below

CONFIG = (
    """
server: {host: 127.0.0.1, port: 8080}
limits: {default_timeout_s: 2, max_timeout_s: 2}
fronts:
  opentool: {prefix: /opentool}
  oxp: {prefix: "", patience_s: 1}
  toolserver: {prefix: "", patience_s: 1}
  jsonrpc: {path: /rpc}
  mcp:
    path: /mcp
    page_size: 7                # tools/list pages with real cursors
    session_idle_s: 120         # MCP_SESSION_IDLE_S
    progress_interval_s: 0.2
    servers: {math: {include: ["Math_*"], exclude: ["Math_Divide"]}}
"""
    + BUILTIN_BACKENDS
    # The reference MCP server twice: at 2026-07-28 under its own names, and held to the handshake era as
    # `Legacy_*` (its questions to a 2026-07-28 caller are held calls). Held calls and answers bounded short.
    + """
  - {name: reference, kind: mcp, url: "${UPSTREAM}", answer_timeout_s: 3, max_held_calls: 16}
  - {name: legacy, kind: mcp, url: "${UPSTREAM}", era: legacy, toolkit: Legacy, answer_timeout_s: 3, max_held_calls: 16}
"""
)


class Server:
    def __init__(self, base: str, log: Path) -> None:
        self.base = base
        self.log = log
        self.client = httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT_S)
        self.sent = 0


@contextlib.contextmanager
def reference_upstream(log: Path) -> Iterator[str]:
    """tests/mcp/reference_server.py on a free port (up before the gateway starts, so that the gateway's first
    discovery finds it: started side by side, the gateway's retries cost as much as the overlap saves)."""
    port = free_port()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.mcp.reference_server", "--port", str(port)],
            cwd=ROOT,
            stdout=out,
            stderr=out,
        )
        try:
            wait_for_port(port, process)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop(process)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("fuzz")
    config = folder / "fuzz.yaml"
    config.write_text(CONFIG)
    log = folder / "gateway.log"
    with (
        reference_upstream(folder / "reference.log") as upstream,
        gateway_process(config, env={"UPSTREAM": upstream}, log_path=log) as base,
    ):
        found = Server(base, log)
        yield found
        found.client.close()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, f"the gateway logged a traceback:\n{text[-4000:]}"
    assert "internal_error" not in text, f"the gateway logged an internal error:\n{text[-4000:]}"


def protocol_defined_5xx(request: FuzzRequest, response: httpx.Response) -> bool:
    """ToolServerNode answers a tool that raised (or ran out of time) with 500: that one is the protocol."""
    if request.path != "/execute_tool" or response.status_code != 500:
        return False
    detail = orjson.loads(response.content).get("detail")
    return "Internal error" not in str(detail)


def check(request: FuzzRequest, server: Server) -> None:
    try:
        response = server.client.request(request.method, request.path, content=request.body, headers=request.headers)
    except httpx.TimeoutException:
        pytest.fail(f"hang: no answer within {CLIENT_TIMEOUT_S} s to {request}")
    except httpx.TransportError as exc:
        pytest.fail(f"dropped connection ({type(exc).__name__}: {exc}) on {request}")
    finally:
        server.client.cookies.clear()
    server.sent += 1
    body = response.content
    assert b"Traceback" not in body, f"traceback in the answer to {request}"
    if response.status_code == 204:
        return
    media = response.headers.get("content-type", "")
    if media.startswith("text/event-stream"):
        assert response.status_code == 200
        return
    assert media.startswith("application/json"), f"{response.status_code} {media!r} answer to {request}: {body[:200]!r}"
    orjson.loads(body)  # raises on a broken JSON answer
    if response.status_code >= 500:
        assert protocol_defined_5xx(request, response), f"{response.status_code} to {request}: {body[:300]!r}"


@pytest.mark.parametrize("front", sorted(FRONTS))
def test_front_survives_generated_requests(front: str, server: Server) -> None:
    started = time.monotonic()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(FRONTS[front])
    def run(request: FuzzRequest) -> None:
        if time.monotonic() - started > SECONDS:
            return  # bounded in time: the rest of the examples are drawn but not sent
        check(request, server)

    before = server.sent
    run()
    sent = server.sent - before
    print(f"\n{front}: {sent} generated requests in {time.monotonic() - started:.0f} s, none failed")
    assert sent > 0


@pytest.mark.parametrize("era", sorted(MCP_ERAS))
def test_mcp_front_survives_generated_requests(era: str, server: Server) -> None:
    """The MCP front, per era: the same property, with what MCP defines (see tests/fuzz/mcp_client.py)."""
    started = time.monotonic()
    client = McpFuzzClient(server.base, server.log, CLIENT_TIMEOUT_S, MCP_SESSION_IDLE_S)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(MCP_ERAS[era])
    def run(request: FuzzRequest) -> None:
        if time.monotonic() - started > SECONDS:
            return
        try:
            client.check(request)
        except Failed as failure:
            pytest.fail(f"{failure}\n(request {client.sent} of the run)")

    try:
        run()
        time.sleep(0.5)  # what the last request made the gateway log
        client.check_log("at the end")
    finally:
        client.close()
    print(
        f"\n{era}: {client.sent} generated requests in {time.monotonic() - started:.0f} s, none failed; "
        f"statuses {dict(sorted(client.statuses.items()))}"
    )
    if os.environ.get("FUZZ_MCP_OUTCOMES"):  # what the run reached: method -> status and answer, most common first
        print("\n".join(f"{count:6} {line}" for line, count in client.outcomes.most_common()))
    assert client.sent > 0


# ---- regressions: requests the MCP fuzz found to break the property (see each test's docstring) ----

MODERN_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
}


@pytest.fixture
def mcp_client(server: Server) -> Iterator[McpFuzzClient]:
    client = McpFuzzClient(server.base, server.log, CLIENT_TIMEOUT_S, MCP_SESSION_IDLE_S)
    yield client
    client.close()


@pytest.mark.parametrize("tool", ["test_simple_text", "Legacy_test_simple_text"])
def test_mcp_arguments_nested_too_deep_are_refused_not_an_internal_error(tool: str, mcp_client: McpFuzzClient) -> None:
    """A 2026-07-28 `tools/call` of an MCP upstream's tool whose arguments nest 300 levels deep.

    The MCP front applies neither `limits.max_json_depth` (64) nor `limits.max_body_bytes` to request bodies, as
    the other fronts do (`gateway.http.parse_json`), and the SDK's `json.loads` takes ~1000 levels, so the
    arguments reach code that cannot serialize them: for a handshake-era backend (`Legacy_*`) the held call's
    `digest` (`orjson.dumps`, 255 levels at most: `TypeError: Recursion limit reached`, adapters/mcp/client/held.py),
    for a 2026-07-28 one the SDK client's `model_dump` in `call_tool` (`ValueError: Maximum serialization depth
    exceeded`). (The handshake era is spared by chance: the SDK parses its bodies with a 200-level limit.) The caller
    gets 200 with an `isError` result "Internal error; quote call id ..." (`io.toolplex/kind: internal`); the
    gateway logs `internal_error` with the traceback.
    """
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    params = {"name": tool, "arguments": {"x": nested(300)}, "_meta": meta}
    body = encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    request = FuzzRequest("POST", "/mcp", body, {**MODERN_HEADERS, "mcp-name": tool})
    try:
        mcp_client.check(request)
    except Failed as failure:
        pytest.fail(str(failure))


def test_mcp_session_survives_a_request_with_its_id_at_another_endpoint(mcp_client: McpFuzzClient) -> None:
    """A handshake-era session opened at `/mcp/math` (a virtual server), its id then sent to `/mcp`.

    `/mcp` answers 404 (the session is not its own), as it should; but `Endpoint._session_route`
    (adapters/mcp/server/endpoint.py) finds the session's state-store record (`session.mcp:<principal>:<id>`,
    keyed by the id alone, not by the endpoint), sees that its own session manager does not hold the id, and
    deletes the record. From then on the session, still open at `/mcp/math`, answers 404 "Session not found" there too:
    lost to its client, yet held (and counted against `max_sessions`) until `session_idle_s` passes.
    """
    version = "2025-11-25"
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    headers["mcp-protocol-version"] = version
    for path, session in [
        ("/mcp/math", real(f"session:{version}")),  # opened (initialize, initialized) at /mcp/math, then a ping
        ("/mcp", real(f"session:{version}@/mcp/math")),  # its id at /mcp: 404
        ("/mcp/math", real(f"session:{version}")),  # at home again: must still answer
    ]:
        try:
            mcp_client.check(FuzzRequest("POST", path, ping, {**headers, "mcp-session-id": session}))
        except Failed as failure:
            pytest.fail(str(failure))
