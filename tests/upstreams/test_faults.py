"""Upstream faults against real misbehaving server processes: each becomes the documented
error kind, within the deadline plus a margin, and the gateway keeps serving."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.http.backend import HttpBackend
from adapters.opentool.backend import OpenToolBackend
from gateway.catalog import Catalog
from gateway.dispatch import Dispatcher
from gateway.errors import ErrorKind
from gateway.model import Call
from tests.support import free_port, python_server
from tests.upstreams.faults import FAULTS
from tests.upstreams.opentool_server import DOCUMENT

DEADLINE = 1.0
MARGIN = 3.0  # generous: a 2-core CI machine under load


@pytest.fixture(scope="module")
def document_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("faults") / "document.json"
    path.write_text(json.dumps(DOCUMENT))
    return path


def backends(url: str) -> list[Any]:
    settings = {"url": url, "retries": 2, "retry_backoff_s": 0.01}
    return [
        OpenToolBackend("ot", {"name": "ot", "kind": "opentool", **settings}),
        HttpBackend(
            "web",
            {
                "name": "web",
                "kind": "http",
                "toolkit": "Web",
                **settings,
                "tools": [{"name": "Get", "method": "GET", "path": "/things/{id}", "input_schema": {"type": "object"}}],
            },
        ),
    ]


async def run_calls(url: str) -> dict[str, tuple[ErrorKind | None, float]]:
    found = backends(url)
    specs = [spec for backend in found for spec in await backend.discover()]
    dispatcher = Dispatcher(Catalog(specs), {b.name: b for b in found}, default_timeout=DEADLINE)
    results = {}
    try:
        for tool, args in (("GeoTools_echo", {"message": "x"}), ("Web_Get", {"id": "7"})):
            started = time.monotonic()
            outcome = await dispatcher.call(Call(tool, args))
            results[tool] = (outcome.error.kind if outcome.error else None, time.monotonic() - started)
    finally:
        for backend in found:
            await backend.close()
    return results


@pytest.mark.parametrize(("mode", "kind"), FAULTS)
async def test_fault(mode: str, kind: ErrorKind, document_file: Path) -> None:
    args = ["--mode", mode, "--document", str(document_file), "--delay", str(DEADLINE + 1)]
    with python_server("tests.upstreams.faulty_server", *args) as port:
        results = await run_calls(f"http://127.0.0.1:{port}")
    for tool, (got, seconds) in results.items():
        expected = kind
        if tool == "Web_Get" and mode in ("error500", "wrong", "html"):
            # A plain REST endpoint has no protocol to violate: a 500 is the tool failing,
            # and any 200 body (JSON of any shape, or HTML text) is its value.
            expected = {"error500": ErrorKind.TOOL_FAILED, "wrong": None, "html": None}[mode]
        assert got == expected, (tool, mode)
        assert seconds < DEADLINE + MARGIN, (tool, mode, seconds)


async def test_connection_refused_at_call_time() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    backend = OpenToolBackend("ot", {"name": "ot", "url": url, "retries": 1, "retry_backoff_s": 0.01})
    with pytest.raises(Exception) as info:
        await backend.discover()
    assert "unavailable" in str(info.value)
    web = backends(url)[1]
    dispatcher = Dispatcher(Catalog(await web.discover()), {"web": web}, default_timeout=DEADLINE)
    outcome = await dispatcher.call(Call("Web_Get", {"id": "1"}))
    assert outcome.error is not None and outcome.error.kind == ErrorKind.UPSTREAM_UNAVAILABLE
    await web.close()
    await backend.close()


async def test_circuit_opens_and_fails_fast() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    web = HttpBackend(
        "web",
        {
            "name": "web",
            "url": url,
            "retries": 0,
            "circuit_breaker": {"failures": 2, "cooldown_s": 60},
            "tools": [{"name": "Get", "path": "/x"}],
        },
    )
    web.settings["toolkit"] = "Web"
    dispatcher = Dispatcher(Catalog(await web.discover()), {"web": web}, default_timeout=DEADLINE)
    messages = [(await dispatcher.call(Call("Web_Get", {}))).error for _ in range(3)]
    await web.close()
    assert all(m is not None and m.kind == ErrorKind.UPSTREAM_UNAVAILABLE for m in messages)
    assert "cannot connect" in messages[0].message  # type: ignore[union-attr]
    assert "circuit open" in messages[2].message  # type: ignore[union-attr]
    assert web.upstream.breaker.state == "open"
