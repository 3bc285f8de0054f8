"""The OAuth test authorization server itself: what the gateway's OAuth tests rely on, checked with PyJWT."""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest

from tests.oauth.auth_server import DEFAULT_CLIENTS, AuthServer, missing_reason, started_auth_server

CLIENT = DEFAULT_CLIENTS[0]
RESOURCE = "http://127.0.0.1:8080/mcp"


def verified(server: AuthServer, token: str, audience: str | None = None) -> dict[str, Any]:
    """The token's claims, its signature checked against the JWKS (fetched with httpx, read by PyJWKSet)."""
    jwks = jwt.PyJWKSet.from_dict(httpx.get(server.jwks_uri, trust_env=False).json())
    header = jwt.get_unverified_header(token)
    key = jwks[header["kid"]]
    return jwt.decode(
        token,
        key=key,
        algorithms=[header["alg"]],
        audience=audience,
        issuer=server.issuer,
        options={"verify_aud": audience is not None},
    )


def kids(server: AuthServer) -> set[str]:
    return {key["kid"] for key in server.jwks()["keys"]}


def test_discovery_documents(auth_server: AuthServer) -> None:
    rfc8414 = auth_server.metadata("oauth-authorization-server")
    openid = auth_server.metadata("openid-configuration")
    assert rfc8414 == openid
    assert rfc8414["issuer"] == auth_server.issuer == f"http://127.0.0.1:{auth_server.port}"
    assert rfc8414["jwks_uri"] == auth_server.jwks_uri
    assert rfc8414["token_endpoint"] == auth_server.token_endpoint
    assert rfc8414["introspection_endpoint"] == auth_server.introspection_endpoint
    assert rfc8414["registration_endpoint"] == auth_server.registration_endpoint
    assert rfc8414["code_challenge_methods_supported"] == ["S256"]
    assert {"client_secret_basic", "client_secret_post"} <= set(rfc8414["token_endpoint_auth_methods_supported"])


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_minted_token_verifies_against_the_jwks(auth_server: AuthServer, alg: str) -> None:
    token = auth_server.mint({"sub": "alice", "aud": RESOURCE, "scope": "tools:call"}, alg=alg)
    assert jwt.get_unverified_header(token)["alg"] == alg
    claims = verified(auth_server, token, audience=RESOURCE)
    assert (claims["sub"], claims["scope"], claims["iss"]) == ("alice", "tools:call", auth_server.issuer)
    expired = auth_server.mint({"sub": "alice"}, alg=alg, expires_in=-60)
    with pytest.raises(jwt.ExpiredSignatureError):
        verified(auth_server, expired)
    no_iss = auth_server.mint({"sub": "alice", "iss": None}, alg=alg)
    assert "iss" not in jwt.decode(no_iss, options={"verify_signature": False})


def test_rotate_replaces_the_key_in_the_jwks(auth_server: AuthServer) -> None:
    before = kids(auth_server)
    kid_old, kid_new = auth_server.rotate()
    after = kids(auth_server)
    assert kid_old in before and kid_old not in after
    assert kid_new in after and kid_new not in before
    assert before - {kid_old} == after - {kid_new}  # the other algorithms' keys stay
    token = auth_server.client_credentials(CLIENT["client_id"], CLIENT["client_secret"])["access_token"]
    assert jwt.get_unverified_header(token)["kid"] == kid_new
    assert verified(auth_server, token)["sub"] == CLIENT["client_id"]


@pytest.mark.parametrize("auth", ["basic", "post"])
def test_client_credentials(auth_server: AuthServer, auth: Any) -> None:
    answer = auth_server.client_credentials(
        CLIENT["client_id"], CLIENT["client_secret"], scope="tools:call", resource=RESOURCE, auth=auth
    )
    assert answer["token_type"] == "Bearer" and answer["scope"] == "tools:call" and answer["expires_in"] > 0
    claims = verified(auth_server, answer["access_token"], audience=RESOURCE)
    assert (claims["aud"], claims["scope"], claims["client_id"]) == (RESOURCE, "tools:call", CLIENT["client_id"])
    everything = auth_server.client_credentials(CLIENT["client_id"], CLIENT["client_secret"], auth=auth)
    assert everything["scope"] == " ".join(CLIENT["scopes"])
    assert "aud" not in verified(auth_server, everything["access_token"])


@pytest.mark.parametrize(
    ("client_id", "secret", "auth"),
    [(CLIENT["client_id"], "wrong", "basic"), (CLIENT["client_id"], "wrong", "post"), ("nobody", "x", "basic")],
)
def test_bad_client_is_401(auth_server: AuthServer, client_id: str, secret: str, auth: Any) -> None:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        auth_server.client_credentials(client_id, secret, auth=auth)
    assert caught.value.response.status_code == 401
    assert caught.value.response.json()["error"] == "invalid_client"


def test_scope_outside_the_client_is_refused(auth_server: AuthServer) -> None:
    with pytest.raises(httpx.HTTPStatusError) as caught:
        auth_server.client_credentials(CLIENT["client_id"], CLIENT["client_secret"], scope="admin")
    assert (caught.value.response.status_code, caught.value.response.json()["error"]) == (400, "invalid_scope")


