"""The HTTP server around the app: uvicorn with the gateway's limits, signals and graceful shutdown.

`toolplex serve` runs `GatewayServer`. SIGTERM and SIGINT stop the listener
(serving first what already reached it), end the event streams that answer GETs
(`gateway.streams`), give running calls `server.shutdown_grace_s` to finish, answer what is left
with "the gateway is shutting down" (through each call's own front, never a
dropped connection), then close every backend. SIGHUP reloads the
configuration (`gateway.reload`). Request heads over `server.max_header_bytes`
get 431; idle keep-alive connections are closed after `server.keepalive_timeout_s`.
Once the port is bound (the gateway has discovered its backends by then) it logs
`Toolplex <version> listening on http://<host>:<port> (<n> tools from <m> backends)`,
with the port actually bound, so `--port 0` says which one it got.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
import termios
from collections.abc import Callable, Iterator
from typing import Any

import structlog
import uvicorn

from gateway import tracing
from gateway.app import GatewayApp
from gateway.config.models import ServerSettings
from gateway.observability import ACCESS_LOGGER

try:  # the SSE library of the MCP SDK (adapters/mcp): see `GatewayServer.__init__`
    from sse_starlette.sse import AppStatus
except ImportError:  # pragma: no cover - not installed: no SSE answer is ended by it
    AppStatus = None

log = structlog.get_logger("toolplex.server")

ANSWER_MARGIN_S = 6.0  # after the grace: time for the ended calls' answers to be written out
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
READ_PENDING_S = 2.0  # at a stop: most time for requests already sent on open connections to be read


def event_loop_factory(loop: str = ServerSettings().loop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop for `auto` (when installed) and `uvloop`; None (asyncio's own) otherwise.

    `toolplex serve` runs its own loop (`asyncio.Runner`) so that the gateway starts before the
    server listens; uvicorn's `loop` setting only applies to `uvicorn.run`, so it is chosen here.
    """
    if loop == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if loop == "uvloop":
            raise
        return None
    return uvloop.new_event_loop  # type: ignore[no-any-return]


def http_protocol(max_header_bytes: int) -> type[asyncio.Protocol]:
    """httptools (uvicorn's fast parser) bounded to `max_header_bytes`; h11 where httptools is missing.

    Neither writes uvicorn's access line: the gateway's `Edge` does (`gateway.access_log`)."""
    try:
        from gateway.bounded_http import bounded_httptools_protocol
    except ImportError:  # no httptools: h11 bounds the head itself (answering 400)
        from uvicorn.protocols.http.h11_impl import H11Protocol

        class QuietH11Protocol(H11Protocol):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.access_log = False

        return QuietH11Protocol
    return bounded_httptools_protocol(max_header_bytes)


def uvicorn_config(app: Any, server: ServerSettings, host: str, port: int) -> uvicorn.Config:
    """uvicorn's settings from the `server` section; the app's lifespan is run by `toolplex serve` itself.

    uvicorn installs no log handler of its own (`log_config=None`): its lines reach the gateway's
    JSON handler. For the gateway's app, `tracing` is put in force here, and with the access log
    (`logging.access`) or tracing on, each request gets its trace context and the access line from the
    app's `gateway.edge.Edge`; uvicorn's protocol writes none of its own (`http_protocol`).
    """
    settings = app.gateway.config.settings if isinstance(app, GatewayApp) else None
    access = settings is not None and settings.logging.access
    if settings is not None:
        tracing.configure(settings.tracing)
        app.options.access_log = access  # written by the app's Edge, not by uvicorn (see http_protocol)
        app.options.trace = access or tracing.enabled()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        log_config=None,
        access_log=access,  # False also stops `uvicorn.access` propagating (nothing else writes there then)
        lifespan="off",
        http=http_protocol(server.max_header_bytes),
        h11_max_incomplete_event_size=server.max_header_bytes,
        timeout_keep_alive=float(server.keepalive_timeout_s),  # type: ignore[arg-type]
        # uvicorn cancels request tasks after this; by then the gateway has answered every call.
        timeout_graceful_shutdown=int(server.shutdown_grace_s + ANSWER_MARGIN_S + 1),
    )
    if access:  # uvicorn set its loggers to `log_level`; its access lines are at info
        logging.getLogger(ACCESS_LOGGER).setLevel(logging.INFO)
    return config


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def listening_message(version: str, url: str, tools: int, backends: int) -> str:
    """The start-up line an operator looks for; also the `event` of its log record, so it reads as is."""
    return f"Toolplex {version} listening on {url} ({_plural(tools, 'tool')} from {_plural(backends, 'backend')})"


