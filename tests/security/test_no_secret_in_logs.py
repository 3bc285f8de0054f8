"""No secret in any log line, from any logger, at any level (issue 10, point 8).

A real gateway at DEBUG fronts a real REST upstream through a URL with a password, static
credential headers and a token in the query string, plus an unreachable upstream whose URL
and key carry secrets too; clients call it with an API key, a JWT, a wrong key and an OXP
secret in the call context. Then everything the process printed (stdout and stderr) is
searched for each planted value.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import jwt

from tests.support import ROOT, free_port, python_server, refused_port, stop, wait_for_http

PLANTED = {
    "url_password": "urlpass-3f9c1a7e",
    "static_header": "static-cred-8b2d4e6f",
    "static_bearer": "static-bearer-5a1c9e3d",
    "query_token": "querytoken-7d3e2b1a",
    "dead_password": "deadpass-1e2f3a4b",
    "dead_query": "deadquery-9c8b7a6d",
    "dead_api_key": "deadapikey-2b4d6f8h",
    "api_key": "client-api-key-6e5d4c3b",
    "wrong_key": "wrong-api-key-0a9b8c7d",
    "jwt_secret": "jwt-secret-for-logs-test-0123456789abcdef",
    "oxp_secret": "oxp-context-secret-4f3e2d1c",
    "configured_secret": "configured-secret-1a2b3c4d",
}
JWT_ENV = "TOOLPLEX_LOGS_TEST_JWT"


def config(rest_port: int, dead_port: int) -> str:
    p = PLANTED
    return textwrap.dedent(f"""
        logging: {{level: debug}}
        server: {{loop: asyncio}}  # asyncio's loop logs a DEBUG line of its own: proof that libraries ran at DEBUG
        auth:
          api_keys:
            - {{key: "{p["api_key"]}", name: ci}}
          jwt: {{secret_env: {JWT_ENV}}}
        secrets:
          WEATHER_API_KEY: "{p["configured_secret"]}"
        backends:
          - name: library
            kind: http
            url: "http://svc-user:{p["url_password"]}@127.0.0.1:{rest_port}"
            headers: {{X-Api-Key: "{p["static_header"]}", X-Upstream-Auth: "Bearer {p["static_bearer"]}"}}
            retries: 0
            toolkit: Library
            tools:
              - name: GetBook
                path: /books/{{book_id}}
                query: [access_token]
                input_schema:
                  type: object
                  properties: {{book_id: {{type: string}}, access_token: {{type: string}}}}
                  required: [book_id]
          - name: deadlib
            kind: http
            url: "http://dead-user:{p["dead_password"]}@127.0.0.1:{dead_port}"
            headers: {{Authorization: "Bearer {p["dead_api_key"]}"}}
            retries: 0
            toolkit: Dead
            tools:
              - name: Fetch
                path: /fetch
                query: [token]
                input_schema: {{type: object, properties: {{token: {{type: string}}}}}}
          - name: deadtools
            kind: opentool
            url: "http://dead-user:{p["dead_password"]}@127.0.0.1:{dead_port}"
            api_key: "{p["dead_api_key"]}"
          - {{name: requirements, kind: python, module: "adapters.python.toolkits.demo_requirements:toolkit"}}
    """)


def exercise(base: str) -> None:
    """Every path that handles a credential, successful and failing, on each front."""
    p = PLANTED
    token = jwt.encode({"sub": "ada", "exp": int(time.time()) + 300}, p["jwt_secret"], algorithm="HS256")
    expired = jwt.encode({"sub": "ada", "exp": int(time.time()) - 300}, p["jwt_secret"], algorithm="HS256")
    PLANTED["jwt"] = token
    PLANTED["expired_jwt"] = expired
    key = {"Authorization": f"Bearer {p['api_key']}"}
    with httpx.Client(base_url=base, timeout=30) as client:
        book = {"book_id": "b1", "access_token": p["query_token"]}
        rpc = {"jsonrpc": "2.0", "method": "Library_GetBook", "params": book, "id": "1"}
        assert client.post("/opentool/call", json=rpc, headers=key).json()["result"]["id"] == "b1"
        assert client.post("/opentool/call", json=rpc, headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert client.post("/opentool/call", json=rpc, headers={"X-API-Key": p["api_key"]}).status_code == 200
        missing = {**rpc, "params": {"book_id": "missing", "access_token": p["query_token"]}}
        assert client.post("/opentool/call", json=missing, headers=key).json()["error"]
        dead = {"jsonrpc": "2.0", "method": "Dead_Fetch", "params": {"token": p["query_token"]}, "id": "2"}
        assert client.post("/opentool/call", json=dead, headers=key).json()["error"]
        for bad in (p["wrong_key"], expired, f"{token}x"):
            assert (
                client.post("/opentool/call", json=rpc, headers={"Authorization": f"Bearer {bad}"}).status_code == 401
            )
            assert client.get("/tools", headers={"Authorization": f"Bearer {bad}"}).status_code == 401
        secret = {"id": "DEMO_API_KEY", "value": p["oxp_secret"]}
        call = {"tool_id": "Demo.SecretCheck", "input": {}, "context": {"secrets": [secret]}}
        answer = client.post("/tools/call", json=call, headers={"Authorization": f"Bearer {token}"})
        assert answer.json()["success"] is True, answer.text
        wrong = {
            "tool_id": "Demo.SecretCheck",
            "input": {"x": p["oxp_secret"]},
            "context": {"secrets": [secret]},
        }
        assert client.post("/tools/call", json=wrong, headers=key).status_code == 422
        tsn = {"tool_name": "Library_GetBook", "arguments": book}
        assert client.post("/execute_tool", json=tsn, headers=key).status_code == 200
        cookie = {"Cookie": f"node_id={p['wrong_key']}", **key}
        assert client.post("/execute_tool", json=tsn, headers=cookie).status_code == 403
        execute = {"tool": "Library_GetBook", "parameters": book}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tool.execute", "params": execute}
        assert "result" in client.post("/rpc", json=body, headers=key).json()
        assert client.post("/rpc", json=body, headers={"Authorization": f"Bearer {p['wrong_key']}"}).status_code == 401


def test_no_planted_secret_appears_in_anything_the_gateway_printed(tmp_path: Path) -> None:
    dead_port = refused_port()  # nothing listens there: connection errors and discovery failures get logged
    with python_server("tests.upstreams.rest_server") as rest_port:
        path = tmp_path / "gateway.yaml"
        path.write_text(config(rest_port, dead_port))
        output = tmp_path / "output.log"
        port = free_port()
        cmd = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(path), "--port", str(port)]
        env = {**os.environ, JWT_ENV: PLANTED["jwt_secret"]}
        with output.open("wb") as sink:
            process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
            try:
                wait_for_http(f"http://127.0.0.1:{port}/healthz", process)
                exercise(f"http://127.0.0.1:{port}")
            finally:
                stop(process)
    printed = output.read_text(errors="replace")
    # the log is not empty: DEBUG lines, the calls, and the failures that carry URLs were all written
    assert "Using selector" in printed  # asyncio's DEBUG line: library loggers ran at DEBUG
    assert printed.count('"event":"call"') >= 8
    assert "deadtools" in printed and "backend_down" in printed
    leaked = {name: value for name, value in PLANTED.items() if value in printed}
    assert not leaked, f"secrets in the log: {sorted(leaked)}"
    signature = PLANTED["jwt"].rsplit(".", 1)[1]
    assert signature not in printed
