"""`tool.execute` and `tool.list`: result shape, every error code a call can end in, context, language."""

from __future__ import annotations

from typing import Any

from tests.jsonrpc.conftest import CONFIG, execute
from tests.support import asgi_client


async def rpc(client: Any, body: Any, status: int = 200) -> Any:
    r = await client.post("/rpc", json=body)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    return r.json()


async def test_result_keeps_text_and_structured_value() -> None:
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, execute("Math_Add", {"a": 10, "b": 5}, request_id="req-1"))
    assert set(answer) == {"jsonrpc", "protocol", "id", "result"}
    assert (answer["jsonrpc"], answer["protocol"], answer["id"]) == ("2.0", "1.0.0", "req-1")
    result = answer["result"]
    assert result["output"] == "15"
    assert result["diagnostics"] == []
    meta = result["metadata"]
    assert meta["value"] == 15
    assert (meta["title"], meta["tool"], meta["version"], meta["language"]) == (
        "Math.Add",
        "Math_Add",
        "1.0.0",
        "python",
    )
    assert meta["cached"] is False
    assert isinstance(meta["durationMs"], float) and meta["durationMs"] >= 0
    assert len(meta["callId"]) == 32


async def test_string_output_is_passed_as_is_and_objects_become_json() -> None:
    async with asgi_client(CONFIG) as client:
        text = await rpc(client, execute("Probe.Greet", {"name": "Ann"}))
        obj = await rpc(client, execute("Probe_Whoami", {}))
    assert text["result"]["output"] == "Hello, Ann!"
    assert obj["result"]["output"] == '{"session_id":null,"message_id":null,"front":"jsonrpc"}'
    assert obj["result"]["metadata"]["value"] == {"session_id": None, "message_id": None, "front": "jsonrpc"}


async def test_ids_are_echoed_with_their_type() -> None:
    async with asgi_client(CONFIG) as client:
        for request_id in (7, "7", 2.5, None, 0, "", 2**53 + 1):
            answer = await rpc(client, execute("Math_Add", {"a": 1, "b": 1}, request_id=request_id))
            assert answer["id"] == request_id and type(answer["id"]) is type(request_id)
            assert answer["result"]["output"] == "2"


async def test_protocol_member_absent_or_1x_is_accepted() -> None:
    async with asgi_client(CONFIG) as client:
        for protocol in ("1.0.0", "1", "1.2", "1.9.3"):
            answer = await rpc(client, {**execute("Math_Add", {"a": 1, "b": 2}), "protocol": protocol})
            assert answer["result"]["output"] == "3" and answer["protocol"] == "1.0.0"


async def test_other_protocol_major_is_invalid_request() -> None:
    async with asgi_client(CONFIG) as client:
        for protocol in ("2.0.0", "0.9", "one", 1):
            answer = await rpc(client, {**execute("Math_Add", {"a": 1, "b": 2}, request_id=3), "protocol": protocol})
            assert answer["id"] == 3
            assert answer["error"]["code"] == -32600
            assert "1.0.0" in answer["error"]["message"]


async def test_version_pin_with_at() -> None:
    async with asgi_client(CONFIG) as client:
        ok = await rpc(client, execute("Math.Add@1.0.0", {"a": 2, "b": 2}))
        missing = await rpc(client, execute("Math.Add@9.0.0", {"a": 2, "b": 2}))
    assert ok["result"]["metadata"]["version"] == "1.0.0"
    assert missing["error"]["code"] == -32601
    assert missing["error"]["data"]["info"]["available_versions"] == ["1.0.0"]
    async with asgi_client(CONFIG) as client:
        for broken in ("Math.Add@", "@1.0.0"):
            answer = await rpc(client, execute(broken, {"a": 2, "b": 2}))
            assert answer["error"]["code"] == -32602 and "tool" in answer["error"]["data"]["parameter_errors"]


