"""A call pipeline over a fixed catalog and backends, for running tools without a gateway.

The running gateway builds its pipeline per snapshot (`gateway.runtime`); this
class is the same pipeline over a catalog and backends given directly, with its
own shutdown tracking and concurrency limiter: what a test or a program that
embeds Toolplex's core needs to run tools without any front.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.backends import Backend
from gateway.cache import ResultCache
from gateway.catalog import Catalog
from gateway.limits import CallLimiter
from gateway.middleware import CallLog
from gateway.model import Call, Outcome, ToolSpec
from gateway.pipeline import Admission, CallPolicy, Pipeline


class Dispatcher:
    def __init__(
        self,
        catalog: Catalog,
        backends: Mapping[str, Backend],
        *,
        default_timeout: float = 30.0,
        max_timeout: float = 300.0,
        secrets: Mapping[str, str] | None = None,
        middleware: Sequence[Any] | None = None,
        cache: ResultCache | None = None,
        limiter: CallLimiter | None = None,
    ) -> None:
        self.catalog = catalog  # read by the pipeline on every call: assigning a new one swaps it whole
        self.backends = backends
        self.pipeline = Pipeline(
            self,
            policy=CallPolicy(default_timeout, max_timeout, dict(secrets or {})),
            admission=Admission(),
            limiter=limiter if limiter is not None else CallLimiter(),
            middleware=list(middleware) if middleware is not None else [CallLog()],
            cache=cache,
        )

    async def call(self, call: Call) -> Outcome:
        return await self.pipeline(call)

    def deadline_for(self, call: Call, spec: ToolSpec) -> float:
        return self.pipeline.deadline_for(call, spec)
