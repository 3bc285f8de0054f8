"""The console's routes: the page, its versioned assets, and the JSON API the page reads (`docs/console.md`).

Auth is the fronts' own (`FrontServices.authenticate`: API keys, JWTs, OAuth access tokens), sent by the page
as `Authorization: Bearer`; no cookie is ever set, and every POST must carry `X-Toolplex-Console: 1` and a JSON
body, which a cross-site form cannot send: CSRF-safe by construction. An `auth.admins` principal (or anyone
when auth is off: the local operator) sees everything; others see their own calls, failures and sessions, and
what is another's or admin-only answers exactly as an unknown path does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.console.settings import ConsoleFrontSettings
from gateway.console.status import read_statuses
from gateway.console.traffic import read_failures, read_traffic
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.http import json_response, parse_json, read_body
from gateway.model import Call, CallContext, Principal, ToolSpec, principal_name
from gateway.pinning import PinError, describe_change, pin_id
from gateway.services import FrontServices

STATIC = Path(__file__).parent / "static"
FRONT = "console"
MAX_SEARCH = 100
CSRF_HEADER = "x-toolplex-console"
STATUS_OF = {
    ErrorKind.MALFORMED: 400,
    ErrorKind.TOO_LARGE: 413,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.INVALID_ARGUMENTS: 400,
    ErrorKind.UNAUTHENTICATED: 401,
    ErrorKind.FORBIDDEN: 403,
    ErrorKind.UPSTREAM_UNAVAILABLE: 503,
    ErrorKind.RATE_LIMITED: 429,
}
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".html": "text/html; charset=utf-8",
}
# The page's own: scripts and styles from the gateway only, nothing framed, no request to another origin.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@cache
def assets() -> tuple[str, dict[str, bytes]]:
    """The static files and their joint digest: asset URLs change whenever any file does (cached for good)."""
    files = {path.name: path.read_bytes() for path in sorted(STATIC.iterdir()) if path.is_file()}
    digest = hashlib.sha256()
    for name, body in files.items():
        digest.update(name.encode() + b"\0" + body + b"\0")
    return digest.hexdigest()[:16], files


def error(kind: ErrorKind | str, message: str, status: int) -> Response:
    return json_response({"error": {"kind": str(kind), "message": message}}, status=status)


def failure_response(failure: Failure) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if failure.kind is ErrorKind.UNAUTHENTICATED else None
    response = error(failure.kind.value, failure.message, STATUS_OF.get(failure.kind, 500))
    if headers:
        response.headers.update(headers)
    return response


def not_found() -> Response:
    """What an unknown path answers (`gateway.edge`): admin-only routes answer others exactly so."""
    return json_response({"detail": "Not Found"}, status=404)


ADMIN_FIELDS = frozenset({"url"})  # a replica's own address: for admins, as the configuration's reload messages


def replica_view(status: dict[str, Any], fields: tuple[str, ...], admin: bool) -> dict[str, Any]:
    """A replica's status as the viewer may see it: without its address, and its configuration summed up
    (`config_summary`), for a non-admin."""
    if admin:
        return {k: status.get(k) for k in fields}
    shown = {k: status.get(k) for k in fields if k not in ADMIN_FIELDS}
    if "config" in shown:
        shown["config"] = config_summary(shown["config"])
    return shown


def config_summary(config: Any) -> dict[str, Any] | None:
    """A replica's configuration as a non-admin sees it: which generation, since when, how many reloads were
    applied or refused; not the reloads' messages (they quote the configuration)."""
    if not isinstance(config, dict):
        return None
    reloads = [r for r in config.get("reloads") or () if isinstance(r, dict)]
    return {
        "generation": config.get("generation"),
        "loaded_at": config.get("loaded_at"),
        "applied": sum(1 for r in reloads if r.get("ok")),
        "refused": sum(1 for r in reloads if not r.get("ok")),
    }


