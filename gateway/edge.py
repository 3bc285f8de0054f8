"""The one ASGI layer in front of the routes: guard, trace context, error handling, access log.

Before this, a request went through uvicorn's proxy headers, the trace-context middleware,
Starlette's error and exception middleware, the Host/Origin guard and Starlette's router,
each a layer of its own with its own wrappers per request. `Edge` does all of it in one
call, then hands a fixed-path route its endpoint directly (`gateway.router.IndexedRouter.fast`):

- the Host/Origin guard (`gateway.guard.HostOriginGuard.refusal`): 421/403 as JSON;
- the request's trace context (`gateway.tracing.RequestTrace`), when `toolplex serve` asks for it;
- the access log line (`gateway.access_log`), written as the answer's head leaves, as uvicorn's was;
- errors: an `HTTPException` from routing (404, 405) or a route is answered `{"detail": ...}` with its
  status and headers; any other exception is answered `{"detail": "Internal server error"}` with 500
  (never HTML or a traceback) when nothing was sent yet, then re-raised so that the server logs it.

With `auth.oauth`, its challenge layer (`gateway.oauth.challenge.OAuthChallenges`) sits between the
guard and the routes, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import access_log, tracing
from gateway.guard import HostOriginGuard
from gateway.router import IndexedRouter
from gateway.wire import Answer, send_answer

INTERNAL_ERROR = orjson.dumps({"detail": "Internal server error"})


@dataclass
class EdgeOptions:
    """What the serving process decides once, at start (`gateway.serving.uvicorn_config`); shared by the
    Edge of every snapshot. In-process use (tests, embedding) leaves both off."""

    access_log: bool = False
    trace: bool = False


class Edge:
    """The per-snapshot ASGI app: see the module docstring."""

    def __init__(
        self,
        router: IndexedRouter,
        guard: HostOriginGuard,
        options: EdgeOptions,
        wrap: Any = None,
    ) -> None:
        """`wrap(app) -> app`: a layer between the guard and the routes (OAuth challenges), or None."""
        self.router = router
        self.guard = guard
        self.options = options
        self.routes: ASGIApp = wrap(self._route) if wrap is not None else self._route
        self.state: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            refusal = self.guard.refusal(scope) if kind == "websocket" else None
            if refusal is not None:
                await send({"type": "websocket.close", "code": 1008, "reason": refusal[1][:120]})
                return
            scope["app"] = self
            await self.routes(scope, receive, send)
            return
        options = self.options
        token = None
        if options.trace:
            request = tracing.RequestTrace()
            tracing.extract(request, scope["headers"])
            token = tracing.REQUEST.set(request)
        try:
            if options.access_log:
                send = access_log.logging_send(scope, send)
            refusal = self.guard.refusal(scope)
            if refusal is not None:
                await self.guard.refuse(send, *refusal)
                return
            await self._guarded(scope, receive, send)
        finally:
            if token is not None:
                tracing.REQUEST.reset(token)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The routes; an unexpected exception becomes a JSON 500 (if nothing was sent yet), then goes on up."""
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        scope["app"] = self
        try:
            await self.routes(scope, receive, sending)
        except Exception:
            if not started:
                await send_answer(send, Answer(INTERNAL_ERROR, 500))
            raise

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The router; 404, 405 and a route's HTTPException answered as JSON, as Starlette's handler did."""
        try:
            await self.router.fast(scope, receive, send)
        except HTTPException as exc:
            body = orjson.dumps({"detail": exc.detail})
            await send_answer(send, Answer(body, exc.status_code, exc.headers))
