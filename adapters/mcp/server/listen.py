"""`subscriptions/listen` (2026-07-28): the changes a caller asked to hear, on the stream its request opened.

The SDK's `ListenHandler` serves the stream (the acknowledgement first, each event stamped with the
subscription id, a stream whose client stopped reading ended at its backlog cap). What the gateway adds:

- events: its own tool list (the catalog changed: `Endpoint._watch_catalog`) and what its MCP upstreams say
  (`Passthrough.notice`): their prompt and resource lists, and updates of resources;
- ownership: each stream is its caller's; a principal holds at most its share of `MAX_STREAMS`
  (`limits.principal_share`), so one caller's streams never use up another's; a further one is refused;
- resources: a stream hears of a resource only when the caller reaches its server (the URIs it may not
  read are left out of what the acknowledgement honours), and the server is asked for updates of it while
  the stream is open (`Passthrough.subscribe`, held by the stream as a session holds a subscription).
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

import mcp_types as types
import structlog
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError

from gateway.model import Principal, principal_name

if TYPE_CHECKING:
    from adapters.mcp.server.endpoint import Ctx, Endpoint

log = structlog.get_logger("toolplex.mcp")

MAX_STREAMS: Final = 1024  # listen streams open at once in this endpoint, every caller's
MAX_BUFFERED_EVENTS: Final = 256  # per stream: a client that stopped reading is ended at this backlog


class Listening:
    """The listen streams of one MCP endpoint (see the module docstring)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.bus = InMemorySubscriptionBus()
        self.handler = ListenHandler(self.bus, max_subscriptions=MAX_STREAMS, max_buffered_events=MAX_BUFFERED_EVENTS)
        self.open: Counter[str] = Counter()  # principal -> its streams open now

    async def __call__(self, ctx: Ctx, params: types.SubscriptionsListenRequestParams) -> Any:
        principal = self.endpoint._principal(ctx)
        owner = principal_name(principal)
        if self.open[owner] >= self.endpoint.services.shares.of(MAX_STREAMS):
            raise MCPError(types.INTERNAL_ERROR, "Subscription limit reached")
        holder = f"listen:{secrets.token_hex(16)}"
        wanted = params.notifications
        self.open[owner] += 1
        watched: list[str] = []
        try:
            for uri in wanted.resource_subscriptions or ():
                if await self._watch(ctx, principal, uri, holder):
                    watched.append(uri)
            honoured = wanted.model_copy(update={"resource_subscriptions": watched or None})
            return await self.handler(ctx, params.model_copy(update={"notifications": honoured}))
        finally:
            self.open[owner] -= 1
            if self.open[owner] <= 0:
                del self.open[owner]
            for uri in watched:
                await self._unwatch(ctx, principal, uri, holder)

    async def _watch(self, ctx: Ctx, principal: Principal | None, uri: str, holder: str) -> bool:
        """Ask the URI's server for its updates, for this stream; False when the caller reaches no server of it."""
        try:
            await self.endpoint.passthrough.subscribe(ctx, principal, uri, True, holder)
        except MCPError as exc:
            log.info("mcp_listen_uri_left_out", error=exc.error.message)
            return False
        return True

    async def _unwatch(self, ctx: Ctx, principal: Principal | None, uri: str, holder: str) -> None:
        try:
            await self.endpoint.passthrough.subscribe(ctx, principal, uri, False, holder)
        except Exception as exc:  # the stream ended: the upstream's watch ends with its connection anyway
            log.info("mcp_listen_unwatch_failed", error=type(exc).__name__)

    async def publish(self, notice: Any) -> None:
        """A server's notice (or the catalog's change) to the streams that asked for its kind."""
        event = _event(notice)
        if event is not None:
            await self.bus.publish(event)


def _event(notice: Any) -> ServerEvent | None:
    if isinstance(notice, types.ToolListChangedNotification):
        return ToolsListChanged()
    if isinstance(notice, types.PromptListChangedNotification):
        return PromptsListChanged()
    if isinstance(notice, types.ResourceListChangedNotification):
        return ResourcesListChanged()
    if isinstance(notice, types.ResourceUpdatedNotification):
        return ResourceUpdated(uri=str(notice.params.uri))
    return None
