"""The MCP page's raw HTTP examples work as printed (docs/protocols/mcp.md, "Raw HTTP (curl)").

Each ```sh block of that section runs as one bash script, as a reader would paste it, against a real
`toolplex serve` of config/gateway.yaml on a free loopback port (the page's `http://127.0.0.1:8080`
replaced by it). The `curl` those scripts find first on the PATH is a recorder: it runs the real curl
with the command's own arguments and passes its output through unchanged, and notes for each request
its arguments, the HTTP status, the response headers and what curl printed. The test then reads what a
client reads: each answer's status (and content type) against the `# <status>` line printed under the
command, `result.tools` holding Math_Add, a call of Math_Add with a=2, b=3 giving 5, and in the
handshake era the `Mcp-Session-Id` of `initialize` sent by every later request and closed by the
`DELETE`. The refusals the section's table lists are sent too (with httpx), each answer's message
being the one printed.

(tests/e2e/test_readme.py also runs these blocks, as it runs every curl block of the pages, checking
only that they exit 0 and print something.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docs.pages import DOCS
from tests.e2e.test_readme import BLOCK, commands
from tests.support import DEFAULT_CONFIG, gateway_process

PAGE = DOCS / "protocols" / "mcp.md"
HEADING = "### Raw HTTP (curl)"
PRINTED_URL = "http://127.0.0.1:8080/mcp"
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
FENCE = re.compile(r"^(```|~~~)")
SECTION_END = re.compile(r"^#{1,3} ")  # the next heading of the same level or above (outside a fence)
ANSWER = re.compile(r"^# (?P<status>\d{3})\b(?P<rest>.*)$")
MARK = "@@toolplex-curl-record@@"

# curl >= 7.83 (for %{header_json}); the recorder's own write-out goes to stderr, so stdout is the command's.
RECORDER = '''#!{python}
"""curl, recording each request for tests/docs/test_mcp_curl_examples.py."""
import json, os, subprocess, sys

done = subprocess.run(
    [{curl!r}, "--write-out", "%{{stderr}}{mark}%{{http_code}}\\n%{{content_type}}\\n%{{header_json}}", *sys.argv[1:]],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
)
err, found, info = done.stderr.partition(b"{mark}")
sys.stdout.buffer.write(done.stdout)
sys.stderr.buffer.write(err)
record = {{"argv": sys.argv[1:], "exit": done.returncode, "stdout": done.stdout.decode("utf-8", "replace")}}
if found:
    status, content_type, headers = info.decode("utf-8", "replace").split("\\n", 2)
    record.update(status=int(status), content_type=content_type, headers=json.loads(headers))
with open(os.environ["CURL_RECORDS"], "a") as log:
    log.write(json.dumps(record) + "\\n")
sys.exit(done.returncode)
'''


# ---- the section, its blocks and their steps ----


def section() -> str:
    """The section's text, from its heading to the next heading of its level or above."""
    lines = PAGE.read_text().splitlines()
    assert HEADING in lines, f"{PAGE.name} has no {HEADING!r} section"
    start = lines.index(HEADING)
    fenced = False
    for end in range(start + 1, len(lines)):
        if FENCE.match(lines[end]):
            fenced = not fenced
        elif not fenced and SECTION_END.match(lines[end]):
            return "\n".join(lines[start:end]) + "\n"
    return "\n".join(lines[start:]) + "\n"


@dataclass(frozen=True)
class Step:
    """One command of a block and the `# <status> ...` line printed right under it (curl commands only)."""

    command: str
    status: int | None = None
    content_type: str | None = None  # when the printed line names one


def steps(block: str) -> list[Step]:
    found: list[Step] = []
    position = 0
    for command, _ in commands(block):
        position = block.index(command, position) + len(command)
        following = block[position:].lstrip("\n").split("\n", 1)[0]
        answer = ANSWER.match(following)
        if answer is None:
            found.append(Step(command))
            continue
        printed = re.search(r"application/json|text/event-stream", answer["rest"])
        found.append(Step(command, int(answer["status"]), printed.group(0) if printed else None))
    return found


def era_block(marker: str) -> str:
    """The section's one ```sh block that contains `marker`."""
    matching = [block for block in BLOCK.findall(section()) if marker in block]
    assert len(matching) == 1, f"expected one ```sh block with {marker!r} in {HEADING}, found {len(matching)}"
    return matching[0]


def modern_block() -> str:
    return era_block(f"MCP-Protocol-Version: {MODERN}")


def handshake_block() -> str:
    return era_block('"method": "initialize"')


# ---- running a block ----


