"""A call pipeline over a fixed catalog and backends, for embedding the core without a gateway.

The running gateway builds its pipeline per snapshot (`gateway.snapshot`); this
class is the same pipeline over a catalog and backends given directly, with its
own admission (shutdown) tracking and concurrency limiter: what a test or a
program that embeds Toolplex's core needs to run tools without any front.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.backends import Backend
from gateway.cache import ResultCache
from gateway.catalog import Catalog
from gateway.errors import Failure
from gateway.limits import CallLimiter
from gateway.middleware import CallLog
from gateway.model import Call, Outcome, Principal, ToolSpec, permitted
from gateway.pipeline import Admission, CallPolicy, Pipeline, shutting_down

__all__ = ["Dispatcher", "shutting_down", "visible_tools"]


def visible_tools(catalog: Catalog, principal: Principal | None, *, latest_only: bool = True) -> list[ToolSpec]:
    """The listed tools this caller may call: what every front's listing shows (one decision, here)."""
    specs = catalog.latest(visible_only=True) if latest_only else catalog.all_versions()
    return [s for s in specs if s.visible and permitted(principal, s)]


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
        self._catalog = catalog
        self.backends = backends
        self.policy = CallPolicy(default_timeout, max_timeout, dict(secrets or {}))
        self.admission = Admission()
        self.limiter = limiter if limiter is not None else CallLimiter()
        self._middleware: list[Any] = list(middleware) if middleware is not None else [CallLog()]
        self._cache = cache
        self.pipeline = self._build()

    def _build(self) -> Pipeline:
        return Pipeline(
            self,
            policy=self.policy,
            admission=self.admission,
            limiter=self.limiter,
            middleware=self._middleware,
            cache=self._cache,
        )

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    @catalog.setter
    def catalog(self, catalog: Catalog) -> None:
        self._catalog = catalog  # one assignment: calls see the old or the new catalog, whole

    @property
    def middleware(self) -> list[Any]:
        return self._middleware

    @middleware.setter
    def middleware(self, middleware: Sequence[Any]) -> None:
        self._middleware = list(middleware)
        self.pipeline = self._build()

    @property
    def cache(self) -> ResultCache | None:
        return self._cache

    @cache.setter
    def cache(self, cache: ResultCache | None) -> None:
        self._cache = cache
        self.pipeline = self._build()

    async def call(self, call: Call) -> Outcome:
        return await self.pipeline(call)

    def precheck(self, call: Call) -> Failure | None:
        return self.pipeline.precheck(call)

    def deadline_for(self, call: Call, spec: ToolSpec) -> float:
        return self.pipeline.deadline_for(call, spec)

    def visible_tools(self, principal: Principal | None, *, latest_only: bool = True) -> list[ToolSpec]:
        return visible_tools(self.catalog, principal, latest_only=latest_only)

    @property
    def running(self) -> int:
        return self.admission.running

    async def drain(self, grace: float, answer_within: float = 5.0) -> int:
        return await self.admission.drain(grace, answer_within)

    def hurry(self) -> None:
        self.admission.hurry()
