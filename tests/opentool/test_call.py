"""OpenTool `/call` conformance: the exact bytes real SDK clients send and the fields they read."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support import BUILTIN_BACKENDS, asgi_client

JSON = {"content-type": "application/json"}


@pytest.fixture
async def client() -> Any:
    async with asgi_client(BUILTIN_BACKENDS + "limits: {max_body_bytes: 2048}\n") as c:
        yield c


async def post(client: httpx.AsyncClient, body: bytes | str, headers: dict[str, str] = JSON) -> httpx.Response:
    return await client.post("/opentool/call", content=body, headers=headers)


async def test_version(client: httpx.AsyncClient) -> None:
    r = await client.get("/opentool/version")
    assert r.status_code == 200
    assert r.json() == {"version": "0.1.0"}


async def test_success_as_the_dart_client_sends_it(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0","method":"Math_Add","params":{"a":10,"b":5},"id":"call-1"}')
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"jsonrpc": "2.0", "result": {"result": 15}, "error": None, "id": "call-1"}


async def test_object_results_are_returned_as_they_are(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0","method":"Demo_Sleep","params":{"seconds":0},"id":"s"}')
    assert r.json() == {"jsonrpc": "2.0", "result": {"slept": 0}, "error": None, "id": "s"}


async def test_typescript_sdk_jsonrpc_2_0_0_is_accepted(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0.0","method":"Text_WordCount","params":{"text":"a b c"},"id":"t"}')
    assert r.json() == {"jsonrpc": "2.0", "result": {"result": 3}, "error": None, "id": "t"}


async def test_missing_params_means_no_arguments(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0","method":"Time_Now","id":"n"}')
    assert r.json()["result"]["timezone"] == "UTC" and r.json()["error"] is None


async def test_tool_failure_keeps_result_an_object(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0","method":"Demo_Fail","params":{"message":"it broke"},"id":"f"}')
    assert r.status_code == 200
    assert r.json() == {
        "jsonrpc": "2.0",
        "result": {},
        "error": {
            "code": 500,
            "message": "it broke",
            "data": {
                "developer_message": "Demo.Fail always fails",
                "can_retry": True,
                "retry_after_ms": 500,
                "additional_prompt_content": "This tool fails on purpose.",
            },
        },
        "id": "f",
    }


async def test_divide_by_zero_is_a_tool_error(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0","method":"Math_Divide","params":{"a":1,"b":0},"id":"d"}')
    assert r.status_code == 200
    assert r.json()["error"]["code"] == 500 and r.json()["error"]["message"] == "Cannot divide by zero"


async def test_unknown_function(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0","method":"Math_Power","params":{},"id":"u"}')
    assert r.status_code == 200
    assert r.json() == {
        "jsonrpc": "2.0",
        "result": {},
        "error": {"code": -32601, "message": "Method Math_Power not found"},  # as the Dart SDK's server words it
        "id": "u",
    }


async def test_missing_and_mistyped_arguments_are_each_named(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0","method":"Math_Add","params":{"b":"five","c":1},"id":"v"}')
    assert r.status_code == 200
    assert r.json() == {
        "jsonrpc": "2.0",
        "result": {},
        "error": {
            "code": -32602,
            "message": "Invalid arguments for Math_Add: a: Missing required parameter; "
            "b: Must be an integer or a number; c: Unexpected parameter",
            "data": {
                "parameter_errors": {
                    "a": "Missing required parameter",
                    "b": "Must be an integer or a number",
                    "c": "Unexpected parameter",
                }
            },
        },
        "id": "v",
    }


async def test_params_must_be_an_object(client: httpx.AsyncClient) -> None:
    r = await post(client, '{"jsonrpc":"2.0","method":"Math_Add","params":[1,2],"id":"p"}')
    assert r.status_code == 200
    assert r.json()["error"] == {
        "code": -32602,
        "message": "'params' must be an object keyed by parameter name, got a JSON list",
    }
    assert r.json()["result"] == {} and r.json()["id"] == "p"


@pytest.mark.parametrize(
    ("body", "headers", "status", "code", "message"),
    [
        ("{not json", JSON, 400, -32700, "Request body is not valid JSON"),
        ("", JSON, 400, -32700, "Request body is empty"),
        ("[1, 2]", JSON, 400, -32600, "The body must be a JSON-RPC request object, not a JSON list"),
        ("42", JSON, 400, -32600, "The body must be a JSON-RPC request object, not a JSON int"),
        ('"x"', JSON, 400, -32600, "The body must be a JSON-RPC request object, not a JSON str"),
        ('{"jsonrpc":"2.0","params":{},"id":"m"}', JSON, 400, -32600, "'method' is required"),
        ('{"jsonrpc":"2.0","method":"Math_Add","id":7}', JSON, 400, -32600, "'id' must be a string, got int 7"),
        ('{"jsonrpc":"2.0","method":"Math_Add"}', JSON, 400, -32600, "'id' is required"),
        ('{"jsonrpc":"1.0","method":"Math_Add","id":"j"}', JSON, 400, -32600, "'jsonrpc' must be \"2.0\""),
        ('{"jsonrpc":"2.0","method":"Math_Add","id":"x","extra":1}', JSON, 400, -32600, "Unknown request member"),
        (
            '{"jsonrpc":"2.0","method":"Math_Add","id":"c"}',
            {"content-type": "application/xml"},  # browser-form types get 415 (tests/security)
            400,
            -32600,
            "Content-Type must be application/json, got 'application/xml'",
        ),
        ("[" * 5000 + "]" * 5000, {**JSON}, 413, -32600, "larger than the limit"),
    ],
)
async def test_malformed_requests(
    client: httpx.AsyncClient, body: str, headers: dict[str, str], status: int, code: int, message: str
) -> None:
    r = await post(client, body, headers)
    assert r.status_code == status
    payload = r.json()
    assert payload["jsonrpc"] == "2.0" and payload["result"] == {}
    assert payload["error"]["code"] == code
    assert message in payload["error"]["message"]


async def test_deeply_nested_json_is_refused() -> None:
    nested = "[" * 3000 + "]" * 3000
    body = '{"jsonrpc":"2.0","method":"Text_WordCount","params":{"text":' + nested + '},"id":"deep"}'
    async with asgi_client(BUILTIN_BACKENDS) as client:
        r = await post(client, body)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32700
    assert "more than 64 levels deep (limits.max_json_depth)" in r.json()["error"]["message"]


async def test_oversized_body_is_413(client: httpx.AsyncClient) -> None:
    big = '{"jsonrpc":"2.0","method":"Text_WordCount","params":{"text":"' + "x " * 2000 + '"},"id":"b"}'
    r = await post(client, big)
    assert r.status_code == 413
    assert r.json()["error"] == {"code": -32600, "message": "Request body is larger than the limit of 2048 bytes"}


async def test_deadline_is_504() -> None:
    config = BUILTIN_BACKENDS.replace(
        'module: "adapters.python.toolkits.demo:toolkit"}',
        'module: "adapters.python.toolkits.demo:toolkit", timeouts: {Sleep: 0.05}}',
    )
    async with asgi_client(config) as client:
        r = await post(client, '{"jsonrpc":"2.0","method":"Demo_Sleep","params":{"seconds":5},"id":"late"}')
    assert r.status_code == 200
    assert r.json() == {
        "jsonrpc": "2.0",
        "result": {},
        "error": {
            "code": 504,
            "message": "Tool Demo_Sleep did not finish within 0.05 s",
            "data": {"can_retry": True},
        },
        "id": "late",
    }
