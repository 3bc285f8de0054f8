"""XAgent's own ToolServer session against a real `toolplex serve`, byte for byte as the client sends it.

`XAgentClient` reproduces `XAgent/toolserver_interface.py` (ToolServerInterface) and the retry
loop of `XAgent/function_handler.py` (handle_tool_call): the same `requests` calls, payloads,
cookie handling, unwrapping and status mapping, uploads (a `file` part and a `filename` part,
as the real client sends) and downloads. Left out: the recorder cache, the client's 3 s pause
between retries (the gateway's patience paces the loop instead), and `/execute_tool` without a
timeout (here 30 s, so a broken test cannot hang).
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any

import requests

from tests.support import BUILTIN_BACKENDS, gateway_process
from tests.toolserver.xagent import unwrap_tool_response

PATIENCE_S = 0.5
SLEEP_S = 2.0  # several patiences long, well under the client's 10 retries


class ToolCallStatusCode(enum.Enum):
    TOOL_CALL_SUCCESS = 0
    HALLUCINATE_NAME = 1
    FORMAT_ERROR = 2
    TIMEOUT_ERROR = 3
    TOOL_CALL_FAILED = 4
    SERVER_ERROR = 5
    OTHER_ERROR = 6


class XAgentClient:
    def __init__(self, url: str) -> None:
        self.url = url
        self.requests_sent: list[tuple[str, Any]] = []
        response = requests.post(f"{self.url}/get_cookie", timeout=10)
        self.cookies = response.cookies

    def close(self) -> None:
        requests.post(f"{self.url}/close_session", cookies=self.cookies, timeout=10)

    def upload_file(self, file_path: str) -> Any:
        with open(file_path, "rb") as handle:
            files = {"file": handle, "filename": os.path.basename(file_path)}
            response = requests.post(f"{self.url}/upload_file", timeout=10, cookies=self.cookies, files=files)
        response.raise_for_status()
        return response.json()

    def download_file(self, file_path: str, record_root_dir: Path) -> Path:
        response = requests.post(
            f"{self.url}/download_file", json={"file_path": file_path}, timeout=10, cookies=self.cookies
        )
        response.raise_for_status()
        save_path = record_root_dir / file_path
        save_path.parent.mkdir(parents=True, exist_ok=True)
        save_path.write_bytes(response.content)
        return save_path

    def get_workspace_structure(self) -> Any:
        response = requests.post(f"{self.url}/get_workspace_structure", timeout=10, cookies=self.cookies)
        response.raise_for_status()
        return response.json()

    def download_all_files(self, record_root_dir: Path) -> Path:
        response = requests.post(f"{self.url}/download_workspace", cookies=self.cookies, timeout=30)
        response.raise_for_status()
        save_path = record_root_dir / "workspace.zip"
        save_path.write_bytes(response.content)
        return save_path

    def get_available_tools(self) -> dict[str, Any]:
        payload: dict[str, Any] = {}
        response = requests.post(f"{self.url}/get_available_tools", json=payload, timeout=10, cookies=self.cookies)
        response.raise_for_status()
        return response.json()  # type: ignore[no-any-return]

    def retrieve_rapidapi_tools(self, query: str, top_k: int = 10) -> tuple[list[str], list[dict[str, Any]]]:
        payload = {"question": query, "top_k": top_k}
        response = requests.post(f"{self.url}/retrieving_tools", json=payload, timeout=20, cookies=self.cookies)
        body = response.json()
        return body["retrieved_tools"], body["tools_json"]

    def get_json_schema_for_tools(self, command_names: list[str]) -> Any:
        payload = {"tool_names": command_names}
        response = requests.post(
            f"{self.url}/get_json_schema_for_tools", json=payload, timeout=10, cookies=self.cookies
        )
        return response.json()

    def execute_command_client(self, command_name: str, arguments: Any) -> tuple[Any, ToolCallStatusCode]:
        payload = {"tool_name": command_name, "arguments": arguments}
        self.requests_sent.append(("/execute_tool", payload))
        response = requests.post(f"{self.url}/execute_tool", json=payload, cookies=self.cookies, timeout=30)
        status = response.status_code
        command_result = unwrap_tool_response(response.json()) if status in (200, 450) else response.text
        if status == 200:
            code = ToolCallStatusCode.TOOL_CALL_SUCCESS
        elif status == 404:
            code = ToolCallStatusCode.HALLUCINATE_NAME
        elif status == 422:
            code = ToolCallStatusCode.FORMAT_ERROR
        elif status == 450:
            code = ToolCallStatusCode.TIMEOUT_ERROR
        elif status == 500:
            code = ToolCallStatusCode.TOOL_CALL_FAILED
        elif status == 503:
            raise Exception("Server Error: " + command_result)
        else:
            code = ToolCallStatusCode.OTHER_ERROR
        return command_result, code

    def handle_tool_call(self, command_name: str, arguments: Any) -> tuple[Any, ToolCallStatusCode, int]:
        """The agent's call with its retry loop; returns the result, its status and how many retries it took."""
        command_result, code = self.execute_command_client(command_name, arguments)
        max_retry = 10
        retry_time = 0
        while (
            retry_time < max_retry
            and code == ToolCallStatusCode.TIMEOUT_ERROR
            and isinstance(command_result["detail"], dict)
            and "type" in command_result["detail"]
            and command_result["detail"]["type"] == "retry"
        ):
            retry_time += 1
            command_result, code = self.execute_command_client(
                command_result["detail"]["next_calling"], command_result["detail"]["arguments"]
            )
        if code == ToolCallStatusCode.TIMEOUT_ERROR and retry_time == max_retry:
            command_result = "Timeout and no content returned! Please check the content you submit!"
        return command_result, code, retry_time