def listening_url(host: str, listeners: list[socket.socket]) -> str:
    """http://host:port with the port actually bound (port 0 asks the system for one); IPv6 in brackets."""
    port = int(listeners[0].getsockname()[1])
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class GatewayServer(uvicorn.Server):
    """uvicorn's server, draining the gateway's calls during its shutdown; signals are handled by `signals`."""

    def __init__(
        self,
        config: uvicorn.Config,
        gateway: Any,
        grace: float,
        on_hangup: Callable[[], None] | None = None,
        *,
        drain: float = 0.0,
    ) -> None:
        super().__init__(config)
        self.gateway = gateway
        self.grace = grace
        self.drain = drain  # `server.drain_s`: serving on, /readyz failing, before the shutdown begins
        self._draining: asyncio.TimerHandle | None = None
        self.on_hangup = on_hangup
        self._sockets: list[socket.socket] | None = None
        self._advertise_port: int | None = None
        # sse_starlette ends every SSE answer of the process (an MCP session's call, an `initialize` whose answer
        # has not started yet: a 500) as soon as uvicorn's exit begins (`handle_exit`), while the stop below still
        # serves what it accepted. The stop ends the streams that never end by themselves instead (`end_streams`).
        if AppStatus is not None:
            AppStatus.disable_automatic_graceful_drain()

    def listen_on(self, sockets: list[socket.socket], *, advertise_port: int) -> None:
        """Serve these sockets already bound (a worker of `server.workers`); register `advertise_port`."""
        self._sockets = sockets
        self._advertise_port = advertise_port

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await super().serve(sockets or self._sockets)

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:  # the port is bound (the real one, when 0 was asked for)
            host, port = self.config.host, self._advertise_port
            if port is None:
                listeners = [sock for server in self.servers for sock in server.sockets or ()]
                port = int(listeners[0].getsockname()[1]) if listeners else self.config.port
            await self.gateway.listening(host, port)
            self._log_listening()

    def _log_listening(self) -> None:
        """Say once, at info, where the gateway listens and what it serves (tools and backends discovered)."""
        listeners = [sock for server in self.servers for sock in server.sockets or ()]
        if not listeners:
            return
        url = listening_url(self.config.host, listeners)
        catalog = self.gateway.catalog
        discovery = self.gateway.discovery
        states = list(discovery.states.values()) if discovery is not None else []
        up = [state.name for state in states if state.state == "up"]
        tools = len(catalog.latest(visible_only=False))
        log.info(
            listening_message(self.gateway.version, url, tools, len(up)),
            version=self.gateway.version,
            url=url,
            port=int(listeners[0].getsockname()[1]),
            tools=tools,
            backends=len(up),
            backends_down=[state.name for state in states if state.state != "up"],
        )

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn's own handling re-raises the signal after serving, which would kill the
        # process before the gateway closes its backends; `signals()` below replaces it.
        yield

    async def shutdown(self, sockets: Any = None) -> None:
        log.info("shutdown_started", grace_s=self.grace, calls=self.gateway.running)
        self.gateway.draining = True
        await self.gateway.leave()
        loop = asyncio.get_running_loop()
        for factory, connection in self._stop_listening():
            with contextlib.suppress(OSError):
                await loop.connect_accepted_socket(factory, connection)
        end_streams = getattr(self.config.app, "end_streams", None)
        if end_streams is not None:  # subscriptions (an MCP session's GET stream): their clients reopen them elsewhere
            end_streams()
        await self._read_pending()
        quiet = asyncio.Event()  # every connection closed: no request is left that could bring a new call
        draining = asyncio.create_task(self.gateway.drain(self.grace, quiet), name="drain")
        try:
            await super().shutdown(sockets)  # stop accepting, close idle connections, wait for busy ones
        finally:
            quiet.set()
            ended = await draining
        log.info("shutdown_drained", ended_calls=ended)

    async def _read_pending(self) -> None:
        """Let the requests on their way on open connections be read before uvicorn closes the connections it finds
        idle: it would close one whose request was still unread in its socket, or not arrived yet on a connection
        just accepted (the client then sees a reset, and a proxy cannot send a POST again). Bounded by
        READ_PENDING_S, however busy the loop is, or however long a client that connected sends nothing."""
        deadline = asyncio.get_running_loop().time() + READ_PENDING_S
        await asyncio.sleep(0)
        while any(_request_coming(connection) for connection in list(self.server_state.connections)):
            if asyncio.get_running_loop().time() > deadline:
                log.warning("shutdown_requests_left_unread")
                return
            await asyncio.sleep(0.01)

    def _protocol_factory(self) -> Callable[[], asyncio.Protocol]:
        """A connection's protocol, as uvicorn's `startup` makes one for its listeners (an event loop's server does
        not say which it serves: asyncio keeps it privately, uvloop not at all)."""
        config, state, app_state = self.config, self.server_state, self.lifespan.state

        def protocol() -> asyncio.Protocol:
            return config.http_protocol_class(config=config, server_state=state, app_state=app_state)  # type: ignore[call-arg]

        return protocol

    def _stop_listening(self) -> list[tuple[Callable[[], asyncio.Protocol], socket.socket]]:
        """Stop listening, taking first every connection already waiting in the listeners' backlogs (with the
        protocol to serve it): closing a listener resets those, after their clients had sent their requests, which a
        proxy cannot send again. From the last accept to the close nothing awaits, so a connection comes either
        before (served) or after (refused at once, and sent elsewhere)."""
        factory = self._protocol_factory()
        taken: list[tuple[Callable[[], asyncio.Protocol], socket.socket]] = []
        for server in self.servers:
            # A duplicate keeps each socket listening while the loop stops serving it (and closes its own).
            listeners = [socket.socket(fileno=os.dup(s.fileno())) for s in server.sockets or ()]
            server.close()
            for listener in listeners:
                with listener:
                    listener.setblocking(False)
                    while True:
                        try:
                            connection, _ = listener.accept()
                        except OSError:  # BlockingIOError: nothing (more) waiting
                            break
                        taken.append((factory, connection))
        if taken:
            log.info("shutdown_took_waiting_connections", connections=len(taken))
        return taken

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        """SIGTERM/SIGINT: a graceful stop (a second SIGINT: stop waiting); SIGHUP: reload the configuration."""
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._stop, sig)
        loop.add_signal_handler(signal.SIGHUP, self._hangup)
        try:
            yield
        finally:
            for sig in (*STOP_SIGNALS, signal.SIGHUP):
                loop.remove_signal_handler(sig)

    def _stop(self, sig: int) -> None:
        log.info("signal_received", signal=signal.Signals(sig).name)
        if self._draining is not None:  # a second signal while draining: shut down now
            self._draining.cancel()
            self._draining = None
        elif not self.should_exit and self.drain > 0:
            self.gateway.draining = True  # /readyz says so at once; requests are still served
            self.gateway.leave()  # sessions move to other replicas while this one goes on serving
            log.info("drain_started", drain_s=self.drain, calls=self.gateway.running)
            self._draining = asyncio.get_running_loop().call_later(self.drain, self._drained, sig)
            return
        if self.should_exit and sig == signal.SIGINT:  # Ctrl-C again: answer the running calls now
            self.gateway.hurry()
        self.handle_exit(sig, None)

    def _drained(self, sig: int) -> None:
        self._draining = None
        self.handle_exit(sig, None)

    def _hangup(self) -> None:
        log.info("signal_received", signal="SIGHUP")
        if self.on_hangup is None:
            log.warning("sighup_ignored", reason="no configuration file to reload")
            return
        self.on_hangup()


def _request_coming(connection: Any) -> bool:
    """A connection with no request in progress on which one is on its way: none read yet (a connection just
    accepted: its client connected to send one, or it is arriving), or bytes waiting in its socket after an answer.
    uvicorn's protocols keep the request in progress as `cycle` (None until a request's head is read) and their
    transport as `transport`."""
    cycle = getattr(connection, "cycle", None)
    if cycle is not None and not cycle.response_complete:
        return False  # a request in progress: uvicorn waits for it
    transport = getattr(connection, "transport", None)
    if transport is None or transport.is_closing():
        return False
    if cycle is None:
        return True
    sock = transport.get_extra_info("socket")
    if sock is None or sock.fileno() < 0:
        return False
    waiting = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), termios.FIONREAD, waiting)
    except OSError:
        return False
    return waiting[0] > 0
