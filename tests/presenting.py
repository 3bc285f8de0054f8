"""What the presenter tests of every front share (tests/<front>/test_presenter.py): a probe toolkit whose tools
break and outlive their deadline, the gateway configuration serving it beside the built-in tools, a spec in no
catalog, and the call through the pipeline whose outcome a presenter is asked to show."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx

from adapters.python import Toolkit, tool
from gateway.model import Call, Outcome, ToolSpec
from tests.support import BUILTIN_BACKENDS


@tool(name="Boom", side_effects=False)
def boom(text: str) -> str:
    """Raise a plain exception (not a ToolError): the tool itself breaks."""
    raise RuntimeError(f"boom: {text}")


@tool(name="Slow", side_effects=False, timeout=0.3)
async def slow(seconds: float = 5) -> str:
    """Outlive the tool's own deadline (0.3 s)."""
    await asyncio.sleep(seconds)
    return "late"


toolkit = Toolkit("Probe", [boom, slow])
CONFIG = BUILTIN_BACKENDS + '  - {name: probe, kind: python, module: "tests.presenting:toolkit"}\n'
NOWHERE = ToolSpec(toolkit="Nope", name="Tool", version="1.0.0", description="Not in the catalog", input_schema={})
QUOTED_CALL_ID = re.compile(r"call id [0-9a-f]{32}")  # an internal error's message quotes the call's own id


async def through_pipeline(
    client: httpx.AsyncClient, spec: ToolSpec, arguments: dict[str, Any], *, qualified: bool = False
) -> Outcome:
    """The call through the gateway's pipeline, for the outcome a presenter shows; by the tool's qualified name
    where the front names tools so (OXP: the failure of an unknown tool quotes the name)."""
    name = spec.qualified_name if qualified else spec.flat_name
    call = Call(tool=name, arguments=dict(arguments), version=spec.version)
    return await client.app.gateway.services.call(call)  # type: ignore[attr-defined,no-any-return]
