"""Settings of the OpenTool front (`fronts.opentool`) and of `kind: opentool` backends.

Each default lives here and only here: the front and the backend read these
attributes, and `toolplex schema` generates the configuration schema from them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.settings import FrontSettings, UpstreamBackendSettings


class OpenToolFrontSettings(FrontSettings):
    """`/version`, `/call`, `/streamCall` and `/load` under one prefix."""

    prefix: str = Field(default="/opentool", pattern=r"^(/[A-Za-z0-9._~-]+)*$")
    server_url: str | None = Field(
        default=None, description="server.url in /load; defaults to the request's base URL plus the prefix"
    )


class OpenToolBackendSettings(UpstreamBackendSettings):
    """An OpenTool server upstream: its description from `/load` (or a local file), calls to `/call`."""

    kind: Literal["opentool"]
    path: str = Field(default="/opentool", description="Base path of the OpenTool API on the upstream")
    api_key: str | None = Field(default=None, description="Sent as Authorization: Bearer <key>")
    description_file: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "A local OpenTool description (JSON, or YAML for .yaml/.yml; relative to the working directory) "
            "used instead of the upstream's /load"
        ),
    )
