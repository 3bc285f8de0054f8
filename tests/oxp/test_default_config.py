"""The OXP examples of the docs (docs/protocols/oxp.md) against the default configuration (what `make run` serves)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from adapters.oxp import codec
from tests.support import DEFAULT_CONFIG, asgi_client

EXAMPLES: list[tuple[dict[str, Any], dict[str, str], int, dict[str, Any]]] = [
    (
        {"tool_id": "Math.Add@2.0.0"},
        {},
        400,
        {
            "message": "Tool 'Math_Add' was not found",
            "developer_message": "Math.Add version 2.0.0 is not available; available versions: 1.0.0",
        },
    ),
    (
        {"tool_id": "Math.Add"},
        {"OXP-Version": "2"},
        400,
        {
            "message": "OXP version '2' is not supported",
            "developer_message": "This server speaks OXP 1.0; send OXP-Version: 1 or 1.x, or leave the header out",
        },
    ),
    (
        {"tool_id": "Demo.WhoAmI", "context": {"user_id": "ada"}},
        {},
        400,
        {
            "message": "Tool Demo_WhoAmI needs your authorization with demo",
            "missing_requirements": {
                "authorization": [
                    {"id": "demo", "url": "https://auth.example.com/authorize?provider=demo&user=ada&scope=profile"}
                ]
            },
        },
    ),
]


@pytest.fixture(scope="module")
def default_yaml() -> str:
    return DEFAULT_CONFIG.read_text()


async def test_readme_examples(default_yaml: str) -> None:
    async with asgi_client(default_yaml) as client:
        assert (await client.get("/health")).json() == {"status": "ok"}
        for body, headers, status, expected in EXAMPLES:
            r = await client.post("/tools/call", json=body, headers=headers)
            assert (r.status_code, r.json()) == (status, expected), body
            assert r.headers[codec.VERSION_HEADER] == codec.OXP_VERSION
        secret = await client.post(
            "/tools/call",
            json={"tool_id": "Demo.SecretCheck", "context": {"secrets": [{"id": "DEMO_API_KEY", "value": "s3cret"}]}},
        )
        who = await client.post(
            "/tools/call",
            json={
                "tool_id": "Demo.WhoAmI",
                "context": {"user_id": "ada", "authorization": [{"id": "demo", "token": "token-from-the-provider"}]},
            },
        )
        failed = await client.post(
            "/tools/call", json={"tool_id": "Demo.Fail", "input": {"message": "Doorbell ID not found"}}
        )
    assert secret.json()["value"] == {"secret": "DEMO_API_KEY", "length": 6, "fingerprint": "sha256:1ec1c26b50d5d3c5"}
    assert who.json()["value"] == {"user_id": "ada", "provider": "demo", "token_fingerprint": "sha256:8acacff2bd228e72"}
    assert orjson.loads(failed.content)["error"] == {
        "message": "Doorbell ID not found",
        "developer_message": "Demo.Fail always fails",
        "can_retry": True,
        "additional_prompt_content": "This tool fails on purpose.",
        "retry_after_ms": 500,
    }
