"""An OpenTool client following seed 000's SDK interface: `version()`, `call(FunctionCall)`,
`load()`, the `FunctionCall` / `ToolReturn` structures and the five client exceptions.

It is what the gateway uses to reach OpenTool upstreams, and it is usable on its own:

    async with OpenToolClient("http://127.0.0.1:9627/opentool", api_key="...") as client:
        ret = await client.call(FunctionCall("1", "Math_Add", {"a": 1, "b": 2}))
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from adapters.opentool.codec import sse_events, text_of
from adapters.opentool.document import Document, DocumentError, parse_document

Sender = Callable[..., Awaitable[httpx.Response]]
Streamer = Callable[..., contextlib.AbstractAsyncContextManager[httpx.Response]]


@dataclass
class Version:
    version: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Version:
        return cls(version=str(data["version"]))

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version}


@dataclass
class FunctionCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FunctionCall:
        return cls(id=str(data["id"]), name=str(data["name"]), arguments=dict(data.get("arguments") or {}))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass
class ToolReturn:
    id: str
    result: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolReturn:
        return cls(id=str(data["id"]), result=dict(data.get("result") or {}))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "result": self.result}


class OpenToolException(Exception):
    """Base of the client exceptions; `to_json()` for structured logging and error output."""

    code: int | None = None
    message: str = ""

    def __init__(self, message: str | None = None, code: int | None = None) -> None:
        if message is not None:
            self.message = message
        if code is not None:
            self.code = code
        super().__init__(self.message)

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


class ResponseNullException(OpenToolException):
    message = "Response is null"


class ErrorNullException(OpenToolException):
    message = "Error is null"


class OpenToolServerUnauthorizedException(OpenToolException):
    code = 401
    message = "Please check API Key is VALID or NOT"


class OpenToolServerNoAccessException(OpenToolException):
    code = 404
    message = "Please check OpenTool Server is RUNNING or NOT"


class OpenToolServerCallException(OpenToolException):
    """The tool answered with an error; `code` and `data` are what the server sent."""

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message, code)
        self.data = data

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.data is not None:
            out["data"] = self.data
        return out


class OpenToolClient:
    """Async client of one OpenTool server; `base_url` includes the `/opentool` base path."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        sender: Sender | None = None,
        streamer: Streamer | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self._own_http = http is None and sender is None
        self._http = http or (httpx.AsyncClient(timeout=timeout) if sender is None else None)
        self._sender = sender
        self._streamer = streamer

    async def __aenter__(self) -> OpenToolClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_http and self._http is not None:
            await self._http.aclose()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self._headers(), **kwargs.pop("headers", {})}
        try:
            if self._sender is not None:
                return await self._sender(method, f"{self.base_url}{path}", headers=headers, **kwargs)
            assert self._http is not None
            return await self._http.request(method, f"{self.base_url}{path}", headers=headers, **kwargs)
        except httpx.TransportError:
            raise OpenToolServerNoAccessException() from None

    @staticmethod
    def _checked(response: httpx.Response) -> Any:
        if response.status_code == 401:
            raise OpenToolServerUnauthorizedException()
        if response.status_code == 404:
            raise OpenToolServerNoAccessException()
        if not response.content:
            raise ResponseNullException(code=response.status_code)
        try:
            return response.json()
        except ValueError:
            raise ResponseNullException(
                f"Response is not JSON (HTTP {response.status_code})", code=response.status_code
            ) from None

    async def version(self, **kwargs: Any) -> Version:
        data = self._checked(await self._send("GET", "/version", **kwargs))
        if not isinstance(data, dict) or "version" not in data:
            raise ResponseNullException("Response has no version")
        return Version.from_json(data)

    def _request(self, function_call: FunctionCall) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "method": function_call.name,
            "params": function_call.arguments,
            "id": function_call.id or uuid.uuid4().hex,
        }

    @staticmethod
    def _tool_return(data: Any, status: int) -> ToolReturn:
        if data is None:
            raise ResponseNullException(code=status)
        if not isinstance(data, dict):
            raise ResponseNullException(f"Response is not a JSON-RPC object (HTTP {status})", code=status)
        error = data.get("error")
        if error is not None:  # some servers omit `error` on success, some send null
            if not isinstance(error, dict):
                raise ErrorNullException(code=status)
            raise OpenToolServerCallException(text_of(error.get("message", "")), error.get("code"), error.get("data"))
        if status != 200:
            raise ErrorNullException(code=status)
        result = data.get("result")
        if result is None:
            raise ResponseNullException(code=status)
        if not isinstance(result, dict):
            result = {"result": result}
        return ToolReturn(id=str(data.get("id", "")), result=result)

    async def call(self, function_call: FunctionCall, **kwargs: Any) -> ToolReturn:
        response = await self._send("POST", "/call", json=self._request(function_call), **kwargs)
        return self._tool_return(self._checked(response), response.status_code)

    async def stream_call(self, function_call: FunctionCall, **kwargs: Any) -> AsyncIterator[ToolReturn]:
        """`/streamCall`: yields each `data` event's result as it arrives; an `error` event raises."""
        body = self._request(function_call)
        async with self._open_stream("POST", "/streamCall", json=body, **kwargs) as response:
            if response.status_code != 200 or not response.headers.get("content-type", "").startswith(
                "text/event-stream"
            ):
                await response.aread()
                self._tool_return(self._checked(response), response.status_code)
                return
            async for event, data in sse_events(response.aiter_lines()):
                if event in ("data", "error"):
                    yield self._tool_return(json.loads(data or "null"), 200)

    @contextlib.asynccontextmanager
    async def _open_stream(self, method: str, path: str, **kwargs: Any) -> AsyncIterator[httpx.Response]:
        headers = {**self._headers(), **kwargs.pop("headers", {})}
        url = f"{self.base_url}{path}"
        if self._streamer is not None:
            async with self._streamer(method, url, headers=headers, **kwargs) as response:
                yield response
            return
        assert self._http is not None
        try:
            async with self._http.stream(method, url, headers=headers, **kwargs) as response:
                yield response
        except httpx.TransportError:
            raise OpenToolServerNoAccessException() from None

    async def load_json(self, **kwargs: Any) -> Any:
        """The raw `/load` answer (None when the server has no description)."""
        response = await self._send("GET", "/load", **kwargs)
        if response.status_code == 404:
            return None
        data = self._checked(response)
        return data or None

    async def load(self, **kwargs: Any) -> Document | None:
        """The parsed description; anything unparsable is 'no description', as SDK clients do."""
        data = await self.load_json(**kwargs)
        try:
            return parse_document(data) if data else None
        except DocumentError:
            return None
