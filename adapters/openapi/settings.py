"""Settings of the `openapi` backend kind: a REST API described by an OpenAPI (or Swagger 2.0) document."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from gateway.settings import Section, UpstreamBackendSettings

FILTER_DESCRIPTION = (
    "Operations {which}: each entry an operationId glob (`repos/*`; the tool name matches too), "
    "`tag:<glob>`, `method:<METHOD>` or `path:<glob>`"
)


class OpenApiCredential(Section):
    """The credential of one security scheme of the document (its name in `components.securitySchemes`).

    apiKey: `value`; http basic: `username` and `password`; http bearer (or another http scheme): `token`.
    `secret` names an entry of the gateway's `secrets:` instead of a literal (the key, the token, or with
    `username` the password): the value is handed to the call by the pipeline and never held here.
    """

    value: str | None = Field(default=None, description="apiKey: the key (use ${VAR}); never logged")
    username: str | None = Field(default=None, description="http basic: the user name")
    password: str | None = Field(default=None, description="http basic: the password (use ${VAR}); never logged")
    token: str | None = Field(default=None, description="http bearer: the token (use ${VAR}); never logged")
    secret: str | None = Field(
        default=None,
        min_length=1,
        description="The name of a `secrets:` entry holding the key, the token, or (with username) the password",
    )

    @model_validator(mode="after")
    def _one_form(self) -> OpenApiCredential:
        given = [k for k in ("value", "password", "token", "secret") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of value, token, password (with username) or secret")
        if given[0] == "password" and self.username is None:
            raise ValueError("password needs username")
        if self.username is not None and given[0] not in ("password", "secret"):
            raise ValueError("username goes with password or secret")
        return self


class OpenApiBackendSettings(UpstreamBackendSettings):
    """Every operation of an OpenAPI document as a tool; calls go to the document's server (or `url`)."""

    kind: Literal["openapi"]
    spec: str = Field(
        min_length=1,
        description=(
            "The OpenAPI document: an http(s) URL, or a file (JSON or YAML; relative to the working directory). "
            "OpenAPI 3.0 and 3.1; Swagger 2.0 is converted on load"
        ),
    )
    url: str | None = Field(  # type: ignore[assignment]
        default=None,
        pattern=r"^https?://",
        description="Base URL of the API; default: the document's first `servers` entry",
    )
    server_variables: dict[str, str] = Field(
        default_factory=dict, description="Values of the chosen server's {variables} (default: their defaults)"
    )
    credentials: dict[str, OpenApiCredential] = Field(
        default_factory=dict,
        description=(
            "Security scheme name (components.securitySchemes) -> its credential; OAuth2 and OpenID Connect "
            "schemes take their tokens from `oauth:`"
        ),
    )
    include: list[str] | None = Field(default=None, description=FILTER_DESCRIPTION.format(which="to serve"))
    exclude: list[str] | None = Field(default=None, description=FILTER_DESCRIPTION.format(which="not to serve"))
    remote_refs: bool = Field(
        default=False,
        description=(
            "Follow $refs to other hosts than the document's own (a document on disk: any http(s) $ref); "
            "refs within the document and to its sibling files are always followed"
        ),
    )
    max_document_bytes: int = Field(
        default=134217728, ge=1024, description="Largest document (or referenced file) read, in bytes"
    )

    OAUTH_PER_CALL: ClassVar[bool] = True  # each call names its own credentials (`Credentials.auth`)
    ROUTING_FILTERS: ClassVar[bool] = False  # include/exclude are operation filters, applied at discovery
