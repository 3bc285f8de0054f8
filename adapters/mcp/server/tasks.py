"""The MCP front's side of the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), relayed from `kind: mcp`
upstreams.

The canonical model has no tasks: a task is the upstream's own, so the gateway relays it between the
MCP caller that created it and the upstream that runs it, on 2026-07-28 only (the handshake era has no
such extension, and nothing changes there).

- The front advertises the extension (`capabilities.extensions`, `server/discover`) when an MCP backend
  the caller sees here advertised it when it connected.
- A `tools/call` of such a backend's tool carries the caller's own declaration upstream (`relay`); the
  upstream's `CreateTaskResult` (`resultType: "task"`) reaches the caller as it came, but for its id.
- `tasks/get`, `tasks/update` and `tasks/cancel` go to the upstream that created the task, and its
  answers (an inlined result, a JSON-RPC error, pending `inputRequests`) come back as they came, but for
  the id. Without the extension declared: -32021, as an upstream would answer; `Mcp-Name` must name the id.

The id a caller sees is no upstream's: it is a sealed token (AES-256-GCM, the `mcp` SDK's request-state
codec) of (backend, the upstream's task id, the caller's principal). Any replica can open it, so no
replica needs to remember a task, and it opens for its own principal only: another caller's id, a
tampered one, or one naming a backend this caller does not see here is -32602 "Unknown task", exactly
what an unknown id gets. The key is random, kept in the state store (`keys.mcp:tasks`): every replica
that shares the store (Redis) shares it; with the in-memory store it lasts as long as the process, so
ids handed out before a restart are unknown after it.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import mcp_types as types
import orjson
import structlog
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from adapters.mcp import codec, relay
from adapters.mcp.tasks import CREATED, EXTENSION, METHODS, missing_extension, supported, unknown
from gateway.errors import ErrorKind, GatewayError
from gateway.model import Principal, RequestKind, principal_name

if TYPE_CHECKING:
    from adapters.mcp.server.endpoint import Ctx
    from adapters.mcp.server.passthrough import Passthrough

log = structlog.get_logger("toolplex.mcp")

KEY: Final = "keys.mcp:tasks"  # state store: the secret task ids are sealed with
KEY_TTL_S: Final = 30 * 86_400.0  # renewed by use; one that lapses is replaced, the last one still opens
KEY_CHECK_S: Final = 600.0  # how often a replica reads the key again (renewing it, adopting a new one)
RECHECK_S: Final = 1.0  # an id no key opens reads the key again, at most this often
KEYS_KEPT: Final = 2  # the current key and the one before it: ids sealed under either open
__all__ = ["CREATED", "EXTENSION", "METHODS", "Sealer", "Tasks", "declared"]


def declared(ctx: Ctx) -> bool:
    """This request's client declared the extension (per request, on 2026-07-28)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and supported(capabilities.extensions)


# ---- the front's side: ids, and the three methods ----


class TaskIdParams(types.RequestParams):
    """What the front reads of a `tasks/*` request: the id (the rest goes upstream as it came)."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)
    task_id: str


class Sealer:
    """Seals (backend, upstream task id, principal) into the id a caller sees, with the store's key."""

    def __init__(self, passthrough: Passthrough) -> None:
        self.passthrough = passthrough
        self._keys: list[str] = []
        self._codec: AESGCMRequestStateCodec | None = None
        self._checked = float("-inf")
        self._lock = asyncio.Lock()

    async def _current(self, fresh_s: float = KEY_CHECK_S) -> AESGCMRequestStateCodec:
        """The codec of the store's key, read again when it was read more than `fresh_s` ago."""
        if self._codec is not None and time.monotonic() - self._checked < fresh_s:
            return self._codec
        async with self._lock:
            if self._codec is not None and time.monotonic() - self._checked < fresh_s:
                return self._codec
            store = self.passthrough.endpoint.services.store
            key = await store.get(KEY)
            if not (isinstance(key, str) and await store.touch(KEY, KEY_TTL_S)):
                # None yet, or lapsed: the first replica to write one wins, the others read it.
                await store.add(KEY, secrets.token_hex(32), KEY_TTL_S)
                key = await store.get(KEY)
            if not isinstance(key, str):
                raise GatewayError.of(ErrorKind.INTERNAL, "The state store did not keep the key of task ids")
            self._keys = [key, *[k for k in self._keys if k != key]][:KEYS_KEPT]
            self._codec = AESGCMRequestStateCodec(self._keys)
            self._checked = time.monotonic()
            return self._codec

    async def seal(self, backend: str, task_id: str, principal: Principal | None) -> str:
        codec = await self._current()
        return codec.seal(orjson.dumps([backend, task_id, principal_name(principal)]))

    async def open(self, token: str, principal: Principal | None) -> tuple[str, str] | None:
        """(backend, upstream task id) of a token sealed here for this principal; None for any other."""
        try:
            sealed = orjson.loads((await self._current()).unseal(token))
        except InvalidRequestState:
            # Perhaps sealed by a replica that has a newer key (the last one lapsed): read it, once a second at most.
            try:
                sealed = orjson.loads((await self._current(RECHECK_S)).unseal(token))
            except (InvalidRequestState, orjson.JSONDecodeError, ValueError):
                return None
        except (orjson.JSONDecodeError, ValueError):
            return None
        if not (isinstance(sealed, list) and len(sealed) == 3 and all(isinstance(part, str) for part in sealed)):
            return None
        backend, task_id, owner = sealed
        return (backend, task_id) if owner == principal_name(principal) else None