def test_introspection(auth_server: AuthServer) -> None:
    opaque = auth_server.opaque({"sub": "bob", "scope": "tools:read", "aud": RESOURCE})
    assert opaque.count(".") == 0
    answer = auth_server.introspect(opaque)
    assert answer["active"] is True
    assert (answer["sub"], answer["scope"], answer["aud"]) == ("bob", "tools:read", RESOURCE)
    assert answer["iss"] == auth_server.issuer
    assert auth_server.introspect("garbage") == {"active": False}
    assert auth_server.introspect(auth_server.opaque({"sub": "bob"}, expires_in=-1)) == {"active": False}
    issued = auth_server.client_credentials(CLIENT["client_id"], CLIENT["client_secret"], resource=RESOURCE)
    assert auth_server.introspect(issued["access_token"])["aud"] == RESOURCE
    unauthenticated = auth_server.http.post("/introspect", data={"token": opaque})
    assert unauthenticated.status_code == 401


def test_stats_count_requests(auth_server: AuthServer) -> None:
    before = auth_server.stats()
    auth_server.jwks()
    auth_server.metadata()
    auth_server.metadata("openid-configuration")
    token = auth_server.client_credentials(CLIENT["client_id"], CLIENT["client_secret"])["access_token"]
    auth_server.introspect(token)
    auth_server.mint({"sub": "x"})  # the control API does not count
    after = auth_server.stats()
    delta = {name: after[name] - before[name] for name in after}
    assert delta["jwks"] == 1 and delta["discovery"] == 2 and delta["token"] == 1 and delta["introspect"] == 1
    assert delta["openid_configuration"] == delta["oauth_authorization_server"] == 1
    auth_server.reset_stats()
    assert set(auth_server.stats().values()) == {0}


def test_registered_public_client_code_flow_refresh_and_exchange(auth_server: AuthServer) -> None:
    registered = auth_server.http.post(
        "/register",
        json={
            "redirect_uris": ["http://127.0.0.1:9/callback"],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "client_name": "an MCP client",
        },
    )
    assert registered.status_code == 201 and "client_secret" not in registered.json()
    client_id = registered.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": "http://127.0.0.1:9/callback",
        "scope": "openid tools:call",
        "state": "s1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": RESOURCE,
        "login_hint": "carol",
    }
    redirect = auth_server.http.get("/authorize", params=query)
    assert redirect.status_code == 302  # approved at once, no login page
    back = parse_qs(urlsplit(redirect.headers["location"]).query)
    assert back["state"] == ["s1"] and back["iss"] == [auth_server.issuer]
    code_grant = {"grant_type": "authorization_code", "code": back["code"][0], "redirect_uri": query["redirect_uri"]}
    wrong = auth_server.token_request(
        {**code_grant, "code_verifier": secrets.token_urlsafe(48)}, client_id, auth="none"
    )
    assert (wrong.status_code, wrong.json()["error"]) == (400, "invalid_grant")  # and the code is spent
    redirect = auth_server.http.get("/authorize", params=query)
    code_grant["code"] = parse_qs(urlsplit(redirect.headers["location"]).query)["code"][0]
    tokens = auth_server.token_request({**code_grant, "code_verifier": verifier}, client_id, auth="none").json()
    claims = verified(auth_server, tokens["access_token"], audience=RESOURCE)
    assert (claims["sub"], claims["scope"]) == ("carol", "openid tools:call")
    assert verified(auth_server, tokens["id_token"], audience=client_id)["sub"] == "carol"

    refreshed = auth_server.token_request(
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "scope": "tools:call"},
        client_id,
        auth="none",
    ).json()
    assert verified(auth_server, refreshed["access_token"], audience=RESOURCE)["scope"] == "tools:call"
    assert refreshed["refresh_token"] != tokens["refresh_token"]  # rotated: the old one is spent

    exchanged = auth_server.token_request(
        {
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": refreshed["access_token"],
            "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "resource": "http://127.0.0.1:9/upstream",
        },
        CLIENT["client_id"],
        CLIENT["client_secret"],
    ).json()
    assert exchanged["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    upstream = verified(auth_server, exchanged["access_token"], audience="http://127.0.0.1:9/upstream")
    assert (upstream["sub"], upstream["client_id"]) == ("carol", CLIENT["client_id"])


def test_signing_algorithm_per_server(tmp_path: Path) -> None:
    if reason := missing_reason():
        pytest.skip(reason)
    with started_auth_server(tmp_path, alg="EdDSA", algs=["EdDSA"]) as server:
        assert [key["kty"] for key in server.jwks()["keys"]] == ["OKP"]
        token = server.client_credentials(CLIENT["client_id"], CLIENT["client_secret"])["access_token"]
        assert jwt.get_unverified_header(token)["alg"] == "EdDSA"
        assert verified(server, token)["sub"] == CLIENT["client_id"]
    assert server._process is None
