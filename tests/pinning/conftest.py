"""An upstream whose tool changes between discoveries, and a real redis-server for the replica tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.pinning.changing_server import ORIGINAL, write
from tests.support import free_port, server_process


@dataclass
class Upstream:
    url: str
    document: Path

    def serve(self, doc: dict) -> None:  # type: ignore[type-arg]
        """What the next discovery finds."""
        write(self.document, doc)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    document = tmp_path / "document.json"
    write(document, ORIGINAL)
    port = free_port()
    command = [sys.executable, "-m", "tests.pinning.changing_server", "--port", str(port), "--document", str(document)]
    with server_process(command, port):
        yield Upstream(f"http://127.0.0.1:{port}", document)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    from tests.state.redis_server import redis_server

    with redis_server() as url:
        yield url
