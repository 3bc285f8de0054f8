"""Settings of the `python` backend kind: in-process tools, optionally run by isolated worker processes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from gateway.settings import BackendSettings

# Keys that only mean something for worker processes (`isolation: process`).
PROCESS_ONLY = ("pool_size", "cpu_seconds", "memory_mb")
# The schema's `process_isolation` rule: naming one of these keys requires `isolation: process`.
PROCESS_ISOLATION: dict[str, Any] = {
    "description": "pool_size, cpu_seconds and memory_mb need isolation: process",
    "required": ["isolation"],
    "properties": {"isolation": {"const": "process"}},
}


class PythonBackendSettings(BackendSettings):
    """Tools imported from a Python module and run in this process (or in pooled worker subprocesses)."""

    model_config = ConfigDict(json_schema_extra={"dependentSchemas": dict.fromkeys(PROCESS_ONLY, PROCESS_ISOLATION)})

    kind: Literal["python"]
    module: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*(:[A-Za-z_][A-Za-z0-9_.]*)?$",
        description="module:attribute, or a module",
    )
    workers: int = Field(default=16, ge=1, le=256, description="Threads for synchronous tools")
    isolation: Literal["none", "process"] = Field(
        default="none",
        description="process: run every call in a pooled worker subprocess under resource limits",
    )
    pool_size: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Worker processes (isolation: process); at most this many calls run at once",
    )
    cpu_seconds: float | None = Field(
        default=None,
        gt=0,
        description="CPU time one call may use (RLIMIT_CPU, whole seconds, rounded up); isolation: process only",
    )
    memory_mb: int | None = Field(
        default=None,
        ge=1,
        description="Memory one call may allocate on top of the worker's own (RLIMIT_AS); isolation: process only",
    )

    @model_validator(mode="after")
    def _limits_need_process_isolation(self) -> PythonBackendSettings:
        """A limit on worker processes given without workers would silently do nothing: refuse it."""
        given = [key for key in PROCESS_ONLY if key in self.model_fields_set]
        if given and self.isolation != "process":
            keys = " and ".join(given)
            raise ValueError(
                f"{keys} {'needs' if len(given) == 1 else 'need'} isolation: process "
                f"(isolation is {self.isolation!r}; these keys only apply to worker processes)"
            )
        return self
