"""`kind: openapi` end to end: a real `toolplex serve` fronts the echo API (tests/openapi/echo_app.py, a real
uvicorn process serving its own /openapi.json); each operation is called through every front, and the request
the upstream received (echoed back: method, raw path, raw query, headers, cookies, body) is compared with what
the document prescribes. Then credentials per security scheme, error statuses, and `toolplex check`."""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.front_clients import EXPECTED_CODES, FRONTS
from tests.openapi.fixtures import EchoApp
from tests.support import ROOT, served_gateway

CONFIG = """
secrets: {{basic_password: "${{ECHO_BASIC_PASSWORD}}"}}
backends:
  - name: echo
    kind: openapi
    spec: {document}
    toolkit: Echo
    credentials:
      headerKey: {{value: "${{ECHO_KEY}}"}}
  - name: echo-query
    kind: openapi
    spec: {document}
    toolkit: EchoQuery
    include: [secure]
    credentials: {{queryKey: {{value: q-secret}}}}
  - name: echo-cookie
    kind: openapi
    spec: {document}
    toolkit: EchoCookie
    include: [secure]
    credentials: {{cookieKey: {{value: c-secret}}}}
  - name: echo-basic
    kind: openapi
    spec: {document}
    toolkit: EchoBasic
    include: [secure]
    credentials: {{basic: {{username: ann, secret: basic_password}}}}
  - name: echo-bearer
    kind: openapi
    spec: {document}
    toolkit: EchoBearer
    include: ["tag:*", secure]
    exclude: ["method:POST"]
    credentials: {{bearer: {{token: "${{ECHO_TOKEN}}"}}}}
  - name: echo-forward
    kind: openapi
    spec: {document}
    toolkit: EchoForward
    include: [secure]
    forward_authorization: true
"""
ENV = {"ECHO_KEY": "k-123", "ECHO_BASIC_PASSWORD": "pw", "ECHO_TOKEN": "t-456"}
FILE = bytes(range(8))


@pytest.fixture(scope="module")
def gateway(echo_app: EchoApp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = tmp_path_factory.mktemp("openapi") / "gateway.yaml"
    config.write_text(CONFIG.format(document=echo_app.document_url))
    with served_gateway(config, env=ENV) as (base, _process):
        yield base


def header(echo: dict[str, Any], name: str) -> str | None:
    return next((value for key, value in echo["headers"] if key == name), None)


def body(echo: dict[str, Any]) -> bytes:
    return base64.b64decode(echo["body"])


# (tool, arguments, what the upstream must have received): path and query raw, as on the wire.
REQUESTS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "Echo_pathSimple",
        {"prim": "a b", "arr": ["x", "y"], "obj": {"r": 1, "g": 2}},
        {"method": "GET", "path": "/api/path/simple/a%20b/x,y/r=1,g=2", "query": ""},
    ),
    (
        "Echo_pathLabel",
        {"prim": "a", "arr": ["x", "y"], "obj": {"r": 1, "g": 2}},
        {"path": "/api/path/label/.a/.x,y/.r=1.g=2"},
    ),
    (
        "Echo_pathMatrix",
        {"prim": "a", "arr": ["x", "y"], "obj": {"r": 1, "g": 2}},
        {"path": "/api/path/matrix/;prim=a/;arr=x;arr=y/;obj=r,1,g,2"},
    ),
    (
        "Echo_queryForm",
        {
            "prim": "a&b",
            "flag": True,
            "arr_explode": ["1", "2"],
            "arr_flat": [1, 2],
            "obj_explode": {"r": 1},
            "obj_flat": {"r": 1, "g": 2},
            "reserved": "a/b?c",
            "empty": "",
        },
        {
            "query": "prim=a%26b&flag=true&arr_explode=1&arr_explode=2&arr_flat=1,2&r=1&obj_flat=r,1,g,2"
            "&reserved=a/b?c&empty="
        },
    ),
    ("Echo_queryDelimited", {"space": ["a", "b"], "pipe": [1, 2]}, {"query": "space=a%20b&pipe=1%7C2"}),
    (
        "Echo_queryDeepObject",
        {"filter": {"name": "x y", "min": 3}},
        {"query": "filter%5Bname%5D=x%20y&filter%5Bmin%5D=3"},
    ),
    (
        "Echo_headersAndCookies",
        {"X-Request-Id": "r1", "X-Tags": ["a", "b"], "X-Colour": {"r": 1, "g": 2}, "session": "s1", "ids": [1, 2]},
        {"x-request-id": "r1", "x-tags": "a,b", "x-colour": "r=1,g=2", "cookies": {"session": "s1", "ids": "1,2"}},
    ),
    (
        "Echo_bodyJson",
        {"title": "t", "labels": ["a"], "owner": {"id": 1}, "dry_run": True, "Idempotency-Key": "i-1"},
        {
            "method": "POST",
            "query": "dry_run=true",
            "idempotency-key": "i-1",
            "content_type": "application/json",
            "body": b'{"title":"t","labels":["a"],"owner":{"id":1}}',
        },
    ),
    (
        "Echo_bodyForm",
        {"name": "n m", "ids": [1, 2], "tags": ["a", "b"], "colour": {"r": 1}},
        {
            "method": "PUT",
            "content_type": "application/x-www-form-urlencoded",
            "body": b"name=n%20m&ids=1,2&tags=a&tags=b&colour%5Br%5D=1",
        },
    ),
    (
        "Echo_bodyBinary",
        {"body": base64.b64encode(FILE).decode()},
        {"content_type": "application/octet-stream", "body": FILE},
    ),
    ("Echo_secure", {}, {"x-api-key": "k-123", "query": ""}),  # the first alternative that is configured
    ("EchoQuery_secure", {}, {"query": "api_key=q-secret"}),
    ("EchoCookie_secure", {}, {"cookies": {"token": "c-secret"}}),
    ("EchoBasic_secure", {}, {"authorization": "Basic " + base64.b64encode(b"ann:pw").decode()}),  # from secrets:
    ("EchoBearer_secure", {}, {"authorization": "Bearer t-456"}),
    ("EchoForward_secure", {}, {"authorization": None, "x-api-key": None}),  # the caller sent none: none sent
]


