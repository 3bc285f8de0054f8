"""Host and Origin checks: a web page must not be able to drive a gateway it can reach.

Two attacks, two checks, before any route runs:

- DNS rebinding: a page on `evil.example` re-points its own name at 127.0.0.1 and
  then talks to the gateway as a same-origin page. The browser still sends
  `Host: evil.example`, so a `Host` outside `server.allowed_hosts` gets 421
  (Misdirected Request). Default: the loopback names when the gateway is bound to
  a loopback address; any host when it is bound elsewhere (a deployment behind
  its own DNS name sets the list).
- Cross-site requests: every browser sends `Origin` on a cross-site POST. A
  request whose `Origin` is present and not in `server.allowed_origins` (default:
  none) gets 403. Agents and SDKs send no `Origin`, so they are unaffected.
  The gateway's own origin is the exception: when the `Host` check passed against
  a list (the loopback default or `server.allowed_hosts`), an `Origin` of exactly
  `http://<Host>` or `https://<Host>` (the header's value, port included) is a
  page served from the gateway's own address, and is accepted. With no list (any
  host, or `*`) nothing vouches for the Host, so that exception does not apply:
  a rebound page sends `Host: evil.example` with `Origin: http://evil.example`.

A plain ASGI middleware, so it also covers routes that read the body as a stream.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
ANY = "*"
OWN_SCHEMES = ("http", "https")  # an Origin with either scheme and the Host is the gateway's own


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, str | None]:
    """`name[:port]` (IPv6 in brackets) -> (lower-cased name, IPv6 kept in brackets; port or None)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end >= 0 else ""
        if end < 0 or (rest and not rest.startswith(":")):
            return value, None  # not a host name: matches no rule
        return value[: end + 1], rest[1:] if rest else None
    if value.count(":") > 1:  # a bare IPv6 address (in configuration)
        return f"[{value}]", None
    name, colon, port = value.partition(":")
    return (name, port) if colon else (value, None)


@dataclass(frozen=True)
class HostRule:
    """One `allowed_hosts` entry: `name` (any port), `name:port`, `*.suffix`, or `*`."""

    name: str
    port: str | None

    @classmethod
    def parse(cls, entry: str) -> HostRule:
        name, port = split_host(entry)
        return cls(name, port)

    def matches(self, name: str, port: str | None) -> bool:
        if self.name == ANY:
            return True
        if self.port is not None and self.port != port:
            return False
        if self.name.startswith("*."):
            return name.endswith(self.name[1:]) and len(name) > len(self.name) - 1
        return self.name == name


def default_hosts(bind_host: str | None) -> tuple[str, ...] | None:
    """Loopback names when bound to loopback; None (any host) when bound elsewhere or not bound."""
    if bind_host is not None and is_loopback(bind_host):
        return LOOPBACK_NAMES
    return None


class HostOriginGuard:
    """Refuses a request whose Host is not allowed (421) or whose Origin is not allowed (403)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Iterable[str] | None,
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        hosts = None if allowed_hosts is None else [HostRule.parse(h) for h in allowed_hosts]
        self.hosts: Sequence[HostRule] | None = None if hosts is None or any(h.name == ANY for h in hosts) else hosts
        origins = {_origin(o) for o in allowed_origins}
        self.any_origin = ANY in origins
        self.origins = frozenset(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message = refusal
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
            return
        await self.refuse(send, status, message)

    @staticmethod
    async def refuse(send: Send, status: int, message: str) -> None:
        """The refusal of an HTTP request, as JSON."""
        body = orjson.dumps({"detail": message, "message": message})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, message) when the request must be refused, else None."""
        host = origin = None
        for key, value in scope.get("headers") or ():
            if key == b"host":
                host = value.decode("latin-1")
            elif key == b"origin":
                origin = value.decode("latin-1")
        if host is not None and self.hosts is not None:
            name, port = split_host(host)
            if not any(rule.matches(name, port) for rule in self.hosts):
                return 421, f"Host {_shown(host)!r} is not served here; add it to server.allowed_hosts to allow it"
        if origin is not None and not self.any_origin and not self._origin_allowed(_origin(origin), host):
            return 403, f"Origin {_shown(origin)!r} may not call this gateway; add it to server.allowed_origins"
        return None

    def _origin_allowed(self, origin: str, host: str | None) -> bool:
        """Listed, or the gateway's own origin: `http(s)://<Host>` once the Host check passed against a list."""
        if origin in self.origins:
            return True
        if host is None or self.hosts is None:  # no list vouched for this Host: it may be a rebound name
            return False
        scheme, sep, authority = origin.partition("://")
        return bool(sep) and scheme in OWN_SCHEMES and authority == host.strip().lower()


def _origin(value: str) -> str:
    return value.strip().rstrip("/").lower()


def _shown(value: str, limit: int = 100) -> str:
    return value if len(value) <= limit else value[:limit] + "..."
