"""One live connection to an MCP server (`Link`): the `mcp` SDK's `Client`, entered and left by one task of
its own, the era it found, the process under it for stdio, and its `subscriptions/listen` stream.

The backend (`adapters.mcp.client.backend`) holds its main link, made in the era `era:` asks for (`auto`
probes 2026-07-28 `server/discover` first, then falls back to the `initialize` handshake), and, for a
server that speaks both eras, a handshake-era companion link for handshake-era callers (era affinity).
Each link runs the relay's callbacks (`adapters.mcp.relay`), so what the server says during a request
reaches the caller of that request, and stamps each 2026-07-28 request with its caller's own
capabilities (`relay.stamp_caller_capabilities`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, Final

import anyio
import mcp_types as types
import structlog
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation, ToolListChangedNotification
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS

from adapters.mcp import relay, tasks
from adapters.mcp.client.http import EXCHANGE, Exchange
from adapters.mcp.client.stdio import ServerProcess, connect
from gateway.errors import GatewayError

if TYPE_CHECKING:
    from adapters.mcp.client.backend import McpBackend

log = structlog.get_logger("toolplex.mcp")

# What a server says of its resources and prompts, relayed to the MCP front's sessions (`McpBackend.announce`).
NOTICES: Final = (
    types.ResourceUpdatedNotification,
    types.ResourceListChangedNotification,
    types.PromptListChangedNotification,
)
MODES: Final = {"auto": "auto", "legacy": "legacy", "modern": LATEST_MODERN_VERSION}
WINDOW_S: Final = 60.0  # a listen stream (or a stdio process) that lived this long was no quick end
MAX_BACKOFF_S: Final = 30.0
CLOSE_MARGIN_S: Final = 3.0  # what closing a link may take beyond the process's stop grace
SETTLE_S: Final = 1.0  # how long an error waits for a dying stdio process's exit status and stderr
LISTEN_PAUSE_S: Final = 0.5  # first pause before a `subscriptions/listen` stream that ended is opened again


def _client_info() -> Implementation:
    from gateway.tracing import GATEWAY_VERSION

    return Implementation(name="toolplex", version=GATEWAY_VERSION)


def _unwrap(exc: BaseException) -> BaseException:
    """The first real error inside the task-group exception groups the SDK raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class Link:
    """One live MCP connection: an SDK `Client`, entered and left by one task of its own (the SDK's task
    groups must be), the era it found, and for stdio the process under it."""

    def __init__(self, backend: McpBackend, process: ServerProcess | None, mode: str | None = None) -> None:
        self.backend = backend
        self.process = process
        self.mode = mode or MODES[backend.settings.era]  # "legacy" for a handshake-era caller's companion link
        self.client: Client | None = None
        self.protocol_version: str | None = None
        self.dead = asyncio.Event()  # the connection ended: the process exited, or the link was closed
        self.closing = False
        self.handshake = Exchange()  # what the HTTP requests of the handshake met
        self.pending: dict[relay.Pending, None] = {}  # requests in flight on this connection (`_calling`)
        self.relisten = asyncio.Event()  # 2026 era: the URIs to watch changed; open the listen stream again
        self.listened = 0  # how many watch changes the open listen stream reflects (`McpBackend.watch`)
        self._listen_acked = asyncio.Condition()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.dead.is_set()

    @property
    def era(self) -> str:
        return "modern" if self.protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"

    def sole(self) -> relay.Pending | None:
        """Over stdio, the one request in flight (a message without request context is about it); else None.

        Over HTTP every message runs in its request's own context (`relay`): a message without one
        belongs to no caller, and must not be handed to whoever happens to be waiting.
        """
        if self.process is None or len(self.pending) != 1:
            return None
        return next(iter(self.pending))

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self.process is not None:
            return connect(self.process, self.dead.set)
        settings = self.backend.settings
        assert settings.url is not None
        return streamable_http_client(
            settings.url, http_client=self.backend.http(), max_sse_event_size=self.backend.max_body
        )

    async def open(self, timeout: float) -> None:
        """Connect and negotiate the era within `timeout` seconds; GatewayError when that fails."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready), name=f"mcp-link-{self.backend.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            ready.cancel()
            await self.close()
            raise self.backend.unavailable(f"it did not complete the MCP handshake within {timeout:g} s") from None
        except GatewayError:
            await self.close()  # the task is ending already: this waits for its process to be stopped
            raise
        except BaseException:
            ready.cancel()
            await self.close()
            raise

    async def _run(self, ready: asyncio.Future[None]) -> None:
        backend = self.backend
        EXCHANGE.set(self.handshake)  # the handshake's requests; this task's own context
        try:
            async with Client(
                self._transport(),
                mode=self.mode,
                cache=None,  # every discovery asks the server: a cached listing would hide changes
                message_handler=self._on_message,
                client_info=_client_info(),
                # Each question or log line is relayed to the MCP caller of the request it belongs to.
                **relay.callbacks(self.sole),
                extensions=[tasks.Relaying()],  # a tools/call may answer a task, which its caller polls
            ) as client:
                self.client = client
                self.protocol_version = client.protocol_version
                if self.era == "modern":
                    relay.stamp_caller_capabilities(client.session)
                EXCHANGE.set(None)  # what this task starts from now on is the connection's own traffic
                ready.set_result(None)
                backend.connected(self, client)
                async with anyio.create_task_group() as group:
                    if self.era == "modern" and _listens(client):
                        group.start_soon(self._listen, client)
                    await _first(self._stop, self.dead)
                    group.cancel_scope.cancel()
        except BaseException as exc:
            if not ready.done():
                if self.process is not None and not isinstance(exc, asyncio.CancelledError):
                    await self.process.settle(SETTLE_S)
                ready.set_exception(backend.connect_failure(self, _unwrap(exc)))
            elif not self.closing:
                log.warning("mcp_link_failed", backend=backend.name, error=repr(_unwrap(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.dead.set()
            if self.process is not None:
                await self.process.stop(backend.settings.stop_timeout_s)
            if not self.closing:
                backend.link_lost(self)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self.backend.tools_listing_changed(self)
        elif isinstance(message, NOTICES):
            # A list change is told by the main connection; a companion one tells the updates it subscribed to.
            if self.backend.is_main(self) or isinstance(message, types.ResourceUpdatedNotification):
                await self.backend.announce(message)
        elif isinstance(message, Exception):
            log.debug("mcp_transport_error", backend=self.backend.name, error=repr(message))

    async def _listen(self, client: Client) -> None:
        """2026 era: changes come on a `subscriptions/listen` stream: the tool, prompt and resource lists',
        and updates of the resources the MCP front's callers subscribed to (`McpBackend.watched`). One
        that ends is opened again after a pause (doubling up to 30 s, from 1 s again after a stream that
        lasted a minute) while the link lives; a change of the watched URIs opens it again at once."""
        pause = LISTEN_PAUSE_S
        reopened = False
        while not self.dead.is_set():
            opened = time.monotonic()
            wanted = self.backend.watch_changes
            self.relisten.clear()
            try:
                async with client.listen(
                    tools_list_changed=True,
                    prompts_list_changed=True,
                    resources_list_changed=True,
                    resource_subscriptions=tuple(self.backend.watched),
                ) as subscription:
                    async with self._listen_acked:
                        self.listened = wanted
                        self._listen_acked.notify_all()
                    if reopened:  # a change in the moment between the two streams would be lost: look again
                        self.backend.tools_listing_changed(self, said=False)
                    if await self._follow(subscription):
                        reopened = True
                        continue  # the watched URIs changed: the new filter at once
                reason = "the server closed it"
            except (MCPError, SubscriptionLost, TimeoutError) as exc:
                reason = str(exc) or type(exc).__name__
            reopened = False
            if self.closing:
                return
            pause = LISTEN_PAUSE_S if time.monotonic() - opened >= WINDOW_S else min(MAX_BACKOFF_S, pause * 2)
            log.info("mcp_listen_ended", backend=self.backend.name, reason=reason, again_in_s=pause)
            await anyio.sleep(pause)

    async def _follow(self, subscription: Any) -> bool:
        """Pass on the stream's events until it ends (False) or the watched URIs change (True)."""
        ended = False
        error: MCPError | SubscriptionLost | None = None
        async with anyio.create_task_group() as group:

            async def read() -> None:
                nonlocal ended, error
                try:
                    async for event in subscription:
                        await self._event(event)
                except (MCPError, SubscriptionLost) as exc:
                    error = exc
                ended = True
                group.cancel_scope.cancel()

            group.start_soon(read)
            await self.relisten.wait()
            group.cancel_scope.cancel()
        if error is not None:
            raise error
        return not ended

    async def _event(self, event: Any) -> None:
        """A listen stream's event. Its frames also reach the client's message handler (`_on_message`), which
        passes resource and prompt notices on: only a tool list change is the link's own business."""
        if isinstance(event, ToolsListChanged):
            self.backend.tools_listing_changed(self)

    async def listening(self, wanted: int, timeout: float) -> bool:
        """Wait (at most `timeout` s) until the listen stream reflects watch change number `wanted`."""
        async with self._listen_acked:
            try:
                await asyncio.wait_for(self._listen_acked.wait_for(lambda: self.listened >= wanted), timeout)
            except TimeoutError:
                return False
        return True

    async def close(self) -> None:
        """Leave the connection (stopping its process); bounded by the process's stop grace and a margin."""
        self.closing = True
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        budget = self.backend.settings.stop_timeout_s + CLOSE_MARGIN_S
        done, _ = await asyncio.wait({task}, timeout=budget)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=budget)


