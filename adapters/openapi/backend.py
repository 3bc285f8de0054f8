"""The `openapi` backend: every operation of an OpenAPI document is a tool.

- name: petstore
  kind: openapi
  spec: https://petstore3.swagger.io/api/v3/openapi.json   # or a file, JSON or YAML
  url: https://petstore3.swagger.io/api/v3                 # optional: else the document's servers
  credentials: {api_key: {value: "${PETSTORE_KEY}"}}       # per security scheme of the document

Discovery reads the document (a URL through an upstream client of its own: bounded, retried; a file from
disk), converts Swagger 2.0, and builds one tool per operation (`operations.Builder`) off the event loop.
An operation that cannot be used is skipped and named (document, JSON pointer, problem) in a warning and
in the backend's health, which `toolplex check` prints; a document that cannot be read at all fails the
discovery with the same detail, and the backend is tried again like any upstream.

A call builds its request (`requests`), adds its credentials (`security`), goes through the backend's
`Upstream` (pool, deadline, breaker, retries of what never left, the OAuth hook), and its answer becomes
the value or the failure (`responses`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

import structlog

from adapters.openapi.document import (
    DocumentError,
    Documents,
    is_url,
    openapi_root,
    parse,
    read_file,
)
from adapters.openapi.operations import Builder, Built, Operation, server_url
from adapters.openapi.requests import build
from adapters.openapi.responses import failure_of, value_of
from adapters.openapi.security import Request, Security
from adapters.openapi.settings import OpenApiBackendSettings
from gateway.backends import BackendContext, BaseBackend, Health
from gateway.errors import ConfigError, ErrorKind, GatewayError
from gateway.model import CallContext, ToolSpec
from gateway.observability import redact_text, register_secrets
from gateway.upstream import UPSTREAMS, Credentials, Upstream, UpstreamSettings
from gateway.workspaces import key_for

log = structlog.get_logger("toolplex.openapi")

MAX_FETCH_ROUNDS = 8  # referenced documents that reference further ones: rounds of fetching, at most
ACCEPT = "application/json, application/yaml;q=0.9, text/yaml;q=0.9, */*;q=0.5"
MAX_WARNINGS_LOGGED = 50  # skipped operations logged one by one; the rest as a count


class OpenApiBackend(BaseBackend):
    """One REST API from its OpenAPI document."""

    settings: OpenApiBackendSettings

    def __init__(self, settings: OpenApiBackendSettings, context: BackendContext) -> None:
        self.settings = settings
        self.name = settings.name
        self.context = context
        register_secrets(
            [v for c in settings.credentials.values() for v in (c.value, c.password, c.token) if v]
        )  # never in a log line
        # The document's own client: no headers or credentials of the API's (it may live on another host).
        document_settings = UpstreamSettings.from_config(
            settings.model_copy(update={"url": "http://document.invalid", "headers": {}}), settings.max_document_bytes
        )
        self.documents_client = Upstream(self.name, dataclasses.replace(document_settings, url=""))
        self.upstream: Upstream | None = None
        self.credentials: Credentials | None = None
        self.security: Security | None = None
        self.base_url: str | None = None
        self.warnings: tuple[str, ...] = ()

    # ---- discovery ----

    async def discover(self) -> list[ToolSpec]:
        spec = self.settings.spec
        main = spec if is_url(spec) else _absolute(spec)
        try:
            data = await self._read(main)
            parsed = await asyncio.to_thread(parse, data, main)
            root, version = openapi_root(parsed, main)
            documents = Documents(
                main, root, remote_refs=self.settings.remote_refs, max_bytes=self.settings.max_document_bytes
            )
            security = Security(
                documents,
                dict(self.settings.credentials),
                oauth=self.settings.oauth is not None,
                forward=self.settings.forward_authorization,
            )
        except DocumentError as exc:
            raise self._unreadable(str(exc)) from None
        base = self.settings.url or self._document_server(root, main)
        undeclared = sorted(set(self.settings.credentials) - set(security.schemes))
        if undeclared:
            raise ConfigError(
                [f"backend {self.name!r}: credentials for {', '.join(undeclared)}: no such security scheme in {main}"]
            )
        builder = Builder(
            documents,
            version,
            security,
            backend=self.name,
            toolkit=self._toolkit(),
            routed_toolkit=self.settings.routed_toolkit(self._toolkit()),
            include=self.settings.include,
            exclude=self.settings.exclude,
        )
        built = await self._build(builder, documents)
        for problem in built.problems[:MAX_WARNINGS_LOGGED]:
            log.warning("openapi_operation_skipped", backend=self.name, problem=problem)
        if len(built.problems) > MAX_WARNINGS_LOGGED:
            more = len(built.problems) - MAX_WARNINGS_LOGGED
            log.warning("openapi_operations_skipped", backend=self.name, more=more)
        doubts = builder.warnings()
        for doubt in doubts:
            log.warning("openapi_credentials", backend=self.name, problem=doubt)
        self.warnings = (*built.problems, *doubts)
        await self._connect(base, security, builder)
        return built.specs

    async def _build(self, builder: Builder, documents: Documents) -> Built:
        """Build every operation off the event loop; fetch the documents their `$ref`s reach, and build those
        operations again, until nothing more is needed."""
        candidates = builder.candidates()
        built = await asyncio.to_thread(builder.build_all, candidates)
        for _ in range(MAX_FETCH_ROUNDS):
            if not built.needed:
                return built
            for url in sorted(built.needed):
                try:
                    documents.add(url, await self._read(url))
                except DocumentError as exc:
                    raise self._unreadable(str(exc)) from None
            built = await asyncio.to_thread(builder.build_all, candidates)
        built.problems += [f"{url}: still not fetched after {MAX_FETCH_ROUNDS} rounds" for url in built.needed]
        return built

    async def _read(self, where: str) -> bytes:
        if not is_url(where):
            return await asyncio.to_thread(read_file, where, self.settings.max_document_bytes)
        response = await self.documents_client.request("GET", where, idempotent=True, headers={"Accept": ACCEPT})
        if response.status_code >= 400:
            raise DocumentError(where, "", f"fetching it answered HTTP {response.status_code}")
        return response.content

    def _unreadable(self, problem: str) -> GatewayError:
        return GatewayError.of(
            ErrorKind.UPSTREAM_UNAVAILABLE,
            f"backend {self.name!r}: the OpenAPI document cannot be used: {redact_text(problem)}",
            can_retry=True,
        )

    def _document_server(self, root: dict[str, Any], main: str) -> str:
        servers = root.get("servers")
        first = servers[0] if isinstance(servers, list) and servers and isinstance(servers[0], dict) else None
        url = server_url(first, self.settings.server_variables, main) if first is not None else None
        if url is None and is_url(main) and first is None:
            url = server_url({"url": "/"}, {}, main)  # no servers: the document's own origin (the spec's default)
        if url is None:
            raise ConfigError([f"backend {self.name!r}: {main} names no absolute server URL; give the backend `url:`"])
        return url

    def _toolkit(self) -> str:
        return self.settings.toolkit or "".join(c if c.isalnum() else "_" for c in self.name)

    async def _connect(self, base: str, security: Security, builder: Builder) -> None:
        """The API's upstream client and credentials, for `base`; kept while the base stays the same."""
        self.security = security
        if base == self.base_url and self.upstream is not None:
            return
        oauth = self.settings.oauth
        if oauth is not None:
            scopes = security.scopes()
            update: dict[str, Any] = {}
            if oauth.scope is None and scopes:
                update["scope"] = " ".join(scopes)
            issuer = security.openid_issuer()
            if oauth.authorization_server is None and issuer is not None:
                update["authorization_server"] = issuer
            oauth = oauth.model_copy(update=update) if update else oauth
        settings = self.settings.model_copy(update={"url": base.rstrip("/"), "oauth": oauth})
        old = (self.upstream, self.credentials)
        self.credentials = Credentials.of(None, settings, self.context.store)
        self.upstream = Upstream(
            self.name,
            UpstreamSettings.from_config(settings, self.context.max_response_bytes),
            auth=self.credentials.auth(None),
        )
        self.base_url = base
        if old[0] is not None:
            await old[0].close()
        if old[1] is not None:
            await old[1].close()

    # ---- calls ----

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        operation: Operation = spec.binding
        upstream, credentials, security = self.upstream, self.credentials, self.security
        if upstream is None or credentials is None or security is None:
            raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, f"backend {self.name!r} is not discovered yet")
        built, body_headers, content = build(
            operation.method,
            operation.path,
            operation.params,
            operation.body,
            arguments,
            lambda path: self._workspace_file(path, context),
        )
        request = Request(built.headers, built.query, built.cookies)
        auth = security.apply(operation.plan, request, context, credentials)
        headers = request.headers
        if operation.accept is not None:
            headers.setdefault("Accept", operation.accept)
        if body_headers:
            headers.update(body_headers)
        if request.cookies:
            headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in request.cookies)
        url = built.path + ("?" + "&".join(request.query) if request.query else "")
        if operation.server is not None and self.settings.url is None:
            url = operation.server.rstrip("/") + url  # an operation's own server (absolute: not the base URL)
        response = await upstream.request(
            operation.method,
            url,
            headers=headers,
            content=content,
            deadline=context.deadline,
            **({"auth": auth} if auth is not None else {}),
        )
        if response.status_code >= 400:
            raise failure_of(
                self.name,
                response,
                forwarded=self.settings.forward_authorization,
                what=f"{spec.flat_name}: {operation.method} {built.path}",
            )
        return value_of(upstream, response, tool=spec.name, context=context, workspaces=self.context.workspaces)

    def _workspace_file(self, path: str, context: CallContext) -> bytes:
        """A file of the caller's workspace, sent as a file argument."""
        workspaces = self.context.workspaces
        if workspaces is None:
            raise GatewayError.of(ErrorKind.INVALID_ARGUMENTS, "workspace_file: this gateway has no workspaces")
        target = workspaces.resolve(key_for(context), path)
        if not target.is_file():
            message = f"{path!r} is not a file of the caller's workspace"
            raise GatewayError.of(
                ErrorKind.INVALID_ARGUMENTS, f"workspace_file: {message}", parameter_errors={"workspace_file": message}
            )
        return target.read_bytes()

    # ---- the rest of the contract ----

    async def health(self) -> Health:
        return Health(breaker=UPSTREAMS.breaker_state(self.name), warnings=self.warnings)

    async def close(self) -> None:
        await self.documents_client.close()
        if self.upstream is not None:
            await self.upstream.close()
        if self.credentials is not None:
            await self.credentials.close()


def _absolute(path: str) -> str:
    return os.path.abspath(path)
