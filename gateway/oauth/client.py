"""Toolplex as an OAuth 2.1 client of its upstreams: where a backend's bearer tokens come from.

A backend with `oauth:` gets its tokens from an authorization server instead of a static `api_key`:

- **Discovery** as the MCP authorization spec describes it: the authorization server is the configured
  `authorization_server`, else the one the upstream's protected resource metadata names (RFC 9728: the
  `resource_metadata` of a 401's `WWW-Authenticate`, else `/.well-known/oauth-protected-resource` with the
  path inserted, then at the root), and its metadata comes from RFC 8414 `/.well-known/oauth-authorization-server`
  (path inserted) or OpenID `/.well-known/openid-configuration`; metadata whose `issuer` is not, string for
  string, the issuer it was fetched for is refused (a poisoned document must not pick the token endpoint).
- **Grants**: `client_credentials` (the backend's own token; client authentication `client_secret_basic`,
  `client_secret_post` or `private_key_jwt`), RFC 8693 token exchange for `on_behalf_of: token_exchange`
  (each authenticated caller's validated token exchanged for an upstream token of its own: the caller's
  token itself never goes upstream), and `authorization_code` with PKCE for an authorization server that
  approves without a login page (a pre-authorized client: the redirect is read, never followed to a browser).
- **Challenges**: a 401 drops the token it answered and asks for a new one (the challenge's `scope` taken in),
  a 403 `insufficient_scope` asks for the union of the scopes held and challenged (step-up); each request
  is sent at most `max_attempts` times, so an upstream that never accepts ends the loop.
- **Caching**: a token is kept until `expiry_margin_s` before it expires, in process and in the state store
  (namespace `oauth`), so replicas share the backend's token; a caller's exchanged token is that
  principal's own entry (`owned_key`). Concurrent requests wait for one token request, not one each.
- **Secrets**: the client secret, private key and every token obtained are registered with
  `register_secrets`: no log line carries them, and no error message is built from them.

The flow is one async generator (`UpstreamOAuth.authorize`) that the HTTP clients' `Auth` hooks drive:
`UpstreamAuth` here for httpx (`gateway.upstream.Upstream`), the MCP adapter's for its httpx2 client.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
import orjson
import structlog

from gateway.errors import ErrorKind, GatewayError
from gateway.oauth.settings import UpstreamOAuthSettings
from gateway.ownership import owned_key
from gateway.redaction import register_secrets

__all__ = [
    "Caller",
    "UpstreamAuth",
    "UpstreamOAuth",
    "UpstreamOAuthSettings",
    "parse_challenge",
]

log = structlog.get_logger("toolplex.oauth")

NAMESPACE = "oauth"  # state-store keys: oauth:<backend>:... and owned_key("oauth", principal, ...)
MAX_METADATA_BYTES = 256 * 1024  # a metadata document or token answer larger than this is refused unread
MAX_CACHED = 1024  # tokens kept in process per backend (the backend's own and its callers')
DEFAULT_EXPIRES_S = 300.0  # a token answer without expires_in is used this long
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
LOOPBACK_REDIRECT = "http://127.0.0.1/toolplex/oauth/callback"
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))')


class StateStoreLike(Protocol):
    async def get(self, key: str) -> Any | None: ...

    async def set(self, key: str, value: Any, ttl: float) -> None: ...

    async def delete(self, key: str) -> None: ...


@dataclass(frozen=True)
class Caller:
    """The caller a token is exchanged for: its principal (the cache's owner) and its own validated token."""

    principal: str
    subject_token: str = field(repr=False)


@dataclass(frozen=True)
class Challenge:
    """What an upstream's `WWW-Authenticate: Bearer ...` asks."""

    status: int
    error: str | None = None
    scope: frozenset[str] = frozenset()
    resource_metadata: str | None = None


def parse_challenge(response: Any) -> Challenge | None:
    """The Bearer challenge of a 401, or of a 403 `insufficient_scope`; None for any other answer."""
    status = response.status_code
    if status not in (401, 403):
        return None
    header = ",".join(response.headers.get_list("www-authenticate")) if hasattr(response.headers, "get_list") else ""
    header = header or response.headers.get("www-authenticate", "")
    params = {m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3) for m in _PARAM.finditer(header)}
    error = params.get("error")
    if status == 403 and error != "insufficient_scope":
        return None
    scope = params.get("scope")
    return Challenge(status, error, frozenset((scope or "").split()), params.get("resource_metadata"))


