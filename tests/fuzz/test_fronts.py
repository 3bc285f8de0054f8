"""Generated requests against a real `toolplex serve`, per front: never a 5xx the protocol does not
define, a traceback, a hang or a dropped connection.

`make test` sends a few hundred (derandomized, so a failure reproduces); `make fuzz` sends
FUZZ_EXAMPLES (10,000) per front with fresh randomness, each front bounded by FUZZ_SECONDS.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.requests import FRONTS, FuzzRequest
from tests.support import BUILTIN_BACKENDS, gateway_process

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
SECONDS = float(os.environ.get("FUZZ_SECONDS", "120"))
RANDOM = os.environ.get("FUZZ_RANDOM") == "1"
CLIENT_TIMEOUT_S = 15.0  # every call is capped at 2 s by the config below: longer is a hang

CONFIG = (
    """
server: {host: 127.0.0.1, port: 8080}
limits: {default_timeout_s: 2, max_timeout_s: 2}
fronts:
  opentool: {prefix: /opentool}
  oxp: {prefix: "", patience_s: 1}
  toolserver: {prefix: "", patience_s: 1}
  jsonrpc: {path: /rpc}
"""
    + BUILTIN_BACKENDS
)


class Server:
    def __init__(self, base: str, log: Path) -> None:
        self.base = base
        self.log = log
        self.client = httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT_S)
        self.sent = 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("fuzz")
    config = folder / "fuzz.yaml"
    config.write_text(CONFIG)
    log = folder / "gateway.log"
    with gateway_process(config, log_path=log) as base:
        found = Server(base, log)
        yield found
        found.client.close()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, f"the gateway logged a traceback:\n{text[-4000:]}"
    assert "internal_error" not in text, f"the gateway logged an internal error:\n{text[-4000:]}"


def protocol_defined_5xx(request: FuzzRequest, response: httpx.Response) -> bool:
    """ToolServerNode answers a tool that raised (or ran out of time) with 500: that one is the protocol."""
    if request.path != "/execute_tool" or response.status_code != 500:
        return False
    detail = orjson.loads(response.content).get("detail")
    return "Internal error" not in str(detail)


def check(request: FuzzRequest, server: Server) -> None:
    try:
        response = server.client.request(request.method, request.path, content=request.body, headers=request.headers)
    except httpx.TimeoutException:
        pytest.fail(f"hang: no answer within {CLIENT_TIMEOUT_S} s to {request}")
    except httpx.TransportError as exc:
        pytest.fail(f"dropped connection ({type(exc).__name__}: {exc}) on {request}")
    finally:
        server.client.cookies.clear()
    server.sent += 1
    body = response.content
    assert b"Traceback" not in body, f"traceback in the answer to {request}"
    if response.status_code == 204:
        return
    media = response.headers.get("content-type", "")
    if media.startswith("text/event-stream"):
        assert response.status_code == 200
        return
    assert media.startswith("application/json"), f"{response.status_code} {media!r} answer to {request}: {body[:200]!r}"
    orjson.loads(body)  # raises on a broken JSON answer
    if response.status_code >= 500:
        assert protocol_defined_5xx(request, response), f"{response.status_code} to {request}: {body[:300]!r}"


@pytest.mark.parametrize("front", sorted(FRONTS))
def test_front_survives_generated_requests(front: str, server: Server) -> None:
    started = time.monotonic()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(FRONTS[front])
    def run(request: FuzzRequest) -> None:
        if time.monotonic() - started > SECONDS:
            return  # bounded in time: the rest of the examples are drawn but not sent
        check(request, server)

    before = server.sent
    run()
    sent = server.sent - before
    print(f"\n{front}: {sent} generated requests in {time.monotonic() - started:.0f} s, none failed")
    assert sent > 0
