"""The OpenTool backend and SDK client against a real OpenTool server process (protocols.md §1 quirks)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from adapters.opentool.backend import OpenToolBackend
from adapters.opentool.client import (
    FunctionCall,
    OpenToolClient,
    OpenToolServerCallException,
    OpenToolServerNoAccessException,
    OpenToolServerUnauthorizedException,
    ToolReturn,
)
from adapters.opentool.settings import OpenToolBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import Call, CallContext
from tests.support import ROOT, asgi_client, python_server, refused_port

KEY = "upstream-secret-key"


def backend_of(settings: dict[str, Any]) -> OpenToolBackend:
    """A backend built as the gateway builds it: from its typed settings."""
    return OpenToolBackend(OpenToolBackendSettings.model_validate(settings), BackendContext())


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
    async with OpenToolClient(f"http://127.0.0.1:{refused_port()}/opentool") as client:
        with pytest.raises(OpenToolServerNoAccessException) as no_access:
            await client.version()
        assert no_access.value.code == 404


async def dispatcher(url: str, **settings: object) -> tuple[Dispatcher, OpenToolBackend]:
    backend = backend_of({"name": "geo", "kind": "opentool", "url": url, "api_key": KEY, **settings})
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
            backend = backend_of(
                {
                    "name": "open",
                    "kind": "opentool",
                    "url": f"http://127.0.0.1:{port}",
                    "forward_authorization": forward,
                }
            )
            dispatch = Dispatcher(Catalog(await backend.discover()), {"open": backend})
            try:
                ctx = CallContext(client_credentials={"Authorization": "Bearer client-token"})
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
        'event: data\ndata: {"jsonrpc":"2.0","result":{"left":2},"error":null,"id":"s"}\n\n'
        'event: data\ndata: {"jsonrpc":"2.0","result":{"left":1},"error":null,"id":"s"}\n\n'
        'event: data\ndata: {"jsonrpc":"2.0","result":{"left":0},"error":null,"id":"s"}\n\n'
        'event: done\ndata: {"done":"GeoTools_countdown"}\n\n'
    )
    assert plain.json()["result"] == {"left": 0}  # the upstream's own result, as it came


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


# ---- the TypeScript SDK's example server (issue 11.5) ----

TS_DESCRIPTION = ROOT / "tests" / "upstreams" / "opentool_typescript.yaml"
TS_KEY = "6621c8a3-2110-4e6a-9d62-70ccd467e789"


@pytest.fixture
def typescript_server() -> Iterator[str]:
    """A fresh server per test: its text store starts empty."""
    with python_server("tests.upstreams.opentool_server", "--flavor", "typescript", "--api-key", TS_KEY) as port:
        yield f"http://127.0.0.1:{port}"


def test_the_typescript_double_answers_as_the_sdk_server_runs(typescript_server: str) -> None:
    base, auth = f"{typescript_server}/opentool", {"Authorization": TS_KEY}  # the bare key, as the SDK allows
    assert httpx.get(f"{base}/version", timeout=5).json() == {"error": "Authorization header missing"}
    load = httpx.get(f"{base}/load", headers=auth, timeout=5)
    assert (load.status_code, load.json()) == (200, {"code": 404, "message": "Json Parser NOT implement"})
    unknown = httpx.post(f"{base}/call", json={"method": "nope", "id": 1}, headers=auth, timeout=5)
    assert unknown.text == '{"jsonrpc":"2.0.0","result":{"code":405,"message":"Function Not Supported: nope"},"id":1}'
    stream = httpx.post(f"{base}/streamCall", json={"method": "count", "id": "s"}, headers=auth, timeout=5)
    assert stream.status_code == 404 and "Cannot POST /opentool/streamCall" in stream.text


async def test_a_typescript_sdk_server_without_description_file_is_a_discovery_error(typescript_server: str) -> None:
    backend = backend_of({"name": "ts", "kind": "opentool", "url": typescript_server, "api_key": TS_KEY})
    try:
        with pytest.raises(GatewayError) as info:
            await backend.discover()
    finally:
        await backend.close()
    assert info.value.failure.kind == ErrorKind.UPSTREAM_UNAVAILABLE
    assert (
        "description_file" in info.value.failure.message and "Json Parser NOT implement" in info.value.failure.message
    )


def description_files(tmp_path: Path) -> dict[str, Path]:
    """The YAML description as it ships, and a JSON copy with one function the server does not have."""
    document = yaml.safe_load(TS_DESCRIPTION.read_text())
    extra = {"name": "archive", "description": "Not implemented by the server", "parameters": [], "return": None}
    document["functions"].append(extra)
    as_json = tmp_path / "mock.json"
    as_json.write_text(json.dumps(document))
    return {"yaml": TS_DESCRIPTION, "json": as_json}


@pytest.mark.parametrize("form", ["yaml", "json"])
async def test_description_file_fronts_the_typescript_sdk_server(
    typescript_server: str, tmp_path: Path, form: str
) -> None:
    path = description_files(tmp_path)[form]
    config = (
        "backends:\n"
        f"  - {{name: ts, kind: opentool, url: '{typescript_server}', api_key: '{TS_KEY}',"
        f" description_file: '{path}'}}\n"
    )
    async with asgi_client(config) as client:

        async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "method": f"MockTextStore_{method}", "params": params, "id": method}
            return (await client.post("/opentool/call", json=body)).json()

        created = await call("create", {"text": "hello"})
        read = await call("read", {"id": created["result"]["id"]})
        missing = await call("read", {"id": 99})
        fatal = await call("run", {})
        stream_body = {"jsonrpc": "2.0", "method": "MockTextStore_count", "params": {}, "id": "s"}
        streamed = await client.post("/opentool/streamCall", json=stream_body)
        archive = await call("archive", {}) if form == "json" else None
        definition = next(t for t in (await client.get("/tools")).json()["items"] if t["name"] == "MockTextStore_read")
    # An OpenTool caller gets the upstream's own `result` as it came (a transparent hop); other fronts get the
    # value unwrapped under its declared return (an integer: 1).
    assert created["result"] == {"id": 1}
    assert read["result"] == {"text": "hello"} and read["error"] is None  # "jsonrpc": "2.0.0" accepted
    assert missing["error"]["code"] == 500 and missing["error"]["message"] == "Error: No text found with id: 99"
    assert fatal["error"] == {"code": 500, "message": '{"code":500,"message":"Error: Fatal error occurred in run()"}'}
    assert streamed.text == (  # no /streamCall there: /call's one value, framed as a direct stream
        'event: start\ndata: {"start":"MockTextStore_count"}\n\n'
        'event: data\ndata: {"jsonrpc":"2.0","result":{"count":1},"error":null,"id":"s"}\n\n'
        'event: done\ndata: {"done":"MockTextStore_count"}\n\n'
    )
    if archive is not None:  # the successful {"code": 405, ...} answer is "not found"
        assert archive["error"]["code"] == -32601 and "Function Not Supported: archive" in archive["error"]["message"]
    assert definition["version"] == "0.0.1"
    assert definition["input_schema"]["properties"]["id"] == {"type": "integer", "description": "The text's id."}


async def test_a_bad_description_file_names_the_file_and_the_place(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("opentool: '1.0.0'\ninfo: {title: t, version: '1.0.0'}\nfunctions:\n  - {name: f}\n")
    backend = backend_of({"name": "ts", "kind": "opentool", "url": "http://127.0.0.1:9", "description_file": str(path)})
    try:
        with pytest.raises(ConfigError) as info:
            await backend.discover()
    finally:
        await backend.close()
    assert info.value.problems == [
        f"backend 'ts': description_file {path}: functions[0]: required field 'description' is missing"
    ]


# ---- /streamCall falls back to /call (issue 11.6) ----

DISTANCE = (
    '{"jsonrpc":"2.0","method":"GeoTools_distance","params":{"from":{"lat":0,"lon":0},"to":{"lat":0,"lon":1}},"id":"d"}'
)


async def streamed_frames(*server_args: str) -> tuple[str, str]:
    """Two /streamCall answers in a row through a gateway fronting the Dart-style double."""
    with python_server("tests.upstreams.opentool_server", *server_args) as port:
        config = f"backends:\n  - {{name: geo, kind: opentool, url: 'http://127.0.0.1:{port}'}}\n"
        async with asgi_client(config) as client:
            headers = {"content-type": "application/json"}
            first = await client.post("/opentool/streamCall", content=DISTANCE, headers=headers)
            second = await client.post("/opentool/streamCall", content=DISTANCE, headers=headers)
    return first.text, second.text


@pytest.mark.parametrize("mode", ["absent", "405", "rpc-not-found"])
async def test_stream_call_falls_back_to_call_with_the_same_frames(mode: str) -> None:
    direct, _ = await streamed_frames("--stream", "sse")
    first, second = await streamed_frames("--stream", mode)
    assert direct == (
        'event: start\ndata: {"start":"GeoTools_distance"}\n\n'
        'event: data\ndata: {"jsonrpc":"2.0","result":{"km":111.195},"error":null,"id":"d"}\n\n'
        'event: done\ndata: {"done":"GeoTools_distance"}\n\n'
    )
    assert first == direct and second == direct
