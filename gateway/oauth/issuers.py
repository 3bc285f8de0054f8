"""A trusted authorization server, as the gateway knows it: its metadata, its signing keys, its introspection.

Everything here is fetched, never configured twice: the metadata from discovery (OpenID, then RFC 8414),
checked to name the configured issuer; the keys from its JWKS, cached for `keys_max_age_s` and fetched
again early only for a token whose `kid` is unknown, at most once per `keys_refresh_min_s` (a flood of
made-up kids costs the issuer nothing); concurrent fetches are one. Fetches are bounded in time and size.
The token-verifying code asks synchronously (`key`), after `ensure_key` did the I/O.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
import orjson
import structlog

log = structlog.get_logger("toolplex.oauth")

MAX_DOCUMENT_BYTES = 512 * 1024  # a metadata document, a JWKS or an introspection answer
OPENID = "/.well-known/openid-configuration"
RFC8414 = "/.well-known/oauth-authorization-server"


class FetchFailed(Exception):
    """An authorization server did not answer a usable document; the message says why (no secret in it)."""


async def fetch_json(
    client: httpx.AsyncClient, method: str, url: str, *, data: dict[str, str] | None = None, auth: Any = None
) -> Any:
    """A JSON document from `url`, read up to `MAX_DOCUMENT_BYTES`."""
    try:
        async with client.stream(method, url, data=data, auth=auth, headers={"Accept": "application/json"}) as answer:
            if answer.status_code != 200:
                raise FetchFailed(f"{url} answered HTTP {answer.status_code}")
            body = bytearray()
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise FetchFailed(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
    except httpx.HTTPError as exc:
        raise FetchFailed(f"{url} could not be reached ({type(exc).__name__})") from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise FetchFailed(f"{url} did not answer JSON") from None


def discovery_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: OpenID's `<issuer>/.well-known/...`, then RFC 8414's path insertion."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = [f"{issuer.rstrip('/')}{OPENID}", f"{origin}{RFC8414}{path}"]
    if path:
        urls.append(f"{origin}{OPENID}{path}")
    return urls


class Issuer:
    """One trusted issuer (`auth.oauth.issuers[]`), its metadata and keys fetched when first needed."""

    def __init__(self, settings: Any, *, timeout_s: float, keys_max_age_s: float, keys_refresh_min_s: float) -> None:
        self.issuer: str = settings.issuer
        self.name: str = settings.name or settings.issuer
        self.algorithms: tuple[str, ...] = tuple(settings.algorithms)
        self.client_id: str | None = settings.client_id
        self._client_secret: str | None = settings.client_secret
        self._discovery_url: str | None = settings.discovery_url
        self._jwks_url: str | None = settings.jwks_url
        self._introspection_url: str | None = settings.introspection_url
        self.timeout_s = timeout_s
        self.keys_max_age_s = keys_max_age_s
        self.keys_refresh_min_s = keys_refresh_min_s
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")  # monotonic time of the last key fetch (tried)
        self._loaded_at = float("-inf")  # ... of the last one that succeeded
        self._lock = asyncio.Lock()
        self.fetches = 0  # key fetches made (tests and logs)

    @property
    def introspects(self) -> bool:
        """Opaque tokens can be asked about: a client id, and an introspection endpoint configured or discovered."""
        return self.client_id is not None and (
            self._introspection_url is not None or self._metadata is None or "introspection_endpoint" in self._metadata
        )

    # ---- keys ----

    def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The signing key named `kid` (a token without `kid`: the issuer's only key), if it is known now."""
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def ensure_key(self, kid: str | None) -> None:
        """Fetch the keys when they are old or `kid` is unknown, unless a fetch was tried within
        `keys_refresh_min_s`; concurrent requests wait for one fetch. Never raises: old keys stay usable."""
        if self._usable(kid) or not self._may_fetch():
            return
        async with self._lock:
            if self._usable(kid) or not self._may_fetch():
                return  # fetched meanwhile, for another request
            self._fetched_at = time.monotonic()
            try:
                await self._load_keys()
            except FetchFailed as exc:
                log.warning("oauth_keys_unavailable", issuer=self.issuer, reason=str(exc))

    def _usable(self, kid: str | None) -> bool:
        return time.monotonic() - self._loaded_at < self.keys_max_age_s and self.key(kid) is not None

    def _may_fetch(self) -> bool:
        return time.monotonic() - self._fetched_at >= self.keys_refresh_min_s

    async def _load_keys(self) -> None:
        self.fetches += 1
        async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as client:
            url = self._jwks_url or (await self._meta(client)).get("jwks_uri")
            if not isinstance(url, str):
                raise FetchFailed(f"the metadata of {self.issuer} names no jwks_uri")
            document = await fetch_json(client, "GET", url)
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                continue  # a key type or curve this gateway does not verify with: skipped, as RFC 7517 allows
            keys[key.key_id] = key
        if not keys:
            raise FetchFailed(f"{url} holds no signing key the gateway can use")
        self._keys = keys
        self._loaded_at = time.monotonic()
        log.info("oauth_keys_loaded", issuer=self.issuer, keys=len(keys))

    async def _meta(self, client: httpx.AsyncClient) -> dict[str, Any]:
        """The issuer's metadata, fetched once; its `issuer` must be the configured one (RFC 8414 §3.3)."""
        if self._metadata is not None:
            return self._metadata
        problems = []
        for url in [self._discovery_url] if self._discovery_url else discovery_urls(self.issuer):
            try:
                found = await fetch_json(client, "GET", url)
            except FetchFailed as exc:
                problems.append(str(exc))
                continue
            if not isinstance(found, dict) or found.get("issuer") != self.issuer:
                problems.append(f"{url} names another issuer than {self.issuer}")
                continue
            self._metadata = found
            return found
        raise FetchFailed("; ".join(problems))

    # ---- introspection (RFC 7662) ----

    async def introspect(self, token: str) -> dict[str, Any]:
        """What the issuer says of an opaque token (`active`, claims); raises FetchFailed when it cannot say."""
        async with httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as client:
            url = self._introspection_url or (await self._meta(client)).get("introspection_endpoint")
            if not isinstance(url, str) or self.client_id is None:
                raise FetchFailed(f"{self.issuer} offers no introspection to this gateway")
            auth = httpx.BasicAuth(self.client_id, self._client_secret or "")
            answer = await fetch_json(
                client, "POST", url, data={"token": token, "token_type_hint": "access_token"}, auth=auth
            )
        if not isinstance(answer, dict) or not isinstance(answer.get("active"), bool):
            raise FetchFailed(f"{url} did not answer an introspection object")
        return answer

    def __repr__(self) -> str:
        return f"Issuer({self.issuer!r}, keys={len(self._keys)})"
