"""The `oxp` backend against real OXP servers on loopback: another `toolplex serve` (JWT on),
an older-style server answering `{"tools": [...]}`, and the deliberately faulty server."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from pydantic import ValidationError

from adapters.oxp.backend import OxpBackend, upstream_call_id
from adapters.oxp.settings import OxpBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.config import parse_config
from gateway.dispatch import Dispatcher
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import Call, CallContext, Principal, ToolSpec
from tests.support import asgi_client, gateway_process, python_server, refused_port
from tests.upstreams.faults import FAULTS
from tests.upstreams.oxp_legacy_server import TOOLS as LEGACY_TOOLS

SECRET = "oxp-upstream-secret-0123456789abcdef"  # 36 bytes
AUDIENCE = "upstream-toolplex"
DEADLINE = 1.0
MARGIN = 3.0  # generous: a 2-core CI machine under load

UPSTREAM_CONFIG = f"""
fronts:
  oxp: {{prefix: ""}}
backends:
  - {{name: calculator, kind: python, module: "tests.oxp.fixtures.calculator:toolkit"}}
  - {{name: doorbell, kind: python, module: "tests.oxp.fixtures.doorbell:toolkit"}}
  - {{name: demo_requirements, kind: python, module: "adapters.python.toolkits.demo_requirements:toolkit"}}
  - {{name: vault, kind: python, module: "tests.oxp.fixtures.vault:toolkit"}}
authorization:
  providers:
    demo:
      url: "https://auth.example.com/authorize?provider={{provider}}&user={{user_id}}"
      check_url: "https://auth.example.com/status?provider={{provider}}&user={{user_id}}"
    vault:
      url: "https://auth.example.com/vault?tool={{tool}}&scopes={{scopes}}"
auth:
  jwt: {{secret_env: OXP_UPSTREAM_SECRET, audience: {AUDIENCE}}}
"""


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `toolplex serve` serving the OXP fixtures, bearer JWT required."""
    path = tmp_path_factory.mktemp("oxp-upstream") / "upstream.yaml"
    path.write_text(UPSTREAM_CONFIG)
    with gateway_process(path, env={"OXP_UPSTREAM_SECRET": SECRET}) as base:
        yield base


@pytest.fixture(scope="module")
def legacy() -> Iterator[str]:
    """The older-style server, its API under /oxp."""
    with python_server("tests.upstreams.oxp_legacy_server", "--prefix", "/oxp") as port:
        yield f"http://127.0.0.1:{port}"


def oxp_backend(url: str, **settings: Any) -> OxpBackend:
    """A backend built as the gateway builds it: from its typed settings."""
    typed = OxpBackendSettings.model_validate({"name": "up", "kind": "oxp", "url": url, **settings})
    return OxpBackend(typed, BackendContext())


def signed(**settings: Any) -> dict[str, Any]:
    return {"jwt": {"secret": SECRET, "audience": AUDIENCE, "ttl_s": 30}, **settings}


def context(**fields: Any) -> CallContext:
    return CallContext(deadline=time.monotonic() + 10, **fields)


