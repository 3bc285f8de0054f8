"""`toolplex` as if `toolplex[otel]` were not installed: the extra's packages cannot be imported.

The extra is the OpenTelemetry SDK and its OTLP exporter. `opentelemetry-api` is not part of it:
the `mcp` SDK (a base dependency) requires the API, so it is always there.

python -m tests.observability.without_otel serve --config PATH --port P

Each attempt to import it is appended to the file named by TOOLPLEX_TEST_OTEL_ATTEMPTS (when
set), so a test can tell that a gateway with tracing off never even tried.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType

BLOCKED = ("opentelemetry.sdk", "opentelemetry.exporter")  # what `toolplex[otel]` adds


def blocked(name: str) -> bool:
    return any(name == root or name.startswith(f"{root}.") for root in BLOCKED)


class NoOpenTelemetry(importlib.abc.MetaPathFinder):
    """Finds the extra's packages and their submodules first, and refuses them as a missing package would."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not blocked(fullname):
            return None
        attempts = os.environ.get("TOOLPLEX_TEST_OTEL_ATTEMPTS")
        if attempts:
            with open(attempts, "a") as out:
                out.write(f"{fullname}\n")
        raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


def main() -> int:
    for name in [m for m in sys.modules if blocked(m)]:
        del sys.modules[name]
    sys.meta_path.insert(0, NoOpenTelemetry())
    from gateway.cli import main as toolplex

    return toolplex(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
