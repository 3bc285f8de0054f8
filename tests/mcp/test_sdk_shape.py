"""The `mcp` SDK's private names the adapter relies on (adapters/mcp/sdk.py) still have the shape it uses.

An SDK release that renames, removes or reshapes one of them fails here, by name, rather than somewhere deep
in a request; pyproject.toml pins the SDK to the minor version this passes on.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

import adapters.mcp.sdk as sdk
from adapters.mcp.sdk import _modern


def parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (_modern._sse_event, ["msg"]),
        (_modern._write, ["msg", "scope", "receive", "send"]),
        (sdk._apply_middleware, ["middleware", "call_next", "ctx"]),
        (sdk._dump_result, ["result"]),
        (sdk._extract_meta, ["params"]),
        (StreamableHTTPSessionManager._admit_session, ["self", "requestor"]),
        (StreamableHTTPSessionManager._discard_session, ["self", "session_id", "transport"]),
        (StreamableHTTPSessionManager._serve_opening_request, ["self", "http_transport", "scope", "receive", "send"]),
    ],
    ids=lambda value: getattr(value, "__qualname__", "params"),
)
def test_each_private_function_has_the_parameters_the_adapter_passes(function: Any, expected: list[str]) -> None:
    assert parameters(function) == expected


def test_the_session_manager_keeps_what_the_adapter_reads_and_takes_what_it_passes() -> None:
    manager = StreamableHTTPSessionManager(app=Server("shape"), max_sessions=3)
    assert isinstance(sdk.open_sessions(manager), dict) and sdk.open_sessions(manager) == {}
    assert isinstance(manager._session_owners, dict)
    assert hasattr(manager, "_lifespan_state")
    for name in ("json_response", "security_settings", "retry_interval", "session_idle_timeout", "max_sessions"):
        assert hasattr(manager, name), name
    assert {"app", "event_store", "retry_interval", "session_idle_timeout", "max_sessions", "security_settings"} <= set(
        parameters(StreamableHTTPSessionManager.__init__)
    )
    assert getattr(StreamableHTTPSessionManager, sdk.ADMIT_STEP) is StreamableHTTPSessionManager._admit_session
    assert getattr(StreamableHTTPSessionManager, sdk.DISCARD_STEP) is StreamableHTTPSessionManager._discard_session


def test_the_server_info_stamp_is_made_once_per_server() -> None:
    assert isinstance(inspect.getattr_static(Server, "_server_info_stamp_source"), functools.cached_property)
    stamp = sdk.server_info_stamp(Server("shape", version="1.2.3"))
    assert stamp["name"] == "shape" and stamp["version"] == "1.2.3"


def test_the_client_session_stamps_each_request_through_an_attribute_it_calls() -> None:
    source = inspect.getsource(ClientSession)
    assert "self._stamp(data, opts)" in source  # the call site the adapter wraps (wrap_request_stamp)


def test_the_transport_streams_type_is_where_the_stdio_link_imports_it() -> None:
    assert sdk.TransportStreams is not None


def test_the_installed_sdk_is_the_pinned_minor_version() -> None:
    version = importlib.metadata.version("mcp")
    assert version.startswith("2.3."), f"the adapter's private uses are checked against mcp 2.3, not {version}"
