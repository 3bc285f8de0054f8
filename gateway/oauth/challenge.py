"""The gateway's face as an OAuth protected resource: its metadata (RFC 9728) and its challenges (RFC 6750).

One ASGI layer in front of every front, when `auth.oauth` is configured (so no front can forget it):

- before the request: the I/O its bearer token may need (`Authenticator.prepare`), so the one synchronous
  `authenticate` decides with the keys or the introspection answer at hand;
- on the answer: every `401` carries `WWW-Authenticate: Bearer resource_metadata="…", scope="…"` (with
  `error="invalid_token"` when a token was sent), which is how an MCP client discovers where to get a token;
  a request refused only because its token lacks a scope that would allow it (`note_insufficient_scope`,
  said by the pipeline's permission check) is answered `403` with `error="insufficient_scope"` and the scopes
  needed, the body still the front's own refusal.

`metadata_routes` serves `/.well-known/oauth-protected-resource` and its path-inserted forms (`…/mcp`,
`…/mcp/<name>`, any path): one resource, the gateway, whatever front is asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.auth import bearer_token
from gateway.http import json_response
from gateway.oauth.resource import Published
from gateway.oauth.scopes import STATE_KEY, RequestAuth, listening

if TYPE_CHECKING:
    from gateway.auth import Authenticator

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def metadata_url(resource: str, path: str = "") -> str:
    """Where a client finds the metadata of `resource`, path-inserted for `path` (RFC 9728 §3.1)."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}{path.rstrip('/')}"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class OAuthChallenges:
    """The ASGI layer of the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticator: Callable[[], Authenticator],
        published: Published,
        mcp_paths: tuple[str, ...] = (),
    ) -> None:
        """`authenticator` gives the current one (the snapshot's, swapped with this app on a reload)."""
        self.app = app
        self.authenticator = authenticator
        self.published = published
        self.mcp_paths = mcp_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        await self.authenticator().prepare(headers)
        sent_token = bearer_token(headers) is not None
        said = RequestAuth()
        scope.setdefault("state", {})[STATE_KEY] = said  # for a front that answers from another task (MCP's SDK)
        path: str = scope.get("path", "")

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = self._challenged(message, said, sent_token, path)
            await send(message)

        with listening(said):
            await self.app(scope, receive, answer)

    def _challenged(self, message: Message, said: RequestAuth, sent_token: bool, path: str) -> Message:
        status = message["status"]
        if status == 401:
            parts = [f"resource_metadata={_quoted(self._metadata_url(path))}"]
            if self.published.scopes:
                parts.append(f"scope={_quoted(' '.join(self.published.scopes))}")
            if sent_token:
                parts.insert(0, 'error="invalid_token"')
            return self._with_challenge(message, status, parts)
        refused = status < 300 or 400 <= status < 500  # the front's own refusal (in a 200 for some protocols)
        if said.scopes_needed and not said.allowed and refused:
            parts = [
                'error="insufficient_scope"',
                f"scope={_quoted(' '.join(said.scopes_needed))}",
                f"resource_metadata={_quoted(self._metadata_url(path))}",
            ]
            return self._with_challenge(message, 403, parts)
        return message

    def _metadata_url(self, path: str) -> str:
        """Path-inserted for the MCP endpoints (where MCP clients look first), the root form for other fronts."""
        inserted = any(path == base or path.startswith(f"{base}/") for base in self.mcp_paths)
        return metadata_url(self.published.resource, path if inserted else "")

    @staticmethod
    def _with_challenge(message: Message, status: int, parts: list[str]) -> Message:
        started: dict[str, Any] = {**message, "status": status}
        headers = MutableHeaders(raw=list(message.get("headers", [])))
        headers["WWW-Authenticate"] = "Bearer " + ", ".join(parts)
        started["headers"] = headers.raw
        return started


def metadata_routes(published: Published) -> list[BaseRoute]:
    """The protected resource metadata (RFC 9728), at the root and at every path-inserted form."""
    document: dict[str, Any] = {
        "resource": published.resource,
        "authorization_servers": list(published.authorization_servers),
        "bearer_methods_supported": ["header"],
        "resource_signing_alg_values_supported": list(published.algorithms),
    }
    if published.scopes:
        document["scopes_supported"] = list(published.scopes)

    async def metadata(_request: Request) -> Response:
        return json_response(document, headers={"Cache-Control": "max-age=300"})

    return [
        Route(WELL_KNOWN, metadata, methods=["GET"]),
        Route(WELL_KNOWN + "/{rest:path}", metadata, methods=["GET"]),
    ]
