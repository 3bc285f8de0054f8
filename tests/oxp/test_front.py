"""The OXP front over HTTP: endpoints, version rules, every kind of bad input, requirements, headers."""

from __future__ import annotations

import textwrap
from typing import Any

import httpx
import pytest

from adapters.oxp import codec
from gateway.app import create_app
from gateway.config import parse_config
from tests.oxp.helpers import oxp_config
from tests.support import asgi_client

PUBLISHED_FIELDS = ["id", "name", "description", "version", "input_schema", "output_schema", "requirements"]


def expect(response: httpx.Response, status: int) -> dict[str, Any]:
    """Status, the OXP-Version header every response carries, and a JSON body."""
    assert response.status_code == status, response.text
    assert response.headers["oxp-version"] == "1.0"
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert isinstance(body, dict)
    return body


async def test_health_is_200_once_ready_and_503_before() -> None:
    async with asgi_client(oxp_config()) as client:
        assert expect(await client.get("/health"), 200) == {"status": "ok"}
    app = create_app(parse_config(textwrap.dedent(oxp_config()), "t.yaml"))  # lifespan not run: not ready
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        assert expect(await client.get("/health"), 503) == {"status": "starting"}


async def test_tools_lists_every_version_with_exactly_the_published_fields() -> None:
    async with asgi_client(oxp_config()) as client:
        body = expect(await client.get("/tools"), 200)
    assert list(body) == ["items"]
    by_id = {item["id"]: item for item in body["items"]}
    assert {"Calculator.Add@1.0.0", "Calculator.Add@1.1.0", "Doorbell.Ring@0.1.0", "Demo.WhoAmI@1.0.0"} <= set(by_id)
    for item in body["items"]:
        assert list(item) == PUBLISHED_FIELDS
    add = by_id["Calculator.Add@1.0.0"]
    assert add["name"] == "Calculator_Add"
    assert add["version"] == "1.0.0"
    assert add["input_schema"]["properties"]["b"]["type"] == "number"
    assert add["output_schema"] == {"type": "number"}
    assert add["requirements"] == {"authorization": [], "secrets": [], "user_id": False}
    assert by_id["Demo.WhoAmI@1.0.0"]["requirements"] == {
        "authorization": [{"id": "demo", "oauth2": {"scopes": ["profile"]}}],
        "secrets": [],
        "user_id": True,
    }
    assert by_id["Demo.SecretCheck@1.0.0"]["requirements"]["secrets"] == [{"id": "DEMO_API_KEY"}]


async def test_version_resolution() -> None:
    three = {"a": 10, "b": 5, "c": 1}  # only 1.1.0 takes c
    async with asgi_client(oxp_config()) as client:
        latest = expect(await client.post("/tools/call", json={"tool_id": "Calculator.Add", "input": three}), 200)
        exact = expect(await client.post("/tools/call", json={"tool_id": "Calculator.Add@1.1.0", "input": three}), 200)
        major = expect(await client.post("/tools/call", json={"tool_id": "Calculator.Add@1", "input": three}), 422)
        unknown_major = expect(await client.post("/tools/call", json={"tool_id": "Calculator.Add@2"}), 400)
    assert latest["value"] == exact["value"] == 16
    assert major["parameter_errors"] == {"c": "Unexpected parameter"}  # @1 is 1.0.0 exactly, not the newest 1.x
    assert unknown_major["developer_message"] == (
        "Calculator.Add version 2.0.0 is not available; available versions: 1.1.0, 1.0.0"
    )


