"""A real OAuth 2.1 / OpenID authorization server on a free loopback port, for the OAuth tests.

tests/oauth/auth_server/server.mjs (npm oauth2-mock-server, pinned, installed into .tools/oauth/ by
tests/oauth/install_auth_server.sh, which `make test` runs) on Node from PATH. `AuthServer` starts it,
waits for its ready line (bounded), and offers its endpoints and its test control API (/_test/: mint
JWTs with any claims, opaque tokens, key rotation, request counts). Every request stays on 127.0.0.1.

    with AuthServer(tmp_path, clients=[{"client_id": "gw", "client_secret": "s", "scopes": ["tools:call"]}]) as a:
        token = a.mint({"sub": "alice", "aud": "http://127.0.0.1:8080/mcp", "scope": "tools:call"})
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import httpx

from tests.support import ROOT, free_port, stop

SERVER = ROOT / "tests" / "oauth" / "auth_server" / "server.mjs"
PREFIX = ROOT / ".tools" / "oauth"  # where install_auth_server.sh puts the npm packages
ALGS = ("RS256", "ES256", "EdDSA")
START_TIMEOUT_S = 20.0

# One confidential client unless a test names its own: {client_id, client_secret (absent: a public client),
# scopes (absent: any scope), redirect_uris (absent: any), grant_types (absent: every grant)}.
DEFAULT_CLIENTS: tuple[dict[str, Any], ...] = (
    {
        "client_id": "toolplex-gateway",
        "client_secret": "toolplex-gateway-secret",
        "scopes": ["tools:read", "tools:call"],
    },
)


def node_binary() -> str | None:
    return shutil.which("node")


def missing_reason() -> str | None:
    """Why the server cannot start here (no node, packages not installed), or None."""
    if node_binary() is None:
        return "node is not on PATH: the OAuth authorization server needs Node.js 20.19+"
    if not (PREFIX / "node_modules" / "oauth2-mock-server" / "package.json").is_file():
        return (
            "oauth2-mock-server is not installed in .tools/oauth: "
            "run tests/oauth/install_auth_server.sh (make test does)"
        )
    return None


class AuthServer:
    """The authorization server as a context manager; `start()` / `close()` for explicit use."""

    def __init__(
        self,
        workdir: Path,
        clients: Iterable[Mapping[str, Any]] | None = None,
        alg: str = "RS256",
        algs: Sequence[str] = ALGS,
        access_token_ttl: int = 3600,
        subject: str = "johndoe",
        introspection_auth: bool = True,
        start_timeout: float = START_TIMEOUT_S,
    ) -> None:
        self.workdir = Path(workdir)
        self.clients = [dict(c) for c in (DEFAULT_CLIENTS if clients is None else clients)]
        self.alg = alg
        self.config = {
            "clients": self.clients,
            "alg": alg,
            "algs": list(algs),
            "access_token_ttl": access_token_ttl,
            "subject": subject,
            "introspection_auth": introspection_auth,
        }
        self.start_timeout = start_timeout
        self.port = 0
        self.issuer = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._http: httpx.Client | None = None

    # ---- lifecycle
    def __enter__(self) -> AuthServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> AuthServer:
        reason = missing_reason()
        if reason:
            raise RuntimeError(reason)
        self.workdir.mkdir(parents=True, exist_ok=True)
        config_path = self.workdir / "auth-server.json"
        config_path.write_text(json.dumps(self.config))
        for attempt in range(3):  # the free port can be taken between free_port() and the bind
            try:
                self._spawn(config_path)
                break
            except RuntimeError as exc:
                if "EADDRINUSE" not in str(exc) or attempt == 2:
                    raise
        self._http = httpx.Client(base_url=self.issuer, timeout=10.0, trust_env=False)
        return self

    def _spawn(self, config_path: Path) -> None:
        self.port = free_port()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        command = [
            node_binary() or "node",
            str(SERVER),
            "--port",
            str(self.port),
            "--config",
            str(config_path),
            "--prefix",
            str(PREFIX),
            "--parent-pid",
            str(os.getpid()),
        ]
        self._process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,  # its own process group, ended whole in close()
        )
        try:
            ready = self._ready_line()
        except Exception as exc:
            log = self._log_text()
            self.close()
            raise RuntimeError(f"the OAuth authorization server did not start: {exc}\n{log}") from None
        except BaseException:
            self.close()
            raise
        self.issuer = ready["issuer"]

    def _ready_line(self) -> dict[str, Any]:
        """The first stdout line, {"ready": true, ...}, read within the start timeout (no sleeping)."""
        assert self._process is not None and self._process.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no ready line within {self.start_timeout} s")
                if not selector.select(timeout=remaining):
                    continue
                chunk = os.read(self._process.stdout.fileno(), 4096)
                if not chunk:
                    raise RuntimeError(f"exited with {self._process.wait(timeout=5)} before it was ready")
                buffer += chunk
        line = json.loads(buffer.split(b"\n", 1)[0])
        if not line.get("ready"):
            raise RuntimeError(f"unexpected first line {line!r}")
        return dict(line)

    def _log_text(self) -> str:
        if self._log is None or self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-4000:]

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)  # the leader is not reaped yet: the group is still ours
            stop(process)
            if process.stdout is not None:
                process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    # ---- endpoints
    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def introspection_endpoint(self) -> str:
        return f"{self.issuer}/introspect"

    @property
    def authorization_endpoint(self) -> str:
        return f"{self.issuer}/authorize"

    @property
    def revocation_endpoint(self) -> str:
        return f"{self.issuer}/revoke"

    @property
    def registration_endpoint(self) -> str:
        return f"{self.issuer}/register"

    @property
    def userinfo_endpoint(self) -> str:
        return f"{self.issuer}/userinfo"

    @property
    def http(self) -> httpx.Client:
        """An httpx client on the issuer (no proxies from the environment)."""
        if self._http is None:
            raise RuntimeError("the authorization server is not running")
        return self._http

    # ---- the OAuth side (these requests count in stats())
    def metadata(self, well_known: str = "oauth-authorization-server") -> dict[str, Any]:
        """/.well-known/<well_known>: "oauth-authorization-server" (RFC 8414) or "openid-configuration"."""
        return self._json(self.http.get(f"/.well-known/{well_known}"))

    def jwks(self) -> dict[str, Any]:
        return self._json(self.http.get("/jwks"))

    def token_request(
        self,
        data: Mapping[str, Any],
        client_id: str | None = None,
        client_secret: str | None = None,
        auth: str = "basic",
    ) -> httpx.Response:
        """POST /token with `data`; the client authenticates by `auth`: "basic", "post" or "none" (client_id only)."""
        form = dict(data)
        basic = None
        if client_id is not None:
            if auth == "basic":
                basic = httpx.BasicAuth(client_id, client_secret or "")
            elif auth == "post":
                form.update(client_id=client_id, client_secret=client_secret or "")
            elif auth == "none":
                form["client_id"] = client_id
            else:
                raise ValueError(f"auth is basic, post or none, not {auth!r}")
        return self.http.post("/token", data=form, auth=basic)

    def client_credentials(
        self,
        client_id: str,
        client_secret: str,
        scope: str | None = None,
        resource: str | Sequence[str] | None = None,
        auth: Literal["basic", "post"] = "basic",
    ) -> dict[str, Any]:
        """A client_credentials grant; the token response, or httpx.HTTPStatusError (e.g. 401 invalid_client)."""
        data: dict[str, Any] = {"grant_type": "client_credentials"}
        if scope is not None:
            data["scope"] = scope
        if resource is not None:
            data["resource"] = [resource] if isinstance(resource, str) else list(resource)
        return self._json(self.token_request(data, client_id, client_secret, auth))

    def introspect(self, token: str, client_id: str | None = None, client_secret: str | None = None) -> dict[str, Any]:
        """RFC 7662 introspection, authenticated as `client_id` (default: the first confidential client)."""
        if client_id is None:
            client = next(c for c in self.clients if c.get("client_secret"))
            client_id, client_secret = client["client_id"], client["client_secret"]
        response = self.http.post(
            "/introspect", data={"token": token}, auth=httpx.BasicAuth(client_id, client_secret or "")
        )
        return self._json(response)

    # ---- the test control API (not counted in stats())
    def mint(
        self,
        claims: Mapping[str, Any] | None = None,
        alg: str | None = None,
        expires_in: int = 3600,
        kid: str | None = None,
        header: Mapping[str, Any] | None = None,
    ) -> str:
        """A JWT signed by the current key of `alg` (default: the server's), or by the key `kid`.

        Defaults iss=issuer, iat=now, nbf=now-10, exp=now+expires_in (negative: already expired); `claims`
        override them, a None claim removes one. `header` adds or overrides header fields (e.g. a kid the
        JWKS lacks) without changing the signing key. /introspect knows the token.
        """
        body: dict[str, Any] = {"claims": dict(claims or {}), "expires_in": expires_in}
        if alg is not None:
            body["alg"] = alg
        if kid is not None:
            body["kid"] = kid
        if header is not None:
            body["header"] = dict(header)
        return str(self._json(self.http.post("/_test/token", json=body))["access_token"])

    def opaque(self, claims: Mapping[str, Any] | None = None, expires_in: int = 3600) -> str:
        """An opaque (non-JWT) access token that only /introspect can read; claims as for mint()."""
        body = {"claims": dict(claims or {}), "expires_in": expires_in}
        return str(self._json(self.http.post("/_test/opaque", json=body))["access_token"])

    def rotate(self, alg: str | None = None) -> tuple[str, str]:
        """A new key for `alg` (default: the server's), published and signing from now on; the old one leaves
        the JWKS. Returns (old kid, new kid)."""
        answer = self._json(self.http.post("/_test/rotate", json={"alg": alg or self.alg}))
        return str(answer["kid_old"]), str(answer["kid_new"])

    def stats(self) -> dict[str, int]:
        """Requests so far per endpoint: discovery (both documents; also openid_configuration and
        oauth_authorization_server apart), jwks, authorize, token, introspect, revoke, userinfo, register,
        endsession, other."""
        return {k: int(v) for k, v in self._json(self.http.get("/_test/stats")).items()}

    def reset_stats(self) -> None:
        self._json(self.http.post("/_test/stats/reset", json={}))

    @staticmethod
    def _json(response: httpx.Response) -> dict[str, Any]:
        response.raise_for_status()
        return dict(response.json())


@contextlib.contextmanager
def started_auth_server(
    tmp_path: Path,
    clients: Iterable[Mapping[str, Any]] | None = None,
    alg: str = "RS256",
    **options: Any,
) -> Iterator[AuthServer]:
    """`AuthServer(tmp_path, clients, alg, **options)`, started; stopped on exit."""
    with AuthServer(tmp_path, clients=clients, alg=alg, **options) as server:
        yield server
