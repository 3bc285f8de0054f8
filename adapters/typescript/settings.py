"""Settings of the `typescript` backend kind: a pool of Node.js sidecars running tool modules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gateway.settings import BackendSettings


class TypeScriptBackendSettings(BackendSettings):
    """Tools written in TypeScript or JavaScript (zod schemas), served by Node.js sidecar processes."""

    kind: Literal["typescript"]
    modules: list[Annotated[str, Field(min_length=1)]] = Field(
        min_length=1,
        description="Tool module files (.ts, .mts, .js, .mjs) or folders of them; relative to the working directory",
    )
    pool_size: int = Field(
        default=1, ge=1, le=64, description="Node.js sidecar processes; each runs many calls at once"
    )
    node: str = Field(default="node", description="The Node.js (20 or newer) executable")
    startup_timeout_s: float = Field(
        default=30, gt=0, description="How long a new sidecar may take to load the modules"
    )
    cancel_grace_s: float = Field(
        default=2,
        gt=0,
        description="How long a cancelled call may take to let go before its sidecar is killed and replaced",
    )
