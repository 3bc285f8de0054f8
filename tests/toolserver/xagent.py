"""What the real XAgent client does with a ToolServerNode answer (XAgent/toolserver_interface.py)."""

from __future__ import annotations

from typing import Any


def unwrap_tool_response(obj: Any) -> Any:
    """The client's unwrapping of the node's result wrapping, minus its file writing."""
    if isinstance(obj, dict):
        if "type" in obj and obj["type"] in ["simple", "composite", "binary"] and "data" in obj:
            if obj["type"] == "simple":
                return obj["data"]
            if obj["type"] == "composite":
                return [unwrap_tool_response(o) for o in obj["data"]]
            return {"media_type": obj["media_type"], "file_name": obj.get("name")}
        return obj
    if isinstance(obj, str | int | float | bool | list) or obj is None:
        return obj
    return None
