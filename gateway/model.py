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
from fnmatch import fnmatchcase
from typing import Any

from gateway.errors import Failure

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

    def may_call(self, spec: ToolSpec) -> bool:
        return self.tools is None or any(fnmatchcase(spec.flat_name, pattern) for pattern in self.tools)


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
    # The client's own Authorization header, kept only for backends configured to forward it.
    client_authorization: str | None = field(default=None, repr=False)
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


@dataclass
class Call:
    """A request to run one tool, as every front hands it to dispatch."""

    tool: str  # flat name ("Math_Add") or qualified name ("Math.Add")
    arguments: dict[str, Any]
    context: CallContext = field(default_factory=CallContext)
    version: str | None = None  # "x.y.z" exact, "x" meaning x.0.0, None for the latest
    timeout: float | None = None  # requested deadline in seconds
    # Filled in by the call pipeline: the resolved tool, when the call arrived, the deadline it got.
    spec: ToolSpec | None = field(default=None, compare=False, repr=False)
    started: float = field(default=0.0, compare=False, repr=False)
    deadline_s: float | None = field(default=None, compare=False, repr=False)


@dataclass
class Outcome:
    """The result of one call: a value or a canonical failure."""

    call_id: str
    spec: ToolSpec | None
    value: Any = None
    error: Failure | None = None
    duration_ms: float = 0.0
    cached: bool = False  # served from the result cache; the tool did not run

    @property
    def ok(self) -> bool:
        return self.error is None
