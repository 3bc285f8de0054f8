"""A 2026-07-28 MCP client over raw HTTP, byte for byte what the revision asks (`Mcp-Method`, `Mcp-Name`, the
`_meta` envelope), for the front's tests where the exact request matters."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

MODERN = "2026-07-28"
DEADLINE_S = 20.0  # bound on every request and poll here


class Caller:
    """One API key speaking 2026-07-28 over raw HTTP, declaring `capabilities` on every request."""

    def __init__(self, key: str, capabilities: dict[str, Any]) -> None:
        self.key = key
        self.capabilities = capabilities
        self._ids = iter(range(1, 10_000))

    def send(self, url: str, method: str, params: dict[str, Any], name: str | None = None) -> httpx.Response:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "test-raw-2026", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        }
        headers = {
            "Authorization": f"Bearer {self.key}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": {**params, "_meta": meta}}
        return httpx.post(url, json=body, headers=headers, timeout=DEADLINE_S)

    def request(self, url: str, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        """The JSON-RPC response (result or error) to one request; `Mcp-Name` is the task id for tasks/*."""
        if name is None and method.startswith("tasks/"):
            name = params["taskId"]
        if name is None and method == "tools/call":
            name = params["name"]
        return message_of(self.send(url, method, params, name))

    def result(self, url: str, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        answer = self.request(url, method, params, name)
        assert "result" in answer, answer
        return answer["result"]  # type: ignore[no-any-return]

    def call(self, url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.result(url, "tools/call", {"name": tool, "arguments": arguments})

    def poll(self, url: str, task_id: str, until: frozenset[str]) -> dict[str, Any]:
        """tasks/get at the task's own poll interval until its status is in `until` (bounded)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            task = self.result(url, "tasks/get", {"taskId": task_id})
            assert task["taskId"] == task_id  # the caller's id, never the upstream's
            if task["status"] in until:
                return task
            assert time.monotonic() < deadline, f"task {task['status']} after {DEADLINE_S} s"
            time.sleep(task.get("pollIntervalMs", 200) / 1000)


def message_of(answer: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response in an answer, sent as JSON or as an SSE stream."""
    if answer.headers.get("content-type", "").startswith("application/json"):
        return answer.json()  # type: ignore[no-any-return]
    for line in answer.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            message = json.loads(line[5:])
            if "id" in message and ("result" in message or "error" in message):
                return message  # type: ignore[no-any-return]
    raise AssertionError(f"no JSON-RPC response in {answer.status_code}: {answer.text[:300]}")