@pytest.mark.parametrize("front", sorted(FRONTS))
@pytest.mark.parametrize(("tool", "arguments", "expected"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_the_upstream_receives_what_the_document_prescribes(
    gateway: str, front: str, tool: str, arguments: dict[str, Any], expected: dict[str, Any]
) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        answer = FRONTS[front](http, tool, arguments)
    assert answer.ok, answer
    echo = answer.value
    for key, value in expected.items():
        if key == "body":
            assert body(echo) == value
        elif key in echo:
            assert echo[key] == value, key
        else:
            assert header(echo, key) == value, key


@pytest.mark.parametrize("front", sorted(FRONTS))
def test_multipart_text_binary_and_empty_answers(gateway: str, front: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        upload = FRONTS[front](
            http, "Echo_bodyMultipart", {"file": base64.b64encode(b"hello").decode(), "note": "hi", "meta": {"a": 1}}
        )
        assert upload.ok, upload
        assert upload.value["content_type"].startswith("multipart/form-data; boundary=")
        sent = body(upload.value)
        assert b'name="file"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\nhello' in sent
        assert b'name="meta"\r\nContent-Type: application/json\r\n\r\n{"a":1}' in sent
        assert FRONTS[front](http, "Echo_text", {"body": "plain words"}).value == "plain words"
        assert FRONTS[front](http, "Echo_deleteItem", {"id": 3}).value in (None, "", {})
        download = FRONTS[front](http, "Echo_download", {"name": "f.bin", "size": 4})
    assert download.ok
    if front == "toolserver":  # a session workspace: the bytes became a file there
        assert download.value == {
            "media_type": "application/octet-stream",
            "size": 4,
            "workspace_file": "downloads/f.bin",
        }
    else:
        assert download.value == {"media_type": "application/octet-stream", "size": 4, "base64": "AAECAw=="}


@pytest.mark.parametrize("front", sorted(FRONTS))
def test_error_statuses_keep_their_meaning(gateway: str, front: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        refused = FRONTS[front](http, "Echo_problem", {"status": 409})
    assert not refused.ok
    assert refused.code == EXPECTED_CODES["tool_failed"][front]


def test_the_problem_details_are_in_the_message(gateway: str) -> None:
    request = {"jsonrpc": "2.0", "method": "Echo_problem", "params": {"status": 404}, "id": "1"}
    error = httpx.post(f"{gateway}/opentool/call", json=request, timeout=30).json()["error"]
    assert error["message"] == "Upstream 'echo' answered HTTP 404: Echoed error: as asked"
    invalid = {"jsonrpc": "2.0", "method": "Echo_pathSimple", "params": {"prim": ".."}, "id": "2"}
    error = httpx.post(f"{gateway}/opentool/call", json=invalid, timeout=30).json()["error"]
    assert set(error["data"]["parameter_errors"]) >= {"arr", "obj"}  # validated against the document's schema


def test_forwarded_credentials_are_the_callers(gateway: str) -> None:
    request = {"jsonrpc": "2.0", "method": "EchoForward_secure", "params": {}, "id": "1"}
    answer = httpx.post(
        f"{gateway}/opentool/call", json=request, headers={"Authorization": "Bearer caller"}, timeout=30
    ).json()
    assert header(answer["result"], "authorization") == "Bearer caller"


def test_secrets_never_reach_the_log(echo_app: EchoApp, tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(CONFIG.format(document=echo_app.document_url))
    log = tmp_path / "gateway.log"
    with served_gateway(config, env=ENV, log_path=log) as (base, _process):
        for tool in ("Echo_secure", "EchoBasic_secure", "EchoBearer_secure"):
            request = {"jsonrpc": "2.0", "method": tool, "params": {}, "id": "1"}
            assert "result" in httpx.post(f"{base}/opentool/call", json=request, timeout=30).json()
    text = log.read_text()
    assert "call" in text
    for secret in ("k-123", "t-456", "q-secret", "c-secret"):
        assert secret not in text


BAD_DOCUMENT = """
openapi: 3.0.3
info: {title: bad, version: 1.0.0}
paths:
  /ok: {get: {operationId: fine, responses: {"200": {description: ok}}}}
  /broken:
    post:
      operationId: broken
      requestBody: {content: {application/json: {schema: {$ref: "#/components/schemas/Missing"}}}}
      responses: {}
"""


def test_check_names_each_unusable_operation_and_loads_the_rest(tmp_path: Path) -> None:
    document = tmp_path / "bad.yaml"
    document.write_text(BAD_DOCUMENT)
    config = tmp_path / "gateway.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            backends:
              - {{name: bad, kind: openapi, spec: {document}, url: "http://127.0.0.1:9"}}
              - {{name: gone, kind: openapi, spec: {tmp_path / "missing.yaml"}, url: "http://127.0.0.1:9"}}
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "check", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "bad_fine" in done.stdout and "bad_broken" not in done.stdout
    pointer = "#/paths/~1broken/post/requestBody/content/application~1json/schema"
    assert f"- {document}{pointer}: $ref '#/components/schemas/Missing': not found (no 'components')" in done.stdout
    assert f"{tmp_path / 'missing.yaml'}#: cannot read it: No such file or directory" in done.stdout  # gone: down
    assert "openapi_operation_skipped" in done.stderr  # and a warning in the log
