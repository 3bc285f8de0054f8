"""Every upstream kind through every front, and every upstream fault through every front.

One real `toolplex serve` fronts real upstream processes on loopback: an OpenTool
server, a REST service, a real Arcade worker (arcade-serve + arcade-math), a
ToolServerNode, another `toolplex serve` reached over OXP, TypeScript tools in the
Node sidecar, and misbehaving servers; each tool is called through OpenTool, OXP,
ToolServerNode and JSON-RPC as a client of that protocol would.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.front_clients import EXPECTED_CODES, FRONTS, Answer
from tests.support import ROOT, free_port, gateway_process, python_server, refused_port, server_process
from tests.upstreams.faults import FAULTS as UPSTREAM_FAULTS
from tests.upstreams.opentool_server import DOCUMENT
from tests.upstreams.test_arcade import ARCADE_PYTHON, SECRET
from tests.upstreams.test_toolserver_upstream import FAULT_LISTING

CALLS: list[tuple[str, dict[str, Any], Any]] = [
    ("Math_Add", {"a": 2, "b": 3}, 5),  # in-process Python
    ("GeoTools_echo", {"message": "hi"}, {"echo": "hi", "headers": {"authorization": None}}),  # OpenTool
    ("Library_GetBook", {"book_id": "7"}, {"id": "7", "fields": ["title"], "title": "Book 7"}),  # plain HTTP
    ("Arcade_Add", {"a": "10", "b": "5"}, "15"),  # Arcade worker
    ("EchoEnv_add", {"a": 2, "b": 3}, 5),  # XAgent ToolServerNode
    ("Inner_WordCount", {"text": "one two three"}, 3),  # another Toolplex, over OXP
    ("InnerOT_WordCount", {"text": "one two"}, 2),  # ... over OpenTool (names kept: issue 11.8)
    ("Text_WordCount", {"text": "a b c d"}, 4),  # ... over its ToolServerNode front
    ("Url_Resolve", {"base": "https://a.example/x/y", "reference": "../z"}, {"href": "https://a.example/z"}),  # TS
]
INNER_CONFIG = """
fronts: {jsonrpc: {enabled: false}}
backends:
  - {name: text, kind: python, module: "adapters.python.toolkits.text:toolkit"}
"""


@contextlib.contextmanager
def upstreams(workdir: Path) -> Iterator[dict[str, int]]:
    subprocess.run([str(ROOT / "tests" / "upstreams" / "install_arcade.sh")], check=True, timeout=600)
    inner = workdir / "inner.yaml"
    inner.write_text(INNER_CONFIG)
    arcade_port = free_port()
    arcade = [str(ARCADE_PYTHON), "tests/upstreams/arcade_worker.py", "--port", str(arcade_port), "--secret", SECRET]
    with (
        python_server("tests.upstreams.opentool_server") as opentool_port,
        python_server("tests.upstreams.rest_server") as rest_port,
        server_process(arcade, arcade_port, env={"ARCADE_USAGE_TRACKING": "0"}, timeout=60),
        python_server("tests.upstreams.toolserver_node") as node_port,
        gateway_process(inner) as inner_base,
    ):
        yield {
            "opentool": opentool_port,
            "rest": rest_port,
            "arcade": arcade_port,
            "node": node_port,
            "inner": int(inner_base.rsplit(":", 1)[1]),
        }


def config_for(ports: dict[str, int]) -> str:
    return f"""
limits: {{default_timeout_s: 20}}
backends:
  - {{name: math, kind: python, module: "adapters.python.toolkits.arithmetic:toolkit"}}
  - {{name: geo, kind: opentool, url: "http://127.0.0.1:{ports["opentool"]}"}}
  - name: library
    kind: http
    url: http://127.0.0.1:{ports["rest"]}
    toolkit: Library
    tools:
      - name: GetBook
        path: "/books/{{book_id}}"
        input_schema: {{type: object, properties: {{book_id: {{type: string}}}}}}
  - {{name: arcade, kind: arcade, url: "http://127.0.0.1:{ports["arcade"]}", secret: "{SECRET}", toolkit: Arcade}}
  - {{name: node, kind: toolserver, url: "http://127.0.0.1:{ports["node"]}", include: [add]}}
  - {{name: inner, kind: oxp, url: "http://127.0.0.1:{ports["inner"]}", toolkit: Inner}}
  - {{name: inner_ot, kind: opentool, url: "http://127.0.0.1:{ports["inner"]}", toolkit: InnerOT}}
  - {{name: inner_tsn, kind: toolserver, url: "http://127.0.0.1:{ports["inner"]}"}}
  - {{name: url, kind: typescript, modules: [config/typescript/url.ts]}}
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("matrix")
    with upstreams(workdir) as ports:
        path = workdir / "gateway.yaml"
        path.write_text(config_for(ports))
        with gateway_process(path) as base:
            yield base


