"""A document's security schemes as the credentials each request carries.

Each operation's `security` (its own, else the document's) lists alternatives, each a set of schemes
that apply together. The first alternative the backend can satisfy is the operation's plan, decided
once at discovery:

- `apiKey` (header, query or cookie), `http` basic, bearer or another http scheme: a configured
  credential (`credentials: {<scheme>: ...}`), a literal or a `secrets:` entry the call receives;
- `oauth2` and `openIdConnect`: the backend's `oauth:` (client credentials, or a token exchanged per
  caller), through the OAuth hook of `gateway.upstream.Credentials`;
- an empty alternative (`{}`): nothing.

With `forward_authorization: true` every operation carries the caller's own credential headers and
none of the backend's. An operation none of whose alternatives can be satisfied is still served, sent
without credentials (its upstream's 401 then says so); discovery names it once per set of schemes.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import httpx

from adapters.openapi.document import DocumentError, Documents, escape
from adapters.openapi.settings import OpenApiCredential
from gateway.errors import ErrorKind, GatewayError
from gateway.model import CallContext
from gateway.upstream import Credentials

OAUTH_TYPES = frozenset({"oauth2", "openIdConnect"})


@dataclass(frozen=True)
class Scheme:
    """One security scheme as the document declares it."""

    name: str
    type: str  # apiKey | http | oauth2 | openIdConnect | mutualTLS
    location: str = ""  # apiKey: header | query | cookie
    parameter: str = ""  # apiKey: the header, query or cookie name
    http_scheme: str = ""  # http: basic | bearer | ...
    openid_url: str | None = None


@dataclass(frozen=True)
class Plan:
    """What one operation's requests carry: these schemes (with their credentials), the OAuth token or nothing."""

    schemes: tuple[Scheme, ...] = ()
    oauth: bool = False
    scopes: tuple[str, ...] = ()  # what the chosen OAuth requirement asks for
    unmet: tuple[str, ...] = ()  # no alternative could be met: the schemes they name (for the discovery warning)
    secrets: tuple[str, ...] = ()  # the `secrets:` entries the call needs handed in


@dataclass
class Request:
    """The parts of a request the security plan adds to."""

    headers: dict[str, str]
    query: list[str]  # encoded `name=value` pairs
    cookies: list[tuple[str, str]]


