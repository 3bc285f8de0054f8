"""Settings of the ToolServerNode front (`fronts.toolserver`) and of backends of kind `toolserver`.

Each default lives here and only here; the front and the backend read attributes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.settings import FrontSettings, UpstreamBackendSettings

FRONT_DESCRIPTION = (
    'XAgent ToolServerNode API: cookie sessions, tool listing and retrieval, /execute_tool with 450 "call again"'
)


class ToolServerFrontSettings(FrontSettings):
    """XAgent ToolServerNode API: cookie sessions, tool listing and retrieval, /execute_tool with 450 "call again\""""

    prefix: str = Field(
        default="",
        pattern=r"^(/[A-Za-z0-9._~-]+)*$",
        description='Path prefix of the endpoints; "" mounts them at the root, where XAgent expects them',
    )
    patience_s: float = Field(
        default=5,
        gt=0,
        description="How long /execute_tool waits for a result before answering 450 with a handle to collect it",
    )
    session_idle_s: float = Field(default=1800, gt=0, description="A node_id session unused this long is forgotten")
    env_tool_cap: int = Field(
        default=50,
        ge=1,
        description='At most this many tool names per env in /get_available_tools, then "..."',
    )
    result_retention_s: float = Field(
        default=600,
        gt=0,
        description="How long an uncollected 450 handle stays valid (runs are also dropped 600 s after they finish)",
    )
    result_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description=(
            "Byte budget of the finished, uncollected results kept for 450 handles (their JSON), each caller "
            "within its share; a caller's oldest go first, and a result larger than the budget is not kept"
        ),
    )
    result_max_entries: int = Field(
        default=10_000, ge=1, description="How many finished, uncollected results are kept at most"
    )
    workspace_backend: str | None = Field(
        default=None,
        description=(
            "The toolserver backend whose node serves /upload_file, /download_file, /get_workspace_structure "
            "and /download_workspace; default: the first toolserver backend"
        ),
    )


class ToolServerBackendSettings(UpstreamBackendSettings):
    """An XAgent ToolServerNode (or Manager) as upstream."""

    kind: Literal["toolserver"]
    path: str = Field(
        default="",
        description='Prefix of the node\'s endpoints on the upstream ("" for a node or Manager at the root)',
    )
    sessions: Literal["per_session", "shared", "none"] = Field(
        default="per_session",
        description=(
            "One upstream node session per front session, one for all, or none (a bare ToolServerNode, which "
            "has no /get_cookie; detected without this setting too)"
        ),
    )
    api_key: str | None = Field(
        default=None,
        description="Sent as Authorization: Bearer <key> (for an upstream behind auth, e.g. another Toolplex)",
    )
    session_idle_s: float = Field(default=1800, gt=0, description="An upstream session unused this long is released")
    max_sessions: int = Field(
        default=1000,
        ge=2,
        description="Most upstream sessions held at once; the least recently used is released first",
    )
    follow_max_calls: int = Field(
        default=100,
        ge=1,
        description=(
            "For fronts other than ToolServerNode: at most this many next_calling follow-ups of an upstream 450"
        ),
    )
    follow_backoff_s: float = Field(
        default=0.2,
        ge=0,
        description="First pause before following an upstream 450; doubles up to 3 s, never past the deadline",
    )
