"""The arcade backend against a real Arcade worker process serving the real arcade-math toolkit."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

import pytest

from adapters.arcade.backend import ArcadeBackend
from adapters.arcade.settings import ArcadeBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.errors import ErrorKind
from gateway.model import Call
from tests.support import ROOT, free_port, server_process

SECRET = "arcade-worker-secret-for-tests-0123456789"
ARCADE_PYTHON = ROOT / ".venv-arcade" / "bin" / "python"


@contextlib.contextmanager
def arcade_worker() -> Iterator[str]:
    subprocess.run([str(ROOT / "tests" / "upstreams" / "install_arcade.sh")], check=True, timeout=600)
    port = free_port()
    script = ROOT / "tests" / "upstreams" / "arcade_worker.py"
    command = [str(ARCADE_PYTHON), str(script), "--port", str(port), "--secret", SECRET]
    with server_process(command, port, env={"ARCADE_USAGE_TRACKING": "0"}, timeout=60):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def worker_url() -> Iterator[str]:
    with arcade_worker() as url:
        yield url


def arcade_backend(url: str, secret: str) -> ArcadeBackend:
    config = {"name": "arcade", "kind": "arcade", "url": url, "secret": secret}
    return ArcadeBackend(ArcadeBackendSettings.model_validate(config), BackendContext())


async def test_discovers_and_calls_arcade_math(worker_url: str) -> None:
    backend = arcade_backend(worker_url, SECRET)
    try:
        specs = await backend.discover()
        dispatcher = Dispatcher(Catalog(specs), {"arcade": backend}, default_timeout=20)
        add = dispatcher.catalog.resolve("Math_Add")
        assert add.versioned_id.startswith("Math.Add@") and add.language == "remote"
        assert add.input_schema["properties"]["a"] == {"type": "string", "description": "The first number as a string"}
        assert add.input_schema["required"] == ["a", "b"]
        assert add.side_effects is False  # the worker declares it read-only
        outcome = await dispatcher.call(Call("Math_Add", {"a": "10", "b": "5"}))
        assert outcome.error is None and outcome.value == "15"
        failed = await dispatcher.call(Call("Math_Divide", {"a": "1", "b": "0"}))
        assert failed.error is not None and failed.error.kind == ErrorKind.TOOL_FAILED
        assert "DivisionByZero" in failed.error.message
        assert "Traceback" not in (failed.error.developer_message or "")
        invalid = await dispatcher.call(Call("Math_Add", {"a": 10}))
        assert invalid.error is not None and invalid.error.parameter_errors == {
            "a": "Must be a string",
            "b": "Missing required parameter",
        }
    finally:
        await backend.close()


async def test_wrong_secret_is_upstream_unavailable(worker_url: str) -> None:
    backend = arcade_backend(worker_url, "not-the-secret-0123456789abcdef-xyz")
    try:
        with pytest.raises(Exception, match="unavailable"):
            await backend.discover()
    finally:
        await backend.close()
