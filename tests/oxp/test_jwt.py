"""Bearer JWT on the OXP front: HS256 with a secret from the environment, exp required, aud when configured."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import jwt
import pytest

from gateway.app import create_app
from gateway.auth import JwtAuth
from gateway.config import parse_config
from gateway.errors import ConfigError, GatewayError
from tests.oxp.helpers import oxp_config
from tests.support import asgi_client

SECRET = "oxp-test-secret-0123456789-abcdefghij"  # 36 bytes: HS256 wants at least 32
ENV = "TOOLPLEX_TEST_JWT_SECRET"
JWT_AUTH = f"auth:\n  jwt:\n    secret_env: {ENV}\n    audience: toolplex\n"
ADD = {"tool_id": "Calculator.Add", "input": {"a": 2, "b": 3}}


@pytest.fixture(autouse=True)
def jwt_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, SECRET)


def token(key: str = SECRET, algorithm: str = "HS256", **overrides: Any) -> str:
    claims: dict[str, Any] = {"sub": "ada", "aud": "toolplex", "exp": int(time.time()) + 300}
    claims.update(overrides)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, key, algorithm=algorithm)


def unsigned(**claims: Any) -> str:
    """A `none`-algorithm token, built by hand as an attacker would."""

    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    body = {"sub": "mallory", "aud": "toolplex", "exp": int(time.time()) + 300, **claims}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(body)}."


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


async def test_a_valid_token_lists_and_calls() -> None:
    async with asgi_client(oxp_config(extra=JWT_AUTH)) as client:
        listed = await client.get("/tools", headers=bearer(token()))
        called = await client.post("/tools/call", json=ADD, headers=bearer(token()))
    assert listed.status_code == 200
    assert called.status_code == 200
    assert called.json()["value"] == 5


@pytest.mark.parametrize(
    ("credential", "message"),
    [
        (lambda: token(exp=int(time.time()) - 10), "JWT has expired"),
        (lambda: token(key="another-secret-of-enough-length-000000"), "JWT signature is invalid"),
        (lambda: token(aud="someone-else"), "JWT audience is not accepted by this gateway"),
        (lambda: token(aud=None), "JWT lacks the required claim 'aud'"),
        (lambda: token(exp=None), "JWT lacks the required claim 'exp'"),
        (lambda: unsigned(), "JWT algorithm 'none' is not accepted; tokens must be signed with HS256"),
        (
            lambda: token(key=SECRET * 2, algorithm="HS512"),
            "JWT algorithm 'HS512' is not accepted; tokens must be signed with HS256",
        ),
        (lambda: "not-a-jwt", "Invalid credentials"),
    ],
)
async def test_bad_tokens_are_401_with_a_server_error_body(credential: Any, message: str) -> None:
    async with asgi_client(oxp_config(extra=JWT_AUTH)) as client:
        call = await client.post("/tools/call", json=ADD, headers=bearer(credential()))
        listing = await client.get("/tools", headers=bearer(credential()))
    for response in (call, listing):
        assert response.status_code == 401
        assert response.headers["oxp-version"] == "1.0"
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json() == {"message": message}


async def test_no_token_is_401_and_health_stays_open() -> None:
    async with asgi_client(oxp_config(extra=JWT_AUTH)) as client:
        missing = await client.post("/tools/call", json=ADD)
        health = await client.get("/health")
    assert missing.status_code == 401
    assert missing.json()["message"].startswith("Missing credentials")
    assert health.status_code == 200


async def test_wrapped_requests_get_401_too() -> None:
    async with asgi_client(oxp_config(extra=JWT_AUTH)) as client:
        r = await client.post("/tools/call", json={"request": ADD}, headers=bearer(token(exp=1)))
    assert r.status_code == 401
    assert r.json()["message"] == "JWT has expired"


async def test_jwt_and_api_keys_together() -> None:
    both = JWT_AUTH.replace("auth:\n", "auth:\n  api_keys:\n    - {name: ci, key: key-0123456789}\n")
    async with asgi_client(oxp_config(extra=both)) as client:
        by_key = await client.post("/tools/call", json=ADD, headers=bearer("key-0123456789"))
        by_jwt = await client.post("/tools/call", json=ADD, headers=bearer(token()))
        by_neither = await client.post("/tools/call", json=ADD, headers=bearer("key-wrong"))
    assert by_key.status_code == by_jwt.status_code == 200
    assert by_neither.status_code == 401


def test_without_audience_a_token_needs_no_aud() -> None:
    auth = JwtAuth(SECRET)
    principal = auth.authenticate(token(aud=None))
    assert principal is not None and principal.name == "jwt:ada"
    with pytest.raises(GatewayError, match="audience"):
        auth.authenticate(token(aud="someone"))  # a token meant for someone else is still refused


def test_leeway_tolerates_clock_skew() -> None:
    skewed = token(exp=int(time.time()) - 5, aud=None)
    assert JwtAuth(SECRET, leeway=30).authenticate(skewed) is not None
    with pytest.raises(GatewayError, match="expired"):
        JwtAuth(SECRET).authenticate(skewed)


def test_the_secret_must_be_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV)
    config = parse_config(oxp_config(extra=JWT_AUTH), "t.yaml")
    with pytest.raises(ConfigError, match=f"environment variable {ENV} is not set"):
        create_app(config)


def test_a_short_secret_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "short")
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        create_app(parse_config(oxp_config(extra=JWT_AUTH), "t.yaml"))


@pytest.mark.parametrize(
    ("jwt_yaml", "problem"),
    [
        ("audience: x", "'secret_env' is a required property"),
        (f"secret_env: {ENV}\n    algorithms: [none]", "unknown key 'algorithms'"),
        ("secret_env: not a name", "does not match"),
    ],
)
def test_the_schema_checks_auth_jwt(jwt_yaml: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config(oxp_config(extra=f"auth:\n  jwt:\n    {jwt_yaml}\n"), "t.yaml")
