"""Toolplex as an OAuth client of its upstreams (`oauth:` of a backend), against real servers on loopback.

The authorization server is tests/oauth/auth_server.py's (real signed JWTs, request counts); the upstream is an
MCP server written with the `mcp` SDK that takes only tokens that server issued for its resource
(tests/oauth/upstream_protected_server.py). The backend is built as the gateway builds it, from validated
settings, and calls go through `McpBackend.call` with the caller's `CallContext`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import ValidationError

from adapters.http.settings import HttpBackendSettings
from adapters.jsonrpc.settings import JsonRpcBackendSettings
from adapters.mcp.client.settings import McpBackendSettings
from gateway.backends import Backend, BackendContext
from gateway.errors import ErrorKind, GatewayError
from gateway.model import CallContext, Principal, ToolSpec
from gateway.oauth.client import ServerMetadata, UpstreamOAuth, UpstreamOAuthSettings
from gateway.runtime import create_backend
from gateway.state import MemoryStore
from tests.oauth.auth_server import AuthServer, missing_reason
from tests.support import python_server

CLIENT_ID = "toolplex-upstream"
SECRET = "upstream-secret-0f9e8d7c"
NARROW_ID = "toolplex-narrow"  # may never have mcp:write
SHORT_ID = "toolplex-short"  # its tokens live 2 s
CLIENTS = [
    {"client_id": CLIENT_ID, "client_secret": SECRET, "scopes": ["mcp:read", "mcp:write"]},
    {"client_id": NARROW_ID, "client_secret": SECRET, "scopes": ["mcp:read"]},
    {"client_id": SHORT_ID, "client_secret": SECRET, "scopes": ["mcp:read", "mcp:write"], "access_token_ttl": 2},
]


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    with AuthServer(tmp_path_factory.mktemp("as"), clients=CLIENTS) as server:
        yield server


@pytest.fixture(scope="module")
def upstream(auth: AuthServer) -> Iterator[str]:
    """The protected MCP server's endpoint; it trusts `auth` only."""
    with python_server("tests.oauth.upstream_protected_server", "--issuer", auth.issuer) as port:
        yield f"http://127.0.0.1:{port}/mcp"


def oauth(**extra: Any) -> dict[str, Any]:
    return {"client_id": CLIENT_ID, "client_secret": SECRET, **extra}


@pytest.fixture
async def make(upstream: str) -> AsyncIterator[Any]:
    """Backends of the protected server, each closed after the test."""
    made: list[Backend] = []

    def build(settings: dict[str, Any], store: MemoryStore | None = None, url: str | None = None) -> Backend:
        config = McpBackendSettings.model_validate({"name": "notes", "kind": "mcp", "url": url or upstream, **settings})
        backend = create_backend(config, BackendContext(store=store))
        made.append(backend)
        return backend

    yield build
    for backend in made:
        await backend.close()


async def call(backend: Backend, tool: str, arguments: dict[str, Any] | None = None, **context: Any) -> Any:
    specs: list[ToolSpec] = await backend.discover()
    spec = next(s for s in specs if s.binding.name == tool)
    answer = await backend.call(spec, arguments or {}, CallContext(deadline=time.monotonic() + 20, **context))
    return answer.value


def tokens(auth: AuthServer) -> int:
    return auth.stats()["token"]


async def test_discovery_from_the_upstream_401_alone(auth: AuthServer, make: Any) -> None:
    """Only client_id and secret configured: the 401's resource_metadata leads to the authorization server."""
    before = auth.stats()
    backend = make({"oauth": oauth()})
    assert await call(backend, "whoami") == {"sub": CLIENT_ID, "scope": "mcp:read mcp:write", "client_id": CLIENT_ID}
    after = auth.stats()
    assert after["token"] - before["token"] == 1
    assert after["oauth_authorization_server"] - before["oauth_authorization_server"] == 1


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_client_authentication_methods(auth: AuthServer, make: Any, method: str) -> None:
    backend = make({"oauth": oauth(auth_method=method, authorization_server=auth.issuer, scope="mcp:read")})
    assert (await call(backend, "whoami"))["scope"] == "mcp:read"


