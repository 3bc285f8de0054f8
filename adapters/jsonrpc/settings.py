"""Settings of the JSON-RPC front (`fronts.jsonrpc`) and of `kind: jsonrpc` backends.

Each default lives here and only here: the front and the backend read these
attributes, and `toolplex schema` generates the configuration schema from them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.settings import FrontSettings, UpstreamBackendSettings


class JsonRpcFrontSettings(FrontSettings):
    """`tool.execute` and `tool.list` at one path."""

    path: str = Field(
        default="/rpc", pattern=r"^(/[A-Za-z0-9._~-]+)+$", description="Where JSON-RPC requests are POSTed"
    )
    max_batch: int = Field(
        default=50,
        ge=1,
        le=1000,
        description="Most requests one batch may hold; a larger batch is refused with -32600",
    )
    max_timeout_ms: int | None = Field(
        default=None, ge=1, description="Cap on params.context.timeout; limits.max_timeout_s applies as well"
    )


class JsonRpcBackendSettings(UpstreamBackendSettings):
    """A seed-002 JSON-RPC server upstream (another Toolplex's `/rpc`, for one)."""

    kind: Literal["jsonrpc"]
    path: str = Field(default="/rpc", description="Path of the upstream's JSON-RPC endpoint (tool.list, tool.execute)")
    api_key: str | None = Field(
        default=None, description="Sent as Authorization: Bearer <key> (empty: none); use ${VAR}"
    )
