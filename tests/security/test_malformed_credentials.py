"""Malformed bearer JWTs are 401 in each front's own format, never a 500 (issue 10, point 9).

Tokens are built by hand, as an attacker would: correctly signed with the gateway's own
secret where that matters, so that only the malformed part can be the reason for the 401.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest

from tests.support import asgi_client

SECRET = "security-test-secret-0123456789-abcdef"
ENV = "TOOLPLEX_SECURITY_JWT_SECRET"
CONFIG = f"""
backends:
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
auth:
  api_keys:
    - {{key: plain-api-key-0001, name: ci}}
  jwt: {{secret_env: {ENV}}}
"""


def part(data: dict[str, Any] | bytes) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def signed(header: dict[str, Any], claims: dict[str, Any] | None = None, key: str = SECRET) -> str:
    """HS256 over whatever header we like: pyjwt refuses to build the malformed ones."""
    body = claims if claims is not None else {"sub": "mallory", "exp": int(time.time()) + 300}
    signing_input = f"{part(header)}.{part(body)}"
    signature = hmac.new(key.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{part(signature)}"


def good() -> str:
    return signed({"alg": "HS256", "typ": "JWT"})


MALFORMED = {
    "crit": lambda: signed({"alg": "HS256", "crit": ["exp-policy"], "exp-policy": 1}),
    "crit-known-to-pyjwt": lambda: signed({"alg": "HS256", "crit": ["b64"], "b64": True}),
    "crit-not-a-list": lambda: signed({"alg": "HS256", "crit": "x"}),
    "kid-number": lambda: signed({"alg": "HS256", "kid": 5}),
    "kid-object": lambda: signed({"alg": "HS256", "kid": {"a": 1}}),
    "alg-none": lambda: f"{part({'alg': 'none'})}.{part({'sub': 'm', 'exp': int(time.time()) + 300})}.",
    "alg-list": lambda: signed({"alg": ["HS256"]}),
    "alg-missing": lambda: signed({"typ": "JWT"}),
    "alg-hs512": lambda: jwt.encode({"sub": "m", "exp": int(time.time()) + 300}, SECRET * 2, algorithm="HS512"),
    "alg-rs256": lambda: signed({"alg": "RS256"}),
    "bad-base64-payload": lambda: f"{part({'alg': 'HS256'})}.@@@.{good().split('.')[2]}",
    "bad-base64-header": lambda: "eyJ!!!." + ".".join(good().split(".")[1:]),
    "header-not-json": lambda: f"eyJ{part(b'not json')}.{good().split('.', 1)[1]}",
    "header-not-object": lambda: f"{part(b'[1]')}.{good().split('.', 1)[1]}",
    "payload-not-object": lambda: signed({"alg": "HS256"}, [1]),  # type: ignore[arg-type]
    "exp-not-a-number": lambda: signed({"alg": "HS256"}, {"sub": "m", "exp": "soon"}),
    "exp-infinite": lambda: signed({"alg": "HS256"}, {"sub": "m", "exp": 1e308 * 10}),
    "sub-object": lambda: signed({"alg": "HS256"}, {"sub": {"a": 1}, "exp": int(time.time()) + 300}),
    "wrong-key": lambda: signed({"alg": "HS256"}, key="another-secret-of-enough-length-000000"),
    "expired": lambda: signed({"alg": "HS256"}, {"sub": "m", "exp": int(time.time()) - 60}),
    "two-parts": lambda: ".".join(good().split(".")[:2]),
}


def opentool_refusal(r: httpx.Response) -> bool:
    return r.json()["error"]["code"] == 401 and r.json()["result"] == {}


def oxp_refusal(r: httpx.Response) -> bool:
    return isinstance(r.json()["message"], str) and r.headers["oxp-version"] == "1.0"


def tsn_refusal(r: httpx.Response) -> bool:
    return isinstance(r.json()["detail"], str)


def rpc_refusal(r: httpx.Response) -> bool:
    return r.json()["jsonrpc"] == "2.0" and isinstance(r.json()["error"]["code"], int)


FRONTS = {
    "opentool": (
        "/opentool/call",
        {"jsonrpc": "2.0", "method": "Math_Add", "params": {"a": 1, "b": 2}, "id": "1"},
        opentool_refusal,
    ),
    "oxp": ("/tools/call", {"tool_id": "Math.Add", "input": {"a": 1, "b": 2}}, oxp_refusal),
    "toolserver": ("/execute_tool", {"tool_name": "Math_Add", "arguments": {"a": 1, "b": 2}}, tsn_refusal),
    "jsonrpc": (
        "/rpc",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tool.execute",
            "params": {"tool": "Math_Add", "parameters": {"a": 1, "b": 2}},
        },
        rpc_refusal,
    ),
}


@pytest.fixture
async def client(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv(ENV, SECRET)
    async with asgi_client(CONFIG) as c:
        yield c


@pytest.mark.parametrize("front", list(FRONTS))
@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_jwt_is_a_401_in_the_fronts_format(client: httpx.AsyncClient, front: str, case: str) -> None:
    path, body, refused = FRONTS[front]
    r = await client.post(path, json=body, headers={"Authorization": f"Bearer {MALFORMED[case]()}"})
    assert r.status_code == 401, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert refused(r), r.text


@pytest.mark.parametrize("front", list(FRONTS))
async def test_well_formed_credentials_still_pass(client: httpx.AsyncClient, front: str) -> None:
    path, body, _ = FRONTS[front]
    for credential in (good(), "plain-api-key-0001"):
        r = await client.post(path, json=body, headers={"Authorization": f"Bearer {credential}"})
        assert r.status_code == 200, r.text


async def test_the_reason_is_said(client: httpx.AsyncClient) -> None:
    path, body, _ = FRONTS["oxp"]
    said = {}
    for case in ("crit", "kid-number", "alg-none", "bad-base64-header"):
        r = await client.post(path, json=body, headers={"Authorization": f"Bearer {MALFORMED[case]()}"})
        said[case] = r.json()["message"]
    assert "crit" in said["crit"]
    assert "Key ID" in said["kid-number"]
    assert "'none' is not accepted" in said["alg-none"]
    assert "malformed" in said["bad-base64-header"]