class Tasks:
    """The tasks extension on one MCP endpoint (see the module docstring)."""

    def __init__(self, passthrough: Passthrough) -> None:
        self.passthrough = passthrough
        self.ids = Sealer(passthrough)

    def backends(self, principal: Principal | None) -> list[relay.Server]:
        """The caller's MCP backends here whose server runs tasks (it advertised the extension)."""
        return [b for b in self.passthrough.backends(principal) if supported(b.extensions)]

    def advertised(self, principal: Principal | None) -> dict[str, dict[str, Any]]:
        """The extensions the front advertises on 2026-07-28 for this caller: tasks, when it reaches any."""
        return {EXTENSION: {}} if self.backends(principal) else {}

    def register(self, server: Any, principal_of: Callable[[Ctx], Principal | None]) -> None:
        """`tasks/get`, `tasks/update`, `tasks/cancel` on the SDK's server (`principal_of` authenticates)."""
        for method in METHODS:
            server.add_request_handler(method, TaskIdParams, self._handler(method, principal_of))

    def _handler(self, method: str, principal_of: Callable[[Ctx], Principal | None]) -> Callable[..., Any]:
        async def handle(ctx: Ctx, params: TaskIdParams) -> dict[str, Any]:
            return await self.relay(ctx, principal_of(ctx), method, params)

        return handle

    async def created(self, principal: Principal | None, backend: str, answer: dict[str, Any]) -> dict[str, Any]:
        """An upstream's CreateTaskResult as the caller gets it: its id sealed for this caller."""
        task_id = answer.get("taskId")
        if not isinstance(task_id, str):
            raise MCPError(types.INTERNAL_ERROR, f"Upstream {backend!r} created a task without a taskId")
        try:
            sealed = await self.ids.seal(backend, task_id, principal)
        except GatewayError as exc:  # the state store is out of reach: the caller cannot be given an id
            log.warning("mcp_task_not_sealed", backend=backend, error=exc.failure.message)
            raise MCPError(types.INTERNAL_ERROR, exc.failure.message) from None
        return _own(answer, sealed)

    async def relay(self, ctx: Ctx, principal: Principal | None, method: str, params: TaskIdParams) -> dict[str, Any]:
        """One `tasks/*` request, gated as an upstream gates it, sent to the upstream that owns the task."""
        token = params.task_id
        backends = self.backends(principal)
        if not backends or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data=method)
        if not declared(ctx):
            raise missing_extension()
        headers = getattr(ctx.request, "headers", None)
        if headers is not None and decode_header_value(headers.get("mcp-name")) != token:
            raise MCPError(types.HEADER_MISMATCH, "Mcp-Name header does not match the request body's 'taskId'")
        try:
            opened = await self.ids.open(token, principal)
        except GatewayError as exc:
            raise MCPError(types.INTERNAL_ERROR, exc.failure.message) from None
        backend = next((b for b in backends if opened is not None and b.name == opened[0]), None)
        if opened is None or backend is None:
            raise unknown(token)
        upstream_id = opened[1]
        sent = params.model_dump(by_alias=True, mode="json", exclude_unset=True, exclude={"meta"})
        params = {**sent, "taskId": upstream_id}
        try:
            answer = await self.passthrough.request(RequestKind.TASK, backend, method, params, ctx, principal)
        except GatewayError as exc:
            raise codec.error_of(exc.failure) from None
        except MCPError as exc:  # the upstream's own error, but for the id
            message = exc.error.message.replace(upstream_id, token)
            raise MCPError(exc.error.code, message, _renamed(exc.error.data, upstream_id, token)) from None
        return _own(answer, token) if "taskId" in answer else _own(answer, None)


def _own(answer: dict[str, Any], task_id: str | None) -> dict[str, Any]:
    """An upstream's task answer as the front's: the caller's id, and no upstream identity in `_meta`
    (the SDK stamps the gateway's `serverInfo` where none is)."""
    mine = dict(answer)
    if task_id is not None:
        mine["taskId"] = task_id
    relay.without(mine, "_meta", SERVER_INFO_META_KEY)
    return mine


def _renamed(data: Any, upstream_id: str, token: str) -> Any:
    """An error's `data` with the upstream's task id, where it stands as a value, replaced by the caller's."""
    if data == upstream_id:
        return token
    if isinstance(data, dict):
        return {k: _renamed(v, upstream_id, token) for k, v in data.items()}
    if isinstance(data, list):
        return [_renamed(v, upstream_id, token) for v in data]
    return data