@pytest.mark.parametrize("header", ["1", "1.0", "1.4"])
async def test_accepted_oxp_versions(header: str) -> None:
    async with asgi_client(oxp_config()) as client:
        r = await client.post(
            "/tools/call",
            json={"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}},
            headers={"OXP-Version": header},
        )
        assert expect(r, 200)["value"] == 3
        expect(await client.get("/tools", headers={"OXP-Version": header}), 200)


@pytest.mark.parametrize("header", ["2", "2.0", "0.1", "latest"])
async def test_another_oxp_major_is_a_400_naming_the_supported_versions(header: str) -> None:
    async with asgi_client(oxp_config()) as client:
        call = await client.post("/tools/call", json={"tool_id": "Calculator.Add"}, headers={"OXP-Version": header})
        listing = await client.get("/tools", headers={"OXP-Version": header})
    for response in (call, listing):
        body = expect(response, 400)
        assert body["message"] == f"OXP version {header!r} is not supported"
        assert "OXP 1.0" in body["developer_message"]


@pytest.mark.parametrize(
    ("content", "headers", "message"),
    [
        (b"", {"Content-Type": "application/json"}, "Request body is empty"),
        (b"   ", {"Content-Type": "application/json"}, "Request body is empty"),
        (b"{not json", {"Content-Type": "application/json"}, "Request body is not valid JSON"),
        (b"[1, 2]", {"Content-Type": "application/json"}, "The body must be a JSON object"),
        (b"<call/>", {"Content-Type": "application/xml"}, "Content-Type must be"),  # forms: 415 (tests/security)
    ],
)
async def test_unreadable_bodies(content: bytes, headers: dict[str, str], message: str) -> None:
    async with asgi_client(oxp_config()) as client:
        body = expect(await client.post("/tools/call", content=content, headers=headers), 400)
    assert body["message"].startswith(message)


async def test_a_body_without_content_type_is_read_as_json() -> None:
    async with asgi_client(oxp_config()) as client:
        r = await client.post("/tools/call", content=b'{"tool_id": "Calculator.Add", "input": {"a": 1, "b": 1}}')
    assert expect(r, 200)["value"] == 2


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        ({"tool_id": "Calculator.Add", "input": [10, 5]}, "'input' must be an object keyed by parameter name"),
        ({"tool_id": "Calculator.Add", "input": 10}, "'input' must be an object keyed by parameter name"),
        (
            {"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}, "timeout": 5},
            "Unknown field(s) in the call request: timeout",
        ),
        ({"tool_id": "Calculator.Add@1.2"}, "Invalid tool_id 'Calculator.Add@1.2'"),
        ({"tool_id": "Calculator.Add@1.0.0-rc.1"}, "Invalid tool_id 'Calculator.Add@1.0.0-rc.1'"),
        ({"tool_id": "calculatoradd"}, "Invalid tool_id 'calculatoradd'"),
        ({"tool_id": "CalculatorAdd@1.0.0"}, "Invalid tool_id 'CalculatorAdd@1.0.0'"),
        ({"input": {"a": 1}}, "'tool_id' is required"),
        ({"request": {"tool_id": "Calculator.Add"}, "call_id": "x"}, "Unknown field(s) next to 'request': call_id"),
    ],
)
async def test_malformed_requests_are_400(request_body: dict[str, Any], message: str) -> None:
    async with asgi_client(oxp_config()) as client:
        body = expect(await client.post("/tools/call", json=request_body), 400)
    assert body["message"] == message or body["message"].startswith(message)


async def test_lowercase_ids_are_unknown_tools_with_what_exists() -> None:
    async with asgi_client(oxp_config()) as client:
        lower = expect(await client.post("/tools/call", json={"tool_id": "calculator.add"}), 400)
        sibling = expect(await client.post("/tools/call", json={"tool_id": "Calculator.Sub"}), 400)
    assert lower["message"] == "Tool 'calculator_add' was not found"
    assert lower["developer_message"].startswith("No tool calculator.add is served; toolkits: Calculator, ")
    assert sibling["developer_message"] == (
        "No tool Calculator.Sub is served; toolkit Calculator has Calculator.Add, Calculator.Round"
    )


async def test_missing_input_means_no_arguments() -> None:
    async with asgi_client(oxp_config()) as client:
        body = expect(await client.post("/tools/call", json={"tool_id": "Calculator.Add"}), 422)
    assert body["parameter_errors"] == {"a": "Missing required parameter", "b": "Missing required parameter"}


async def test_422_names_every_bad_parameter() -> None:
    async with asgi_client(oxp_config()) as client:
        body = expect(
            await client.post(
                "/tools/call",
                json={"tool_id": "Calculator.Round", "input": {"value": "x", "mode": "sideways", "precision": 2}},
            ),
            422,
        )
    assert body == {
        "message": "Some input parameters are invalid",
        "parameter_errors": {
            "mode": 'Must be one of: "up", "down", "nearest"',
            "precision": "Unexpected parameter",
            "value": "Must be a number",
        },
    }


async def test_call_id_is_generated_when_absent_and_echoed_when_given() -> None:
    async with asgi_client(oxp_config()) as client:
        made = expect(
            await client.post("/tools/call", json={"tool_id": "Calculator.Add", "input": {"a": 1, "b": 1}}), 200
        )
        given = expect(
            await client.post(
                "/tools/call", json={"call_id": "mine", "tool_id": "Calculator.Add", "input": {"a": 1, "b": 1}}
            ),
            200,
        )
    assert isinstance(made["call_id"], str) and len(made["call_id"]) == 32
    assert given["call_id"] == "mine"
    assert isinstance(made["duration"], float | int) and made["duration"] >= 0


