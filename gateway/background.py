"""Fire-and-forget tasks that must not be garbage-collected while they run.

The event loop keeps only a weak reference to a task, so a task nobody holds can
vanish mid-run. A `BackgroundTasks` holds each one until it ends, and says nothing
when the loop is already gone (a done-callback firing during shutdown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class BackgroundTasks:
    """The running tasks of one owner; each forgotten as soon as it ends."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, job: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any] | None:
        """Run `job` on the running loop; None (and the coroutine closed) when there is no loop any more."""
        try:
            task = asyncio.get_running_loop().create_task(job, name=name)
        except RuntimeError:  # the loop is shutting down
            job.close()
            return None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