@dataclass(frozen=True)
class Record:
    """One request a block's curl made, as the recorder saw it."""

    argv: list[str]
    status: int
    content_type: str
    headers: dict[str, list[str]]  # lower-case names
    stdout: str

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[0] if values else None

    def sent(self, name: str) -> list[str]:
        """The values of the request header `name` the command passed with -H."""
        out = []
        for flag, value in zip(self.argv, self.argv[1:], strict=False):
            if flag in ("-H", "--header"):
                key, _, rest = value.partition(":")
                if key.strip().lower() == name.lower():
                    out.append(rest.strip())
        return out

    def message(self) -> dict[str, Any]:
        """The JSON-RPC answer: the JSON body, or the SSE stream's last `data:` that answers a request."""
        body = self.stdout.split("\r\n\r\n", 1)[1] if self.stdout.startswith("HTTP/") else self.stdout
        if not self.content_type.startswith("text/event-stream"):
            return json.loads(body)
        answers = [
            message
            for line in body.splitlines()
            if line.startswith("data:") and line[5:].strip()
            for message in [json.loads(line[5:])]
            if "result" in message or "error" in message
        ]
        assert answers, f"no JSON-RPC answer in the SSE stream:\n{body}"
        return answers[-1]


def run_block(block: str, base: str, tools: Path, workdir: Path) -> list[Record]:
    """Run the block as printed (its URL made the test gateway's); the requests its curl made, in order."""
    log = workdir / "curl-records.jsonl"
    script = "set -euo pipefail\n" + block.replace("http://127.0.0.1:8080", base)
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}", "CURL_RECORDS": str(log)}
    done = subprocess.run(["bash", "-c", script], cwd=workdir, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"the block failed (exit {done.returncode}):\n{done.stderr}\n{block}"
    records = []
    for line in log.read_text().splitlines():
        raw = json.loads(line)
        assert "status" in raw, f"curl recorded no status (does the command set its own --write-out?): {raw['argv']}"
        assert raw["exit"] == 0, f"curl exited {raw['exit']}: {raw['argv']}"
        headers = {name.lower(): values for name, values in raw["headers"].items()}
        records.append(Record(raw["argv"], raw["status"], raw["content_type"], headers, raw["stdout"]))
    return records


def checked_run(block: str, base: str, tools: Path, workdir: Path) -> list[Record]:
    """Run the block; each curl's answer has the status (and content type) printed under its command."""
    printed = [step for step in steps(block) if step.command.lstrip().startswith("curl")]
    records = run_block(block, base, tools, workdir)
    assert len(records) == len(printed), f"{len(printed)} curl commands made {len(records)} requests"
    for step, record in zip(printed, records, strict=True):
        assert record.status == step.status, f"{step.command}\nprinted {step.status}, got {record.status}"
        if step.content_type is not None:
            assert record.content_type.startswith(step.content_type), f"{step.command}\n{record.content_type}"
    return records


def value_of(result: dict[str, Any]) -> Any:
    """What a client takes from a `tools/call` result: `structuredContent`, else its text block's JSON."""
    assert result.get("isError") is False, result
    if "structuredContent" in result:
        return result["structuredContent"]
    texts = [block["text"] for block in result["content"] if block["type"] == "text"]
    assert len(texts) == 1, result
    return json.loads(texts[0])


def tool_names(result: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in result["tools"]]


# ---- fixtures ----


def curl_version() -> tuple[int, ...]:
    first = subprocess.run(["curl", "--version"], capture_output=True, text=True, timeout=10).stdout.split()
    return tuple(int(part) for part in first[1].split(".")[:2]) if len(first) > 1 else (0,)


needs_curl = pytest.mark.skipif(
    shutil.which("curl") is None or curl_version() < (7, 83),
    reason="needs curl 7.83 or newer (%{header_json})",
)


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    with gateway_process(DEFAULT_CONFIG) as base:
        yield base


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose `curl` is the recorder."""
    real = shutil.which("curl")
    assert real is not None
    directory = tmp_path_factory.mktemp("recorder")
    recorder = directory / "curl"
    recorder.write_text(RECORDER.format(python=sys.executable, curl=real, mark=MARK))
    recorder.chmod(recorder.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


# ---- the page ----


def test_section_shows_both_eras() -> None:
    text = section()
    assert f"Accept: {ACCEPT}" in text
    assert "Authorization: Bearer $TOOLPLEX_API_KEY" in text
    modern, handshake = modern_block(), handshake_block()
    for method in ("server/discover", "tools/list", "tools/call"):
        assert f"Mcp-Method: {method}" in modern and f'"method": "{method}"' in modern, method
    assert "Mcp-Name: Math_Add" in modern and "io.modelcontextprotocol/clientCapabilities" in modern
    for method in ("initialize", "notifications/initialized", "tools/list", "tools/call"):
        assert f'"method": "{method}"' in handshake, method
    assert "-X DELETE" in handshake and f"MCP-Protocol-Version: {HANDSHAKE}" in handshake
    for block in (modern, handshake):
        for step in steps(block):
            if step.command.lstrip().startswith("curl"):
                assert PRINTED_URL in step.command, step.command
                assert step.status is not None, f"no '# <status> ...' answer printed under:\n{step.command}"
                if "-X DELETE" not in step.command:
                    assert f"Accept: {ACCEPT}" in step.command, step.command


def test_steps_read_the_printed_answers() -> None:
    """The parser this test relies on: a command, the status and content type printed under it."""
    lines = ["curl -s x \\", '  -d \'{"a":', " 1}'", "# 200 application/json: {...}", "V=$(echo 1)", "curl -si y"]
    block = "\n".join([*lines, "# 202 Accepted, no body", ""])
    assert steps(block) == [
        Step("curl -s x \\\n  -d '{\"a\":\n 1}'", 200, "application/json"),
        Step("V=$(echo 1)"),
        Step("curl -si y", 202, None),
    ]


# ---- the examples, run ----


@needs_curl
def test_stateless_era_as_printed(gateway: str, tools: Path, tmp_path: Path) -> None:
    discover, listed, called = checked_run(modern_block(), gateway, tools, tmp_path)
    for record in (discover, listed, called):
        assert record.header("mcp-session-id") is None, "the 2026-07-28 era has no session"
        assert record.sent("MCP-Protocol-Version") == [MODERN]
        assert record.message()["jsonrpc"] == "2.0"
    assert MODERN in discover.message()["result"]["supportedVersions"]
    assert "tools" in discover.message()["result"]["capabilities"]
    result = listed.message()["result"]
    assert "Math_Add" in tool_names(result), tool_names(result)
    assert "nextCursor" not in result  # one page: the printed request needs no cursor
    (add,) = [tool for tool in result["tools"] if tool["name"] == "Math_Add"]
    assert sorted(add["inputSchema"]["required"]) == ["a", "b"]
    assert value_of(called.message()["result"]) == 5


@needs_curl
def test_handshake_era_as_printed(gateway: str, tools: Path, tmp_path: Path) -> None:
    opened, initialized, listed, called, closed = checked_run(handshake_block(), gateway, tools, tmp_path)
    session = opened.header("mcp-session-id")
    assert session, "initialize answered no Mcp-Session-Id"
    result = opened.message()["result"]
    assert result["protocolVersion"] == HANDSHAKE and result["serverInfo"]["name"] == "toolplex"
    for record in (initialized, listed, called, closed):
        assert record.sent("Mcp-Session-Id") == [session], "the session id must flow from initialize"
        assert record.sent("MCP-Protocol-Version") == [HANDSHAKE]
    assert "Math_Add" in tool_names(listed.message()["result"])
    assert value_of(called.message()["result"]) == 5
    # The DELETE closed the session: its id now gets 404, as the page says.
    after = httpx.post(
        f"{gateway}/mcp",
        headers={
            "Content-Type": "application/json",
            "Accept": ACCEPT,
            "Mcp-Session-Id": session,
            "MCP-Protocol-Version": HANDSHAKE,
        },
        content=b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}',
        timeout=10,
    )
    assert after.status_code == 404 and after.json()["error"]["message"] in section()


# ---- what a request lacking a piece gets (the section's table) ----

ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
LIST_HEADERS = {
    "Content-Type": "application/json",
    "Accept": ACCEPT,
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "tools/list",
}
CALL_HEADERS = {**LIST_HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": "Math_Add"}
LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": ENVELOPE}}
CALL = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {"name": "Math_Add", "arguments": {"a": 2, "b": 3}, "_meta": ENVELOPE},
}


def without(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


# (headers, body, status, JSON-RPC code or None, the message as the section prints it, or None: no body)
REFUSALS = {
    "no _meta": (LIST_HEADERS, without(LISTING, "params"), 400, -32602, None),
    "empty _meta": (LIST_HEADERS, {**LISTING, "params": {"_meta": {}}}, 400, -32602, None),
    "no Mcp-Method": (without(LIST_HEADERS, "Mcp-Method"), LISTING, 400, -32020, None),
    "no Mcp-Name": (without(CALL_HEADERS, "Mcp-Name"), CALL, 400, -32020, None),
    "version mismatch": (
        LIST_HEADERS,
        {**LISTING, "params": {"_meta": {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": HANDSHAKE}}},
        400,
        -32020,
        None,
    ),
    "no version header": (without(LIST_HEADERS, "MCP-Protocol-Version"), LISTING, 400, -32600, None),
    "JSON only": ({**LIST_HEADERS, "Accept": "application/json"}, LISTING, 406, None, None),
    "no Content-Type": (without(LIST_HEADERS, "Content-Type"), LISTING, 400, None, "Invalid Content-Type header"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_documented_refusals(gateway: str, case: str) -> None:
    headers, body, status, code, text = REFUSALS[case]
    answer = httpx.post(f"{gateway}/mcp", headers=headers, content=json.dumps(body).encode(), timeout=10)
    assert answer.status_code == status, answer.text
    if code is None:
        if text is None:
            assert answer.content == b""
        else:
            assert answer.text == text and text in section()
        return
    error = answer.json()["error"]
    assert error["code"] == code, error
    printed = section()
    assert f"`{code}` `{error['message']}`" in printed, f"the section does not print this answer: {error}"
    assert f"{status}, `{code}`" in printed