async def test_context_reaches_the_tool_and_the_log_event(events: list[dict[str, Any]]) -> None:
    context = {"sessionId": "sess-9", "messageId": "msg-4", "timeout": 5000}
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, execute("Probe_Whoami", {}, context=context))
    assert answer["result"]["metadata"]["value"] == {"session_id": "sess-9", "message_id": "msg-4", "front": "jsonrpc"}
    calls = [e for e in events if e["event"] == "call"]
    assert len(calls) == 1
    assert calls[0]["session_id"] == "sess-9" and calls[0]["message_id"] == "msg-4"
    assert calls[0]["call_id"] == answer["result"]["metadata"]["callId"]
    assert (calls[0]["front"], calls[0]["tool"], calls[0]["outcome"]) == ("jsonrpc", "Probe_Whoami", "ok")


async def test_language_must_match_the_implementation() -> None:
    async with asgi_client(CONFIG) as client:
        ok = await rpc(client, execute("Math_Add", {"a": 1, "b": 2}, language="python"))
        wrong = await rpc(client, execute("Math_Add", {"a": 1, "b": 2}, language="typescript", request_id=2))
        unknown = await rpc(client, execute("Math_Add", {"a": 1, "b": 2}, language="rust", request_id=3))
    assert ok["result"]["output"] == "3"
    assert wrong["id"] == 2 and wrong["error"]["code"] == -32602
    assert wrong["error"]["data"]["tool"] == "Math_Add"
    assert wrong["error"]["data"]["language"] == "typescript"
    assert "implemented in python" in wrong["error"]["data"]["parameter_errors"]["language"]
    assert unknown["error"]["code"] == -32602 and "language" in unknown["error"]["data"]["parameter_errors"]


async def test_tool_not_found_is_32601_with_seed_data() -> None:
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, execute("Nope_Nothing", {}, language="python"))
    error = answer["error"]
    assert error["code"] == -32601
    assert error["data"]["tool"] == "Nope_Nothing" and error["data"]["language"] == "python"
    assert "Nope_Nothing" in error["data"]["details"]


async def test_unknown_method_is_32601() -> None:
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}})
    assert answer["error"]["code"] == -32601
    assert answer["error"]["data"] == {"method": "tools/call", "methods": ["tool.execute", "tool.list"]}


async def test_invalid_arguments_are_32602_with_parameter_errors() -> None:
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, execute("Math_Add", {"a": "ten"}))
    error = answer["error"]
    assert error["code"] == -32602
    assert set(error["data"]["parameter_errors"]) == {"a", "b"}
    assert error["data"]["kind"] == "invalid_arguments" and error["data"]["tool"] == "Math_Add"


async def test_bad_execute_params_are_named_together() -> None:
    params = {"tool": 5, "parameters": [1], "context": {"timeout": "soon", "sessionId": 3, "extra": 1}, "x": 1}
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": params})
    assert answer["error"]["code"] == -32602
    assert set(answer["error"]["data"]["parameter_errors"]) == {
        "tool",
        "parameters",
        "context.timeout",
        "context.sessionId",
        "context.extra",
        "x",
    }


async def test_timeout_must_be_a_positive_number_of_milliseconds() -> None:
    async with asgi_client(CONFIG) as client:
        for timeout in (-5, 0, "1000", True, None):
            body = execute("Math_Add", {"a": 1, "b": 2}, context={"timeout": timeout})
            answer = await rpc(client, body)
            if timeout is None:  # null means "not given": the tool's own deadline applies
                assert answer["result"]["output"] == "3"
                continue
            assert answer["error"]["code"] == -32602, timeout
            assert "context.timeout" in answer["error"]["data"]["parameter_errors"]


async def test_params_as_array_is_32602() -> None:
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, {"jsonrpc": "2.0", "id": 4, "method": "tool.execute", "params": ["Math_Add", {}]})
    assert answer["id"] == 4 and answer["error"]["code"] == -32602
    assert answer["error"]["data"]["parameter_errors"] == {"params": "must be an object, not an array"}


async def test_tool_error_is_32000_with_everything_the_tool_said() -> None:
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, execute("Demo_Fail", {"message": "boom"}))
    error = answer["error"]
    assert error["code"] == -32000 and error["message"] == "boom"
    data = error["data"]
    assert (data["tool"], data["language"], data["details"]) == ("Demo_Fail", "python", "Demo.Fail always fails")
    assert data["canRetry"] is True and data["retryAfterMs"] == 500
    assert data["additionalPromptContent"] == "This tool fails on purpose."