class Viewer:
    """Who looks: the principal (None with auth off) and whether it sees everything."""

    def __init__(self, principal: Principal | None, auth: bool) -> None:
        self.principal = principal
        self.admin = not auth or (principal is not None and principal.admin)

    @property
    def own(self) -> str | None:
        """Whose rows to show: None for an admin (all), else the principal's own name."""
        return None if self.admin else principal_name(self.principal)


Handler = Callable[[Request, Viewer], Awaitable[Response]]


def routes(services: FrontServices, settings: ConsoleFrontSettings) -> list[BaseRoute]:
    base = settings.path.rstrip("/")
    api = f"{base}/api"

    def guarded(handler: Handler, *, post: bool = False) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if post:
                if request.headers.get(CSRF_HEADER) != "1":
                    return error(ErrorKind.FORBIDDEN, f"A console request sends the header {CSRF_HEADER}: 1", 403)
                media = request.headers.get("content-type", "").split(";")[0].strip().lower()
                if media != "application/json":
                    return error(ErrorKind.MALFORMED, "The body is JSON (Content-Type: application/json)", 415)
            try:
                viewer = Viewer(services.authenticate(request.headers), services.auth_enabled)
                return await handler(request, viewer)
            except GatewayError as exc:
                return failure_response(exc.failure)

        return endpoint

    async def page(request: Request) -> Response:
        digest, files = assets()
        html = files["index.html"].decode()
        html = html.replace("{{ASSET_BASE}}", f"{base}/assets/{digest}").replace("{{VERSION}}", services.version)
        html = html.replace("{{API_BASE}}", api)
        return Response(html, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    async def asset(request: Request) -> Response:
        digest, files = assets()
        name = request.path_params["name"]
        body = files.get(name)
        if request.path_params["digest"] != digest or body is None or name == "index.html":
            return not_found()
        return Response(
            body,
            media_type=CONTENT_TYPES.get(Path(name).suffix, "application/octet-stream"),
            headers={"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"},
        )

    # ---- the API ----

    async def me(request: Request, viewer: Viewer) -> Response:
        return json_response(
            {
                "principal": None if viewer.principal is None else viewer.principal.name,
                "admin": viewer.admin,
                "auth": services.auth_enabled,
                "version": services.version,
                "replica": services.replicas.id,
                "fronts": sorted(services.presenters()),
            }
        )

    def summaries(specs: list[ToolSpec]) -> list[dict[str, Any]]:
        """The tools as the catalog lists them; the fronts' presenters and the backends' kinds found once."""
        presenters = services.presenters()
        kinds = {name: services.backend_kind(name) for name in {spec.backend for spec in specs}}
        return [
            {
                "id": f"{spec.flat_name}@{spec.version}",
                "name": spec.flat_name,
                "qualified_name": spec.qualified_name,
                "toolkit": spec.toolkit,
                "version": spec.version,
                "backend": spec.backend,
                "origin": kinds[spec.backend],
                "description": spec.description,
                "quarantined": spec.quarantine is not None,
                "names": {front: presenter.name_of(spec) for front, presenter in presenters.items()},
            }
            for spec in specs
        ]

    def tool_of(request: Request, viewer: Viewer) -> ToolSpec:
        """The tool named in the path, as this viewer may see it; else NOT_FOUND, as for a tool that is not."""
        name, _, version = unquote(request.path_params["tool"]).partition("@")
        spec = services.callable_tool(name, viewer.principal, version or None)
        if spec is None or (spec.quarantine is not None and not viewer.admin):
            raise GatewayError.of(ErrorKind.NOT_FOUND, f"No tool {name}{'@' + version if version else ''}")
        return spec

    async def tools(request: Request, viewer: Viewer) -> Response:
        query = request.query_params.get("q", "").strip()
        if query:
            try:
                limit = max(1, min(MAX_SEARCH, int(request.query_params.get("limit", "25"))))
            except ValueError:
                return error(ErrorKind.MALFORMED, "limit is a whole number", 400)
            found = await services.search(query, limit, viewer.principal)
        else:
            found = services.tools(viewer.principal)
        listed = summaries(list(found))
        return json_response({"tools": listed, "total": len(listed), "query": query or None})

    async def tool(request: Request, viewer: Viewer) -> Response:
        spec = tool_of(request, viewer)
        (body,) = summaries([spec])
        body.update(
            input_schema=spec.input_schema,
            output_schema=spec.output_schema,
            tags=list(spec.tags),
            side_effects=spec.side_effects,
            versions=services.versions_of(spec.flat_name),
            pin=await pin_of(spec) if viewer.admin else None,
        )
        return json_response(body)

    async def pin_of(spec: ToolSpec) -> dict[str, Any] | None:
        try:
            return await pin_detail(pin_id(spec))
        except PinError:
            return None

    async def pin_detail(pin: str) -> dict[str, Any]:
        pins = services.pins
        view = (await pins.get(pin)).to_dict()
        approved, pending = await pins.definitions(pin)
        view["approved_definition"] = approved
        view["pending_definition"] = pending
        view["changed"], view["diff"] = (
            describe_change(
                (view["approved"] or {}).get("hash"),
                approved,
                pending,
                old_name=f"{pin} (approved)",
                new_name=f"{pin} (discovered)",
            )
            if pending is not None
            else ([], "")
        )
        return view

    async def call(request: Request, viewer: Viewer) -> Response:
        spec = tool_of(request, viewer)
        document = parse_json(await read_body(request, services.limits.max_body_bytes), services.limits.max_json_depth)
        arguments = document.get("arguments", {}) if isinstance(document, dict) else None
        if not isinstance(arguments, dict):
            return error(ErrorKind.MALFORMED, 'The body is {"arguments": {...}}: an object of arguments', 400)
        context = CallContext(
            front=FRONT,
            principal=viewer.principal,
            trace_id=None,
        )
        outcome = await services.call(
            Call(tool=spec.flat_name, arguments=arguments, version=spec.version, context=context)
        )
        body: dict[str, Any] = {
            "ok": outcome.ok,
            "call_id": outcome.call_id,
            "trace_id": context.trace_id or outcome.call_id,
            "duration_ms": outcome.duration_ms,
        }
        if outcome.error is None:
            body["value"] = outcome.value
        else:
            body["error"] = {"kind": outcome.error.kind.value, "message": outcome.error.message}
        body["answers"] = {
            front: asdict(presenter.answer(spec, outcome, arguments))
            for front, presenter in services.presenters().items()
        }
        return json_response(body)

    async def backends(request: Request, viewer: Viewer) -> Response:
        await services.publish_traffic()
        statuses = await read_statuses(services.store, await services.replica_status())
        window = settings.traffic_window_minutes
        traffic = await read_traffic(services.store, viewer.own, window)
        stats = {
            s["key"]: {k: s[k] for k in ("calls", "errors", "error_rate", "p50_ms", "p99_ms")}
            for s in traffic["series"]["backend"]
        }
        seen = None if viewer.admin else {spec.backend for spec in services.tools(viewer.principal)}
        if seen is not None:  # a non-admin sees the backends of the tools it may call, nothing of the others
            stats = {name: figures for name, figures in stats.items() if name in seen}
        replicas = []
        for status in statuses:
            shown = replica_view(status, ("id", "url", "self", "leaving", "reported_at"), viewer.admin)
            here = traffic["by_replica"].get(status["id"], {})
            shown["backends"] = [
                {**b, "stats": here.get(b.get("name"))}
                for b in status.get("backends") or ()
                if seen is None or b.get("name") in seen
            ]
            replicas.append(shown)
        return json_response({"replicas": replicas, "stats": stats, "window_minutes": window})

    async def traffic(request: Request, viewer: Viewer) -> Response:
        try:
            minutes = int(request.query_params.get("minutes", "60"))
        except ValueError:
            return error(ErrorKind.MALFORMED, "minutes is a whole number", 400)
        await services.publish_traffic()
        body = await read_traffic(services.store, viewer.own, minutes)
        body["failures"] = await read_failures(services.store, viewer.own)
        statuses = await read_statuses(services.store, await services.replica_status())
        by_front: dict[str, int] = {}
        by_replica: dict[str, int] = {}
        for status in statuses:
            flights = status.get("in_flight") or {}
            by_replica[status["id"]] = int(flights.get("total", 0))
            for front, count in (flights.get("by_front") or {}).items():
                by_front[front] = by_front.get(front, 0) + int(count)
        # calls in flight are not told apart by principal: a non-admin sees the totals, never whose they are
        body["in_flight"] = {"total": sum(by_replica.values()), "by_front": by_front, "by_replica": by_replica}
        return json_response(body)

    async def state(request: Request, viewer: Viewer) -> Response:
        own = await services.replica_status()
        statuses = await read_statuses(services.store, own)
        sessions = await services.session_counts()
        if not viewer.admin:
            mine = viewer.own
            sessions = [row for row in sessions if row["principal"] == mine]
        leases = await services.replicas.leases()
        replicas = [
            {
                **replica_view(s, ("id", "url", "leaving", "started", "self", "config"), viewer.admin),
                "lease": leases.get(s["id"]),
            }
            for s in statuses
        ]
        config = own["config"] if viewer.admin else config_summary(own["config"])
        return json_response({"sessions": sessions, "replicas": replicas, "config": config})

    def admin_only(handler: Handler) -> Handler:
        async def checked(request: Request, viewer: Viewer) -> Response:
            if not viewer.admin:
                return not_found()
            try:
                return await handler(request, viewer)
            except PinError as exc:
                return error(ErrorKind.NOT_FOUND, str(exc), 404)

        return checked

    async def pins(request: Request, viewer: Viewer) -> Response:
        return json_response({"pins": [view.to_dict() for view in await services.pins.list()]})

    async def pin(request: Request, viewer: Viewer) -> Response:
        name = await services.pins.resolve(unquote(request.path_params["pin"]))
        return json_response(await pin_detail(name))

    def decide(approve: bool) -> Handler:
        async def decided(request: Request, viewer: Viewer) -> Response:
            admin = services.pins
            name = await admin.resolve(unquote(request.path_params["pin"]))
            by = principal_name(viewer.principal) or "console"
            if approve:
                await admin.approve(name, by=by)
            else:
                await admin.reject(name, by=by)
            return json_response({"pin": await pin_detail(name)})

        return decided

    return [
        Route(base, page, methods=["GET"]),
        Route(f"{base}/", page, methods=["GET"]),
        Route(f"{base}/assets/{{digest}}/{{name}}", asset, methods=["GET"]),
        Route(f"{api}/me", guarded(me), methods=["GET"]),
        Route(f"{api}/tools", guarded(tools), methods=["GET"]),
        Route(f"{api}/tools/{{tool}}", guarded(tool), methods=["GET"]),
        Route(f"{api}/tools/{{tool}}/call", guarded(call, post=True), methods=["POST"]),
        Route(f"{api}/backends", guarded(backends), methods=["GET"]),
        Route(f"{api}/traffic", guarded(traffic), methods=["GET"]),
        Route(f"{api}/state", guarded(state), methods=["GET"]),
        Route(f"{api}/pins", guarded(admin_only(pins)), methods=["GET"]),
        Route(f"{api}/pins/{{pin:path}}/approve", guarded(admin_only(decide(True)), post=True), methods=["POST"]),
        Route(f"{api}/pins/{{pin:path}}/reject", guarded(admin_only(decide(False)), post=True), methods=["POST"]),
        Route(f"{api}/pins/{{pin:path}}", guarded(admin_only(pin)), methods=["GET"]),
    ]
