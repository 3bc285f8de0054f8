"""Seed 003's four non-normative examples, reproduced byte for byte where the seed fixes the bytes.

The requests are sent as the exact bytes the seed shows; the answers are
compared as raw bytes (compact JSON, the seed's field order), with only the
measured `duration` left free.
"""

from __future__ import annotations

import re

import httpx
import orjson

from tests.oxp.helpers import oxp_config
from tests.support import asgi_client

HEADERS = {"Content-Type": "application/json"}
DURATION = re.compile(rb'"duration":(\d+(?:\.\d+)?)')


def split_duration(content: bytes) -> tuple[bytes, float]:
    """The body with its duration replaced by 0, and the duration."""
    match = DURATION.search(content)
    assert match is not None, content
    return DURATION.sub(b'"duration":0', content, count=1), float(match.group(1))


def assert_oxp(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.headers["oxp-version"] == "1.0"
    assert response.headers["content-type"] == "application/json"


async def test_successful_execution() -> None:
    request = b"""{
  "call_id": "123e4567-e89b-12d3-a456-426614174000",
  "tool_id": "Calculator.Add@1.0.0",
  "input": {
    "a": 10,
    "b": 5
  }
}"""
    async with asgi_client(oxp_config()) as client:
        response = await client.post("/tools/call", content=request, headers=HEADERS)
    assert_oxp(response, 200)
    body, duration = split_duration(response.content)
    assert body == b'{"call_id":"123e4567-e89b-12d3-a456-426614174000","duration":0,"success":true,"value":15}'
    assert duration >= 0


async def test_server_error_for_an_unknown_version() -> None:
    request = b"""{
  "call_id": "123e4567-e89b-12d3-a456-426614174000",
  "tool_id": "Calculator.Add@2.0.0"
}"""
    async with asgi_client(oxp_config()) as client:
        response = await client.post("/tools/call", content=request, headers=HEADERS)
    assert_oxp(response, 400)
    body = orjson.loads(response.content)
    assert list(body) == ["message", "developer_message"]
    assert body["message"] == "Tool 'Calculator_Add' was not found"
    # The seed's developer message, plus what does exist (the issue asks for the available versions).
    assert body["developer_message"] == (
        "Calculator.Add version 2.0.0 is not available; available versions: 1.1.0, 1.0.0"
    )
    assert body["developer_message"].startswith("Calculator.Add version 2.0.0 is not available")


async def test_input_validation_error() -> None:
    request = b"""{
  "call_id": "123e4567-e89b-12d3-a456-426614174000",
  "tool_id": "Calculator.Add@1.0.0",
  "input": {
    "a": 10,
    "b": "infinity"
  }
}"""
    async with asgi_client(oxp_config()) as client:
        response = await client.post("/tools/call", content=request, headers=HEADERS)
    assert_oxp(response, 422)
    assert (
        response.content
        == b'{"message":"Some input parameters are invalid","parameter_errors":{"b":"Must be a number"}}'
    )


async def test_tool_execution_error() -> None:
    request = b"""{
  "call_id": "723e4567-e89b-12d3-a456-426614174006",
  "tool_id": "Doorbell.Ring@0.1.0",
  "input": {
    "doorbell_id": "doorbell1"
  }
}"""
    async with asgi_client(oxp_config()) as client:
        response = await client.post("/tools/call", content=request, headers=HEADERS)
    assert_oxp(response, 200)
    body, _ = split_duration(response.content)
    assert body == (
        b'{"call_id":"723e4567-e89b-12d3-a456-426614174006","duration":0,"success":false,"error":'
        b'{"message":"Doorbell ID not found","developer_message":"The doorbell with ID \'doorbell1\' does not exist.",'
        b'"can_retry":true,"additional_prompt_content":"ids: doorbell42,doorbell84","retry_after_ms":500}}'
    )


async def test_the_examples_in_the_wrapped_shape() -> None:
    async with asgi_client(oxp_config()) as client:
        ok = await client.post(
            "/tools/call",
            json={
                "$schema": "urn:oxp:1.0",
                "request": {"call_id": "w1", "tool_id": "Calculator.Add@1.0.0", "input": {"a": 10, "b": 5}},
            },
        )
        failed = await client.post(
            "/tools/call",
            json={
                "request": {"call_id": "w2", "tool_id": "Doorbell.Ring@0.1.0", "input": {"doorbell_id": "doorbell1"}}
            },
        )
        missing = await client.post("/tools/call", json={"request": {"tool_id": "Calculator.Add@2.0.0"}})
        invalid = await client.post(
            "/tools/call", json={"request": {"tool_id": "Calculator.Add@1.0.0", "input": {"a": 10, "b": "infinity"}}}
        )
    assert_oxp(ok, 200)
    assert split_duration(ok.content)[0] == (
        b'{"$schema":"urn:oxp:1.0","result":{"call_id":"w1","duration":0,"success":true,"value":15}}'
    )
    assert_oxp(failed, 200)
    result = failed.json()["result"]
    assert result["success"] is False
    assert result["error"] == {
        "message": "Doorbell ID not found",
        "developer_message": "The doorbell with ID 'doorbell1' does not exist.",
        "can_retry": True,
        "additional_prompt_content": "ids: doorbell42,doorbell84",
        "retry_after_ms": 500,
    }
    assert_oxp(missing, 400)
    assert missing.json()["$schema"] == "urn:oxp:1.0"
    assert missing.json()["message"] == "Tool 'Calculator_Add' was not found"
    assert_oxp(invalid, 422)
    assert invalid.json() == {
        "$schema": "urn:oxp:1.0",
        "message": "Some input parameters are invalid",
        "parameter_errors": {"b": "Must be a number"},
    }