async def test_the_token_is_cached_across_calls(auth: AuthServer, make: Any) -> None:
    """Many calls, concurrent ones too: the token endpoint is asked once."""
    before = tokens(auth)
    backend = make({"oauth": oauth()})
    specs = await backend.discover()
    spec = next(s for s in specs if s.binding.name == "whoami")
    results = await asyncio.gather(
        *(backend.call(spec, {}, CallContext(deadline=time.monotonic() + 20)) for _ in range(8))
    )
    for _ in range(4):
        await backend.call(spec, {}, CallContext(deadline=time.monotonic() + 20))
    assert all(r.value["sub"] == CLIENT_ID for r in results)
    assert tokens(auth) - before == 1


async def test_a_token_is_renewed_before_it_expires(auth: AuthServer, make: Any) -> None:
    """Tokens living 2 s, renewed 1.5 s before: a call after the first half second needs a new one."""
    backend = make({"oauth": {"client_id": SHORT_ID, "client_secret": SECRET, "expiry_margin_s": 1.5}})
    await call(backend, "whoami")
    before = tokens(auth)
    await asyncio.sleep(0.6)  # time passing is what is tested: the token is past its renewal point
    await call(backend, "whoami")
    assert tokens(auth) - before == 1


async def test_a_401_drops_the_token_and_retries_once(auth: AuthServer, upstream: str, make: Any) -> None:
    backend = make({"oauth": oauth()})
    await call(backend, "whoami")
    before = tokens(auth)
    httpx.post(upstream.replace("/mcp", "/_test/reject")).raise_for_status()  # every token so far is refused
    assert (await call(backend, "whoami"))["sub"] == CLIENT_ID
    assert tokens(auth) - before == 1


async def test_insufficient_scope_steps_up_to_the_union(auth: AuthServer, make: Any) -> None:
    backend = make({"oauth": oauth(scope="mcp:read")})
    assert (await call(backend, "whoami"))["scope"] == "mcp:read"
    before = tokens(auth)
    assert await call(backend, "write_note", {"text": "hi"}) == {"result": "noted: hi"}
    assert tokens(auth) - before == 1  # one token for mcp:read mcp:write
    assert await call(backend, "write_note", {"text": "again"}) == {"result": "noted: again"}
    assert (await call(backend, "whoami"))["scope"] == "mcp:read mcp:write"
    assert tokens(auth) - before == 1


async def test_step_up_is_bounded_when_the_scope_is_never_granted(auth: AuthServer, make: Any) -> None:
    """A client that may not have the challenged scope: the call fails after a bounded number of tries."""
    backend = make({"oauth": {"client_id": NARROW_ID, "client_secret": SECRET, "max_attempts": 3}})
    await call(backend, "whoami")
    before = tokens(auth)
    with pytest.raises(GatewayError) as caught:
        await call(backend, "write_note", {"text": "x"})
    assert "invalid_scope" in caught.value.failure.message
    assert tokens(auth) - before <= 3


async def test_token_exchange_per_caller(auth: AuthServer, upstream: str, make: Any) -> None:
    """Each caller's token is exchanged for its own upstream token; the caller's own never reaches the upstream."""
    backend = make({"oauth": oauth(on_behalf_of="token_exchange")})
    alice = auth.mint({"sub": "alice", "scope": "mcp:read mcp:write", "aud": "http://gateway.test"})
    bob = auth.mint({"sub": "bob", "scope": "mcp:read", "aud": "http://gateway.test"})

    def as_(name: str, token: str) -> dict[str, Any]:
        return {"principal": Principal(name), "client_credentials": {"Authorization": f"Bearer {token}"}}

    before = tokens(auth)
    assert (await call(backend, "whoami", **as_("alice", alice)))["sub"] == "alice"
    assert (await call(backend, "whoami", **as_("bob", bob))) == {
        "sub": "bob",
        "scope": "mcp:read",
        "client_id": CLIENT_ID,
    }
    assert (await call(backend, "whoami", **as_("alice", alice)))["sub"] == "alice"
    # Discovery (the backend's own token) and one exchange per caller; alice's second call is cached.
    assert tokens(auth) - before == 3
    seen = httpx.get(upstream.replace("/mcp", "/_test/seen")).json()
    for own in (alice, bob):
        assert hashlib.sha256(own.encode()).hexdigest() not in seen

    with pytest.raises(GatewayError) as caught:  # no authenticated caller: never the backend's own token
        await call(backend, "whoami")
    assert caught.value.failure.kind is ErrorKind.UNAUTHENTICATED


