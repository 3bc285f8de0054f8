"""The published OXP Python client (PyPI `oxp`) against a real `toolplex serve` subprocess, with JWT auth.

The client is Stainless-generated from the wrapped 1.0 spec: it sends
`{"request": {...}}` and reads `{"result": {...}}`. These tests record the
exact bytes it sends and check every field it reads back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import orjson
import oxp
import pytest

from tests.oxp.helpers import oxp_config
from tests.support import gateway_process

SECRET = "client-test-secret-0123456789-abcdefgh"
ENV = "TOOLPLEX_TEST_JWT_SECRET"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = tmp_path_factory.mktemp("oxp") / "gateway.yaml"
    config.write_text(oxp_config(fronts="patience_s: 10", extra=f"auth:\n  jwt:\n    secret_env: {ENV}\n"))
    with gateway_process(Path(config), env={ENV: SECRET}) as base:
        yield base


def bearer_jwt() -> str:
    return jwt.encode({"sub": "client-test", "exp": int(time.time()) + 300}, SECRET, algorithm="HS256")


@pytest.fixture
def sent() -> list[httpx.Request]:
    return []


@pytest.fixture
def client(base_url: str, sent: list[httpx.Request]) -> Iterator[oxp.Oxp]:
    http = httpx.Client(event_hooks={"request": [sent.append]}, timeout=30)
    with oxp.Oxp(bearer_token=bearer_jwt(), base_url=base_url, max_retries=0, http_client=http) as made:
        yield made


def test_health_and_listing(client: oxp.Oxp) -> None:
    assert client.health.check() is None
    listed = client.tools.list()
    by_id = {item.id: item for item in listed.items}
    add = by_id["Calculator.Add@1.0.0"]
    assert (add.name, add.version, add.description) == ("Calculator_Add", "1.0.0", "Add two numbers.")
    assert add.input_schema is not None and add.input_schema["required"] == ["a", "b"]
    assert add.output_schema == {"type": "number"}
    who = by_id["Demo.WhoAmI@1.0.0"]
    assert who.requirements is not None and who.requirements.user_id is True
    assert who.requirements.authorization is not None
    assert who.requirements.authorization[0].id == "demo"
    assert who.requirements.authorization[0].oauth2 is not None
    assert who.requirements.authorization[0].oauth2.scopes == ["profile"]


def test_a_successful_call(client: oxp.Oxp, sent: list[httpx.Request]) -> None:
    response = client.tools.call(
        request={"call_id": "client-ok-1", "tool_id": "Calculator.Add@1.0.0", "input": {"a": 10, "b": 5}}
    )
    # What the client put on the wire: the wrapped shape, no $schema unless asked for, a bearer JWT.
    request = sent[-1]
    assert (request.method, request.url.path) == ("POST", "/tools/call")
    assert orjson.loads(request.content) == {
        "request": {"call_id": "client-ok-1", "tool_id": "Calculator.Add@1.0.0", "input": {"a": 10, "b": 5}}
    }
    assert request.headers["authorization"].startswith("Bearer ey")
    result: Any = response.result
    assert response.schema_ == "urn:oxp:1.0"
    assert result.success is True
    assert result.value == 15
    assert result.call_id == "client-ok-1"
    assert isinstance(result.duration, float) and result.duration >= 0


def test_a_failed_call_carries_every_tool_error_field(client: oxp.Oxp) -> None:
    response = client.tools.call(
        request={"tool_id": "Doorbell.Ring@0.1.0", "input": {"doorbell_id": "doorbell1"}},
        schema="urn:oxp:1.0",
    )
    result: Any = response.result
    assert result.success is False
    assert result.call_id  # made by the server
    assert result.error.message == "Doorbell ID not found"
    assert result.error.developer_message == "The doorbell with ID 'doorbell1' does not exist."
    assert result.error.can_retry is True
    assert result.error.additional_prompt_content == "ids: doorbell42,doorbell84"
    assert result.error.retry_after_ms == 500


def test_the_same_call_id_is_answered_from_the_record(client: oxp.Oxp) -> None:
    request = {"call_id": "client-idem-1", "tool_id": "Calculator.Add", "input": {"a": 1, "b": 2, "c": 3}}
    first: Any = client.tools.call(request=request).result
    second: Any = client.tools.call(request=request).result
    assert first.value == second.value == 6
    assert first.duration == second.duration


def test_server_and_validation_errors_raise_with_the_body(client: oxp.Oxp) -> None:
    with pytest.raises(oxp.BadRequestError) as not_found:
        client.tools.call(request={"tool_id": "Calculator.Add@2.0.0"})
    assert not_found.value.status_code == 400
    assert not_found.value.response.headers["oxp-version"] == "1.0"
    assert not_found.value.body["message"] == "Tool 'Calculator_Add' was not found"  # type: ignore[index]
    with pytest.raises(oxp.UnprocessableEntityError) as invalid:
        client.tools.call(request={"tool_id": "Calculator.Add@1.0.0", "input": {"a": 10, "b": "infinity"}})
    assert invalid.value.body["parameter_errors"] == {"b": "Must be a number"}  # type: ignore[index]
    with pytest.raises(oxp.BadRequestError) as challenge:
        client.tools.call(request={"tool_id": "Demo.WhoAmI", "context": {"user_id": "ada"}})
    assert challenge.value.body["missing_requirements"]["authorization"][0]["id"] == "demo"  # type: ignore[index]


def test_context_reaches_the_tool(client: oxp.Oxp) -> None:
    result: Any = client.tools.call(
        request={
            "tool_id": "Demo.WhoAmI",
            "context": {"user_id": "ada", "authorization": [{"id": "demo", "token": "tok"}]},
        }
    ).result
    assert result.success is True
    assert result.value["user_id"] == "ada"


def test_raw_responses_carry_the_version_header(client: oxp.Oxp) -> None:
    raw = client.tools.with_raw_response.list()
    assert raw.headers["oxp-version"] == "1.0"
    assert raw.parse().items


def test_a_bad_token_is_an_authentication_error(base_url: str) -> None:
    expired = jwt.encode({"sub": "x", "exp": int(time.time()) - 60}, SECRET, algorithm="HS256")
    with oxp.Oxp(bearer_token=expired, base_url=base_url, max_retries=0) as stale:
        with pytest.raises(oxp.AuthenticationError) as caught:
            stale.tools.list()
        assert caught.value.body == {"message": "JWT has expired"}
        stale.health.check()  # /health needs no token
