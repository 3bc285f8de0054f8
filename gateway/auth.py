"""Who is calling: API keys, OAuth bearer tokens (`gateway.oauth.resource`) and HS256 bearer JWTs, each an
`AuthMethod` plug-in."""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Protocol

from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import Principal
from gateway.observability import register_secrets

if TYPE_CHECKING:
    from gateway.oauth.resource import OAuthTokens


class AuthMethod(Protocol):
    def authenticate(self, token: str) -> Principal | None:
        """The principal this token proves, or None when the token is not of this method."""
        ...


class ApiKeys:
    def __init__(self, entries: Sequence[Any]) -> None:
        """`entries`: the `auth.api_keys` settings (key, name, tools)."""
        self._entries = [
            (
                entry.key.encode(),
                Principal(
                    name=entry.name or f"key-{index + 1}",
                    tools=tuple(entry.tools) if entry.tools is not None else None,
                ),
            )
            for index, entry in enumerate(entries)
        ]

    def authenticate(self, token: str) -> Principal | None:
        candidate = token.encode()
        found = None
        for key, principal in self._entries:  # compare with all: no early exit
            if hmac.compare_digest(key, candidate):
                found = principal
        return found


class JwtAuth:
    """Bearer JWTs signed with HS256 and a shared secret; `exp` and the principal claim (`sub` by default)
    required, `aud` and `iss` checked when configured.

    The principal claim names the caller (`jwt:<value>`): its sessions, workspaces, limits and records are
    its own. A token without it is refused rather than made one shared principal of every such token.

    Only HS256 is accepted: `none` and every other algorithm are refused
    before the signature is looked at, so a forged header cannot pick one.
    With `grants`, the values of one claim (`scope`, `roles`, ...) decide which
    tools the caller may see and call; without, every tool.
    """

    ALGORITHM = "HS256"
    MIN_SECRET_BYTES = 32  # RFC 7518 3.2: an HS256 key is at least 256 bits

    def __init__(
        self,
        secret: str,
        *,
        audience: str | None = None,
        leeway: float = 0.0,
        claim: str = "scope",
        grants: Mapping[str, Sequence[str]] | None = None,
        principal_claim: str = "sub",
        issuer: str | None = None,
    ) -> None:
        import jwt  # noqa: F401  loaded with the configuration asking for it: frozen with start-up (gateway.heap)

        self._secret = secret
        self.audience = audience
        self.principal_claim = principal_claim
        self.issuer = issuer
        self.leeway = leeway
        self.claim = claim
        self.grants = {value: tuple(globs) for value, globs in grants.items()} if grants is not None else None

    @classmethod
    def from_settings(cls, settings: Any, env: Mapping[str, str]) -> JwtAuth:
        """Build from `auth.jwt`; the secret is read from the environment variable named by `secret_env`."""
        name = settings.secret_env
        secret = env.get(name)
        if not secret:
            raise ConfigError([f"auth.jwt.secret_env: environment variable {name} is not set or empty"])
        if len(secret.encode()) < cls.MIN_SECRET_BYTES:
            raise ConfigError(
                [f"auth.jwt.secret_env: the secret in {name} must hold at least {cls.MIN_SECRET_BYTES} bytes for HS256"]
            )
        register_secrets([secret])  # never in a log line
        return cls(
            secret,
            audience=settings.audience,
            leeway=float(settings.leeway_s),
            claim=settings.claim,
            grants=settings.grants,
            principal_claim=settings.principal_claim,
            issuer=settings.issuer,
        )

    def authenticate(self, token: str) -> Principal | None:
        import jwt  # PyJWT (and cryptography) load only for a gateway that checks JWTs

        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            if looks_like_jwt(token):
                raise _unauthenticated("JWT is malformed: its parts are not base64url-encoded JSON") from None
            return None  # not a JWT: another method (an API key) may know it
        except jwt.InvalidTokenError as exc:  # a non-string `kid`, a bad or unsupported `crit`, ...
            raise _unauthenticated(f"JWT header is invalid: {exc}") from None
        check_header(header, (self.ALGORITHM,), "; tokens must be signed with HS256")
        claims = verified_claims(
            token,
            self._secret,
            algorithm=self.ALGORITHM,
            audience=self.audience,
            issuer=self.issuer,
            leeway=self.leeway,
            require=["exp", *(["iss"] if self.issuer is not None else [])],
            foreign_audience="JWT audience is not accepted by this gateway",
        )
        subject = claims.get(self.principal_claim)
        if not isinstance(subject, str) or not subject:
            raise _unauthenticated(
                f"JWT lacks the claim {self.principal_claim!r} naming its caller (a non-empty string)"
            )
        values = tuple(claim_values(claims.get(self.claim), self.claim))
        return Principal(name=f"jwt:{subject}", tools=self.tools_of(claims), claims=values)

    def tools_of(self, claims: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The globs the token's claim values are granted (their union, in order); None without grants: all tools."""
        if self.grants is None:
            return None
        globs: dict[str, None] = {}
        for value in claim_values(claims.get(self.claim), self.claim):
            globs.update(dict.fromkeys(self.grants.get(value, ())))
        return tuple(globs)


def check_header(header: Mapping[str, Any], accepted: tuple[str, ...], refused: str) -> str:
    """The header's algorithm, when it is one of `accepted` (else UNAUTHENTICATED, `refused` appended to the
    message) and the header names no critical extension (none is understood here, RFC 7515 4.1.11)."""
    algorithm = header.get("alg")
    if algorithm not in accepted:
        shown = algorithm if isinstance(algorithm, str) and len(algorithm) <= 20 else type(algorithm).__name__
        raise _unauthenticated(f"JWT algorithm {shown!r} is not accepted{refused}")
    if "crit" in header:
        raise _unauthenticated("JWT header names critical extensions ('crit'); none is supported")
    return str(algorithm)


def verified_claims(
    token: str,
    key: Any,
    *,
    algorithm: str,
    audience: str | list[str] | None,
    issuer: str | None,
    leeway: float,
    require: list[str],
    foreign_audience: str,
) -> dict[str, Any]:
    """A JWT's claims once its signature (`key`, `algorithm`), `aud`, `iss`, `exp`/`nbf` and required claims
    hold; else UNAUTHENTICATED saying which did not (`foreign_audience` for a token meant for another audience).
    The shared-secret JWTs and the OAuth issuers' tokens are decoded here alike."""
    import jwt  # PyJWT (and cryptography) load only for a gateway that checks JWTs

    try:
        return jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            audience=audience,
            issuer=issuer,
            leeway=leeway,
            options={"require": require},
        )
    except jwt.ExpiredSignatureError:
        raise _unauthenticated("JWT has expired") from None
    except jwt.ImmatureSignatureError:
        raise _unauthenticated("JWT is not valid yet (nbf)") from None
    except jwt.MissingRequiredClaimError as exc:
        raise _unauthenticated(f"JWT lacks the required claim {exc.claim!r}") from None
    except jwt.InvalidAudienceError:
        raise _unauthenticated(foreign_audience) from None
    except jwt.InvalidIssuerError:
        raise _unauthenticated("JWT issuer is not accepted by this gateway") from None
    except jwt.InvalidSignatureError:
        raise _unauthenticated("JWT signature is invalid") from None
    except (jwt.InvalidTokenError, jwt.InvalidKeyError) as exc:
        raise _unauthenticated(f"JWT is invalid: {exc}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # whatever a hostile token trips
        raise _unauthenticated(f"JWT is invalid: {type(exc).__name__}") from None


def claim_values(value: Any, claim: str) -> list[str]:
    """A claim as its values: a space-separated string (OAuth `scope`) or a list of strings (`roles`); absent: none.

    Any other shape is refused (401) rather than read as "no values", so a token
    issued with an unexpected claim format says so instead of silently seeing nothing.
    """
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise _unauthenticated(
        f"JWT claim {claim!r} must be a string of space-separated values or a list of strings, not {_shape_of(value)}"
    )


JSON_TYPES = {bool: "a boolean", int: "a number", float: "a number", dict: "an object"}


def _shape_of(value: Any) -> str:
    """How a claim value looks, in JSON words (the value itself may be long or secret)."""
    if isinstance(value, list):
        return "a list holding something other than strings"
    return JSON_TYPES.get(type(value), type(value).__name__)


def looks_like_jwt(token: str) -> bool:
    """Three dot-separated parts, the first the base64url of a JSON object (`eyJ...`)."""
    return token.count(".") == 2 and token.startswith("eyJ")


def _unauthenticated(message: str) -> GatewayError:
    return GatewayError.of(ErrorKind.UNAUTHENTICATED, message)


CREDENTIAL_HEADERS = (("authorization", "Authorization"), ("x-api-key", "X-API-Key"))


def client_credentials(headers: Mapping[str, str]) -> dict[str, str]:
    """The credential headers the client sent, as it sent them (Authorization, X-API-Key): what a backend
    with `forward_authorization` sends upstream in place of its own credentials (`gateway.upstream.Credentials`).
    Every front takes them here, so a client is forwarded the same whichever header it authenticated with."""
    found: dict[str, str] = {}
    for lowered, name in CREDENTIAL_HEADERS:
        value = headers.get(lowered)
        if value:
            found[name] = value
    return found


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """`Authorization: Bearer X`, a bare `Authorization: X` (OpenTool TS SDK), or `X-API-Key: X`."""
    value = headers.get("authorization")
    if value:
        scheme, _, rest = value.strip().partition(" ")
        return rest.strip() if scheme.lower() == "bearer" and rest else value.strip()
    return headers.get("x-api-key") or None


class Authenticator:
    def __init__(
        self,
        methods: list[AuthMethod],
        oauth: OAuthTokens | None = None,
        admins: Sequence[str] = (),
        admin_grants: Sequence[str] = (),
    ) -> None:
        self.methods = methods
        self.oauth = oauth  # also among `methods`; kept apart for its `prepare` and its published metadata
        self.admins = tuple(admins)  # globs on principal names (`auth.admins`)
        self.admin_grants = frozenset(admin_grants)  # a token's grant-claim values (`auth.admin_grants`)

    @property
    def enabled(self) -> bool:
        return bool(self.methods)

    async def prepare(self, headers: Mapping[str, str]) -> None:
        """The I/O the request's token may need before `authenticate` decides (OAuth keys, introspection).
        Never raises; a token an API key matches needs none."""
        if self.oauth is None:
            return
        token = bearer_token(headers)
        if not token or any(isinstance(m, ApiKeys) and m.authenticate(token) is not None for m in self.methods):
            return
        await self.oauth.prepare(token)

    def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """None when authentication is off; raises an UNAUTHENTICATED error when it fails."""
        if not self.methods:
            return None
        token = bearer_token(headers)
        if not token:
            raise GatewayError.of(
                ErrorKind.UNAUTHENTICATED,
                "Missing credentials: send the Authorization header (an API key or a token, scheme Bearer) "
                "or X-API-Key",
            )
        for method in self.methods:
            principal = method.authenticate(token)
            if principal is not None:
                return self._admin(principal) if self.admins or self.admin_grants else principal
        raise GatewayError.of(ErrorKind.UNAUTHENTICATED, "Invalid credentials")

    def _admin(self, principal: Principal) -> Principal:
        """The principal, marked `admin` when its name matches `auth.admins` or its token's grant claim holds a
        value of `auth.admin_grants` (what sees quarantined tools and the whole console)."""
        if any(fnmatchcase(principal.name, pattern) for pattern in self.admins) or not self.admin_grants.isdisjoint(
            principal.claims
        ):
            return replace(principal, admin=True)
        return principal


def auth_configured(auth: Any) -> bool:
    """Whether the `auth` section tells callers apart (an API key, trusted OAuth issuers, or a JWT secret): the
    conditions under which `build_authenticator` adds a method, read before any is built (the fronts need it)."""
    return bool(auth.api_keys) or auth.oauth is not None or (auth.jwt is not None and bool(auth.jwt.secret_env))


def build_authenticator(
    auth: Any, env: Mapping[str, str] | None = None, *, public_url: str | None = None
) -> Authenticator:
    """API keys first, then OAuth tokens of trusted issuers, then HS256 JWTs: a token none knows is
    "Invalid credentials".

    `auth` is the typed `auth` section (api_keys, jwt, oauth); `public_url` (`server.public_url`) is the
    OAuth resource when `auth.oauth.resource` is not set.
    """
    methods: list[AuthMethod] = []
    oauth = None
    if auth.api_keys:
        methods.append(ApiKeys(auth.api_keys))
    if auth.oauth is not None:
        from gateway.oauth.resource import OAuthTokens, Published  # they build on this module's JWT helpers

        oauth = OAuthTokens(auth.oauth, Published.of(auth.oauth, public_url))
        methods.append(oauth)
    if auth.jwt is not None and auth.jwt.secret_env:
        methods.append(JwtAuth.from_settings(auth.jwt, os.environ if env is None else env))
    return Authenticator(
        methods, oauth, admins=getattr(auth, "admins", ()), admin_grants=getattr(auth, "admin_grants", ())
    )
