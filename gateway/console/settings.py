"""`fronts.console`: on by default where the gateway is bound to loopback, off elsewhere unless configured."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from gateway.settings import FrontSettings


class ConsoleFrontSettings(FrontSettings):
    """GET <path>: a web console of the gateway (catalog, backends, traffic, state, pins)"""

    local_without_auth: ClassVar[bool] = True  # with auth off everyone is the local operator, who sees all

    enabled: bool | None = Field(  # type: ignore[assignment]
        default=None,
        description="On or off; unset: on when the gateway is bound to a loopback address, off otherwise",
    )
    path: str = Field(default="/console", pattern=r"^(/[A-Za-z0-9._~-]+)+$")
    traffic_window_minutes: int = Field(
        default=15, ge=1, le=60, description="Minutes of traffic the backends page's latency and error rates cover"
    )
