"""The canonical tool model shared by every front and backend.

Nothing here knows a wire format: a front turns its request into a `Call`,
a backend turns a `ToolSpec` plus arguments into a value, and the `Outcome`
travels back for the front to encode.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from gateway.errors import ErrorKind, Failure, GatewayError

# OXP ids and OpenTool / OpenAI function names, as published.
PART_PATTERN = re.compile(r"^[A-Za-z0-9_]+$")
FLAT_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
VERSION_PATTERN = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")


@dataclass(frozen=True)
class AuthorizationRequirement:
    """A user authorization a tool needs, e.g. an OAuth2 grant from a provider."""

    id: str
    scopes: tuple[str, ...] = ()
    url: str | None = None  # template; may use {provider}, {user_id}, {scopes}, {tool}
    check_url: str | None = None


@dataclass(frozen=True)
class Requirements:
    authorization: tuple[AuthorizationRequirement, ...] = ()
    secrets: tuple[str, ...] = ()
    user_id: bool = False

    @property
    def empty(self) -> bool:
        return not (self.authorization or self.secrets or self.user_id)


@dataclass(frozen=True)
class Quarantine:
    """Why a tool is held back (`gateway.pinning`): its definition changed since it was approved. Calls are
    refused with `message`; listings show it to admins only (`Principal.admin`)."""

    pin: str  # the pin's id: <backend>/<flat name>
    message: str
    changed: tuple[str, ...] = ()  # the definition's fields that differ from the approved one; ("added",): none
    approved_hash: str | None = None
    current_hash: str | None = None
    rejected: bool = False  # an administrator rejected this very definition

    def failure(self, spec: ToolSpec) -> GatewayError:
        """What a call of the quarantined tool gets: forbidden, naming the change (every front maps it)."""
        return GatewayError.of(
            ErrorKind.FORBIDDEN,
            self.message,
            details={
                "tool": spec.flat_name,
                "quarantined": True,
                "pin": self.pin,
                "changed": list(self.changed),
                "approved_hash": self.approved_hash,
                "current_hash": self.current_hash,
                "rejected": self.rejected,
            },
        )


@dataclass(frozen=True)
class ToolSpec:
    """One version of one tool, whichever backend serves it."""

    toolkit: str
    name: str
    version: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    requirements: Requirements = field(default_factory=Requirements)
    visible: bool = True
    tags: tuple[str, ...] = ()
    backend: str = ""
    language: str = "python"
    timeout: float | None = None  # per-tool deadline in seconds
    side_effects: bool = True
    # Where the tool came from, for error messages ("backend 'math' (module:attr)").
    source: str = ""
    # Backend-private handle (a Python callable, an upstream tool name, ...).
    binding: Any = field(default=None, compare=False, repr=False)
    # Where an upstream server listed it (a backend that relays a protocol): listings keep that server's order.
    listed_at: int | None = field(default=None, compare=False)
    # Set by pinning in enforce mode when the definition changed since it was approved: refused to every caller,
    # listed to admins only (`gateway.pinning`).
    quarantine: Quarantine | None = None

    @property
    def flat_name(self) -> str:
        return f"{self.toolkit}_{self.name}"

    @property
    def qualified_name(self) -> str:
        return f"{self.toolkit}.{self.name}"

    @property
    def versioned_id(self) -> str:
        return f"{self.qualified_name}@{self.version}"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller and the tools it may call (globs on flat names).

    The globs come from an API key's `tools` or from the grants of a JWT's claim
    values; every front lists and calls through `permitted`, so they hold everywhere.
    """

    name: str
    tools: tuple[str, ...] | None = None  # None: every tool; (): none (a JWT whose claim values match no grant)
    # An OAuth caller's grant table (claim value -> globs) its `tools` came from: which scopes would let it call
    # a tool it may not (the 403 `insufficient_scope` challenge names them). None: no scope would change that.
    grants: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    # Matched by `auth.admins` or `auth.admin_grants`: sees quarantined tools in listings (`gateway.pinning`) and
    # the whole gateway on the console; calls nothing more.
    admin: bool = False
    # The values of a token's grant claim (`scope`, `roles`, ...), which `auth.admin_grants` may name.
    claims: tuple[str, ...] = field(default=(), compare=False)  # not who it is: equal principals may differ here

    def may_call(self, spec: ToolSpec) -> bool:
        return self.tools is None or any(fnmatchcase(spec.flat_name, pattern) for pattern in self.tools)

    def scopes_for(self, spec: ToolSpec) -> tuple[str, ...]:
        """The claim values (scopes) whose grant covers `spec`: what a token would need to call it."""
        if not self.grants:
            return ()
        return tuple(value for value, globs in self.grants if any(fnmatchcase(spec.flat_name, g) for g in globs))


