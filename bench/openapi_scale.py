"""`kind: openapi` at scale: GitHub's REST API document (npm @octokit/openapi, 1,000+ operations, 13 MB).

Measures, and prints next to the issue's targets (load < 2 s, list < 100 ms):

- load: the backend's discovery in process (read, parse, every operation built), median of `--rounds`;
- start-up: `toolplex serve` with the document, from spawning until `GET /healthz` answers;
- listings: OXP `GET /tools`, OpenTool `GET /opentool/load`, ToolServerNode `POST /get_available_tools`
  and MCP `tools/list` (the fronts' own encodings), median and p95 with response sizes; the first
  request of each is reported apart (it builds what the front caches);
- search: ToolServerNode `POST /retrieving_tools` for questions whose right operation is known.

    .venv/bin/python -m bench.openapi_scale [--document PATH] [--rounds 5]

The document is .tools/openapi/node_modules/@octokit/openapi/generated/api.github.com.json
(tests/openapi/install_openapi_fixtures.sh installs it), else give --document.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.support import ROOT, free_port, stop, wait_for_http

DEFAULT_DOCUMENT = ROOT / ".tools/openapi/node_modules/@octokit/openapi/generated/api.github.com.json"
QUESTIONS = {
    "create an issue in a repository": "issues_create",
    "list the releases of a repository": "repos_list_releases",
    "star a repository for the authenticated user": "activity_star_repo_for_authenticated_user",
    "merge a pull request": "pulls_merge_async",  # this version of the document has both; the async one ranks first
    "delete a gist": "gists_delete",
}


async def load_times(document: Path, rounds: int) -> tuple[list[float], int, int]:
    from adapters.openapi.backend import OpenApiBackend
    from adapters.openapi.settings import OpenApiBackendSettings
    from gateway.backends import BackendContext

    times, count, problems = [], 0, 0
    for _ in range(rounds):
        settings = OpenApiBackendSettings(name="github", kind="openapi", spec=str(document), toolkit="GitHub")
        backend = OpenApiBackend(settings, BackendContext())
        started = time.perf_counter()
        specs = await backend.discover()
        times.append(time.perf_counter() - started)
        count, problems = len(specs), len(backend.warnings)
        await backend.close()
    return times, count, problems


def timed(call, rounds: int) -> tuple[float, list[float], int]:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    size = len(call().content)
    first = time.perf_counter() - started
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return first, times, size


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--document", type=Path, default=DEFAULT_DOCUMENT)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not args.document.is_file():
        print(f"{args.document} is missing: run tests/openapi/install_openapi_fixtures.sh", file=sys.stderr)
        return 1
    loads, count, problems = asyncio.run(load_times(args.document, args.rounds))
    print(f"document: {args.document} ({args.document.stat().st_size / 1e6:.1f} MB)")
    print(
        f"load (discovery in process): median {statistics.median(loads) * 1000:.0f} ms, "
        f"max {max(loads) * 1000:.0f} ms (target < 2000 ms); {count} tools, {problems} warnings"
    )

    with tempfile.TemporaryDirectory() as work:
        config = Path(work) / "gateway.yaml"
        config.write_text(f"backends:\n  - {{name: github, kind: openapi, toolkit: GitHub, spec: {args.document}}}\n")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_http(f"{base}/healthz", process, timeout=60)
            print(f"start-up (spawn to /healthz): {time.perf_counter() - started:.2f} s")
            with httpx.Client(base_url=base, timeout=60) as http:
                http.post("/get_cookie")
                mcp_headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
                hello = {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                }
                opened = http.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
                    headers=mcp_headers,
                )
                if opened.headers.get("mcp-session-id"):
                    mcp_headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
                http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=mcp_headers)
                listings = {
                    "OXP GET /tools": lambda: http.get("/tools"),
                    "OpenTool GET /opentool/load": lambda: http.get("/opentool/load"),
                    "ToolServerNode /get_available_tools": lambda: http.post("/get_available_tools"),
                    "MCP tools/list": lambda: http.post(
                        "/mcp",
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                        headers=mcp_headers,
                    ),
                }
                print("listing (target < 100 ms):")
                for label, call in listings.items():
                    first, times, size = timed(call, args.rounds)
                    median = statistics.median(times) * 1000
                    print(
                        f"  {label:<38} first {first * 1000:7.1f} ms, median {median:7.1f} ms, "
                        f"p95 {p95(times) * 1000:7.1f} ms, {size / 1e6:.2f} MB"
                    )
                print("search (ToolServerNode /retrieving_tools, top 5):")
                for question, wanted in QUESTIONS.items():
                    started = time.perf_counter()
                    answer = http.post("/retrieving_tools", json={"question": question, "top_k": 5}).json()
                    took = time.perf_counter() - started
                    names = answer.get("retrieved_tools", []) if isinstance(answer, dict) else []
                    hit = f"GitHub_{wanted}" in names
                    print(f"  {question!r}: {'found' if hit else 'MISSED'} {wanted} ({took * 1000:.1f} ms)")
        finally:
            stop(process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
