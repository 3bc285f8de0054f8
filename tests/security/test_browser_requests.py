"""A web page must not drive a gateway it can reach (issue 10, point 7).

Browser forms (`text/plain`, urlencoded, multipart) are refused with 415 on every JSON
endpoint, in the front's own format, and run nothing; a foreign `Origin` gets 403; a `Host`
outside `server.allowed_hosts` gets 421, by default anything but the loopback names when
the gateway is bound to loopback (DNS rebinding).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import create_app
from gateway.config import parse_config
from tests.security import effects
from tests.support import asgi_client, gateway_process

CONFIG = """
backends:
  - {name: effects, kind: python, module: "tests.security.effects:toolkit"}
"""
FORMS = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "Text/Plain;charset=UTF-8",
]


def opentool(key: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "Effects_Touch", "params": {"key": key}, "id": "1"}


def oxp(key: str) -> dict[str, Any]:
    return {"tool_id": "Effects.Touch", "input": {"key": key}}


def tsn(key: str) -> dict[str, Any]:
    return {"tool_name": "Effects_Touch", "arguments": {"key": key}}


def rpc(key: str) -> dict[str, Any]:
    params = {"tool": "Effects_Touch", "parameters": {"key": key}}
    return {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": params}


# path, body, how the front says "refused" in its own format
ENDPOINTS = [
    ("/opentool/call", opentool, lambda b: b["error"]["code"] == -32600 and "not accepted" in b["error"]["message"]),
    ("/opentool/streamCall", opentool, lambda b: b["error"]["code"] == -32600),
    ("/tools/call", oxp, lambda b: "not accepted" in b["message"]),
    ("/execute_tool", tsn, lambda b: "not accepted" in b["detail"]),
    ("/rpc", rpc, lambda b: b["jsonrpc"] == "2.0" and b["error"]["code"] == -32600),
]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(CONFIG) as c:
        yield c


@pytest.mark.parametrize("content_type", FORMS)
@pytest.mark.parametrize(("path", "body", "refused"), ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
async def test_browser_form_bodies_get_415_and_run_nothing(
    client: httpx.AsyncClient, path: str, body: Any, refused: Any, content_type: str
) -> None:
    key = f"{path}-{content_type}"
    r = await client.post(path, content=json.dumps(body(key)), headers={"Content-Type": content_type})
    assert r.status_code == 415, r.text
    assert refused(r.json()), r.text
    assert effects.RUNS[key] == 0  # the JSON inside was never acted on


@pytest.mark.parametrize(("path", "body"), [("/tools/call", oxp), ("/execute_tool", tsn), ("/rpc", rpc)])
async def test_a_body_without_content_type_is_still_accepted_where_real_clients_send_none(
    client: httpx.AsyncClient, path: str, body: Any
) -> None:
    key = f"bare-{path}"
    r = await client.post(path, content=json.dumps(body(key)))  # httpx adds no Content-Type to raw content
    assert "content-type" not in r.request.headers
    assert r.status_code == 200, r.text
    assert effects.RUNS[key] == 1


async def test_upload_file_stays_multipart(client: httpx.AsyncClient) -> None:
    cookie = (await client.post("/get_cookie")).cookies["node_id"]
    client.cookies.clear()
    files = {"file": ("a.txt", b"hello"), "filename": (None, "a.txt")}
    r = await client.post("/upload_file", files=files, headers={"Cookie": f"node_id={cookie}"})
    assert r.status_code == 200, r.text
    r = await client.post(
        "/download_file",
        content=b"file_path=a.txt",
        headers={"Cookie": f"node_id={cookie}", "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 415


def guarded_app(bind_host: str | None, server: str = "") -> Any:
    config = parse_config(textwrap.dedent(CONFIG) + server, "t.yaml")
    return create_app(config, bind_host=bind_host)


async def status(app: Any, path: str = "/healthz", **headers: str) -> int:
    """One GET through the app with exactly these Host/Origin headers."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        r = await c.get(path, headers=headers)
    if r.status_code in (403, 421):
        assert r.headers["content-type"] == "application/json" and r.json()["detail"]
    return r.status_code


@pytest.mark.parametrize("host", ["localhost", "localhost:8080", "127.0.0.1:9", "[::1]", "[::1]:8080", "LOCALHOST"])
async def test_loopback_names_are_served_when_bound_to_loopback(host: str) -> None:
    assert await status(guarded_app("127.0.0.1"), Host=host) == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "[::1]x", "0.0.0.0"])
@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/tools", "/opentool/version"])
async def test_other_hosts_get_421_when_bound_to_loopback(host: str, path: str) -> None:
    assert await status(guarded_app("::1"), path, Host=host) == 421


async def test_bound_elsewhere_any_host_unless_configured() -> None:
    assert await status(guarded_app("0.0.0.0"), Host="tools.example.com") == 200
    configured = guarded_app("0.0.0.0", "server:\n  allowed_hosts: [tools.example.com, '*.internal', 'api:8443']\n")
    assert await status(configured, Host="tools.example.com:443") == 200
    assert await status(configured, Host="a.b.internal") == 200
    assert await status(configured, Host="internal") == 421
    assert await status(configured, Host="api:8443") == 200
    assert await status(configured, Host="api:80") == 421
    assert await status(configured, Host="localhost") == 421  # a configured list replaces the default
    anything = guarded_app("127.0.0.1", "server:\n  allowed_hosts: ['*']\n")
    assert await status(anything, Host="evil.example") == 200


async def test_a_foreign_origin_gets_403_and_a_listed_one_passes() -> None:
    app = guarded_app("127.0.0.1", "server:\n  allowed_origins: ['https://app.example.com']\n")
    assert await status(app, Host="localhost") == 200  # no Origin: agents and SDKs
    assert await status(app, Host="localhost", Origin="https://evil.example") == 403
    assert await status(app, Host="localhost", Origin="null") == 403  # sandboxed frames, file://
    assert await status(app, Host="localhost", Origin="https://app.example.com") == 200
    assert await status(guarded_app(None), Origin="http://localhost:3000") == 403  # default: no origin allowed


async def test_a_foreign_origin_cannot_call_a_tool() -> None:
    transport = httpx.ASGITransport(app=guarded_app("127.0.0.1"))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost:8080") as c:
        r = await c.post("/execute_tool", json=tsn("origin"), headers={"Origin": "https://evil.example"})
    assert r.status_code == 403
    assert effects.RUNS["origin"] == 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path: Path = tmp_path_factory.mktemp("browser") / "gateway.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    with gateway_process(path) as base:
        yield base


@pytest.mark.parametrize(
    ("host", "expected"),
    [(None, 200), ("localhost", 200), ("rebound.evil.example", 421), ("rebound.evil.example:8080", 421)],
)
def test_a_real_gateway_on_loopback_refuses_rebound_names(served: str, host: str | None, expected: int) -> None:
    headers = {"Host": host} if host else {}
    for path in ("/healthz", "/opentool/version"):
        assert httpx.get(f"{served}{path}", headers=headers, timeout=10).status_code == expected