@dataclass
class Token:
    value: str = field(repr=False)
    expires_at: float  # wall-clock seconds
    scopes: frozenset[str]
    refresh_token: str | None = field(default=None, repr=False)

    def fresh(self, margin: float) -> bool:
        return time.time() < self.expires_at - margin


@dataclass
class ServerMetadata:
    """The authorization server as discovered: its issuer and endpoints."""

    issuer: str
    token_endpoint: str
    authorization_endpoint: str | None = None
    registration_endpoint: str | None = None
    iss_parameter_supported: bool = False
    code_challenge_methods: tuple[str, ...] = ()
    auth_methods: tuple[str, ...] = ()  # token_endpoint_auth_methods_supported


class UpstreamOAuth:
    """One backend's OAuth client: discovery, token requests, the token cache and the challenge flow."""

    def __init__(
        self,
        backend: str,
        settings: UpstreamOAuthSettings,
        upstream_url: str,
        *,
        store: StateStoreLike | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.backend = backend
        self.settings = settings
        self.upstream_url = upstream_url
        self.store = store
        self._client = httpx.AsyncClient(
            timeout=settings.timeout_s, follow_redirects=False, transport=transport, trust_env=False
        )
        self._key = self._private_key()
        register_secrets([s for s in (settings.client_secret, self._key) if s])
        self._client_id = settings.client_id
        self._client_secret = settings.client_secret
        self._auth_method: str = settings.auth_method
        self._metadata: ServerMetadata | None = None
        self._resource = settings.resource
        self._supported_scopes: frozenset[str] = frozenset()
        self._challenge_scopes: frozenset[str] = frozenset()
        self._tokens: OrderedDict[tuple[str, str, frozenset[str]], Token] = OrderedDict()
        self._locks: dict[tuple[str, str, frozenset[str]], asyncio.Lock] = {}
        self._discovery = asyncio.Lock()
        self.token_requests = 0  # how many token requests this client made (for operators and tests)

    # ---- settings ----

    def _private_key(self) -> str | None:
        settings = self.settings
        if settings.private_key_file is not None:
            try:
                return Path(settings.private_key_file).read_text()
            except OSError as exc:
                raise ValueError(f"oauth.private_key_file of backend {self.backend!r}: {exc.strerror or exc}") from None
        return settings.private_key

    def error(self, message: str, kind: ErrorKind = ErrorKind.UPSTREAM_UNAVAILABLE, **fields: Any) -> GatewayError:
        """An error naming the backend; `message` is built from no secret (no token, no client secret)."""
        fields.setdefault("can_retry", kind is ErrorKind.UPSTREAM_UNAVAILABLE)
        return GatewayError.of(kind, f"Upstream {self.backend!r} is unavailable: {message}", **fields)

    # ---- discovery ----

    @property
    def discovered(self) -> bool:
        return self._metadata is not None

    async def discover(self, resource_metadata: str | None = None, *, refresh: bool = False) -> ServerMetadata:
        """The authorization server's metadata, found once; `refresh` (the upstream refused a token) reads the
        resource metadata again: an upstream that moved to another authorization server (SEP-2352) is followed,
        and nothing of the old one (tokens, a registration) is used with the new one."""
        if self._metadata is not None and not refresh:
            return self._metadata
        async with self._discovery:
            if self._metadata is not None and not refresh:
                return self._metadata
            issuer = self.settings.authorization_server
            if issuer is None:
                issuer = await self._protected_resource(resource_metadata)
            old = self._metadata
            if old is not None and old.issuer == issuer:
                return old
            self._metadata = await self._server_metadata(issuer)
            if old is not None:
                self._tokens.clear()
                if self.settings.client_id is None:  # registered with the old server: register with the new one
                    self._client_id, self._client_secret = None, None
                    self._auth_method = self.settings.auth_method
            log.info(
                "oauth_discovered",
                backend=self.backend,
                issuer=self._metadata.issuer,
                token_endpoint=self._metadata.token_endpoint,
                resource=self.resource,
            )
            return self._metadata

    @property
    def resource(self) -> str:
        return self._resource or self.upstream_url

    async def _protected_resource(self, given: str | None) -> str:
        """RFC 9728: the authorization server the upstream names; its `resource` must be the upstream's."""
        parts = urlsplit(self.upstream_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        candidates = [given] if given else []
        candidates += [f"{origin}/.well-known/oauth-protected-resource{path}"] if path else []
        candidates.append(f"{origin}/.well-known/oauth-protected-resource")
        for url in dict.fromkeys(candidates):
            document = await self._document(url)
            if document is None:
                continue
            servers = document.get("authorization_servers")
            resource = document.get("resource")
            if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
                raise self.error(f"its protected resource metadata ({url}) names no authorization server")
            if isinstance(resource, str) and not _covers(resource, self.upstream_url):
                raise self.error(
                    f"its protected resource metadata is for {resource!r}, not for {self.upstream_url!r}; "
                    "the gateway asks no token for another resource",
                    developer_message="RFC 9728 §3.3: the metadata's resource must match the upstream's URL",
                )
            if self._resource is None and isinstance(resource, str):
                self._resource = resource
            scopes = document.get("scopes_supported")
            if isinstance(scopes, list):
                self._supported_scopes = frozenset(s for s in scopes if isinstance(s, str))
            return servers[0]
        # 2025-03-26 servers publish no resource metadata: the upstream's origin is its authorization server.
        return origin

    async def _server_metadata(self, issuer: str) -> ServerMetadata:
        """RFC 8414 then OpenID discovery for `issuer`, path inserted; `issuer` checked string for string."""
        parts = urlsplit(issuer)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        if path:
            candidates = [
                f"{origin}/.well-known/oauth-authorization-server{path}",
                f"{origin}/.well-known/openid-configuration{path}",
                f"{origin}{path}/.well-known/openid-configuration",
            ]
        else:
            candidates = [
                f"{origin}/.well-known/oauth-authorization-server",
                f"{origin}/.well-known/openid-configuration",
            ]
        for url in candidates:
            document = await self._document(url)
            if document is None:
                continue
            if document.get("issuer") != issuer:
                raise self.error(
                    f"the authorization server metadata at {url} names issuer {document.get('issuer')!r}, not "
                    f"{issuer!r}; it is not used",
                    developer_message="RFC 8414 §3.3: the issuer must be the one the metadata was fetched for",
                )
            token_endpoint = document.get("token_endpoint")
            if not isinstance(token_endpoint, str):
                raise self.error(f"the authorization server metadata at {url} has no token_endpoint")
            methods = document.get("code_challenge_methods_supported")
            auth_methods = document.get("token_endpoint_auth_methods_supported")
            return ServerMetadata(
                issuer=issuer,
                token_endpoint=token_endpoint,
                authorization_endpoint=_str(document.get("authorization_endpoint")),
                registration_endpoint=_str(document.get("registration_endpoint")),
                iss_parameter_supported=document.get("authorization_response_iss_parameter_supported") is True,
                code_challenge_methods=tuple(methods) if isinstance(methods, list) else (),
                auth_methods=tuple(auth_methods) if isinstance(auth_methods, list) else (),
            )
        if self.settings.authorization_server is None and issuer == origin:
            # 2025-03-26 fallback: no metadata at all, the default endpoints at the server's root.
            return ServerMetadata(
                issuer=issuer,
                token_endpoint=f"{origin}/token",
                authorization_endpoint=f"{origin}/authorize",
                registration_endpoint=f"{origin}/register",
                code_challenge_methods=("S256",),
            )
        raise self.error(f"no authorization server metadata found for {issuer!r}")

    async def _document(self, url: str) -> dict[str, Any] | None:
        """A JSON metadata document; None when there is none (4xx)."""
        try:
            response = await self._client.get(url, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise self.error(f"cannot fetch {url} ({type(exc).__name__})") from None
        if 400 <= response.status_code < 500:
            return None
        body = self._json(response, url)
        if response.status_code >= 300 or not isinstance(body, dict):
            raise self.error(f"{url} answered HTTP {response.status_code} without a metadata document")
        return body

    def _json(self, response: httpx.Response, what: str) -> Any:
        if len(response.content) > MAX_METADATA_BYTES:
            raise self.error(f"{what} answered more than {MAX_METADATA_BYTES} bytes")
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return None

    # ---- tokens ----

    def scopes_for(self, challenged: frozenset[str] = frozenset()) -> frozenset[str]:
        """Configured scopes plus the challenge's; else the resource metadata's scopes_supported; else none."""
        wanted = self.settings.scopes | challenged | self._challenge_scopes
        return wanted or self._supported_scopes

    def _cache_id(self, caller: Caller | None, scopes: frozenset[str]) -> tuple[str, str, frozenset[str]]:
        if caller is None:
            return ("", "", scopes)
        return (caller.principal, hashlib.sha256(caller.subject_token.encode()).hexdigest()[:32], scopes)

    def _store_key(self, cache_id: tuple[str, str, frozenset[str]]) -> str:
        principal, subject, scopes = cache_id
        scope_hash = hashlib.sha256(" ".join(sorted(scopes)).encode()).hexdigest()[:16]
        resource_hash = hashlib.sha256(self.resource.encode()).hexdigest()[:16]
        if subject:  # a caller's own entry, bounded with its other state
            return owned_key(NAMESPACE, principal, f"{self.backend}:{resource_hash}:{subject}:{scope_hash}")
        return f"{NAMESPACE}:{self.backend}:{resource_hash}:{scope_hash}"

    async def token(self, caller: Caller | None, scopes: frozenset[str] | None = None) -> str:
        """A token for `caller` (None: the backend's own), from the cache when still fresh."""
        return (await self._token(caller, scopes)).value

    async def _token(self, caller: Caller | None, scopes: frozenset[str] | None = None) -> Token:
        await self.discover()
        scopes = self.scopes_for() if scopes is None else scopes
        cache_id = self._cache_id(caller, scopes)
        cached = self._cached(cache_id)
        if cached is not None:
            return cached
        lock = self._locks.setdefault(cache_id, asyncio.Lock())
        async with lock:
            cached = self._cached(cache_id) or await self._shared(cache_id)
            if cached is None:
                cached = await self._request(caller, scopes)
                await self._keep(cache_id, cached)
            return cached

    def _cached(self, cache_id: tuple[str, str, frozenset[str]]) -> Token | None:
        token = self._tokens.get(cache_id)
        if token is None:
            return None
        if not token.fresh(self.settings.expiry_margin_s):
            del self._tokens[cache_id]
            return None
        self._tokens.move_to_end(cache_id)
        return token

    async def _shared(self, cache_id: tuple[str, str, frozenset[str]]) -> Token | None:
        """A token another replica (or an earlier client of this backend) obtained, from the state store."""
        if self.store is None:
            return None
        try:
            value = await self.store.get(self._store_key(cache_id))
        except GatewayError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("access_token"), str):
            return None
        token = Token(value["access_token"], float(value.get("expires_at", 0)), cache_id[2])
        if not token.fresh(self.settings.expiry_margin_s):
            return None
        register_secrets([token.value])
        self._remember(cache_id, token)
        return token

    def _remember(self, cache_id: tuple[str, str, frozenset[str]], token: Token) -> None:
        self._tokens[cache_id] = token
        self._tokens.move_to_end(cache_id)
        while len(self._tokens) > MAX_CACHED:
            old, _ = self._tokens.popitem(last=False)
            self._locks.pop(old, None)

    async def _keep(self, cache_id: tuple[str, str, frozenset[str]], token: Token) -> None:
        self._remember(cache_id, token)
        ttl = token.expires_at - self.settings.expiry_margin_s - time.time()
        if self.store is None or ttl <= 0:
            return
        try:
            await self.store.set(
                self._store_key(cache_id), {"access_token": token.value, "expires_at": token.expires_at}, ttl
            )
        except GatewayError as exc:  # a full or unreachable store: this replica still has its token
            log.info("oauth_token_not_shared", backend=self.backend, error=exc.failure.message)

    async def drop(self, caller: Caller | None, value: str) -> None:
        """Forget a token the upstream refused (in process and in the state store), whatever scopes it was for."""
        for cache_id, token in list(self._tokens.items()):
            if token.value == value:
                del self._tokens[cache_id]
                if self.store is not None:
                    with contextlib.suppress(GatewayError):
                        await self.store.delete(self._store_key(cache_id))

    async def _request(self, caller: Caller | None, scopes: frozenset[str]) -> Token:
        """One token request of the configured grant (token exchange for a caller)."""
        metadata = await self.discover()
        if caller is not None:
            form = {
                "grant_type": TOKEN_EXCHANGE,
                "subject_token": caller.subject_token,
                "subject_token_type": ACCESS_TOKEN_TYPE,
                "requested_token_type": ACCESS_TOKEN_TYPE,
            }
        elif self.settings.grant == "authorization_code":
            form = await self._authorization_code(metadata, scopes)
        else:
            form = {"grant_type": "client_credentials"}
        form["resource"] = self.resource
        if scopes:
            form["scope"] = " ".join(sorted(scopes))
        return await self._token_request(metadata, form, scopes)

    async def _token_request(self, metadata: ServerMetadata, form: dict[str, str], scopes: frozenset[str]) -> Token:
        headers = {"Accept": "application/json"}
        self._authenticate(metadata, form, headers)
        self.token_requests += 1
        try:
            response = await self._client.post(metadata.token_endpoint, data=form, headers=headers)
        except httpx.HTTPError as exc:
            raise self.error(f"its authorization server cannot be reached ({type(exc).__name__})") from None
        body = self._json(response, "the token endpoint")
        if response.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
            said = body if isinstance(body, dict) else {}
            code = _str(said.get("error")) or f"HTTP {response.status_code}"
            text = _str(said.get("error_description"))
            grant = "token exchange" if form["grant_type"] == TOKEN_EXCHANGE else form["grant_type"]
            said_text = f"{code}: {text}" if text else code
            message = f"its authorization server refused the {grant} token request ({said_text})"
            if form["grant_type"] == TOKEN_EXCHANGE and code in ("invalid_grant", "invalid_request"):
                raise GatewayError.of(ErrorKind.UNAUTHENTICATED, f"Upstream {self.backend!r}: {message}")
            raise self.error(message, developer_message=f"check oauth: of backend {self.backend!r}")
        token_type = str(body.get("token_type", "Bearer"))
        if token_type.lower() not in ("bearer", "n_a"):
            raise self.error(f"its authorization server issued a {token_type!r} token; only Bearer tokens are sent")
        value = body["access_token"]
        register_secrets([value, *([body["refresh_token"]] if isinstance(body.get("refresh_token"), str) else [])])
        expires_in = body.get("expires_in")
        lifetime = float(expires_in) if isinstance(expires_in, (int, float)) and expires_in > 0 else DEFAULT_EXPIRES_S
        granted = frozenset(str(body["scope"]).split()) if isinstance(body.get("scope"), str) else scopes
        log.info(
            "oauth_token_obtained",
            backend=self.backend,
            grant=form["grant_type"].rsplit(":", 1)[-1],
            scope=" ".join(sorted(granted)) or None,
            expires_in=round(lifetime),
        )
        return Token(value, time.time() + lifetime, granted, _str(body.get("refresh_token")))

    def _authenticate(self, metadata: ServerMetadata, form: dict[str, str], headers: dict[str, str]) -> None:
        """Client authentication at the token endpoint, as `auth_method` says."""
        client_id = self._client_id
        if client_id is None:
            return
        method = self._auth_method
        if method == "client_secret_basic" and self._client_secret:
            pair = f"{_form_quote(client_id)}:{_form_quote(self._client_secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        elif method == "client_secret_post" and self._client_secret:
            form["client_id"] = client_id
            form["client_secret"] = self._client_secret
        elif method == "private_key_jwt":
            now = int(time.time())
            claims = {
                "iss": client_id,
                "sub": client_id,
                "aud": metadata.issuer,
                "iat": now,
                "exp": now + 60,
                "jti": secrets.token_urlsafe(16),
            }
            try:
                assertion = jwt.encode(claims, self._key or "", algorithm=self.settings.signing_alg)
            except (ValueError, TypeError, jwt.PyJWTError) as exc:
                raise self.error(f"its private_key_jwt assertion cannot be signed ({type(exc).__name__})") from None
            form["client_id"] = client_id
            form["client_assertion_type"] = JWT_BEARER
            form["client_assertion"] = assertion
        else:
            form["client_id"] = client_id

    # ---- authorization code (a client the authorization server approves without a login page) ----

    async def _authorization_code(self, metadata: ServerMetadata, scopes: frozenset[str]) -> dict[str, str]:
        if metadata.authorization_endpoint is None:
            raise self.error("its authorization server has no authorization_endpoint")
        if self._client_id is None:
            await self._register(metadata)
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state = secrets.token_urlsafe(16)
        query = {
            "response_type": "code",
            "client_id": self._client_id or "",
            "redirect_uri": LOOPBACK_REDIRECT,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": self.resource,
        }
        if scopes:
            query["scope"] = " ".join(sorted(scopes))
        url = metadata.authorization_endpoint
        url += ("&" if "?" in url else "?") + urlencode(query)
        try:
            response = await self._client.get(url)
        except httpx.HTTPError as exc:
            raise self.error(f"its authorization endpoint cannot be reached ({type(exc).__name__})") from None
        location = response.headers.get("location", "")
        if response.status_code not in (301, 302, 303, 307, 308) or not location.startswith(LOOPBACK_REDIRECT):
            raise self.error(
                f"its authorization server did not approve the client without a login (HTTP {response.status_code}); "
                "authorization_code needs a pre-authorized client"
            )
        answer = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        if answer.get("state") != state:
            raise self.error("its authorization server's redirect carries another state")
        iss = answer.get("iss")
        if iss is not None and iss != metadata.issuer:  # RFC 9207: compared string for string, never normalised
            raise self.error(f"its authorization response names issuer {iss!r}, not {metadata.issuer!r}")
        if iss is None and metadata.iss_parameter_supported:
            raise self.error("its authorization response lacks the iss parameter its metadata promises (RFC 9207)")
        if "code" not in answer:
            raise self.error(f"its authorization server answered {answer.get('error', 'no code')!r}")
        return {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "code_verifier": verifier,
            "redirect_uri": LOOPBACK_REDIRECT,
        }

    async def _register(self, metadata: ServerMetadata) -> None:
        """RFC 7591 dynamic registration, for an authorization server that offers it and no client_id given."""
        if metadata.registration_endpoint is None:
            raise self.error("no client_id is configured and its authorization server offers no registration")
        offered = metadata.auth_methods or ("client_secret_basic",)
        method = next((m for m in ("client_secret_basic", "client_secret_post", "none") if m in offered), offered[0])
        body = {
            "client_name": f"Toolplex ({self.backend})",
            "redirect_uris": [LOOPBACK_REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": "native",  # a loopback redirect: RFC 8252's native client
        }
        try:
            response = await self._client.post(metadata.registration_endpoint, json=body)
        except httpx.HTTPError as exc:
            raise self.error(f"its registration endpoint cannot be reached ({type(exc).__name__})") from None
        answer = self._json(response, "the registration endpoint")
        if response.status_code not in (200, 201) or not isinstance(answer, dict) or "client_id" not in answer:
            status = response.status_code
            raise self.error(f"its authorization server refused the client's registration (HTTP {status})")
        self._client_id = str(answer["client_id"])
        self._client_secret = _str(answer.get("client_secret"))
        self._auth_method = _str(answer.get("token_endpoint_auth_method")) or method
        if self._client_secret:
            register_secrets([self._client_secret])

    # ---- the flow around each upstream request ----

    async def authorize(
        self,
        request: Any,
        caller: Caller | None,
        on_error: Callable[[GatewayError], None],
    ) -> AsyncGenerator[Any, Any]:
        """Drive one upstream request: a token on it, then a bounded number of retries on 401 and step-up
        on 403 `insufficient_scope`. `on_error` hears why no token could be had (it may raise); the last
        answer is then the request's answer. Yields the request to send; is sent each answer."""
        token: Token | None = None
        scopes = self.scopes_for()
        if self.discovered or self.settings.authorization_server is not None or caller is not None:
            token = await self._try(caller, scopes, on_error)
            if token is not None:
                request.headers["Authorization"] = f"Bearer {token.value}"
        response = yield request
        for _attempt in range(self.settings.max_attempts - 1):
            challenge = parse_challenge(response)
            if challenge is None:
                return
            if challenge.status == 403:
                held = scopes | (token.scopes if token is not None else frozenset())
                wanted = held | challenge.scope
                if wanted == held and token is not None:
                    return  # nothing more to ask for: the refusal is the answer
                scopes = wanted
            else:
                if token is not None:
                    await self.drop(caller, token.value)
                    if self.settings.authorization_server is None:
                        try:  # the refused token may be of an authorization server the upstream left
                            await self.discover(challenge.resource_metadata, refresh=True)
                        except GatewayError as exc:
                            on_error(exc)
                            return
                scopes = self.scopes_for(challenge.scope)
            if challenge.scope:
                self._challenge_scopes = self._challenge_scopes | challenge.scope
            if not self.discovered:
                try:
                    await self.discover(challenge.resource_metadata)
                except GatewayError as exc:
                    on_error(exc)
                    return
                scopes = self.scopes_for(scopes)
            token = await self._try(caller, scopes, on_error)
            if token is None:
                return
            request.headers["Authorization"] = f"Bearer {token.value}"
            response = yield request

    async def _try(
        self, caller: Caller | None, scopes: frozenset[str], on_error: Callable[[GatewayError], None]
    ) -> Token | None:
        try:
            return await self._token(caller, scopes)
        except GatewayError as exc:
            on_error(exc)
            return None

    async def close(self) -> None:
        await self._client.aclose()


class UpstreamAuth(httpx.Auth):
    """The httpx hook of `UpstreamOAuth.authorize` for one caller (None: the backend's own requests).

    A request that already carries an Authorization header (the caller's own, forwarded) is left alone.
    Errors getting a token are raised: the request is not sent without one.
    """

    def __init__(self, oauth: UpstreamOAuth, caller: Caller | None = None) -> None:
        self.oauth = oauth
        self.caller = caller

    def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """`authorize` is itself the flow httpx drives (and closes); a forwarded request goes as it is."""
        if "authorization" in request.headers:
            return as_it_is(request)
        return self.oauth.authorize(request, self.caller, _raise)


async def as_it_is(request: Any) -> AsyncGenerator[Any, Any]:
    """An auth flow that sends the request unchanged, once."""
    yield request


def _raise(error: GatewayError) -> None:
    raise error


def caller_of(principal: str | None, client_credentials: dict[str, str]) -> Caller | None:
    """The caller a token is exchanged for: an authenticated principal with a bearer token; else None."""
    if principal is None:
        return None
    header = next((v for k, v in client_credentials.items() if k.lower() == "authorization"), "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return Caller(principal, value.strip())


def _covers(resource: str, url: str) -> bool:
    """The metadata's `resource` is the upstream's URL or a parent of it (same origin, path prefix)."""
    a, b = urlsplit(resource), urlsplit(url)
    if (a.scheme.lower(), a.netloc.lower()) != (b.scheme.lower(), b.netloc.lower()):
        return False
    parent = a.path.rstrip("/")
    child = b.path.rstrip("/")
    return child == parent or child.startswith(parent + "/")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _form_quote(value: str) -> str:
    """RFC 6749 §2.3.1: client id and secret are form-encoded before Basic encoding."""
    return urlencode({"": value})[1:]
