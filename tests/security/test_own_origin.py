"""The gateway's own origin passes the Origin check (issue 10, point 7; MCP's dns-rebinding-protection).

A page served from the gateway's own address sends `Origin: http://<Host>`; once the `Host`
check has passed against a list (the loopback names by default when bound to loopback, or
`server.allowed_hosts`), that Origin is accepted on every front without listing it in
`server.allowed_origins`. Any other Origin still needs the list, and a rebound name
(`Host: evil.example`, `Origin: http://evil.example`) is still refused: by the Host check, or,
with no host list to vouch for the Host, by the Origin check.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.security.test_browser_requests import CONFIG, guarded_app, status
from tests.support import gateway_process

MCP_ACCEPT = "application/json, text/event-stream"


@pytest.mark.parametrize(
    "host",
    ["localhost:8080", "localhost", "127.0.0.1:9", "[::1]:8080", "LocalHost:8080"],
)
@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_own_origin_passes_when_the_host_is_a_loopback_name(host: str, scheme: str) -> None:
    app = guarded_app("127.0.0.1")
    assert await status(app, Host=host, Origin=f"{scheme}://{host.lower()}") == 200
    assert await status(app, Host=host, Origin=f"{scheme}://{host.lower()}/") == 200  # a trailing slash, as listed ones


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("localhost:8080", "http://localhost:3000"),  # another port is another origin
        ("localhost:8080", "http://localhost"),
        ("localhost", "http://localhost:8080"),
        ("localhost:8080", "http://127.0.0.1:8080"),  # the Host header's value, exactly
        ("localhost:8080", "ws://localhost:8080"),
        ("localhost:8080", "http://user@localhost:8080"),
        ("localhost:8080", "http://localhost:8080/path"),
        ("localhost:8080", "http://localhost:8080.evil.example"),
        ("localhost:8080", "localhost:8080"),
        ("localhost:8080", "null"),
        ("localhost:8080", "https://evil.example"),
    ],
)
async def test_any_other_origin_still_needs_the_list(host: str, origin: str) -> None:
    assert await status(guarded_app("127.0.0.1"), Host=host, Origin=origin) == 403
    listed = guarded_app("127.0.0.1", f"server:\n  allowed_origins: ['{origin}']\n")
    assert await status(listed, Host=host, Origin=origin) == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "127.0.0.1.evil.example"])
async def test_a_rebound_name_sending_its_own_origin_is_still_refused(host: str) -> None:
    origin = f"http://{host}"
    assert await status(guarded_app("127.0.0.1"), Host=host, Origin=origin) == 421  # the Host check
    # Bound elsewhere with no host list, or with `*`: nothing vouches for the Host, so its origin is not ours.
    assert await status(guarded_app("0.0.0.0"), Host=host, Origin=origin) == 403
    anything = guarded_app("127.0.0.1", "server:\n  allowed_hosts: ['*']\n")
    assert await status(anything, Host=host, Origin=origin) == 403
    assert await status(guarded_app(None), Host=host, Origin=origin) == 403  # in-process, unbound


async def test_a_configured_host_list_vouches_for_its_names() -> None:
    app = guarded_app("0.0.0.0", "server:\n  allowed_hosts: [tools.example.com, '*.internal', 'api:8443']\n")
    assert await status(app, Host="tools.example.com", Origin="https://tools.example.com") == 200
    assert await status(app, Host="a.internal:9000", Origin="http://a.internal:9000") == 200
    assert await status(app, Host="api:8443", Origin="https://api:8443") == 200
    assert await status(app, Host="tools.example.com", Origin="https://app.example.com") == 403
    assert await status(app, Host="evil.example", Origin="http://evil.example") == 421


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path: Path = tmp_path_factory.mktemp("own-origin") / "gateway.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    with gateway_process(path) as base:  # bound to 127.0.0.1: the loopback names are the host list
        yield base


def _touch_opentool(key: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "Effects_Touch", "params": {"key": key}, "id": "1"}


def _touch_rpc(key: str) -> dict[str, Any]:
    params = {"tool": "Effects_Touch", "parameters": {"key": key}}
    return {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": params}


def ran(key: str, answer: Any) -> bool:
    """Whether an answer holds Effects_Touch's result for `key`: the tool ran behind the guard."""
    if isinstance(answer, dict):
        if answer.get("key") == key and isinstance(answer.get("runs"), int):
            return True
        return any(ran(key, value) for value in answer.values())
    if isinstance(answer, list):
        return any(ran(key, value) for value in answer)
    return False


# path, the body of a call to Effects_Touch under `key`
FRONTS: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
    ("/opentool/call", _touch_opentool),
    ("/tools/call", lambda key: {"tool_id": "Effects.Touch", "input": {"key": key}}),
    ("/execute_tool", lambda key: {"tool_name": "Effects_Touch", "arguments": {"key": key}}),
    ("/rpc", _touch_rpc),
]


@pytest.mark.parametrize(("path", "body"), FRONTS, ids=[f[0] for f in FRONTS])
def test_a_real_gateway_serves_its_own_origin_on_every_front(
    served: str, path: str, body: Callable[[str], dict[str, Any]]
) -> None:
    host = served.removeprefix("http://")
    for origin in (served, f"https://{host}", f"http://localhost:{host.rsplit(':', 1)[1]}"):
        headers = {"Origin": origin}
        if origin.startswith("http://localhost"):
            headers["Host"] = origin.removeprefix("http://")
        key = f"{path}-{origin}"
        answer = httpx.post(f"{served}{path}", json=body(key), headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        assert ran(key, answer.json()), answer.text
    foreign = httpx.post(f"{served}{path}", json=body("foreign"), headers={"Origin": "http://localhost:1"}, timeout=30)
    assert foreign.status_code == 403 and "server.allowed_origins" in foreign.json()["detail"]
    rebound = {"Host": "evil.example", "Origin": "http://evil.example"}
    refused = httpx.post(f"{served}{path}", json=body("rebound"), headers=rebound, timeout=30)
    assert refused.status_code == 421 and "server.allowed_hosts" in refused.json()["detail"]


def test_a_real_gateway_serves_its_own_origin_on_the_mcp_front(served: str) -> None:
    """What the MCP conformance scenario dns-rebinding-protection sends: the server's own origin, 2xx expected."""
    own = {"Origin": served, "Accept": MCP_ACCEPT}
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "own-origin", "version": "1"},
        },
    }
    with httpx.Client(base_url=served, timeout=30) as client:
        opened = client.post("/mcp", json=hello, headers=own)
        assert opened.status_code == 200, opened.text
        session = {**own, "Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-06-18"}
        ready = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        assert ready.status_code == 202, ready.text
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "Effects_Touch", "arguments": {"key": "mcp-own"}}
        answer = client.post("/mcp", json=call, headers=session)
        assert answer.status_code == 200, answer.text
        assert "mcp-own" in answer.text and '"isError":false' in answer.text.replace(" ", ""), answer.text
        foreign = client.post("/mcp", json=hello, headers={**own, "Origin": "https://evil.example"})
        assert foreign.status_code == 403
        rebound = client.post(
            "/mcp", json=hello, headers={**own, "Host": "evil.example", "Origin": "http://evil.example"}
        )
        assert rebound.status_code == 421
