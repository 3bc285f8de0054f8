"""Settings of the `http` backend kind: plain REST endpoints declared one per tool."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from gateway.settings import PART_PATTERN, SEMVER_PATTERN, Section, UpstreamBackendSettings


class HttpTool(Section):
    """One tool: an endpoint of the upstream, and where each argument goes in the request."""

    name: str = Field(pattern=PART_PATTERN)
    description: str | None = None
    version: str = Field(default="1.0.0", pattern=SEMVER_PATTERN)
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    path: str = Field(pattern=r"^/", description="Path template; {name} placeholders come from the arguments")
    query: list[str] = Field(default_factory=list, description="Arguments sent in the query string")
    body: list[str] | None = Field(
        default=None, description="Arguments sent in the JSON body (default: all the rest, for POST/PUT/PATCH)"
    )
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    timeout_s: float | None = Field(default=None, gt=0)


class HttpBackendSettings(UpstreamBackendSettings):
    """A REST API as tools: each entry of `tools` is one endpoint of the upstream at `url`."""

    kind: Literal["http"]
    tools: list[HttpTool] = Field(min_length=1)

    OAUTH_PER_CALL: ClassVar[bool] = True  # each call names its own credentials (`Credentials.auth`)