@dataclass
class Security:
    """The document's schemes, the backend's credentials, and the plan of each distinct `security` list."""

    documents: Documents
    credentials: dict[str, OpenApiCredential]
    oauth: bool  # the backend has `oauth:`
    forward: bool  # forward_authorization
    schemes: dict[str, Scheme] = field(default_factory=dict)
    undeclared: set[str] = field(default_factory=set)  # schemes `security` names that the document does not declare
    _plans: dict[Any, Plan] = field(default_factory=dict)

    def __post_init__(self) -> None:
        root = self.documents.root
        components = root.get("components") if isinstance(root.get("components"), dict) else {}
        declared = components.get("securitySchemes") or {}
        main = self.documents.main
        for name, raw in declared.items() if isinstance(declared, dict) else ():
            where = f"/components/securitySchemes/{escape(name)}"
            node, _, _ = self.documents.follow(raw, main, where)
            if not isinstance(node, dict):
                raise DocumentError(main, where, "a security scheme must be an object")
            kind = str(node.get("type", ""))
            self.schemes[name] = Scheme(
                name=name,
                type=kind,
                location=str(node.get("in", "")),
                parameter=str(node.get("name", "")),
                http_scheme=str(node.get("scheme", "")).lower(),
                openid_url=node.get("openIdConnectUrl") if isinstance(node.get("openIdConnectUrl"), str) else None,
            )

    def plan(self, requirements: Any, where: str) -> Plan:
        """The plan for one operation's effective `security` (None: the document declares none)."""
        if self.forward or not requirements:
            return Plan()
        if not isinstance(requirements, list):
            raise DocumentError(self.documents.main, where, "security must be a list")
        key = repr(requirements)
        found = self._plans.get(key)
        if found is None:
            found = self._plans[key] = self._choose(requirements, where)
        return found

    def _choose(self, requirements: list[Any], where: str) -> Plan:
        unmet: list[str] = []
        for alternative in requirements:
            if not isinstance(alternative, dict):
                raise DocumentError(self.documents.main, where, "a security requirement must be an object")
            if not alternative:
                return Plan()  # "no credentials" is one of the choices
            schemes: list[Scheme] = []
            oauth = False
            scopes: list[str] = []
            for name, wanted in alternative.items():
                scheme = self.schemes.get(name)
                if scheme is None:  # the alternative cannot be met; the operation may still be usable
                    self.undeclared.add(name)
                    break
                if scheme.type in OAUTH_TYPES and self.oauth:
                    oauth = True
                    scopes += [s for s in wanted or () if isinstance(s, str)]
                elif scheme.type in ("apiKey", "http") and name in self.credentials:
                    schemes.append(scheme)
                else:
                    break
            else:
                secrets = tuple(c for s in schemes if (c := self.credentials[s.name].secret) is not None)
                return Plan(tuple(schemes), oauth, tuple(dict.fromkeys(scopes)), secrets=secrets)
            unmet.extend(alternative)
        return Plan(unmet=tuple(dict.fromkeys(unmet)))

    def apply(self, plan: Plan, request: Request, context: CallContext, credentials: Credentials) -> httpx.Auth | None:
        """Add the plan's credentials to `request`; the OAuth hook the request takes (None: the client's default)."""
        if self.forward:
            request.headers.update(credentials.for_call(context))
            return credentials.auth(context)
        for scheme in plan.schemes:
            self._add(scheme, self.credentials[scheme.name], request, context)
        if credentials.oauth is None:
            return None
        # An operation without an OAuth requirement carries no token of the backend's (a no-op hook).
        return credentials.auth(context) if plan.oauth else httpx.Auth()

    def _add(self, scheme: Scheme, credential: OpenApiCredential, request: Request, context: CallContext) -> None:
        secret = None
        if credential.secret is not None:
            secret = context.secrets.get(credential.secret)
            if secret is None:  # the requirements stage hands every declared secret in; this is a bug elsewhere
                raise GatewayError.of(ErrorKind.INTERNAL, f"secret {credential.secret!r} was not handed to the call")
        if scheme.type == "apiKey":
            value = credential.value if credential.value is not None else secret or credential.token or ""
            if scheme.location == "header":
                request.headers[scheme.parameter] = value
            elif scheme.location == "query":
                from adapters.openapi.requests import encode

                request.query.append(f"{encode(scheme.parameter)}={encode(value)}")
            elif scheme.location == "cookie":
                request.cookies.append((scheme.parameter, value))
        elif scheme.http_scheme == "basic":
            password = credential.password if credential.password is not None else secret or ""
            pair = f"{credential.username or ''}:{password}".encode()
            request.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        else:
            token = credential.token if credential.token is not None else secret or credential.value or ""
            word = "Bearer" if scheme.http_scheme in ("", "bearer") else scheme.http_scheme.capitalize()
            request.headers["Authorization"] = f"{word} {token}"

    def scopes(self) -> list[str]:
        """Every scope the chosen OAuth requirements ask for (the token's default `scope`)."""
        return sorted({scope for plan in self._plans.values() for scope in plan.scopes})

    def openid_issuer(self) -> str | None:
        """The issuer an OpenID Connect scheme's discovery URL names (for `oauth.authorization_server`)."""
        suffix = "/.well-known/openid-configuration"
        for scheme in self.schemes.values():
            if scheme.openid_url and scheme.openid_url.endswith(suffix):
                return scheme.openid_url[: -len(suffix)]
        return None