async def test_user_authorization_required_is_32002_with_the_url() -> None:
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, execute("Probe_Private", {}))
    assert answer["error"]["code"] == -32002
    assert answer["error"]["data"]["url"] == "https://auth.example/github?tool=Probe_Private"
    assert answer["error"]["data"]["kind"] == "authorization_required"


async def test_missing_secret_is_32002_naming_it() -> None:
    config = CONFIG + '  - {name: req, kind: python, module: "adapters.python.toolkits.demo_requirements:toolkit"}\n'
    async with asgi_client(config) as client:
        answer = await rpc(client, execute("Demo_SecretCheck", {}))
    assert answer["error"]["code"] == -32002
    assert answer["error"]["data"]["kind"] == "missing_requirement"
    assert answer["error"]["data"]["info"] == {"secrets": ["DEMO_API_KEY"]}


async def test_key_without_the_tool_is_32002_and_no_key_is_401() -> None:
    config = CONFIG + "auth:\n  api_keys:\n    - {name: limited, key: key-limited-1, tools: ['Math_*']}\n"
    async with asgi_client(config) as client:
        headers = {"Authorization": "Bearer key-limited-1"}
        allowed = (await client.post("/rpc", json=execute("Math_Add", {"a": 1, "b": 2}), headers=headers)).json()
        denied = (await client.post("/rpc", json=execute("Probe_Greet", {"name": "x"}), headers=headers)).json()
        anonymous = await client.post("/rpc", json=execute("Math_Add", {"a": 1, "b": 2}))
        wrong = await client.post(
            "/rpc", json=execute("Math_Add", {"a": 1, "b": 2}), headers={"X-API-Key": "bad-key-1"}
        )
    assert allowed["result"]["output"] == "3"
    assert denied["error"]["code"] == -32002 and denied["error"]["data"]["kind"] == "forbidden"
    for r in (anonymous, wrong):
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"]["code"] == -32002 and r.json()["error"]["data"]["kind"] == "unauthenticated"
        assert r.json()["id"] is None


async def test_internal_failure_is_32603_without_a_traceback() -> None:
    config = CONFIG + 'middleware:\n  - {use: "tests.jsonrpc.test_execute:Broken"}\n'
    async with asgi_client(config) as client:
        answer = await rpc(client, execute("Math_Add", {"a": 1, "b": 2}))
    error = answer["error"]
    assert error["code"] == -32603 and error["data"]["kind"] == "internal"
    assert error["data"]["callId"] in error["message"]
    assert "Traceback" not in str(answer) and "RuntimeError" not in str(answer)


class Broken:
    """A middleware with a bug: its `before` raises a plain exception."""

    async def before(self, call: Any, spec: Any) -> None:
        raise RuntimeError("bug in a middleware")


async def test_tool_list_entries_are_tool_registrations() -> None:
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, {"jsonrpc": "2.0", "id": 1, "method": "tool.list"})
        python_only = await rpc(
            client, {"jsonrpc": "2.0", "id": 2, "method": "tool.list", "params": {"language": "python"}}
        )
        typescript = await rpc(
            client, {"jsonrpc": "2.0", "id": 3, "method": "tool.list", "params": {"language": "typescript"}}
        )
        bad = await rpc(client, {"jsonrpc": "2.0", "id": 4, "method": "tool.list", "params": {"lang": "python"}})
    tools = answer["result"]["tools"]
    ids = [t["id"] for t in tools]
    assert "Math_Add" in ids and "Probe_Greet" in ids and ids == sorted(ids)
    add = tools[ids.index("Math_Add")]
    assert set(add) == {"id", "title", "version", "description", "language", "schema", "x-toolplex"}
    assert add["x-toolplex"]["toolkit"] == "Math" and add["x-toolplex"]["name"] == "Add"  # issue 11.8
    assert add["language"] == "python" and add["schema"]["properties"].keys() == {"a", "b"}
    assert python_only["result"]["tools"] == tools
    assert typescript["result"]["tools"] == []
    assert bad["error"]["code"] == -32602 and "lang" in bad["error"]["data"]["parameter_errors"]
    # every listed id is callable as it is
    async with asgi_client(CONFIG) as client:
        answer = await rpc(client, execute(add["id"], {"a": 1, "b": 1}))
    assert answer["result"]["output"] == "2"
