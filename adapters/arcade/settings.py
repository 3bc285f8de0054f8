"""Settings of the `arcade` backend kind: an Arcade worker reached with its worker secret."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.settings import UpstreamBackendSettings


class ArcadeBackendSettings(UpstreamBackendSettings):
    """An Arcade worker (`arcade-serve`); every request carries a JWT signed with `secret`."""

    kind: Literal["arcade"]
    secret: str = Field(min_length=1, description="The worker secret (ARCADE_WORKER_SECRET)")
