"""The `io.modelcontextprotocol/tasks` extension (SEP-2663) for the reference server, on 2026-07-28.

The `mcp` SDK 2.3.0 does not implement this extension (its own conformance baseline lists every
`tasks-*` scenario as an expected failure); it does route custom methods and lets a `tools/call`
return an extension `resultType`, which is all this module needs. What the conformance suite's
`tasks-*` scenarios ask for, from their requirement texts:

- the server advertises the extension under `capabilities.extensions`; a request whose client did not
  declare it gets `tasks/get`, `tasks/update` and `tasks/cancel` refused with -32021, a tool whose task
  support is `optional` runs synchronously, and one whose support is `required` is refused with -32021;
- for a client that declared it, a task-supporting `tools/call` answers a flat `CreateTaskResult`
  (`resultType: "task"`, `taskId`, `status`, `createdAt`, `lastUpdatedAt`, `ttlMs`, `pollIntervalMs`)
  once `tasks/get` can already find the task;
- `tasks/get` answers the task with its result inlined when completed, its JSON-RPC error when failed,
  and the pending `inputRequests` when it waits for the client, which answers through `tasks/update`
  (one key at a time if it likes); `tasks/cancel` is an empty acknowledgement, idempotent on a finished
  task; an unknown task id is -32602; `Mcp-Name` must name the task id.

A task runs as an asyncio task of the server process, so tasks live as long as the process does: this
is a reference for the conformance suite, not a durable store.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

Ctx = ServerRequestContext[Any, Any]
InputRequest = types.ElicitRequest | types.CreateMessageRequest | types.ListRootsRequest

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TTL_MS: Final = 300_000  # how long a task stays readable after it was created
POLL_INTERVAL_MS: Final = 200
MAX_TASKS: Final = 1024  # tasks kept at once; finished ones are dropped first beyond it
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})

RESULT_TYPES: Final[dict[type[Any], type[Any]]] = {
    types.ElicitRequest: types.ElicitResult,
    types.CreateMessageRequest: types.CreateMessageResult,
    types.ListRootsRequest: types.ListRootsResult,
}


def negotiated(ctx: Ctx) -> bool:
    """Whether this request's client declared the tasks extension (per request, on 2026-07-28 only)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    declared = ctx.session.client_capabilities
    return declared is not None and TASKS_EXTENSION in (declared.extensions or {})