def _listens(client: Client) -> bool:
    """The server has changes to tell on a listen stream: of its lists, or of resources it lets one watch."""
    capabilities = client.server_capabilities
    lists = (capabilities.tools, capabilities.prompts, capabilities.resources)
    resources = capabilities.resources
    return any(c is not None and bool(c.list_changed) for c in lists) or bool(resources and resources.subscribe)


async def _first(*events: asyncio.Event) -> None:
    """Wait until one of `events` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


@contextlib.asynccontextmanager
async def calling(
    link: Link, caller: relay.Caller | None, pending: relay.Pending | None = None
) -> AsyncIterator[relay.Pending]:
    """The requests sent inside the block are in flight for `caller` (as `pending`, else a new one): what the
    server says back reaches it."""
    pending = relay.Pending(caller) if pending is None else pending
    token, pending_token = relay.CALLER.set(caller), relay.PENDING.set(pending)
    link.pending[pending] = None
    try:
        yield pending
    finally:
        link.pending.pop(pending, None)
        relay.PENDING.reset(pending_token)
        relay.CALLER.reset(token)


async def held_call(link: Link, caller: relay.Caller, pending: relay.Pending, send: Awaitable[Any]) -> Any:
    """A held request, in flight on the connection until it ends (not just for one round): its questions
    reach its hold (`pending.hold`), its logs and progress the caller of the round under way. Its rounds
    bound it."""
    async with calling(link, caller, pending):
        return await send
