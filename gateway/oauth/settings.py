"""`oauth:` of an upstream backend: how the gateway gets its bearer tokens (`gateway.oauth.client` uses them).

A module of its own so that the settings models (`gateway.settings`) import neither the OAuth client nor
what it needs (httpx, PyJWT and cryptography): a configuration without `oauth:` never loads them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class UpstreamOAuthSettings(BaseModel):
    """How the gateway gets bearer tokens for this upstream from an OAuth 2.1 authorization server."""

    # As a `gateway.settings.Section` (which imports this module): unknown keys are errors, nothing coerced silently.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    grant: Literal["client_credentials", "authorization_code"] = Field(
        default="client_credentials",
        description=(
            "client_credentials: the backend's own token; authorization_code: PKCE against an authorization server "
            "that approves the pre-registered (or dynamically registered) client without a login page"
        ),
    )
    client_id: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "The client registered at the authorization server (authorization_code: registered dynamically when absent)"
        ),
    )
    client_secret: str | None = Field(
        default=None, description="The client's secret (client_secret_basic/post); use ${VAR}; never logged"
    )
    auth_method: Literal["client_secret_basic", "client_secret_post", "private_key_jwt", "none"] = Field(
        default="client_secret_basic", description="How the client authenticates at the token endpoint"
    )
    private_key: str | None = Field(
        default=None, description="private_key_jwt: the PEM private key (use ${VAR}); never logged"
    )
    private_key_file: str | None = Field(default=None, description="private_key_jwt: a file holding the PEM key")
    signing_alg: Literal["RS256", "ES256"] = Field(
        default="RS256", description="private_key_jwt: the algorithm of the client assertion"
    )
    scope: str | None = Field(
        default=None,
        description=(
            "Scopes to ask for, space-separated; default: the upstream's challenge's scope, else its "
            "protected resource metadata's scopes_supported, else none"
        ),
    )
    resource: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description=(
            "The RFC 8707 resource the token is for; default: the protected resource metadata's, else the upstream URL"
        ),
    )
    authorization_server: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="The authorization server's issuer URL; default: discovered from the upstream (RFC 9728)",
    )
    on_behalf_of: Literal["none", "token_exchange"] = Field(
        default="none",
        description=(
            "token_exchange: each authenticated caller's token is exchanged (RFC 8693) for an upstream token of its "
            "own; the caller's token never goes upstream. Requests of no caller (discovery) use the backend's own"
        ),
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        le=5,
        description="Most times one request is sent while the upstream answers 401 or 403 insufficient_scope",
    )
    expiry_margin_s: float = Field(default=30.0, ge=0, description="A token is renewed this long before it expires")
    timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="Bound on each request to the authorization server"
    )

    @model_validator(mode="after")
    def _complete(self) -> UpstreamOAuthSettings:
        if self.private_key is not None and self.private_key_file is not None:
            raise ValueError("give private_key or private_key_file, not both")
        if self.auth_method == "private_key_jwt":
            if self.private_key is None and self.private_key_file is None:
                raise ValueError("auth_method private_key_jwt needs private_key or private_key_file")
        elif self.private_key is not None or self.private_key_file is not None:
            raise ValueError("private_key and private_key_file apply only to auth_method private_key_jwt")
        secret_based = self.auth_method in ("client_secret_basic", "client_secret_post")
        if secret_based and self.client_id is not None and not self.client_secret:
            raise ValueError(f"auth_method {self.auth_method} needs client_secret")
        if self.grant == "client_credentials" or self.on_behalf_of == "token_exchange":
            if self.client_id is None:
                grant = "token exchange" if self.grant == "authorization_code" else self.grant
                raise ValueError(f"{grant} needs client_id")
            if self.auth_method == "none":
                raise ValueError("a confidential client is needed: auth_method none cannot get a token by itself")
        return self

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset((self.scope or "").split())
