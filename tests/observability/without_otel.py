"""`toolplex` as if `toolplex[otel]` were not installed: every `opentelemetry` import fails.

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

BLOCKED = "opentelemetry"


class NoOpenTelemetry(importlib.abc.MetaPathFinder):
    """Finds `opentelemetry` and its submodules first, and refuses them as a missing package would."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != BLOCKED and not fullname.startswith(f"{BLOCKED}."):
            return None
        attempts = os.environ.get("TOOLPLEX_TEST_OTEL_ATTEMPTS")
        if attempts:
            with open(attempts, "a") as out:
                out.write(f"{fullname}\n")
        raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


def main() -> int:
    for name in [m for m in sys.modules if m == BLOCKED or m.startswith(f"{BLOCKED}.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, NoOpenTelemetry())
    from gateway.cli import main as toolplex

    return toolplex(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