def missing_extension() -> MCPError:
    return MCPError(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"This request needs the client capability extensions[{TASKS_EXTENSION!r}]",
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskCancelled(Exception):
    """The task was cancelled while it waited for its client."""


@dataclass
class Pending:
    request: InputRequest
    answer: asyncio.Future[Any]


@dataclass
class TaskRecord:
    task_id: str
    created_at: str
    created_monotonic: float
    status: str = "working"
    updated_at: str = ""
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    pending: dict[str, Pending] = field(default_factory=dict)
    runner: asyncio.Task[None] | None = None

    def touch(self, status: str) -> None:
        self.status = status
        self.updated_at = _now()

    def envelope(self) -> dict[str, Any]:
        """The Task fields both CreateTaskResult and tasks/get carry."""
        return {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }


class TaskInputs:
    """A task's questions to its client: the task waits in input_required until tasks/update answers."""

    def __init__(self, record: TaskRecord) -> None:
        self._record = record

    async def ask(self, requests: Mapping[str, InputRequest]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        waiting = {key: Pending(request, loop.create_future()) for key, request in requests.items()}
        self._record.pending.update(waiting)
        self._record.touch("input_required")
        try:
            answers = {key: await pending.answer for key, pending in waiting.items()}
        finally:
            for key in waiting:
                self._record.pending.pop(key, None)
        if self._record.status == "input_required" and not self._record.pending:
            self._record.touch("working")
        return answers


Work = Callable[[TaskInputs], Awaitable[types.CallToolResult]]


class TaskStore:
    """Every task of the process, by id; expired after TTL_MS, bounded by MAX_TASKS."""

    def __init__(self) -> None:
        self._records: collections.OrderedDict[str, TaskRecord] = collections.OrderedDict()

    def start(self, work: Work) -> TaskRecord:
        """Create the task (readable by tasks/get from now on), then run `work` in the background."""
        self._expire()
        if len(self._records) >= MAX_TASKS:
            finished = [key for key, record in self._records.items() if record.status in TERMINAL]
            if not finished:
                raise MCPError(types.INTERNAL_ERROR, f"Too many tasks in progress ({MAX_TASKS})")
            del self._records[finished[0]]
        now = _now()
        record = TaskRecord(task_id=uuid.uuid4().hex, created_at=now, updated_at=now, created_monotonic=_clock())
        self._records[record.task_id] = record
        record.runner = asyncio.get_running_loop().create_task(self._run(record, work))
        return record

    async def _run(self, record: TaskRecord, work: Work) -> None:
        try:
            result = await work(TaskInputs(record))
        except (asyncio.CancelledError, TaskCancelled):
            record.touch("cancelled")
            return
        except MCPError as exc:
            record.error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
            record.touch("failed")
            return
        except Exception as exc:  # a crash of the work: the task fails with the JSON-RPC internal error
            record.error = {"code": types.INTERNAL_ERROR, "message": f"Internal error: {type(exc).__name__}"}
            record.touch("failed")
            return
        if record.status not in TERMINAL:
            record.result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
            record.touch("completed")

    def find(self, task_id: str) -> TaskRecord:
        self._expire()
        record = self._records.get(task_id)
        if record is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown task: {task_id}", data={"taskId": task_id})
        return record

    def update(self, task_id: str, responses: Mapping[str, Any]) -> None:
        """Answer the pending questions `responses` names; other keys and malformed answers are ignored."""
        record = self.find(task_id)
        for key, raw in responses.items():
            pending = record.pending.get(key)
            if pending is None or pending.answer.done():
                continue
            try:
                answer = RESULT_TYPES[type(pending.request)].model_validate(raw, by_name=False)
            except ValueError:
                continue
            pending.answer.set_result(answer)
            del record.pending[key]

    def cancel(self, task_id: str) -> None:
        record = self.find(task_id)
        if record.status in TERMINAL:
            return
        record.touch("cancelled")
        for pending in record.pending.values():
            if not pending.answer.done():
                pending.answer.set_exception(TaskCancelled())
        record.pending.clear()
        if record.runner is not None:
            record.runner.cancel()

    def created(self, record: TaskRecord) -> dict[str, Any]:
        return {"resultType": "task", **record.envelope()}

    def detailed(self, record: TaskRecord) -> dict[str, Any]:
        body = {"resultType": "complete", **record.envelope()}
        if record.status == "completed" and record.result is not None:
            body["result"] = record.result
        if record.status == "failed" and record.error is not None:
            body["error"] = record.error
        if record.status == "input_required":
            body["inputRequests"] = {
                key: pending.request.model_dump(by_alias=True, mode="json", exclude_none=True)
                for key, pending in record.pending.items()
            }
        return body

    def _expire(self) -> None:
        horizon = _clock() - TTL_MS / 1000
        for key in [key for key, record in self._records.items() if record.created_monotonic < horizon]:
            record = self._records.pop(key)
            if record.runner is not None and not record.runner.done():
                record.runner.cancel()


def _clock() -> float:
    return asyncio.get_running_loop().time()


class TaskIdParams(types.RequestParams):
    task_id: str


class TaskUpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)


def _check_routing(ctx: Ctx, task_id: str) -> None:
    """SEP-2663 extends SEP-2243's Mcp-Name to the task id of tasks/get, tasks/update and tasks/cancel."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return
    if decode_header_value(headers.get("mcp-name")) != task_id:
        raise MCPError(types.HEADER_MISMATCH, "Mcp-Name header does not match the request body's 'taskId'")


class TaskMethods:
    """The request handlers of tasks/get, tasks/update and tasks/cancel over one TaskStore."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    def _gate(self, ctx: Ctx, task_id: str) -> None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data=ctx.method)
        if not negotiated(ctx):
            raise missing_extension()
        _check_routing(ctx, task_id)

    async def get(self, ctx: Ctx, params: TaskIdParams) -> dict[str, Any]:
        self._gate(ctx, params.task_id)
        return self.store.detailed(self.store.find(params.task_id))

    async def update(self, ctx: Ctx, params: TaskUpdateParams) -> types.EmptyResult:
        self._gate(ctx, params.task_id)
        self.store.update(params.task_id, params.input_responses)
        return types.EmptyResult()

    async def cancel(self, ctx: Ctx, params: TaskIdParams) -> types.EmptyResult:
        self._gate(ctx, params.task_id)
        self.store.cancel(params.task_id)
        return types.EmptyResult()