# With authentication off every caller is this one principal (sessions, runs and call ids are scoped by name).
ANONYMOUS = Principal(name="")


def permitted(principal: Principal | None, spec: ToolSpec) -> bool:
    """The one place that decides whether a caller may see and call a tool; every front lists with it."""
    return principal is None or principal.may_call(spec)


def principal_name(principal: Principal | None) -> str:
    """The owner key of sessions, runs and call ids: an API key's or JWT subject's name, "" with auth off."""
    return (principal or ANONYMOUS).name


@dataclass
class CallContext:
    """Who is calling, under which deadline, with which caller-supplied credentials."""

    call_id: str = field(default_factory=lambda: os.urandom(16).hex())  # 32 hex digits, like uuid4().hex
    front: str = "internal"
    principal: Principal | None = None
    session_id: str | None = None
    message_id: str | None = None
    trace_id: str | None = None
    user_id: str | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    authorization: dict[str, str] = field(default_factory=dict)  # provider id -> token
    # The credential headers the client sent (`gateway.auth.client_credentials`: Authorization, X-API-Key), as
    # sent; a backend sends them upstream only when it forwards credentials (`gateway.upstream.Credentials`).
    client_credentials: dict[str, str] = field(default_factory=dict, repr=False)
    # Absolute time.monotonic() after which the call is abandoned; set by dispatch.
    deadline: float | None = None
    # Set by a streaming front (OpenTool /streamCall): a backend that can stream sends each partial value here.
    stream: Callable[[Any], Awaitable[None]] | None = field(default=None, repr=False, compare=False)
    # The caller's side of a front that can talk back while a call runs (notifications, questions to the
    # client); a backend of the same protocol as the front relays what its upstream says there.
    peer: Any = field(default=None, repr=False, compare=False)
    # What backends report about the run itself (e.g. {"abandoned": "thread"}); ends up in failure details.
    notes: dict[str, Any] = field(default_factory=dict)
    # Cleared by a backend whose value depends on more than the arguments (the caller's answers to the
    # tool's questions) or is no final value (a handle the caller polls): the result cache keeps none of it.
    cacheable: bool = True

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    @property
    def session_key(self) -> str | None:
        """What backends key per-session state by (upstream sessions, workspaces).

        The session id alone is not enough: a JSON-RPC client picks its own
        `sessionId`, which could equal another front's cookie. Scoped by front
        and principal, one caller's session never reaches another's state.
        """
        if self.session_id is None:
            return None
        return f"{self.front}/{principal_name(self.principal)}/{self.session_id}"


class RequestKind(StrEnum):
    """What a request through the pipeline asks for. The pipeline knows these kinds and refuses any other,
    so a new kind of request cannot reach a backend (or a caller's data) around the pipeline's policy."""

    TOOL = "tool"  # run a catalog tool
    LIST = "list"  # a backend's own listing of what is not a tool (an MCP server's resources, prompts)
    READ = "read"  # read a resource of a backend
    PROMPT = "prompt"  # get a prompt of a backend
    COMPLETE = "complete"  # completions of a prompt's or a resource template's argument
    TASK = "task"  # look at, answer or cancel a task a backend runs for the caller
    SUBSCRIBE = "subscribe"  # start or stop updates of a backend's resource
    FILE = "file"  # a file of the caller's workspace (the gateway's own, or its upstream node's)
    COLLECT = "collect"  # the result of an earlier call of the caller's (a 450 handle)


