"""Bearer tokens of trusted authorization servers (`auth.oauth`): the gateway as an OAuth 2.1 resource server.

A JWT is verified by its issuer's published key (`iss` picks the issuer: only configured ones are trusted),
its algorithm one the issuer is allowed (never HS256 or none), and `aud` naming this gateway (RFC 8707: a token
minted for another resource is refused, so no token meant elsewhere is accepted here), `exp`/`nbf` within the
leeway, and the principal claim. An opaque token is asked of the issuers that introspect (RFC 7662); the answer
is kept, bounded, for its lifetime (at most `introspection_cache_s`).

`authenticate` is synchronous, as every `AuthMethod`: the I/O it may need (keys for an unknown `kid`, an
introspection) is done before, by `prepare`, which the request's first layer awaits (`gateway.oauth.challenge`).
The principal is `oauth:<issuer name>:<sub>`: two issuers' subjects never share state. Scopes map to tool
globs as `auth.jwt.grants` do, and the principal keeps that table so a refusal can name the scopes needed.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
import structlog

from gateway.auth import check_header, claim_values, looks_like_jwt, verified_claims
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import Principal
from gateway.oauth.issuers import FetchFailed, Issuer
from gateway.observability import register_secrets

log = structlog.get_logger("toolplex.oauth")

MAX_SUBJECT_CHARS = 512  # a principal name longer than this is refused, so no token makes state keys huge
FAILED_INTROSPECTION_S = 5.0  # an issuer that could not answer is asked again after this long
ENTRY_BYTES = 256  # what one kept introspection answer costs besides its principal's name and globs


@dataclass(frozen=True)
class Published:
    """What the gateway tells clients of itself as a protected resource (metadata and challenges)."""

    resource: str  # the canonical URL tokens must be for
    authorization_servers: tuple[str, ...]
    scopes: tuple[str, ...]
    algorithms: tuple[str, ...]

    @classmethod
    def of(cls, settings: Any, public_url: str | None) -> Published:
        """From `auth.oauth` (and `server.public_url`, the resource when none is set); ConfigError without one."""
        resource = settings.resource or public_url
        if not resource:
            raise ConfigError(["auth.oauth.resource: set it (or server.public_url): the URL tokens must be for"])
        scopes = settings.scopes_supported if settings.scopes_supported is not None else list(settings.grants or ())
        return cls(
            resource=resource,
            authorization_servers=tuple(entry.issuer for entry in settings.issuers),
            scopes=tuple(scopes),
            algorithms=tuple(sorted({a for entry in settings.issuers for a in entry.algorithms})),
        )


def _unauthenticated(message: str) -> GatewayError:
    return GatewayError.of(ErrorKind.UNAUTHENTICATED, message)


class OAuthTokens:
    """The `auth.oauth` method: see the module docstring."""

    def __init__(self, settings: Any, published: Published) -> None:
        self.published = published
        resource = self.resource = published.resource
        bare = resource.rstrip("/")
        self.audiences = list(dict.fromkeys([resource, bare, f"{bare}/", *settings.audiences]))
        self.issuers = {
            entry.issuer: Issuer(
                entry,
                timeout_s=settings.timeout_s,
                keys_max_age_s=settings.keys_max_age_s,
                keys_refresh_min_s=settings.keys_refresh_min_s,
            )
            for entry in settings.issuers
        }
        register_secrets([entry.client_secret for entry in settings.issuers if entry.client_secret])
        self.principal_claim: str = settings.principal_claim
        self.claim: str = settings.claim
        self.grants = (
            tuple((value, tuple(globs)) for value, globs in settings.grants.items())
            if settings.grants is not None
            else None
        )
        self.leeway = float(settings.leeway_s)
        self.introspection_cache_s = float(settings.introspection_cache_s)
        self.max_cached = settings.max_cached_tokens
        # sha256(token) -> (monotonic expiry, the principal or the refusal's message), least recently used first
        self._introspected: OrderedDict[bytes, tuple[float, Principal | str]] = OrderedDict()
        self._introspected_bytes = 0

    # ---- before authenticate: the I/O ----

    async def prepare(self, token: str) -> None:
        """Fetch what `authenticate` will need for `token`: its issuer's keys, or the issuers' word on it."""
        if looks_like_jwt(token):
            try:
                header = jwt.get_unverified_header(token)
                claims = jwt.decode(token, options={"verify_signature": False})
            except (jwt.InvalidTokenError, ValueError, TypeError, RecursionError):
                return  # `authenticate` says what is wrong with it
            issuer = self.issuers.get(claims.get("iss")) if isinstance(claims.get("iss"), str) else None
            kid = header.get("kid")
            if issuer is not None and (kid is None or isinstance(kid, str)):
                await issuer.ensure_key(kid)
            return
        introspecting = [issuer for issuer in self.issuers.values() if issuer.introspects]
        digest = hashlib.sha256(token.encode()).digest()
        if not introspecting or self._cached(digest) is not None:
            return
        self._keep(digest, *await self._introspect(token, introspecting))

    async def _introspect(self, token: str, issuers: list[Issuer]) -> tuple[float, Principal | str]:
        """(seconds to keep it, the principal or why not) from the first issuer that knows the token as active."""
        failures = []
        for issuer in issuers:
            try:
                answer = await issuer.introspect(token)
            except FetchFailed as exc:
                log.warning("oauth_introspection_failed", issuer=issuer.issuer, reason=str(exc))
                failures.append(issuer.issuer)
                continue
            if answer["active"]:
                try:
                    principal, expires = self._from_introspection(answer, issuer)
                except GatewayError as exc:
                    return self.introspection_cache_s, exc.failure.message
                keep = self.introspection_cache_s if expires is None else min(self.introspection_cache_s, expires)
                return keep, principal
        if failures:
            return FAILED_INTROSPECTION_S, "the token could not be introspected: its issuer did not answer"
        return self.introspection_cache_s, "the token is not active"

    def _from_introspection(self, answer: Mapping[str, Any], issuer: Issuer) -> tuple[Principal, float | None]:
        """The principal of an active introspection answer, after the checks a JWT gets; and seconds it has left."""
        iss = answer.get("iss")
        if iss is not None and iss != issuer.issuer:
            raise _unauthenticated("the token's issuer is not the one that introspected it")
        audience = answer.get("aud")
        named = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if not any(value in self.audiences for value in named):
            raise _unauthenticated("the token is not for this gateway (its aud does not name it)")
        now = time.time()
        expires = answer.get("exp")
        if isinstance(expires, int | float) and expires + self.leeway <= now:
            raise _unauthenticated("the token has expired")
        not_before = answer.get("nbf")
        if isinstance(not_before, int | float) and not_before - self.leeway > now:
            raise _unauthenticated("the token is not valid yet")
        left = float(expires) - now if isinstance(expires, int | float) else None
        return self._principal(answer, issuer), left

    def _cached(self, digest: bytes) -> Principal | str | None:
        found = self._introspected.get(digest)
        if found is None:
            return None
        if found[0] <= time.monotonic():
            self._forget(digest)
            return None
        self._introspected.move_to_end(digest)
        return found[1]

    def _keep(self, digest: bytes, seconds: float, result: Principal | str) -> None:
        if seconds <= 0:
            return
        self._forget(digest)
        self._introspected[digest] = (time.monotonic() + seconds, result)
        self._introspected_bytes += _size(result)
        while len(self._introspected) > self.max_cached:
            self._forget(next(iter(self._introspected)))

    def _forget(self, digest: bytes) -> None:
        found = self._introspected.pop(digest, None)
        if found is not None:
            self._introspected_bytes -= _size(found[1])

    @property
    def cached_bytes(self) -> int:
        """What the kept introspection answers hold (bounded: `max_cached_tokens` entries of bounded size)."""
        return self._introspected_bytes

    # ---- the decision ----

    def authenticate(self, token: str) -> Principal | None:
        """The principal the token proves; None when it is none of this method's (an HS256 JWT of `auth.jwt`,
        an opaque token when no issuer introspects); raises UNAUTHENTICATED when it is one and fails."""
        if not looks_like_jwt(token):
            return self._opaque(token)
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except (jwt.InvalidTokenError, ValueError, TypeError, RecursionError):
            return None  # malformed: `auth.jwt` (or the authenticator) says so
        iss = unverified.get("iss")
        issuer = self.issuers.get(iss) if isinstance(iss, str) else None
        if issuer is None:
            if header.get("alg") == "HS256":
                return None  # a shared-secret JWT: `auth.jwt`'s
            raise _unauthenticated("JWT issuer is not trusted by this gateway")
        return self._verified(token, header, issuer)

    def _opaque(self, token: str) -> Principal | None:
        if not any(issuer.introspects for issuer in self.issuers.values()):
            return None
        found = self._cached(hashlib.sha256(token.encode()).digest())
        if found is None:
            raise _unauthenticated("the token could not be introspected")
        if isinstance(found, str):
            raise _unauthenticated(found[0].upper() + found[1:])
        return found

    def _verified(self, token: str, header: Mapping[str, Any], issuer: Issuer) -> Principal:
        algorithm = check_header(header, issuer.algorithms, " from this issuer")
        kid = header.get("kid")
        key = issuer.key(kid) if kid is None or isinstance(kid, str) else None
        if key is None:
            raise _unauthenticated("JWT signing key is not one the issuer publishes (unknown or rotated out)")
        declared = key._jwk_data.get("alg")  # a key published for one algorithm is used for no other
        if declared is not None and declared != algorithm:
            raise _unauthenticated(f"JWT algorithm {algorithm!r} is not the one its key is for")
        claims = verified_claims(
            token,
            key.key,
            algorithm=algorithm,
            audience=self.audiences,
            issuer=issuer.issuer,
            leeway=self.leeway,
            require=["exp", "iss", "aud"],
            foreign_audience="JWT is not for this gateway (its aud does not name it)",
        )
        return self._principal(claims, issuer)

    def _principal(self, claims: Mapping[str, Any], issuer: Issuer) -> Principal:
        subject = claims.get(self.principal_claim)
        if not isinstance(subject, str) or not subject or len(subject) > MAX_SUBJECT_CHARS:
            raise _unauthenticated(
                f"the token lacks the claim {self.principal_claim!r} naming its caller "
                f"(a non-empty string of at most {MAX_SUBJECT_CHARS} characters)"
            )
        return Principal(
            name=f"oauth:{issuer.name}:{subject}",
            tools=self.tools_of(claims),
            grants=self.grants,
            claims=tuple(claim_values(claims.get(self.claim), self.claim)),
        )

    def tools_of(self, claims: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The globs the token's claim values are granted (their union); None without grants: every tool."""
        if self.grants is None:
            return None
        table = dict(self.grants)
        globs: dict[str, None] = {}
        for value in claim_values(claims.get(self.claim), self.claim):
            globs.update(dict.fromkeys(table.get(value, ())))
        return tuple(globs)


def _size(result: Principal | str) -> int:
    if isinstance(result, str):
        return ENTRY_BYTES + len(result)
    return ENTRY_BYTES + len(result.name) + sum(len(glob) for glob in result.tools or ())