@pytest.mark.parametrize("front", sorted(FRONTS))
@pytest.mark.parametrize(("tool", "arguments", "expected"), CALLS, ids=[c[0] for c in CALLS])
def test_every_kind_through_every_front(gateway: str, front: str, tool: str, arguments: dict, expected: Any) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        answer = FRONTS[front](http, tool, arguments)
    assert answer.ok, answer
    assert answer.value == expected


FAULTS = [(mode, kind.value) for mode, kind in UPSTREAM_FAULTS]
ECHO_DEFINITION = {
    "id": "Echo.Echo@1.0.0",
    "name": "Echo_Echo",
    "description": "Echo a message",
    "version": "1.0.0",
    "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}},
    "output_schema": None,
    "requirements": {},
}
# What each upstream kind's discovery gets from the faulty server, and the tool that then misbehaves.
DISCOVERY = {
    "opentool": (DOCUMENT, "GeoTools_echo"),
    "oxp": ({"items": [ECHO_DEFINITION]}, "Echo_Echo"),
    "toolserver": (FAULT_LISTING, "EchoEnv_echo"),
}


@pytest.mark.parametrize("upstream", sorted(DISCOVERY))
@pytest.mark.parametrize(("mode", "kind"), FAULTS)
def test_faults_in_every_front(tmp_path: Path, upstream: str, mode: str, kind: str) -> None:
    listing, tool = DISCOVERY[upstream]
    document = tmp_path / "document.json"
    document.write_text(json.dumps(listing))
    refused = refused_port()
    fault = ["--mode", mode, "--document", str(document), "--delay", "3"]
    with python_server("tests.upstreams.faulty_server", *fault) as port:
        config = tmp_path / "gateway.yaml"
        config.write_text(
            "limits: {default_timeout_s: 1}\n"
            "backends:\n"
            f"  - {{name: bad, kind: {upstream}, url: 'http://127.0.0.1:{port}', retries: 0}}\n"
            f"  - {{name: gone, kind: http, url: 'http://127.0.0.1:{refused}', toolkit: Gone, retries: 0,"
            " tools: [{name: Get, path: /x}]}\n"
        )
        with gateway_process(config) as base, httpx.Client(base_url=base, timeout=30) as http:
            assert {b["name"]: b["state"] for b in http.get("/readyz").json()["backends"]}["bad"] == "up"

            def both(front: str) -> tuple[Answer, Answer]:
                """One front's two calls, on a client of its own (the fronts wait out their deadlines at once)."""
                with httpx.Client(base_url=base, timeout=30) as own:
                    return FRONTS[front](own, tool, {"message": "x"}), FRONTS[front](own, "Gone_Get", {})

            with ThreadPoolExecutor(max_workers=len(FRONTS)) as pool:
                answers = dict(zip(sorted(FRONTS), pool.map(both, sorted(FRONTS)), strict=True))
            for front, (answer, refused_answer) in answers.items():
                assert not answer.ok and answer.code == EXPECTED_CODES[kind][front], (front, answer)
                assert refused_answer.code == EXPECTED_CODES["upstream_unavailable"][front], (front, refused_answer)
            assert http.get("/healthz").json() == {"status": "ok"}  # still serving


def test_tool_failure_in_every_front(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        for front, call in sorted(FRONTS.items()):
            answer = call(http, "GeoTools_explode", {})
            assert answer.code == EXPECTED_CODES["tool_failed"][front], (front, answer)