async def test_a_refused_exchange_is_the_callers_error(auth: AuthServer, make: Any) -> None:
    backend = make({"oauth": oauth(on_behalf_of="token_exchange")})
    forged = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtYWxsb3J5In0.c2lnbmF0dXJl"
    with pytest.raises(GatewayError) as caught:
        await call(
            backend, "whoami", principal=Principal("mallory"), client_credentials={"Authorization": f"Bearer {forged}"}
        )
    assert caught.value.failure.kind is ErrorKind.UNAUTHENTICATED
    assert forged not in caught.value.failure.message


async def test_a_wrong_secret_is_a_clear_error_without_the_secret(make: Any) -> None:
    wrong = "not-the-secret-5a4b3c"
    backend = make({"oauth": oauth(client_secret=wrong)})
    with pytest.raises(GatewayError) as caught:
        await backend.discover()
    failure = caught.value.failure
    assert failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE
    assert "'notes'" in failure.message and "invalid_client" in failure.message
    assert wrong not in str(failure) and SECRET not in str(failure)


async def test_replicas_share_the_token_through_the_state_store(auth: AuthServer, make: Any) -> None:
    store = MemoryStore()
    first = make({"oauth": oauth()}, store=store)
    await call(first, "whoami")
    before = tokens(auth)
    second = make({"oauth": oauth()}, store=store)  # another replica's backend: same store, nothing in process
    assert (await call(second, "whoami"))["sub"] == CLIENT_ID
    assert tokens(auth) == before


async def test_the_http_kind_gets_tokens_too(auth: AuthServer) -> None:
    """A REST endpoint (the authorization server's own /userinfo) behind `kind: http` with `oauth:`."""
    settings = HttpBackendSettings.model_validate(
        {
            "name": "profile",
            "kind": "http",
            "url": auth.issuer,
            "oauth": oauth(),
            "tools": [{"name": "Me", "path": "/userinfo"}],
        }
    )
    backend = create_backend(settings, BackendContext())
    try:
        spec = (await backend.discover())[0]
        value = await backend.call(spec, {}, CallContext(deadline=time.monotonic() + 20))
        assert value["sub"] == CLIENT_ID
    finally:
        await backend.close()


def test_private_key_jwt_assertion() -> None:
    """private_key_jwt (RFC 7523): iss and sub the client, aud the issuer, short-lived, signed with the key."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    settings = UpstreamOAuthSettings(
        client_id="jwt-client", auth_method="private_key_jwt", private_key=pem, signing_alg="ES256"
    )
    client = UpstreamOAuth("b", settings, "http://127.0.0.1:1/mcp")
    form: dict[str, str] = {"grant_type": "client_credentials"}
    headers: dict[str, str] = {}
    client._authenticate(ServerMetadata(issuer="http://as.test", token_endpoint="http://as.test/token"), form, headers)
    assert "Authorization" not in headers and "client_secret" not in form
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    claims = jwt.decode(form["client_assertion"], key.public_key(), algorithms=["ES256"], audience="http://as.test")
    assert claims["iss"] == claims["sub"] == "jwt-client"
    assert claims["exp"] - claims["iat"] <= 60


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"kind": "mcp", "url": "http://h/mcp", "api_key": "k", "oauth": oauth()}, "api_key or oauth"),
        (
            {
                "kind": "mcp",
                "url": "http://h/mcp",
                "forward_authorization": True,
                "oauth": oauth(on_behalf_of="token_exchange"),
            },
            "on_behalf_of and forward_authorization",
        ),
        ({"kind": "mcp", "url": "http://h/mcp", "oauth": {"client_id": "c"}}, "needs client_secret"),
        ({"kind": "mcp", "command": "x", "oauth": oauth()}, "only to an HTTP server"),
    ],
)
def test_configuration_errors(settings: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        McpBackendSettings.model_validate({"name": "b", **settings})


def test_kinds_without_per_call_credentials_refuse_token_exchange() -> None:
    with pytest.raises(ValidationError, match="not supported by kind jsonrpc"):
        JsonRpcBackendSettings.model_validate(
            {"name": "b", "kind": "jsonrpc", "url": "http://h", "oauth": oauth(on_behalf_of="token_exchange")}
        )
