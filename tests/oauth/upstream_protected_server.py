"""An MCP server that requires OAuth tokens, written with the `mcp` SDK: the upstream of the gateway's OAuth tests.

    python -m tests.oauth.upstream_protected_server --port P --issuer http://127.0.0.1:AS [--write-scope mcp:write]

`MCPServer` with `AuthSettings` (resource server only) and a `TokenVerifier` that checks each bearer token as
a real resource server does: a JWT signed by the issuer's current key (its JWKS), `iss` the issuer, `aud`
this server's resource (http://127.0.0.1:P/mcp), not expired. The SDK answers a missing or refused token
with 401 and `WWW-Authenticate: Bearer ... resource_metadata=...`, and serves the RFC 9728 metadata at
/.well-known/oauth-protected-resource/mcp.

Besides, for the tests:

- `tools/call` of `write_note` needs the scope given by `--write-scope`: a token without it is answered
  403 `insufficient_scope` with that scope in the challenge (step-up), before the SDK sees the request.
- POST /_test/reject refuses every token seen so far from now on (as if revoked): the next request with one
  is answered 401.
- GET /_test/seen lists the SHA-256 of every bearer token that reached the server (never the tokens).
- tool `whoami` answers the token's `sub`, `scope` and `client_id`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import warnings
from typing import Any, Final

import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from starlette.types import ASGIApp, Receive, Scope, Send

WRITE_TOOL: Final = "write_note"


class JwksVerifier:
    """Tokens of one issuer for one resource, checked against the issuer's published keys."""

    def __init__(self, issuer: str, resource: str) -> None:
        self.issuer = issuer
        self.resource = resource
        self.jwks = jwt.PyJWKClient(f"{issuer}/jwks", cache_keys=False)
        self.seen: dict[str, str] = {}  # sha256 -> jti, of every token presented
        self.rejected: set[str] = set()

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        self.seen.setdefault(digest, "")
        if digest in self.rejected:
            return None
        try:
            key = await asyncio.to_thread(self.jwks.get_signing_key_from_jwt, token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["RS256", "ES256", "EdDSA"],
                issuer=self.issuer,
                audience=self.resource,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, ValueError):
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=self.resource,
            subject=claims.get("sub"),
            claims=claims,
        )


class StepUp:
    """403 `insufficient_scope` for a `tools/call` of the write tool by a token without the write scope."""

    def __init__(self, app: ASGIApp, verifier: JwksVerifier, scope: str, metadata_url: str) -> None:
        self.app = app
        self.verifier = verifier
        self.scope = scope
        self.metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        if path == "/_test/seen" and method == "GET":
            await _json(send, 200, sorted(self.verifier.seen))
            return
        if path == "/_test/reject" and method == "POST":
            self.verifier.rejected.update(self.verifier.seen)
            await _json(send, 200, {"rejected": len(self.verifier.rejected)})
            return
        if path != "/mcp" or method != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if self._needs_step_up(scope, body):
            challenge = (
                f'Bearer error="insufficient_scope", scope="{self.scope}", '
                f'resource_metadata="{self.metadata_url}", error_description="{WRITE_TOOL} needs {self.scope}"'
            )
            await _json(send, 403, {"error": "insufficient_scope"}, [(b"www-authenticate", challenge.encode())])
            return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _needs_step_up(self, scope: Scope, body: bytes) -> bool:
        try:
            message = json.loads(body)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        if (message.get("params") or {}).get("name") != WRITE_TOOL:
            return False
        headers = dict(scope["headers"])
        scheme, _, token = headers.get(b"authorization", b"").decode().partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False  # the SDK answers 401
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return False
        return self.scope not in str(claims.get("scope", "")).split()


async def _json(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    content = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": content})


def app(port: int, issuer: str, write_scope: str) -> ASGIApp:
    resource = f"http://127.0.0.1:{port}/mcp"
    verifier = JwksVerifier(issuer, resource)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        auth = AuthSettings(
            issuer_url=issuer,  # type: ignore[arg-type]
            resource_server_url=resource,  # type: ignore[arg-type]
            validate_token_resource=False,  # the verifier checks the audience itself
        )
    server: MCPServer[Any] = MCPServer("toolplex-oauth-upstream", token_verifier=verifier, auth=auth)

    @server.tool()
    def whoami() -> dict[str, Any]:
        """Who the bearer token says the caller is."""
        token = get_access_token()
        claims = (token.claims or {}) if token is not None else {}
        return {"sub": claims.get("sub"), "scope": claims.get("scope"), "client_id": claims.get("client_id")}

    @server.tool(name=WRITE_TOOL)
    def write_note(text: str) -> str:
        """Needs the write scope (a token without it is answered 403 insufficient_scope)."""
        return f"noted: {text}"

    metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
    return StepUp(server.streamable_http_app(host="127.0.0.1"), verifier, write_scope, metadata_url)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer", required=True, help="the authorization server's issuer URL")
    parser.add_argument("--write-scope", default="mcp:write")
    args = parser.parse_args(argv)
    config = uvicorn.Config(
        app(args.port, args.issuer.rstrip("/"), args.write_scope),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        http="h11",
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