async def test_body_over_the_limit_is_413() -> None:
    config = oxp_config(extra="limits:\n  max_body_bytes: 64\n")
    async with asgi_client(config) as client:
        body = expect(
            await client.post(
                "/tools/call", json={"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2, "pad": "x" * 100}}
            ),
            413,
        )
    assert body["message"] == "Request body is larger than the limit of 64 bytes"


async def test_wrong_methods_are_405_with_the_oxp_header() -> None:
    async with asgi_client(oxp_config()) as client:
        get_call = expect(await client.get("/tools/call"), 405)
        post_tools = await client.post("/tools", json={})
    assert get_call["message"] == "Method GET is not allowed on /tools/call"
    expect(post_tools, 405)
    assert post_tools.headers["allow"] == "GET, HEAD"


async def test_prefix_mounts_the_front_elsewhere() -> None:
    async with asgi_client(oxp_config(fronts='prefix: "/oxp"')) as client:
        expect(await client.get("/oxp/health"), 200)
        assert len(expect(await client.get("/oxp/tools"), 200)["items"]) > 0
        r = await client.post("/oxp/tools/call", json={"tool_id": "Calculator.Add", "input": {"a": 2, "b": 2}})
        assert expect(r, 200)["value"] == 4
        assert (await client.get("/tools")).status_code == 404


async def test_disabled_front_mounts_nothing() -> None:
    async with asgi_client(oxp_config(fronts="enabled: false")) as client:
        assert (await client.get("/tools")).status_code == 404


class TestRequirements:
    async def test_missing_secret_is_a_400_naming_it(self) -> None:
        async with asgi_client(oxp_config()) as client:
            body = expect(await client.post("/tools/call", json={"tool_id": "Demo.SecretCheck"}), 400)
        assert body["message"] == "Tool Demo_SecretCheck needs the secret(s) DEMO_API_KEY"
        assert body["missing_requirements"] == {"secrets": [{"id": "DEMO_API_KEY"}]}

    async def test_the_secret_reaches_the_tool_through_its_context(self) -> None:
        context = {"secrets": [{"id": "DEMO_API_KEY", "value": "s3cret"}]}
        async with asgi_client(oxp_config()) as client:
            r = await client.post("/tools/call", json={"tool_id": "Demo.SecretCheck", "context": context})
        value = expect(r, 200)["value"]
        assert value["secret"] == "DEMO_API_KEY"
        assert value["length"] == 6
        assert value["fingerprint"].startswith("sha256:")
        assert "s3cret" not in r.text

    async def test_missing_user_id_is_a_400(self) -> None:
        async with asgi_client(oxp_config()) as client:
            body = expect(await client.post("/tools/call", json={"tool_id": "Demo.WhoAmI"}), 400)
        assert body["message"] == "Tool Demo_WhoAmI needs a user_id"
        assert body["missing_requirements"] == {"user_id": True}

    async def test_missing_authorization_is_a_challenge_with_the_configured_urls(self) -> None:
        async with asgi_client(oxp_config()) as client:
            r = await client.post("/tools/call", json={"tool_id": "Demo.WhoAmI", "context": {"user_id": "ada"}})
        body = expect(r, 400)
        assert body["missing_requirements"] == {
            "authorization": [
                {
                    "id": "demo",
                    "url": "https://auth.example.com/authorize?provider=demo&user=ada",
                    "check_url": "https://auth.example.com/status?provider=demo&user=ada",
                }
            ]
        }

    async def test_the_token_reaches_the_tool_through_its_context(self) -> None:
        context = {"user_id": "ada", "authorization": [{"id": "demo", "token": "tok-123"}]}
        async with asgi_client(oxp_config()) as client:
            r = await client.post("/tools/call", json={"tool_id": "Demo.WhoAmI", "context": context})
        value = expect(r, 200)["value"]
        assert value["user_id"] == "ada"
        assert value["provider"] == "demo"
        assert "tok-123" not in r.text


MISSING = "Missing credentials: send the Authorization header (an API key or a token, scheme Bearer) or X-API-Key"


class TestApiKeys:
    CONFIG = oxp_config(extra="auth:\n  api_keys:\n    - {name: ci, key: key-0123456789, tools: ['Calculator_*']}\n")

    async def test_401_with_a_server_error_body_and_the_header(self) -> None:
        async with asgi_client(self.CONFIG) as client:
            missing = await client.post("/tools/call", json={"tool_id": "Calculator.Add"})
            wrong = await client.get("/tools", headers={"Authorization": "Bearer nope"})
        assert expect(missing, 401) == {"message": MISSING}
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert expect(wrong, 401) == {"message": "Invalid credentials"}

    async def test_health_stays_open(self) -> None:
        async with asgi_client(self.CONFIG) as client:
            expect(await client.get("/health"), 200)

    async def test_a_key_sees_and_calls_only_its_tools(self) -> None:
        auth = {"Authorization": "Bearer key-0123456789"}
        async with asgi_client(self.CONFIG) as client:
            listed = expect(await client.get("/tools", headers=auth), 200)
            allowed = await client.post(
                "/tools/call", json={"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}}, headers=auth
            )
            denied = await client.post(
                "/tools/call", json={"tool_id": "Doorbell.Ring", "input": {"doorbell_id": "x"}}, headers=auth
            )
        assert {item["name"] for item in listed["items"]} == {"Calculator_Add", "Calculator_Round"}
        assert expect(allowed, 200)["value"] == 3
        assert expect(denied, 400)["message"] == "Caller 'ci' may not call tool Doorbell_Ring"


async def test_an_unexpected_error_is_a_json_500_with_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("a bug")

    monkeypatch.setattr(codec, "call_result", broken)  # a bug in encoding cannot be provoked from outside
    async with asgi_client(oxp_config()) as client:
        r = await client.post("/tools/call", json={"tool_id": "Calculator.Add", "input": {"a": 1, "b": 2}})
    body = expect(r, 500)
    assert body["message"].startswith("Internal error; quote ")
    assert "a bug" not in r.text and "Traceback" not in r.text
