"""Tools in the two other styles, to run isolated: seed 002 (this module) and seed 000 (`pid_tool`)."""

from __future__ import annotations

import os
from typing import Any


def tool_info() -> dict[str, Any]:
    return {
        "name": "whereami",
        "description": "The process id the tool runs in.",
        "parameters": {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]},
    }


def tool_function(tag: str) -> dict[str, Any]:
    return {"tag": tag, "pid": os.getpid()}


class PidTool:
    """A seed-000 style `Tool` object (load() and call(name, arguments))."""

    def load(self) -> dict[str, Any]:
        return {
            "opentool": "1.1.0",
            "info": {"title": "Pid tools", "version": "1.0.0"},
            "functions": [
                {
                    "name": "pid",
                    "description": "The process id the tool runs in.",
                    "parameters": [{"name": "tag", "schema": {"type": "string"}, "required": True}],
                }
            ],
        }

    def call(self, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        return {"function": name, "tag": (arguments or {}).get("tag"), "pid": os.getpid()}


pid_tool = PidTool()