async def failure_of(backend: OxpBackend, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> Any:
    with pytest.raises(GatewayError) as info:
        await backend.call(spec, arguments, ctx)
    return info.value.failure


def by_id(specs: list[ToolSpec]) -> dict[str, ToolSpec]:
    return {spec.versioned_id: spec for spec in specs}


def fingerprint(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


# ---- toolplex fronting toolplex ----


async def test_discovery_keeps_every_upstream_version(upstream: str) -> None:
    backend = oxp_backend(upstream, **signed())
    try:
        specs = by_id(await backend.discover())
    finally:
        await backend.close()
    assert {"Calculator.Add@1.0.0", "Calculator.Add@1.1.0", "Doorbell.Ring@0.1.0"} <= set(specs)
    older, newer = specs["Calculator.Add@1.0.0"], specs["Calculator.Add@1.1.0"]
    assert (older.binding, newer.binding) == ("Calculator.Add@1.0.0", "Calculator.Add@1.1.0")
    assert "c" in newer.input_schema["properties"] and "c" not in older.input_schema["properties"]
    assert {spec.language for spec in specs.values()} == {"remote"}
    assert {spec.backend for spec in specs.values()} == {"up"}
    assert specs["Demo.SecretCheck@1.0.0"].requirements.secrets == ("DEMO_API_KEY",)
    who = specs["Demo.WhoAmI@1.0.0"].requirements
    assert who.user_id and [(a.id, a.scopes) for a in who.authorization] == [("demo", ("profile",))]


def downstream_config(upstream: str, shape: str) -> str:
    return f"""
fronts:
  oxp: {{prefix: ""}}
backends:
  - name: up
    kind: oxp
    url: {upstream}
    shape: {shape}
    rename: {{Round: Rounding}}
    jwt: {{secret: "${{OXP_UPSTREAM_SECRET}}", audience: {AUDIENCE}, ttl_s: 30}}
"""


@pytest.mark.parametrize("shape", ["flat", "wrapped"])
async def test_toolplex_fronting_toolplex_through_oxp(upstream: str, shape: str) -> None:
    async with asgi_client(downstream_config(upstream, shape), env={"OXP_UPSTREAM_SECRET": SECRET}) as client:
        listed = (await client.get("/tools")).json()["items"]
        ids = [item["id"] for item in listed]
        assert "Calculator.Add@1.0.0" in ids and "Calculator.Add@1.1.0" in ids
        assert "Calculator.Rounding@1.0.0" in ids  # renamed on this side only

        async def call(tool_id: str, arguments: dict[str, Any], **extra: Any) -> Any:
            return await client.post("/tools/call", json={"tool_id": tool_id, "input": arguments, **extra})

        assert (await call("Calculator.Add@1.0.0", {"a": 10, "b": 5})).json()["value"] == 15
        assert (await call("Calculator.Add@1.1.0", {"a": 10, "b": 5, "c": 3})).json()["value"] == 18
        assert (await call("Calculator.Add", {"a": 1, "b": 1, "c": 1})).json()["value"] == 3  # latest: 1.1.0
        # The upstream is asked for its own name and version, whatever this side calls the tool.
        assert (await call("Calculator.Rounding@1.0.0", {"value": 2.5, "mode": "up"})).json()["value"] == 3

        rung = await call("Doorbell.Ring@0.1.0", {"doorbell_id": "doorbell1"}, call_id="c-doorbell-" + shape)
        assert rung.status_code == 200
        assert rung.json()["success"] is False and rung.json()["call_id"] == "c-doorbell-" + shape
        assert rung.json()["error"] == {
            "message": "Doorbell ID not found",
            "developer_message": "The doorbell with ID 'doorbell1' does not exist.",
            "can_retry": True,
            "additional_prompt_content": "ids: doorbell42,doorbell84",
            "retry_after_ms": 500,
        }

        invalid = await call("Calculator.Add@1.0.0", {"a": 10, "b": "infinity"})
        assert invalid.status_code == 422 and set(invalid.json()["parameter_errors"]) == {"b"}

        secret = await call(
            "Demo.SecretCheck@1.0.0", {}, context={"secrets": [{"id": "DEMO_API_KEY", "value": "s3cret"}]}
        )
        assert secret.json()["value"]["fingerprint"] == fingerprint("s3cret")  # the caller's secret reached the tool
        missing = await call("Demo.SecretCheck@1.0.0", {})
        assert missing.status_code == 400
        assert missing.json()["missing_requirements"] == {"secrets": [{"id": "DEMO_API_KEY"}]}
        who = await call(
            "Demo.WhoAmI", {}, context={"user_id": "ada", "authorization": [{"id": "demo", "token": "tok-1"}]}
        )
        assert who.json()["value"] == {"user_id": "ada", "provider": "demo", "token_fingerprint": fingerprint("tok-1")}


def upstream_token() -> str:
    claims = {"sub": "test", "aud": AUDIENCE, "exp": int(time.time()) + 60}
    return jwt.encode(claims, SECRET, algorithm="HS256")


HOP_CONFIG = """
backends:
  - name: up
    kind: oxp
    url: {upstream}
    jwt: {{secret: "${{OXP_UPSTREAM_SECRET}}", audience: {audience}, ttl_s: 30}}
"""


async def test_a_toolplex_behind_a_toolplex_lists_exactly_what_the_inner_one_does(upstream: str) -> None:
    """Names, toolkits, versions, descriptions, schemas and requirements survive the OXP hop, byte for byte."""
    async with httpx.AsyncClient(base_url=upstream, timeout=10) as inner:
        served = (await inner.get("/tools", headers={"Authorization": f"Bearer {upstream_token()}"})).json()["items"]
    config = HOP_CONFIG.format(upstream=upstream, audience=AUDIENCE)
    async with asgi_client(config, env={"OXP_UPSTREAM_SECRET": SECRET}) as client:
        relayed = (await client.get("/tools")).json()["items"]
    assert len(served) >= 7
    assert sorted(relayed, key=lambda item: item["id"]) == sorted(served, key=lambda item: item["id"])


VAULT_URL = "https://auth.example.com/vault?tool=Vault_Peek&scopes=read"


async def test_an_upstream_challenge_keeps_its_url_through_every_front(upstream: str) -> None:
    """This side knows no provider URL; the upstream's challenge, URL included, reaches each front's client."""
    config = HOP_CONFIG.format(upstream=upstream, audience=AUDIENCE)
    async with asgi_client(config, env={"OXP_UPSTREAM_SECRET": SECRET}) as client:
        oxp_answer = await client.post("/tools/call", json={"tool_id": "Vault.Peek"})
        who = await client.post("/tools/call", json={"tool_id": "Demo.WhoAmI", "context": {"user_id": "ada"}})
        opentool = await client.post(
            "/opentool/call", json={"jsonrpc": "2.0", "method": "Vault_Peek", "params": {}, "id": "1"}
        )
        toolserver = await client.post("/execute_tool", json={"tool_name": "Vault_Peek", "arguments": {}})
        rpc = await client.post(
            "/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": {"tool": "Vault_Peek"}}
        )
        granted = await client.post(
            "/tools/call",
            json={"tool_id": "Vault.Peek", "context": {"authorization": [{"id": "vault", "token": "t-1"}]}},
        )
    assert oxp_answer.status_code == 400
    assert oxp_answer.json()["missing_requirements"] == {"authorization": [{"id": "vault", "url": VAULT_URL}]}
    assert who.status_code == 400
    assert who.json()["missing_requirements"]["authorization"] == [
        {
            "id": "demo",
            "url": "https://auth.example.com/authorize?provider=demo&user=ada",
            "check_url": "https://auth.example.com/status?provider=demo&user=ada",
        }
    ]
    error = opentool.json()["error"]
    assert error["code"] == 401 and VAULT_URL in error["message"]
    assert error["data"]["authorization"] == [{"id": "vault", "url": VAULT_URL}]
    assert toolserver.status_code == 403 and VAULT_URL in toolserver.json()["detail"]
    assert rpc.json()["error"]["data"]["url"] == VAULT_URL
    assert granted.json()["success"] is True and granted.json()["value"]["provider"] == "vault"


async def test_upstream_refusals_round_trip_with_every_field(upstream: str) -> None:
    """Straight to the backend, past this side's own checks, so that the upstream's answers are what comes back."""
    backend = oxp_backend(upstream, **signed())
    try:
        specs = by_id(await backend.discover())
        add, secret_check, who_am_i = (
            specs["Calculator.Add@1.0.0"],
            specs["Demo.SecretCheck@1.0.0"],
            specs["Demo.WhoAmI@1.0.0"],
        )
        invalid = await failure_of(backend, add, {"a": 10, "b": "infinity"}, context())
        assert invalid.kind is ErrorKind.INVALID_ARGUMENTS and set(invalid.parameter_errors) == {"b"}

        missing = await failure_of(backend, secret_check, {}, context())
        assert missing.kind is ErrorKind.MISSING_REQUIREMENT and missing.details == {"secrets": ["DEMO_API_KEY"]}

        no_user = await failure_of(backend, who_am_i, {}, context())
        assert no_user.kind is ErrorKind.MISSING_REQUIREMENT and no_user.details == {"user_id": True}

        challenge = await failure_of(backend, who_am_i, {}, context(user_id="ada"))
        assert challenge.kind is ErrorKind.AUTHORIZATION_REQUIRED
        assert challenge.details == {
            "authorization": [
                {
                    "id": "demo",
                    "url": "https://auth.example.com/authorize?provider=demo&user=ada",
                    "check_url": "https://auth.example.com/status?provider=demo&user=ada",
                }
            ]
        }
        gone = dataclasses.replace(add, version="9.0.0", binding="Calculator.Add@9.0.0")
        not_found = await failure_of(backend, gone, {"a": 1, "b": 2}, context())
        assert not_found.kind is ErrorKind.NOT_FOUND and "not found" in not_found.message
    finally:
        await backend.close()


async def test_jwt_is_minted_per_request_and_checked_by_the_upstream(upstream: str, legacy: str) -> None:
    wrong = oxp_backend(upstream, jwt={"secret": "another-secret-of-the-right-length-000", "audience": AUDIENCE})
    unsigned = oxp_backend(upstream)
    right = oxp_backend(upstream, **signed())
    try:
        for refused in (wrong, unsigned):
            with pytest.raises(GatewayError) as info:  # a GatewayError, never a ConfigError: the gateway keeps going
                await refused.discover()
            assert info.value.failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE
            assert "credentials" in info.value.failure.message
        add = by_id(await right.discover())["Calculator.Add@1.0.0"]
        assert await right.call(add, {"a": 1, "b": 2}, context()) == 3
        failure = await failure_of(wrong, add, {"a": 1, "b": 2}, context())
        assert failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE and "credentials" in failure.message
    finally:
        for backend in (wrong, unsigned, right):
            await backend.close()

    echo = oxp_backend(legacy, path="/oxp", **signed())
    try:
        spec = by_id(await echo.discover())["Echo.Request@1.0.0"]
        tokens = []
        for _ in range(2):
            seen = (await echo.call(spec, {}, context()))["headers"]
            tokens.append(seen["authorization"].removeprefix("Bearer "))
    finally:
        await echo.close()
    assert tokens[0] != tokens[1]
    for token in tokens:
        claims = jwt.decode(token, SECRET, algorithms=["HS256"], audience=AUDIENCE, options={"require": ["exp"]})
        assert claims["exp"] - claims["iat"] == 30


def test_a_short_jwt_secret_is_a_configuration_error() -> None:
    with pytest.raises(ValidationError, match="at least 32 bytes"):
        oxp_backend("http://127.0.0.1:9", jwt={"secret": "short"})
    config = 'backends:\n  - {name: up, kind: oxp, url: "http://127.0.0.1:9", jwt: {secret: short}}\n'
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        parse_config(config)


async def test_client_authorization_is_forwarded_only_when_configured(upstream: str, legacy: str) -> None:
    claims = {"sub": "client", "aud": AUDIENCE, "exp": int(time.time()) + 60}
    good = "Bearer " + jwt.encode(claims, SECRET, algorithm="HS256")
    keeps_own = oxp_backend(upstream, **signed())
    forwards = oxp_backend(upstream, forward_authorization=True, **signed())
    try:
        add = by_id(await keeps_own.discover())["Calculator.Add@1.0.0"]
        # A garbage client header would be refused upstream: success proves it stayed here.
        assert (
            await keeps_own.call(add, {"a": 2, "b": 2}, context(client_credentials={"Authorization": "Bearer garbage"}))
            == 4
        )
        assert await forwards.call(add, {"a": 2, "b": 3}, context(client_credentials={"Authorization": good})) == 5
        for client_header in ("Bearer garbage", None):
            refused = await failure_of(
                forwards,
                add,
                {"a": 1, "b": 1},
                context(client_credentials={"Authorization": client_header} if client_header else {}),
            )
            assert refused.kind is ErrorKind.UNAUTHENTICATED  # the client's own credentials: the client can fix it
    finally:
        await keeps_own.close()
        await forwards.close()

    for settings, expected in (
        ({"api_key": "k-123"}, "Bearer k-123"),
        ({"api_key": "k-123", "forward_authorization": True}, "Bearer client"),
        ({}, None),
    ):
        echo = oxp_backend(legacy, path="/oxp", **settings)
        try:
            spec = by_id(await echo.discover())["Echo.Request@1.0.0"]
            seen = (await echo.call(spec, {}, context(client_credentials={"Authorization": "Bearer client"})))[
                "headers"
            ]
        finally:
            await echo.close()
        assert seen["authorization"] == expected, settings


# ---- an older-style server: {"tools": [...]} ----


async def test_older_servers_list_tools_under_tools(legacy: str) -> None:
    backend = oxp_backend(legacy, path="/oxp/")
    try:
        specs = by_id(await backend.discover())
    finally:
        await backend.close()
    assert set(specs) == {"Echo.Request@1.0.0", "Echo.Request@2.0.0", "Echo.Answer@1.0.0"}  # the broken one skipped
    assert len(LEGACY_TOOLS) == 4


@pytest.mark.parametrize("shape", ["flat", "wrapped"])
async def test_the_request_on_the_wire(legacy: str, shape: str) -> None:
    backend = oxp_backend(legacy, path="/oxp", shape=shape, api_key="k-1", **signed())
    try:
        spec = by_id(await backend.discover())["Echo.Request@2.0.0"]
        renamed = dataclasses.replace(spec, toolkit="Mine", name="Renamed", version="5.0.0")  # routing's doing
        ctx = context(
            call_id="call-42",
            trace_id="trace-7",
            user_id="ada",
            secrets={"K": "v"},
            authorization={"demo": "tok"},
        )
        seen = await backend.call(renamed, {"note": "hi"}, ctx)
    finally:
        await backend.close()
    inner = {
        "call_id": upstream_call_id(ctx),  # the caller's id, scoped: callers of the gateway may pick the same
        "trace_id": "trace-7",
        "tool_id": "Echo.Request@2.0.0",
        "input": {"note": "hi"},
        "context": {
            "authorization": [{"id": "demo", "token": "tok"}],
            "secrets": [{"id": "K", "value": "v"}],
            "user_id": "ada",
        },
    }
    assert seen["body"] == (inner if shape == "flat" else {"$schema": "urn:oxp:1.0", "request": inner})
    assert upstream_call_id(ctx) == upstream_call_id(context(call_id="call-42"))  # a retry keeps its id
    other_caller = context(call_id="call-42", principal=Principal("someone-else"))
    assert upstream_call_id(other_caller) != upstream_call_id(ctx)
    shifted = (
        context(call_id="c", principal=Principal("jwt:a:b")),
        context(call_id="b:c", principal=Principal("jwt:a")),
    )
    assert upstream_call_id(shifted[0]) != upstream_call_id(shifted[1])  # a ':' in a name cannot shift the parts
    assert seen["headers"]["oxp-version"] == "1.0"
    assert seen["headers"]["content-type"] == "application/json"
    assert seen["headers"]["authorization"].startswith("Bearer ey")  # the JWT
    assert seen["headers"]["x-api-key"] == "k-1"  # the API key rides along when both are configured


TOOL_ERROR = {
    "message": "Doorbell ID not found",
    "developer_message": "dev",
    "can_retry": True,
    "additional_prompt_content": "ids: a,b",
    "retry_after_ms": 500,
}
CHALLENGE = {"id": "g", "url": "https://auth.example/a", "check_url": "https://auth.example/c"}
ANSWERS: list[tuple[str, int, Any, dict[str, str] | None, ErrorKind | None, dict[str, Any]]] = [
    ("success", 200, {"call_id": "x", "duration": 1, "success": True, "value": None}, None, None, {}),
    (
        "tool failure",
        200,
        {"call_id": "x", "duration": 1, "success": False, "error": TOOL_ERROR},
        None,
        ErrorKind.TOOL_FAILED,
        {**TOOL_ERROR, "developer_message": "dev"},
    ),
    (
        "wrapped tool failure",
        200,
        {"$schema": "urn:oxp:1.0", "result": {"success": False, "error": TOOL_ERROR}},
        None,
        ErrorKind.TOOL_FAILED,
        TOOL_ERROR,
    ),
    (
        "422",
        422,
        {"message": "Some input parameters are invalid", "parameter_errors": {"b": "Must be a number"}},
        None,
        ErrorKind.INVALID_ARGUMENTS,
        {"parameter_errors": {"b": "Must be a number"}},
    ),
    (
        "400 not found",
        400,
        {"message": "Tool 'Calculator_Add' was not found", "developer_message": "version 2.0.0 is not available"},
        None,
        ErrorKind.NOT_FOUND,
        {"developer_message": "version 2.0.0 is not available"},
    ),
    (
        "400 challenge",
        400,
        {"message": "Authorize first", "missing_requirements": {"authorization": [CHALLENGE]}},
        None,
        ErrorKind.AUTHORIZATION_REQUIRED,
        {"details": {"authorization": [CHALLENGE]}},
    ),
    (
        "400 missing secret",
        400,
        {"message": "Needs K", "missing_requirements": {"secrets": [{"id": "K"}]}},
        None,
        ErrorKind.MISSING_REQUIREMENT,
        {"details": {"secrets": ["K"]}},
    ),
    (
        "400 server unavailable",
        400,
        {"message": "The tool server is temporarily unavailable"},
        None,
        ErrorKind.UPSTREAM_UNAVAILABLE,
        {},
    ),
    ("400 not an error body", 400, ["nope"], None, ErrorKind.UPSTREAM_UNAVAILABLE, {}),
    ("422 not an error body", 422, ["nope"], None, ErrorKind.UPSTREAM_UNAVAILABLE, {}),
    (
        "422 with odd parameter_errors",
        422,
        {"message": "bad", "parameter_errors": ["b"]},
        None,
        ErrorKind.INVALID_ARGUMENTS,
        {"parameter_errors": {}},
    ),
    (
        "400 with odd missing_requirements",
        400,
        {"message": "Authorize", "missing_requirements": {"authorization": 7}},
        None,
        ErrorKind.UPSTREAM_UNAVAILABLE,
        {},
    ),
    (
        "400 refused, nothing more said",
        400,
        {"message": "Unknown field(s) in the call request: extra", "developer_message": "only these"},
        None,
        ErrorKind.INVALID_ARGUMENTS,
        {
            "message": "Upstream 'up' answered HTTP 400: Unknown field(s) in the call request: extra",
            "developer_message": "only these",
        },
    ),
    (
        "422 with object messages",
        422,
        {"message": {"text": "bad"}, "parameter_errors": {"b": {"expected": "number"}, "c": "Must be a string"}},
        None,
        ErrorKind.INVALID_ARGUMENTS,
        {
            "message": '{"text":"bad"}',
            "parameter_errors": {"b": '{"expected":"number"}', "c": "Must be a string"},
        },
    ),
    ("401", 401, {"message": "Invalid credentials"}, None, ErrorKind.UPSTREAM_UNAVAILABLE, {}),
    (
        "403",
        403,
        {"message": "not for you"},
        None,
        ErrorKind.FORBIDDEN,
        {"message": "Upstream 'up' answered HTTP 403: not for you"},
    ),
    (
        "404",
        404,
        {"detail": "Not Found"},
        None,
        ErrorKind.NOT_FOUND,
        {"message": 'Upstream \'up\' answered HTTP 404: {"detail":"Not Found"}'},
    ),
    (
        "429",
        429,
        {"message": "slow down"},
        {"Retry-After": "2"},
        ErrorKind.RATE_LIMITED,
        {"retry_after_ms": 2000, "can_retry": True, "message": "Upstream 'up' answered HTTP 429: slow down"},
    ),
    (
        "503",
        503,
        {"message": "down"},
        None,
        ErrorKind.UPSTREAM_UNAVAILABLE,
        {"message": "Upstream 'up' answered HTTP 503: down", "can_retry": True},
    ),
    (
        "500 with an object",
        500,
        {"error": {"code": 7, "why": "boom"}},
        None,
        ErrorKind.UPSTREAM_UNAVAILABLE,
        {"message": 'Upstream \'up\' answered HTTP 500: {"error":{"code":7,"why":"boom"}}'},
    ),
    ("409", 409, {"message": "busy"}, None, ErrorKind.MALFORMED, {"message": "Upstream 'up' answered HTTP 409: busy"}),
    ("200 of another protocol", 200, {"items": []}, None, ErrorKind.UPSTREAM_UNAVAILABLE, {}),
    ("200 success:false without error", 200, {"success": False}, None, ErrorKind.UPSTREAM_UNAVAILABLE, {}),
]


@pytest.mark.parametrize(("label", "status", "body", "headers", "kind", "fields"), ANSWERS, ids=[a[0] for a in ANSWERS])
async def test_each_answer_maps_to_its_kind(
    legacy: str,
    label: str,
    status: int,
    body: Any,
    headers: dict[str, str] | None,
    kind: ErrorKind | None,
    fields: dict[str, Any],
) -> None:
    backend = oxp_backend(legacy, path="/oxp")
    try:
        spec = by_id(await backend.discover())["Echo.Answer@1.0.0"]
        arguments = {"status": status, "body": body, "headers": headers or {}}
        if kind is None:
            assert await backend.call(spec, arguments, context()) is None
            return
        failure = await failure_of(backend, spec, arguments, context())
    finally:
        await backend.close()
    assert failure.kind is kind, label
    for name, value in fields.items():
        assert getattr(failure, name) == value, (label, name)
    if kind is ErrorKind.UPSTREAM_UNAVAILABLE and "message" not in fields:
        assert failure.message.startswith("Upstream 'up' is unavailable"), failure.message
    assert "{'" not in failure.message and all("{'" not in v for v in (failure.parameter_errors or {}).values())


# ---- faults ----


@pytest.fixture(scope="module")
def tool_list(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("oxp-faults") / "tools.json"
    path.write_text(json.dumps({"items": LEGACY_TOOLS[:1]}))
    return path


@pytest.mark.parametrize(("mode", "kind"), FAULTS)
async def test_fault(mode: str, kind: ErrorKind, tool_list: Path) -> None:
    args = ["--mode", mode, "--document", str(tool_list), "--delay", str(DEADLINE + 1)]
    with python_server("tests.upstreams.faulty_server", *args) as port:
        backend = oxp_backend(f"http://127.0.0.1:{port}", retries=2, retry_backoff_s=0.01)
        try:
            dispatcher = Dispatcher(Catalog(await backend.discover()), {"up": backend}, default_timeout=DEADLINE)
            started = time.monotonic()
            outcome = await dispatcher.call(Call("Echo_Request", {"note": "x"}))
            seconds = time.monotonic() - started
            after = await dispatcher.call(Call("Echo_Request", {"note": "again"}))  # still answering, not wedged
        finally:
            await backend.close()
    assert outcome.error is not None and outcome.error.kind is kind, outcome.error
    assert seconds < DEADLINE + MARGIN, seconds
    assert after.error is not None and after.error.kind is kind


async def test_refused_connections_and_invalid_tool_lists(tool_list: Path, tmp_path: Path) -> None:
    nowhere = oxp_backend(f"http://127.0.0.1:{refused_port()}", retries=1, retry_backoff_s=0.01)
    try:
        with pytest.raises(GatewayError) as info:
            await nowhere.discover()
        assert info.value.failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE and "cannot connect" in str(info.value)
        spec = ToolSpec("Echo", "Request", "1.0.0", "", {"type": "object"}, backend="up", binding="Echo.Request@1.0.0")
        dispatcher = Dispatcher(Catalog([spec]), {"up": nowhere}, default_timeout=DEADLINE)
        outcome = await dispatcher.call(Call("Echo_Request", {}))
        assert outcome.error is not None and outcome.error.kind is ErrorKind.UPSTREAM_UNAVAILABLE
    finally:
        await nowhere.close()

    document = tmp_path / "other.json"
    document.write_text(json.dumps({"functions": [], "opentool": "1.0.0"}))
    with python_server("tests.upstreams.faulty_server", "--mode", "wrong", "--document", str(document)) as port:
        other = oxp_backend(f"http://127.0.0.1:{port}", retries=0)
        try:
            with pytest.raises(GatewayError) as info:
                await other.discover()
        finally:
            await other.close()
    assert info.value.failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE
    assert "'items' (or 'tools') array" in info.value.failure.message


async def test_a_gateway_whose_oxp_upstream_is_down_still_serves() -> None:
    config = f"""
fronts:
  oxp: {{prefix: ""}}
backends:
  - {{name: calculator, kind: python, module: "tests.oxp.fixtures.calculator:toolkit"}}
  - {{name: up, kind: oxp, url: "http://127.0.0.1:{refused_port()}", retries: 0}}
"""
    async with asgi_client(config) as client:
        ready = (await client.get("/readyz")).json()
        called = await client.post("/tools/call", json={"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}})
    assert ready["status"] == "degraded"
    assert {b["name"]: b["state"] for b in ready["backends"]} == {"calculator": "up", "up": "down"}
    assert called.json()["value"] == 3
