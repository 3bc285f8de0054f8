"""Reloading the configuration file: on SIGHUP, and when the file changes (watchfiles).

Each reload reads and validates the file, then asks the gateway to build and
swap a new snapshot (`Gateway.reload`). An unreadable or invalid file keeps the
running snapshot: the problems are logged and counted (`toolplex_config_reloads`
in /metrics, result "failed"). Reloads never overlap: a change that arrives
during one is picked up by one more reload right after it.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import structlog

from gateway.config import load_config
from gateway.errors import ConfigError
from gateway.heap import settle_heap
from gateway.observability import config_secrets, configure_logging, register_secrets
from gateway.runtime import Gateway

log = structlog.get_logger("toolplex.reload")

WATCH_DEBOUNCE_MS = 200  # editors write a file in several steps: wait for them to settle


class ConfigReloader:
    def __init__(self, gateway: Gateway, path: str | Path) -> None:
        self.gateway = gateway
        self.path = Path(path)
        self._wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def request(self, reason: str) -> None:
        """Ask for a reload (from a signal handler or the watcher); coalesced with any pending one."""
        log.info("config_reload_requested", reason=reason, path=str(self.path))
        self._wanted.set()

    async def reload_now(self) -> bool:
        """Read, validate and apply the file once; False when it was refused (the old snapshot stays)."""
        try:
            config = load_config(self.path)
        except ConfigError as exc:
            self.gateway.reloads["failed"] += 1
            self.gateway.history.refused(str(self.path), "; ".join(exc.problems))
            log.error("config_reload_failed", source=str(self.path), problems=exc.problems)
            return False
        register_secrets(config_secrets(config.data))  # new credentials are redacted before anything logs
        applied = await self.gateway.reload(config)
        if applied:
            configure_logging(config.settings.logging.level)
            settle_heap()
        return applied

    def start(self, *, watch: bool) -> None:
        """Serve reload requests; with `watch`, a change of the file requests one too."""
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._serve(), name="config-reloader")
        if watch:
            self._watcher = loop.create_task(self._watch(), name="config-watcher")

    async def _serve(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            try:
                await self.reload_now()
            except Exception:  # never let a reload bug end the loop: the next request tries again
                log.exception("config_reload_crashed")

    async def _watch(self) -> None:
        from watchfiles import awatch

        target = self.path.resolve()
        # The directory, not the file: editors and `kubectl`-style updates replace the file by a rename.
        async for changes in awatch(target.parent, stop_event=self._stop, debounce=WATCH_DEBOUNCE_MS, recursive=False):
            if any(Path(changed).resolve() == target for _, changed in changes):
                self.request("file changed")

    async def stop(self) -> None:
        self._stop.set()
        for task in (self._watcher, self._task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
