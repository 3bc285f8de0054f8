"""The tools the MCP conformance suite's tool scenarios call, as a Python toolkit Toolplex serves.

Toolkit `test` makes the flat names the suite asks for (`test_simple_text`, ...). A tool with no
object output schema that returns `{"content": [...]}` has its MCP content blocks passed through as
they are (image, audio, embedded resource, mixed). The suite's logging, sampling and elicitation
tools are left out: a catalog tool cannot log to the client or ask it anything (docs/protocols/mcp.md).
Progress is the front's own: it reports while a call runs, so `test_tool_with_progress` runs long
enough for a few reports.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from adapters.python import ToolError, Toolkit, tool

# The suite's fixtures: a 1x1 PNG and a tiny WAV (the same bytes tests/mcp/reference_server.py sends).
PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
PROGRESS_S = 0.5  # with the conformance config's progress_interval_s of 0.1: several reports


def _embedded(uri: str, mime_type: str, text: str) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": text}}


@tool(name="simple_text", side_effects=False)
def simple_text() -> str:
    """A fixed text answer (conformance: tools-call-simple-text)."""
    return "This is a simple text response for testing."


@tool(name="image_content", side_effects=False)
def image_content() -> Any:
    """One image block (conformance: tools-call-image); `Any`: no output schema, so the blocks pass through."""
    return {"content": [{"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}]}


@tool(name="audio_content", side_effects=False)
def audio_content() -> Any:
    """One audio block (conformance: tools-call-audio)."""
    return {"content": [{"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}]}


@tool(name="embedded_resource", side_effects=False)
def embedded_resource() -> Any:
    """One embedded text resource (conformance: tools-call-embedded-resource)."""
    return {"content": [_embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]}


@tool(name="multiple_content_types", side_effects=False)
def multiple_content_types() -> Any:
    """Text, image and embedded resource in one result (conformance: tools-call-mixed-content)."""
    mixed = json.dumps({"test": "data", "value": 123})
    return {
        "content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
            _embedded("test://mixed-content-resource", "application/json", mixed),
        ]
    }


@tool(name="error_handling", side_effects=False)
def error_handling() -> None:
    """Always fails: the front answers `isError: true` (conformance: tools-call-error)."""
    raise ToolError("This tool intentionally returns an error for testing")


@tool(name="tool_with_progress", side_effects=False)
async def tool_with_progress() -> str:
    """Runs a while; the front sends progress notifications meanwhile (conformance: tools-call-with-progress)."""
    await asyncio.sleep(PROGRESS_S)
    return "Progress tool completed"


toolkit = Toolkit(
    "test",
    [
        simple_text,
        image_content,
        audio_content,
        embedded_resource,
        multiple_content_types,
        error_handling,
        tool_with_progress,
    ],
    description="The tools the MCP conformance suite calls",
)