def test_xagent_session_against_a_real_gateway(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(BUILTIN_BACKENDS + f"fronts:\n  toolserver: {{patience_s: {PATIENCE_S}}}\n")
    with gateway_process(config) as url:
        client = XAgentClient(url)
        assert client.cookies.get("node_id")

        output = client.get_available_tools()
        available_tools: list[str] = output["available_tools"]
        tools_json: list[dict[str, Any]] = output["tools_json"]
        assert "Demo_Sleep" in available_tools
        assert [t["name"] for t in tools_json] == available_tools
        for tool_json in tools_json:  # what function_manager.register_function needs
            assert set(tool_json) == {"name", "description", "parameters"}
            assert tool_json["parameters"]["type"] == "object"

        retrieved, retrieved_json = client.retrieve_rapidapi_tools("sleep for a few seconds")
        assert retrieved[0] == "Demo_Sleep" and retrieved_json[0]["name"] == "Demo_Sleep"
        schemas = client.get_json_schema_for_tools(["Math_Add"])
        assert [t["name"] for t in schemas["tools_json"]] == ["Math_Add"]

        result, code, retries = client.handle_tool_call("Demo_Sleep", {"seconds": SLEEP_S})
        assert (result, code) == ({"slept": SLEEP_S}, ToolCallStatusCode.TOOL_CALL_SUCCESS)
        assert 1 <= retries < 10  # it did go through the 450 loop, and finished within it
        first, *collects = client.requests_sent
        assert first == ("/execute_tool", {"tool_name": "Demo_Sleep", "arguments": {"seconds": SLEEP_S}})
        handles = {payload["arguments"]["handle"] for _, payload in collects}
        assert len(handles) == 1 and all(p["tool_name"] == "Toolplex_collect_result" for _, p in collects)

        # The statuses the client branches on.
        assert client.handle_tool_call("Math_Add", {"a": 2, "b": 40})[:2] == (42, ToolCallStatusCode.TOOL_CALL_SUCCESS)
        assert client.handle_tool_call("Math_Nope", {})[1] == ToolCallStatusCode.HALLUCINATE_NAME
        assert client.handle_tool_call("Math_Add", {"a": "two"})[1] == ToolCallStatusCode.FORMAT_ERROR
        assert client.handle_tool_call("Math_Add", "not json")[1] == ToolCallStatusCode.FORMAT_ERROR
        failed, code, _ = client.handle_tool_call("Demo_Fail", {"message": "kaputt"})
        assert code == ToolCallStatusCode.TOOL_CALL_FAILED and "kaputt" in failed

        client.close()
        stale = requests.post(f"{url}/release_session", cookies=client.cookies, timeout=10)
        assert stale.status_code == 200
        after = requests.post(f"{url}/get_available_tools", json={}, cookies=client.cookies, timeout=10)
        assert after.status_code == 403 and after.json()["detail"].startswith("invalid node_id: ")
