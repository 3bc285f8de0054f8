"""The OpenTool backend and SDK client against a real OpenTool server process (protocols.md §1 quirks)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.opentool.backend import OpenToolBackend
from adapters.opentool.client import (
    FunctionCall,
    OpenToolClient,
    OpenToolServerCallException,
    OpenToolServerNoAccessException,
    OpenToolServerUnauthorizedException,
    ToolReturn,
)
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.errors import ErrorKind
from gateway.model import Call, CallContext
from tests.support import asgi_client, free_port, python_server

KEY = "upstream-secret-key"


@pytest.fixture(scope="module", params=["error-null", "omit-error"])
def upstream(request: pytest.FixtureRequest) -> Iterator[str]:
    extra = ["--omit-error"] if request.param == "omit-error" else []
    with python_server("tests.upstreams.opentool_server", "--api-key", KEY, *extra) as port:
        yield f"http://127.0.0.1:{port}"


async def test_sdk_client_interface(upstream: str) -> None:
    async with OpenToolClient(f"{upstream}/opentool", api_key=KEY) as client:
        assert (await client.version()).version == "1.0.0"
        document = await client.load()
        assert document is not None
        assert [f.name for f in document.functions] == ["distance", "echo", "countdown", "explode"]
        returned = await client.call(FunctionCall("c1", "echo", {"message": "hi"}))
        assert isinstance(returned, ToolReturn) and returned.id == "c1"
        assert returned.result["echo"] == "hi"
        assert ToolReturn.from_json(returned.to_json()) == returned
        with pytest.raises(OpenToolServerCallException) as info:
            await client.call(FunctionCall("c2", "explode", {}))
        assert info.value.code == 500 and info.value.to_json() == {"code": 500, "message": "The tool exploded"}
        streamed = [r async for r in client.stream_call(FunctionCall("c3", "echo", {"message": "s"}))]
        assert [r.result["echo"] for r in streamed] == ["s"]
    async with OpenToolClient(f"{upstream}/opentool", api_key="wrong-key") as client:
        with pytest.raises(OpenToolServerUnauthorizedException) as unauthorized:
            await client.version()
        assert unauthorized.value.to_json() == {"code": 401, "message": "Please check API Key is VALID or NOT"}
    async with OpenToolClient(f"http://127.0.0.1:{free_port()}/opentool") as client:
        with pytest.raises(OpenToolServerNoAccessException) as no_access:
            await client.version()
        assert no_access.value.code == 404


async def dispatcher(url: str, **settings: object) -> tuple[Dispatcher, OpenToolBackend]:
    backend = OpenToolBackend("geo", {"name": "geo", "kind": "opentool", "url": url, "api_key": KEY, **settings})
    return Dispatcher(Catalog(await backend.discover()), {"geo": backend}, default_timeout=10), backend


async def test_backend_discovers_and_calls(upstream: str) -> None:
    dispatch, backend = await dispatcher(upstream)
    try:
        spec = dispatch.catalog.resolve("GeoTools_distance")
        assert spec.version == "1.2.0" and spec.language == "remote"
        assert spec.input_schema["properties"]["from"]["required"] == ["lat", "lon"]  # $ref resolved
        outcome = await dispatch.call(
            Call("GeoTools_distance", {"from": {"lat": 0, "lon": 0}, "to": {"lat": 0, "lon": 1}})
        )
        assert outcome.value == 111.195  # unwrapped from {"km": ...}: the declared return is a number
        failed = await dispatch.call(Call("GeoTools_explode", {}))
        assert failed.error is not None and failed.error.kind == ErrorKind.TOOL_FAILED
        assert failed.error.message == "The tool exploded"
        invalid = await dispatch.call(Call("GeoTools_distance", {"from": {"lat": "north"}}))
        assert invalid.error is not None and set(invalid.error.parameter_errors or {}) == {"from", "to"}
    finally:
        await backend.close()


async def test_client_authorization_is_forwarded_only_when_configured() -> None:
    with python_server("tests.upstreams.opentool_server") as port:
        for forward, expected in ((False, None), (True, "Bearer client-token")):
            backend = OpenToolBackend(
                "open",
                {
                    "name": "open",
                    "kind": "opentool",
                    "url": f"http://127.0.0.1:{port}",
                    "forward_authorization": forward,
                },
            )
            dispatch = Dispatcher(Catalog(await backend.discover()), {"open": backend})
            try:
                ctx = CallContext(client_authorization="Bearer client-token")
                outcome = await dispatch.call(Call("GeoTools_echo", {"message": "m"}, ctx))
                assert outcome.error is None, outcome.error
                assert outcome.value["headers"]["authorization"] == expected
            finally:
                await backend.close()


async def test_stream_call_is_passed_through_event_by_event() -> None:
    with python_server("tests.upstreams.opentool_server") as port:
        config = f"backends:\n  - {{name: geo, kind: opentool, url: 'http://127.0.0.1:{port}'}}\n"
        async with asgi_client(config) as client:
            body = '{"jsonrpc":"2.0","method":"GeoTools_countdown","params":{"n":3},"id":"s"}'
            headers = {"content-type": "application/json"}
            streamed = await client.post("/opentool/streamCall", content=body, headers=headers)
            plain = await client.post("/opentool/call", content=body, headers=headers)
    assert streamed.text == (
        'event: start\ndata: {"start":"GeoTools_countdown"}\n\n'
        'event: data\ndata: {"jsonrpc":"2.0","result":{"result":2},"error":null,"id":"s"}\n\n'
        'event: data\ndata: {"jsonrpc":"2.0","result":{"result":1},"error":null,"id":"s"}\n\n'
        'event: data\ndata: {"jsonrpc":"2.0","result":{"result":0},"error":null,"id":"s"}\n\n'
        'event: done\ndata: {"done":"GeoTools_countdown"}\n\n'
    )
    assert plain.json()["result"] == {"result": 0}


@pytest.mark.parametrize("front", ["opentool", "jsonrpc"])
async def test_a_real_clients_header_is_forwarded_only_when_configured(front: str) -> None:
    with python_server("tests.upstreams.opentool_server") as port:
        for forward, expected in ((False, None), (True, "Bearer client-token")):
            config = (
                "backends:\n"
                f"  - {{name: geo, kind: opentool, url: 'http://127.0.0.1:{port}', forward_authorization: {forward}}}\n"
            )
            async with asgi_client(config) as client:
                headers = {"Authorization": "Bearer client-token"}
                if front == "opentool":
                    body = {"jsonrpc": "2.0", "method": "GeoTools_echo", "params": {"message": "m"}, "id": "1"}
                    value = (await client.post("/opentool/call", json=body, headers=headers)).json()["result"]
                else:
                    params = {"tool": "GeoTools_echo", "parameters": {"message": "m"}}
                    body = {"jsonrpc": "2.0", "method": "tool.execute", "params": params, "id": 1}
                    answer = (await client.post("/rpc", json=body, headers=headers)).json()
                    value = answer["result"]["metadata"]["value"]
            assert value["headers"]["authorization"] == expected
