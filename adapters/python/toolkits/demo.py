"""Demo: tools that exercise the gateway itself (long calls, failures)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from adapters.python import ToolError, Toolkit, tool


@tool(name="Sleep", timeout=65, side_effects=False)
async def sleep(
    seconds: Annotated[float, Field(ge=0, le=60), "How long to sleep, at most 60 seconds"],
) -> dict[str, float]:
    """Sleep for a while, then say how long; for trying deadlines and long calls."""
    await asyncio.sleep(seconds)
    return {"slept": seconds}


@tool(name="Fail")
def fail(message: Annotated[str, "The message of the error to raise"]) -> None:
    """Always fail with a retryable tool error carrying `message`."""
    raise ToolError(
        message,
        developer_message="Demo.Fail always fails",
        can_retry=True,
        retry_after_ms=500,
        additional_prompt_content="This tool fails on purpose.",
    )


toolkit = Toolkit("Demo", [sleep, fail], description="Tools for trying the gateway")
