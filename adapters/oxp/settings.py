"""Settings of the OXP front (`fronts.oxp`) and of backends of kind `oxp`.

Each default lives here and only here: the front, the backend and the
idempotency service read these attributes, and `toolplex schema` generates the
configuration schema from them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from gateway.settings import FrontSettings, Section, UpstreamBackendSettings

FRONT_DESCRIPTION = "OXP (Open eXecution Protocol): /health, /tools, /tools/call with idempotent call_ids"
MIN_SECRET_BYTES = 32  # RFC 7518 3.2: an HS256 key is at least 256 bits


class OxpFrontSettings(FrontSettings):
    """OXP (Open eXecution Protocol): /health, /tools, /tools/call with idempotent call_ids"""

    prefix: str = Field(
        default="",
        pattern=r"^(/[A-Za-z0-9._~-]+)*$",
        description='Mount path of /health, /tools and /tools/call; "" for the root',
    )
    patience_s: float = Field(
        default=30,
        gt=0,
        description="How long /tools/call waits for a tool before answering success:false, can_retry:true",
    )
    retention_s: float = Field(default=600, gt=0, description="How long a call_id's outcome is kept and replayed")
    retention_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description=(
            "Byte budget of the kept outcomes (their JSON); the oldest go first, and an outcome larger than the "
            "whole budget is answered but not kept"
        ),
    )
    retention_max_entries: int = Field(
        default=10_000, ge=1, description="How many finished call_ids are kept at most; the oldest go first"
    )
    retry_after_ms: int = Field(
        default=1000, ge=0, description="retry_after_ms of the answer to a call still running after the patience"
    )


class OxpJwtSettings(Section):
    """Mint a short-lived HS256 bearer JWT (exp, iat, jti, aud) for every request"""

    secret: str = Field(
        min_length=MIN_SECRET_BYTES, description="The shared HS256 secret (at least 32 bytes); use ${VAR}"
    )
    audience: str | None = Field(default=None, description="The aud claim, when the upstream checks one")
    ttl_s: float = Field(default=60, gt=0, description="Lifetime of each token in seconds")

    @field_validator("secret", mode="before")
    @classmethod
    def _long_enough(cls, value: Any) -> Any:
        """Say why in the operator's terms (the schema's minLength counts characters, the key needs bytes)."""
        if isinstance(value, str) and len(value.encode()) < MIN_SECRET_BYTES:
            raise ValueError(f"jwt.secret must hold at least {MIN_SECRET_BYTES} bytes (an HS256 key of 256 bits)")
        return value


class OxpBackendSettings(UpstreamBackendSettings):
    """An OXP server upstream (another Toolplex's OXP front, for one)."""

    kind: Literal["oxp"]
    path: str = Field(default="", description="Prefix of /tools and /tools/call on the upstream")
    shape: Literal["flat", "wrapped"] = Field(
        default="flat",
        description="Body shape of calls: the seed's flat request, or the published 1.0 {$schema, request} wrapper",
    )
    api_key: str | None = Field(
        default=None,
        min_length=1,
        description="Sent as Authorization: Bearer <key> (as X-API-Key when jwt is also set); use ${VAR}",
    )
    jwt: OxpJwtSettings | None = Field(
        default=None, description="Mint a short-lived HS256 bearer JWT (exp, iat, jti, aud) for every request"
    )