# The kinds a backend serves through `operate` (`gateway.backends.OperationBackend`); TOOL goes to `call`.
BACKEND_KINDS = frozenset(RequestKind) - {RequestKind.TOOL, RequestKind.COLLECT}
# The kinds the gateway answers itself, from the caller's own state, with the request's `run`.
GATEWAY_KINDS = frozenset({RequestKind.FILE, RequestKind.COLLECT})


@dataclass
class Call:
    """A request through the pipeline, as every front hands it to dispatch: a tool call, or another kind.

    A tool call names the tool and its arguments. Any other kind (`RequestKind`) names the backend it goes
    to and, in `tool`, the operation (the protocol method, e.g. `resources/read`: what logs and metrics
    show), with its parameters in `arguments`; one the gateway answers from the caller's own state
    (a workspace file, a result handle) has no backend and brings its `run` instead.
    """

    tool: str  # flat name ("Math_Add") or qualified name ("Math.Add"); the operation for other kinds
    arguments: dict[str, Any]
    context: CallContext = field(default_factory=CallContext)
    version: str | None = None  # "x.y.z" exact, "x" meaning x.0.0, None for the latest
    timeout: float | None = None  # requested deadline in seconds
    kind: RequestKind = RequestKind.TOOL
    backend: str | None = None  # where a request of another kind goes (None: the gateway answers it, `run`)
    payload: Any = field(default=None, compare=False, repr=False)  # a body that is no JSON (a file's bytes)
    run: Callable[[CallContext], Awaitable[Any]] | None = field(default=None, compare=False, repr=False)
    # Filled in by the call pipeline: the resolved tool, when the call arrived, the deadline it got.
    spec: ToolSpec | None = field(default=None, compare=False, repr=False)
    started: float = field(default=0.0, compare=False, repr=False)
    deadline_s: float | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class UpstreamAnswer:
    """An upstream server's own answer, as its protocol has it (JSON), beside the canonical value or failure.

    A front of the same protocol passes it on unchanged (a transparent hop: an MCP server's content blocks,
    an OpenTool `result` that has a `result` member of its own); fronts of other protocols render the
    canonical value. `result` is the answer's result part as it came, `error` its error part (a JSON-RPC
    error object, an HTTP status and body), whichever the upstream gave.
    """

    protocol: str  # the upstream's protocol: "mcp", "opentool", "oxp", "toolserver", "jsonrpc"
    result: Any = None
    error: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "result": self.result, "error": self.error}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UpstreamAnswer:
        return cls(str(data["protocol"]), data.get("result"), data.get("error"))


@dataclass(frozen=True)
class Answered:
    """What a backend returns instead of a bare value when it keeps the upstream's own answer too."""

    value: Any
    upstream: UpstreamAnswer


class UpstreamFailed(GatewayError):
    """A failure that came with the upstream's own answer (an MCP `isError` result, a JSON-RPC error):
    the canonical failure for every front, the answer for a front of the same protocol."""

    def __init__(self, failure: Failure, upstream: UpstreamAnswer) -> None:
        super().__init__(failure)
        self.upstream = upstream


@dataclass
class Outcome:
    """The result of one call: a value or a canonical failure, and the upstream's own answer when it kept one."""

    call_id: str
    spec: ToolSpec | None
    value: Any = None
    error: Failure | None = None
    duration_ms: float = 0.0
    cached: bool = False  # served from the result cache; the tool did not run
    upstream: UpstreamAnswer | None = None  # the upstream's answer as its protocol has it (`UpstreamAnswer`)

    @property
    def ok(self) -> bool:
        return self.error is None


UNKNOWN = "(unknown)"  # tool and backend of calls for tools not in the catalog: client-chosen names are no labels


def labels_of(call: Call, outcome: Outcome) -> tuple[str, str]:
    """(backend, tool) a call is counted under (metrics, the console's traffic): the catalog's names, the
    front's own name of another kind of request, never a name the client chose for a tool that is not there."""
    spec = outcome.spec
    if spec is not None:
        return spec.backend, spec.flat_name
    if call.kind is not RequestKind.TOOL:
        return call.backend or "(gateway)", call.tool
    return UNKNOWN, UNKNOWN
