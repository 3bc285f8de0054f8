"""The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on the wire: what both halves read.

The canonical model has no tasks: a task is the upstream's own, relayed between the MCP caller that
created it and the upstream that runs it, on 2026-07-28 only. These are the extension's answers as the
backend reads them (kept as the server sent them) and the SDK client extension that lets a `tools/call`
answer a task; the front's side (sealed ids, the three methods) is `adapters.mcp.server.tasks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from adapters.mcp import relay

EXTENSION: Final = relay.TASKS_EXTENSION
CREATED: Final = "task"  # the `resultType` of a CreateTaskResult
METHODS: Final = ("tasks/get", "tasks/update", "tasks/cancel")


# ---- the backend's side: the upstream's answers, read as they came ----


class _Wire(types.Result):
    """A result kept as the server sent it: every key, by its wire name."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)


class CreatedTask(_Wire):
    """An upstream's `CreateTaskResult`: flat, `resultType: "task"`, the task's fields beside it."""

    result_type: Literal["task"] = Field(alias="resultType")


class TaskParams(types.RequestParams):
    """The params of a `tasks/*` request, relayed as the caller sent them (the id aside)."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)
    task_id: str


class TaskRequest(types.Request[TaskParams, str]):
    """`tasks/get`, `tasks/update` or `tasks/cancel`; SEP-2663 puts the task id in `Mcp-Name`."""

    name_param = "taskId"


class TaskAnswer(_Wire):
    """The answer to a `tasks/*` request (a DetailedTask, or an empty acknowledgement)."""


def wire(result: types.Result) -> dict[str, Any]:
    """A result read by `_Wire` as the JSON it came as (keys the server left out stay out)."""
    return result.model_dump(by_alias=True, mode="json", exclude_unset=True)


async def _unexpected(result: CreatedTask, context: ClaimContext) -> types.CallToolResult:
    """The SDK's client resolves a claimed result only where no caller of the extension is (see `Relaying`)."""
    raise RuntimeError(f"it created a task for {context.tool_name}, for a request that did not declare {EXTENSION}")


class Relaying(ClientExtension):
    """What the backend's SDK client knows of the extension: a `tools/call` may answer a `CreatedTask`.

    The client only reads it: the request declares the extension when its caller did (`relay`), and the
    caller, not the gateway, polls the task. An upstream that creates a task for a request that did
    not declare the extension has answered malformed (`_unexpected`).
    """

    identifier = EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type=CREATED, model=CreatedTask, resolve=_unexpected)]


def supported(extensions: Mapping[str, Any] | None) -> bool:
    return bool(extensions) and EXTENSION in (extensions or {})


def missing_extension() -> MCPError:
    return MCPError(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"This request needs the client capability extensions[{EXTENSION!r}]",
        data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def unknown(task_id: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"Unknown task: {task_id}", data={"taskId": task_id})
