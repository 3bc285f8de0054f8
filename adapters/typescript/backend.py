"""The `typescript` backend: tools written in TypeScript (or JavaScript) with zod schemas.

A pool of Node.js sidecars (sidecar.mjs in this folder) loads the tool
modules and serves calls as JSON-RPC over stdio. This side picks the least
busy sidecar, starts a new one when one has died, turns a cancelled call
(the wall deadline) into an AbortSignal in the tool, and kills a sidecar
that does not let go of a cancelled call within a grace period: a tool that
blocks Node's event loop cannot be stopped any other way.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
from pathlib import Path
from typing import Any

import structlog

from adapters.python.decorator import camel_case
from adapters.stdio import PeerExited, RemoteError, StdioPeer, describe_exit
from adapters.typescript.settings import TypeScriptBackendSettings
from gateway.backends import BackendContext, BaseBackend
from gateway.errors import ConfigError, ErrorKind, Failure, GatewayError
from gateway.model import CallContext, ToolSpec

log = structlog.get_logger("toolplex.typescript")

SIDECAR_DIR = Path(__file__).resolve().parent
SIDECAR = SIDECAR_DIR / "sidecar.mjs"
MODULE_SUFFIXES = (".ts", ".mts", ".js", ".mjs")
INSTALL_HINT = "run `make install` (or `npm ci` in adapters/typescript)"


class TypeScriptBackend(BaseBackend):
    """The sidecar pool of one backend; its tools answer once, they do not stream partial results."""

    settings: TypeScriptBackendSettings

    def __init__(self, settings: TypeScriptBackendSettings, context: BackendContext) -> None:
        self.settings = settings
        self.name = settings.name
        self.node = settings.node
        self.pool_size = settings.pool_size
        self.startup_timeout = settings.startup_timeout_s
        self.cancel_grace = settings.cancel_grace_s
        self.files: list[str] = []
        self._sidecars: list[StdioPeer] = []
        self._spawn_lock = asyncio.Lock()
        self._watchdogs: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """Live sidecar pids (for operators and tests)."""
        return [s.pid for s in self._sidecars if s.alive]

    # ---- discovery ----

    def _module_files(self) -> list[str]:
        problems: list[str] = []
        files: list[str] = []
        for entry in self.settings.modules:
            path = Path(entry).expanduser()
            path = path if path.is_absolute() else Path.cwd() / path
            if path.is_dir():
                found = sorted(
                    p
                    for p in path.iterdir()
                    if p.suffix in MODULE_SUFFIXES
                    and not p.name.endswith(".d.ts")
                    and not p.name.startswith((".", "_"))
                )
                if not found:
                    problems.append(f"backend {self.name!r}: folder {entry!r} holds no .ts/.mts/.js/.mjs tool module")
                files.extend(str(p) for p in found)
            elif path.is_file():
                files.append(str(path))
            else:
                problems.append(
                    f"backend {self.name!r}: tool module {entry!r} not found "
                    f"(relative paths are taken from the working directory, {Path.cwd()})"
                )
        if shutil.which(self.node) is None:
            problems.append(f"backend {self.name!r}: Node.js ({self.node!r}) not found; install Node 20+ or set 'node'")
        if not (SIDECAR_DIR / "node_modules" / "zod").is_dir():
            problems.append(f"backend {self.name!r}: the sidecar's packages are not installed; {INSTALL_HINT}")
        if problems:
            raise ConfigError(problems)
        return files

    async def discover(self) -> list[ToolSpec]:
        """List the tools through a running sidecar (started only if none is alive).

        Rediscovery runs every `discovery.interval_s`: it reuses the pool, so it never
        adds a Node process, and it restarts a sidecar that was killed meanwhile.
        The modules are loaded when a sidecar starts; a changed module takes effect
        when its sidecars are restarted (a gateway restart).
        """
        if self._closed:
            raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {self.name!r} is shutting down")
        if not self._sidecars:
            self.files = self._module_files()  # checked before the first start, or after every sidecar died
        sidecar = await self._pick(idle_only=False)
        try:
            listing = await asyncio.wait_for(sidecar.request("tool.list", {}), self.startup_timeout)
        except (PeerExited, TimeoutError) as exc:
            tail = sidecar.stderr_tail()
            why = "did not answer in time" if isinstance(exc, TimeoutError) else f"ended with {exc}"
            note = f"it did not list its tools within {self.startup_timeout:g} s"  # told to calls it was running
            await self._drop(sidecar, note if isinstance(exc, TimeoutError) else None)
            raise ConfigError(
                [f"backend {self.name!r}: the TypeScript sidecar {why}" + (f":\n{tail}" if tail else "")]
            ) from None
        problems = [f"backend {self.name!r}: {p}" for p in listing.get("problems") or []]
        specs: list[ToolSpec] = []
        for info in listing.get("tools") or []:
            try:
                specs.append(self._spec(info))
            except ValueError as exc:
                problems.append(f"backend {self.name!r}: {info.get('module')}: {exc}")
        if problems:
            raise ConfigError(problems)
        return specs

    def _spec(self, info: dict[str, Any]) -> ToolSpec:
        toolkit = self.settings.toolkit or info.get("toolkit") or camel_case(_identifier(info["moduleStem"]))
        name = camel_case(_identifier(info["id"]))
        if not name:
            raise ValueError(f"tool id {info['id']!r} gives no usable name")
        timeout_ms = info.get("timeoutMs")
        return ToolSpec(
            toolkit=toolkit,
            name=name,
            version=info["version"],
            description=info.get("description") or name,
            input_schema=info["parameters"],
            output_schema=info.get("returns"),
            backend=self.name,
            language="typescript",
            timeout=None if timeout_ms is None else float(timeout_ms) / 1000,
            side_effects=bool(info.get("sideEffects", True)),
            source=f"backend {self.name!r} ({info['module']})",
            binding=info["key"],
        )

    # ---- the pool ----

    async def _spawn(self) -> StdioPeer:
        argv = [self.node, str(SIDECAR), *self.files]
        try:
            sidecar = await StdioPeer.start(argv, label=f"ts-sidecar:{self.name}", cwd=str(SIDECAR_DIR), env=None)
        except OSError as exc:
            raise GatewayError.of(
                ErrorKind.UPSTREAM_UNAVAILABLE, f"Cannot start the TypeScript sidecar ({self.node!r}): {exc}"
            ) from None
        self._sidecars.append(sidecar)
        log.info("sidecar_started", backend=self.name, pid=sidecar.pid)
        return sidecar

    async def _pick(self, *, idle_only: bool = True) -> StdioPeer:
        """The least busy live sidecar; a new one only while the pool is short.

        Every sidecar is started here, under the lock, so the pool never holds more
        than `pool_size` processes. A call (`idle_only`) gets a new sidecar when all
        are busy and the pool is not full; the listing takes any live one.
        """
        async with self._spawn_lock:
            if self._closed:
                raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {self.name!r} is shutting down")
            for dead in [s for s in self._sidecars if not s.alive]:
                self._sidecars.remove(dead)
                await dead.kill()
            live = sorted(self._sidecars, key=lambda s: s.in_flight)
            if live and (not idle_only or live[0].in_flight == 0 or len(live) >= self.pool_size):
                return live[0]
            return await self._spawn()

    async def _drop(self, sidecar: StdioPeer, note: str | None = None) -> None:
        """Kill one sidecar and take it out of the pool (the next call or discovery starts another)."""
        async with self._spawn_lock:
            if sidecar in self._sidecars:
                self._sidecars.remove(sidecar)
        await sidecar.kill(note)

    # ---- invocation ----

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        if self._closed:
            raise GatewayError.of(ErrorKind.UPSTREAM_UNAVAILABLE, f"Backend {self.name!r} is shutting down")
        sidecar = await self._pick()
        remaining = context.remaining()
        params = {
            "tool": spec.binding,
            "language": "typescript",
            "parameters": arguments,
            "context": {
                "callId": context.call_id,
                "sessionId": context.session_id,
                "messageId": context.message_id,
                "userId": context.user_id,
                "timeout": None if remaining is None else max(1, int(remaining * 1000)),
            },
        }
        request_id, answer = await sidecar.start_request("tool.execute", params)
        try:
            result = await asyncio.shield(answer)
        except asyncio.CancelledError:
            await sidecar.notify("tool.cancel", {"id": request_id})
            self._watch(sidecar, answer, context.call_id)
            raise
        except PeerExited as exc:
            raise GatewayError(self._death_failure(spec, exc)) from None
        except RemoteError as exc:
            raise GatewayError(self._remote_failure(spec, exc)) from None
        return result.get("value") if isinstance(result, dict) else None

    def _watch(self, sidecar: StdioPeer, answer: asyncio.Future[Any], call_id: str) -> None:
        """Give a cancelled call `cancel_grace` seconds to let go, then kill its sidecar."""

        # Nobody awaits this answer any more; mark its outcome as seen, whatever it will be.
        answer.add_done_callback(lambda f: f.cancelled() or f.exception())

        async def watchdog() -> None:
            done, _ = await asyncio.wait({answer}, timeout=self.cancel_grace)
            if not done and sidecar.alive:
                note = f"it did not stop a cancelled call within {self.cancel_grace:g} s"
                note += " (a tool blocked Node's event loop)"
                log.warning("sidecar_unresponsive_killed", backend=self.name, pid=sidecar.pid, call_id=call_id)
                await self._drop(sidecar, note)  # every call that sidecar was running is told why

        task = asyncio.get_running_loop().create_task(watchdog())
        self._watchdogs.add(task)
        task.add_done_callback(self._watchdogs.discard)

    def _death_failure(self, spec: ToolSpec, exc: PeerExited) -> Failure:
        how = describe_exit(exc.returncode)
        why = exc.note or f"it ended with {how} (process.exit, an uncaught exception or no memory)"
        return Failure(
            kind=ErrorKind.TOOL_FAILED,
            message=f"Tool {spec.flat_name} did not complete: the TypeScript sidecar running it stopped because {why}. "
            "A fresh sidecar serves the next call, so you may retry.",
            developer_message=("Sidecar stderr (last lines):\n" + exc.stderr_tail) if exc.stderr_tail else None,
            can_retry=True,
            details={"sidecar_exit": describe_exit(exc.returncode)},
        )

    @staticmethod
    def _remote_failure(spec: ToolSpec, exc: RemoteError) -> Failure:
        data = exc.data if isinstance(exc.data, dict) else {}
        if exc.code == -32602:
            return Failure(
                kind=ErrorKind.INVALID_ARGUMENTS,
                message=f"Invalid arguments for {spec.flat_name}: {exc.message.removeprefix('Invalid parameters: ')}",
                parameter_errors=data.get("parameter_errors") or None,
            )
        if exc.code == -32001:
            return Failure(kind=ErrorKind.DEADLINE, message=f"Tool {spec.flat_name}: {exc.message}", can_retry=True)
        if exc.code == -32601:
            return Failure(
                kind=ErrorKind.NOT_FOUND,
                message=f"Tool {spec.flat_name} is no longer loaded by its sidecar (was its module changed?)",
            )
        if exc.code == -32000:
            if data.get("badResult"):
                return Failure(
                    kind=ErrorKind.TOOL_FAILED, message=f"Tool {spec.flat_name} returned {data['badResult']}"
                )
            retry_after = data.get("retryAfterMs")
            return Failure(
                kind=ErrorKind.TOOL_FAILED,
                message=exc.message,
                developer_message=data.get("developerMessage") or data.get("details"),
                can_retry=bool(data.get("canRetry")),
                retry_after_ms=int(retry_after) if isinstance(retry_after, (int, float)) else None,
                additional_prompt_content=data.get("additionalPromptContent"),
            )
        return Failure(kind=ErrorKind.INTERNAL, message=f"The TypeScript sidecar failed: {exc.message}")

    async def close(self) -> None:
        """Stop every sidecar; returns when all are reaped."""
        self._closed = True
        for task in list(self._watchdogs):
            task.cancel()
        async with self._spawn_lock:  # a start under way finishes first, so its sidecar is stopped too
            sidecars, self._sidecars = self._sidecars, []
        await asyncio.gather(*(s.kill() for s in sidecars), return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._watchdogs, return_exceptions=True)


def _is_tool_module(path: Path) -> bool:
    """Files a folder entry loads: tool sources, not declarations, not hidden or private ones."""
    return path.suffix in MODULE_SUFFIXES and not path.name.endswith(".d.ts") and not path.name.startswith((".", "_"))


def _identifier(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", text)).strip("_")
