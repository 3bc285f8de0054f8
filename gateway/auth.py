"""Who is calling: API keys now; other methods (JWT) plug in as `AuthMethod`s."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any, Protocol

from gateway.errors import ErrorKind, GatewayError
from gateway.model import Principal


class AuthMethod(Protocol):
    def authenticate(self, token: str) -> Principal | None:
        """The principal this token proves, or None when the token is not of this method."""
        ...


class ApiKeys:
    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self._entries = [
            (
                entry["key"].encode(),
                Principal(
                    name=entry.get("name") or f"key-{index + 1}",
                    tools=tuple(entry["tools"]) if entry.get("tools") is not None else None,
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


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """`Authorization: Bearer X`, a bare `Authorization: X` (OpenTool TS SDK), or `X-API-Key: X`."""
    value = headers.get("authorization")
    if value:
        scheme, _, rest = value.strip().partition(" ")
        return rest.strip() if scheme.lower() == "bearer" and rest else value.strip()
    return headers.get("x-api-key") or None


class Authenticator:
    def __init__(self, methods: list[AuthMethod]) -> None:
        self.methods = methods

    @property
    def enabled(self) -> bool:
        return bool(self.methods)

    def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """None when authentication is off; raises an UNAUTHENTICATED error when it fails."""
        if not self.methods:
            return None
        token = bearer_token(headers)
        if not token:
            raise GatewayError.of(ErrorKind.UNAUTHENTICATED, "Missing credentials: send Authorization: Bearer <key>")
        for method in self.methods:
            principal = method.authenticate(token)
            if principal is not None:
                return principal
        raise GatewayError.of(ErrorKind.UNAUTHENTICATED, "Invalid credentials")


def build_authenticator(auth: Mapping[str, Any]) -> Authenticator:
    methods: list[AuthMethod] = []
    if auth.get("api_keys"):
        methods.append(ApiKeys(auth["api_keys"]))
    return Authenticator(methods)
