"""A reference MCP server for the conformance tests, built on the `mcp` SDK's low-level `Server`.

It implements what the server scenarios of npm `@modelcontextprotocol/conformance` 0.2.0-alpha.12 ask
for in their own requirement texts (tool, resource and prompt names, payloads, behaviours), so that
`make conformance` can grade it directly, and later through Toolplex as a `kind: mcp` upstream. Both
protocol eras share one Streamable HTTP endpoint at /mcp: the SDK routes each request by its
`MCP-Protocol-Version` header to the handshake era (2025-06-18, 2025-11-25: `initialize`,
`Mcp-Session-Id`, SSE streams, server-to-client requests) or to the stateless 2026-07-28 era
(`server/discover`, per-request `_meta`, `InputRequiredResult` instead of server-to-client requests).

The low-level `Server` rather than `MCPServer`: a reference must put exact shapes on the wire (raw
JSON Schemas with 2020-12 keywords and `x-mcp-header`, elicitation schemas with every enum variant,
tools added and removed at run time, per-session log levels), which the decorator tier derives from
Python signatures or keeps private. What the SDK does itself and this module relies on: both eras'
transports, sessions, DELETE, SSE priming and `Last-Event-ID` replay (given an event store), the
Host/Origin checks against DNS rebinding (armed by binding 127.0.0.1), `server/discover`, header and
`_meta` validation, caching hints, sealing `requestState`, and `subscriptions/listen`. The tasks
extension (SEP-2663), which the SDK does not implement, is in `reference_tasks.py`.

    python -m tests.mcp.reference_server --port 8931      # http://127.0.0.1:8931/mcp
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import jsonschema
import mcp_types as types
import uvicorn
from mcp.server import CacheHint, NotificationOptions, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette

from tests.mcp.reference_tasks import (
    TASKS_EXTENSION,
    TaskIdParams,
    TaskMethods,
    TaskStore,
    TaskUpdateParams,
    missing_extension,
    negotiated,
)

Ctx = ServerRequestContext[Any, Any]
InputRequest = types.ElicitRequest | types.CreateMessageRequest | types.ListRootsRequest
InputResult = types.ElicitResult | types.CreateMessageResult | types.ListRootsResult
ToolOutcome = types.CallToolResult | types.InputRequiredResult

SERVER_NAME: Final = "toolplex-mcp-reference"
SERVER_VERSION: Final = "1.0.0"
LOGGER_NAME: Final = "reference-server"

# A 1x1 red PNG pixel and a minimal WAV file: the scenarios ask for "a minimal test image/audio".
PNG_BASE64: Final = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_BASE64: Final = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

LOG_LEVELS: Final[tuple[types.LoggingLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

# Bounds (every cache has one): sessions remembered for log levels and subscriptions, SSE events
# kept for `Last-Event-ID` replay.
MAX_SESSIONS: Final = 1024
MAX_EVENTS: Final = 10_000
# How long a resumed request stream waits for the rest of its request's events (see BoundedEventStore).
RESUME_TAIL_SECONDS: Final = 60.0

# The scenarios' "~50 ms" between notifications: how a real slow tool behaves, so clients see
# several notifications arrive during one call (server behaviour, not test synchronisation).
STEP_SECONDS: Final = 0.05


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[_text(text)], is_error=is_error)


def _is_modern(ctx: Ctx) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


# ---------------------------------------------------------------------------------------------
# Resumability: the SSE events of the handshake era, so a client that lost a stream resumes it
# with Last-Event-ID (the SDK asks for this store; it keeps none of its own).


class BoundedEventStore(EventStore):
    """Events of every SSE stream, in order, the oldest dropped beyond `MAX_EVENTS`.

    Resuming a request's stream replays what was stored after `Last-Event-ID`, then keeps replaying
    what the request goes on to produce until its response is stored (at most `RESUME_TAIL_SECONDS`).
    The SDK only re-attaches the live stream once replay returns, so an event stored between the
    two would otherwise be kept but never sent: tailing the store here leaves no such window.
    """

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self._events: collections.OrderedDict[int, tuple[str, types.JSONRPCMessage | None]] = collections.OrderedDict()
        self._max_events = max_events
        self._next = 0
        self._stored = anyio.Event()

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        self._next += 1
        self._events[self._next] = (stream_id, message)
        while len(self._events) > self._max_events:
            self._events.popitem(last=False)
        self._stored.set()
        self._stored = anyio.Event()
        return str(self._next)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        try:
            after = int(last_event_id)
        except ValueError:
            return None
        found = self._events.get(after)
        if found is None:
            return None
        stream_id = found[0]
        with anyio.move_on_after(RESUME_TAIL_SECONDS):
            while True:
                stored = self._stored
                for event_id, (event_stream, message) in list(self._events.items()):
                    if event_id <= after or event_stream != stream_id:
                        continue
                    after = event_id
                    if message is None:
                        continue  # a priming event: nothing to resend
                    await send_callback(EventMessage(message, str(event_id)))
                    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                        return stream_id  # the request is answered: nothing more will come
                if stream_id == GET_STREAM_KEY:
                    return stream_id  # the standalone stream never ends: live delivery takes over
                await stored.wait()
        return stream_id


# ---------------------------------------------------------------------------------------------
# Per-session state of the handshake era: the level `logging/setLevel` chose, and the resources
# `resources/subscribe` named. The 2026-07-28 era has neither (log level per request in `_meta`,
# subscriptions as `subscriptions/listen` streams).


@dataclass
class SessionState:
    log_level: types.LoggingLevel = "debug"
    subscriptions: set[str] = field(default_factory=set)


class Sessions:
    """Session id -> state, least recently used evicted beyond `MAX_SESSIONS`."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._states: collections.OrderedDict[str, SessionState] = collections.OrderedDict()
        self._limit = limit

    def get(self, ctx: Ctx) -> SessionState:
        key = session_key(ctx)
        state = self._states.pop(key, None) or SessionState()
        self._states[key] = state
        while len(self._states) > self._limit:
            self._states.popitem(last=False)
        return state


def session_key(ctx: Ctx) -> str:
    """The `Mcp-Session-Id` the request came with (one shared key where there is none, e.g. stdio)."""
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("mcp-session-id") if headers is not None else None
    return value or "-"


# ---------------------------------------------------------------------------------------------
# Client input in either era: a live server-to-client request on a handshake-era session, an
# `InputRequiredResult` the client answers by retrying on 2026-07-28 (SEP-2322). Handlers write
# `answers = await inputs.ask({...})` once and run unchanged in both.


class NeedInput(Exception):
    """The 2026-07-28 answer to "ask the client": end this round with an InputRequiredResult."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


class MissingCapability(Exception):
    """The client did not declare a capability this request needs (named as ClientCapabilities)."""

    def __init__(self, required: dict[str, dict[str, Any]]) -> None:
        super().__init__(f"the client did not declare the {', '.join(sorted(required))} capability")
        self.required = required


_RESULT_TYPES: Final[dict[type[Any], type[Any]]] = {
    types.ElicitRequest: types.ElicitResult,
    types.CreateMessageRequest: types.CreateMessageResult,
    types.ListRootsRequest: types.ListRootsResult,
}
_CAPABILITY_OF: Final[dict[type[Any], str]] = {
    types.ElicitRequest: "elicitation",
    types.CreateMessageRequest: "sampling",
    types.ListRootsRequest: "roots",
}


def declared_capabilities(ctx: Ctx) -> set[str]:
    """The client capabilities among elicitation, sampling and roots that this request's client declared."""
    declared = ctx.session.client_capabilities
    if declared is None:
        return set()
    return {name for name in ("elicitation", "sampling", "roots") if getattr(declared, name) is not None}


class Inputs:
    """What one request may ask its client, and the answers a 2026-07-28 retry brought back."""

    def __init__(self, ctx: Ctx, responses: Mapping[str, Any] | None, state: str | None) -> None:
        self.ctx = ctx
        self.responses = dict(responses or {})
        self.state = state

    @property
    def modern(self) -> bool:
        return _is_modern(self.ctx)

    async def ask(self, requests: Mapping[str, InputRequest], *, state: str | None = None) -> dict[str, Any]:
        """Every answer, keyed like `requests`; raises NeedInput on 2026-07-28 until the retry has them all.

        On a retry an answer counts only when it has the requested shape and came back with the
        `state` it was asked under: anything else (a wrong key, a tampered or missing state, a
        malformed answer) asks again instead of running on input nobody requested.
        """
        required = {_CAPABILITY_OF[type(r)] for r in requests.values()} - declared_capabilities(self.ctx)
        if required:
            raise MissingCapability({name: {} for name in sorted(required)})
        if self.modern:
            answers = {key: self._answer(key, request) for key, request in requests.items()}
            if self.state == state and all(answer is not None for answer in answers.values()):
                return answers
            raise NeedInput(types.InputRequiredResult(input_requests=dict(requests), request_state=state))
        answers = {}
        for key, request in requests.items():
            answers[key] = await self.ctx.session.send_request(
                request,  # type: ignore[arg-type]  # each InputRequest is one of the ServerRequest members
                _RESULT_TYPES[type(request)],
                metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id),
            )
        return answers

    def _answer(self, key: str, request: InputRequest) -> Any:
        raw = self.responses.get(key)
        if raw is None:
            return None
        wire = raw.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(raw, "model_dump") else raw
        try:
            return _RESULT_TYPES[type(request)].model_validate(wire, by_name=False)
        except ValueError:
            return None


def elicitation(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def sampling(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[types.SamplingMessage(role="user", content=_text(prompt))], max_tokens=max_tokens
        )
    )


def roots() -> types.ListRootsRequest:
    return types.ListRootsRequest()


def _sampled_text(result: types.CreateMessageResult) -> str:
    content = result.content
    return content.text if isinstance(content, types.TextContent) else f"<{content.type} content>"


def _elicited(result: types.ElicitResult) -> str:
    return f"action={result.action}, content={json.dumps(result.content or {}, sort_keys=True)}"


NAME_SCHEMA: Final = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM_SCHEMA: Final = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
COLOR_SCHEMA: Final = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}


# ---------------------------------------------------------------------------------------------
# Tools


@dataclass
class Call:
    """One tools/call as a handler sees it."""

    ctx: Ctx
    arguments: dict[str, Any]
    inputs: Inputs
    server: ReferenceServer

    @property
    def modern(self) -> bool:
        return _is_modern(self.ctx)

    async def log(self, level: types.LoggingLevel, message: str) -> None:
        """A `notifications/message` on this call's stream, if the client asked for that level.

        2026-07-28: the request's `_meta` log level decides (the SDK drops what was not asked for).
        Handshake era: the level this session set with `logging/setLevel`.
        """
        if not self.modern:
            chosen = self.server.sessions.get(self.ctx).log_level
            if LOG_LEVELS.index(level) < LOG_LEVELS.index(chosen):
                return
        await self.ctx.session.send_log_message(
            level, message, logger=LOGGER_NAME, related_request_id=self.ctx.request_id
        )

    async def notify(self, notification: types.ServerNotification) -> None:
        """A handshake-era notification on this call's own stream, which is open until the call answers.

        The session's standalone GET stream would reach the client too, but only once the client has
        opened it; the call's stream is certain, and the change is this call's doing.
        """
        await self.ctx.session.send_notification(notification, related_request_id=self.ctx.request_id)

    async def progress(self, progress: float, total: float, message: str) -> None:
        """A progress notification against the request's progressToken (none without one)."""
        await self.ctx.session.report_progress(progress, total, message)


ToolHandler = Callable[[Call], Awaitable[ToolOutcome | dict[str, Any]]]


@dataclass(frozen=True)
class ToolEntry:
    tool: types.Tool
    handler: ToolHandler


NO_ARGUMENTS: Final = {"type": "object", "properties": {}}
READ_ONLY: Final = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)

JSON_SCHEMA_2020_12: Final = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

SEP1034_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}

SEP1330_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

USER_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


async def simple_text(call: Call) -> ToolOutcome:
    return _result("This is a simple text response for testing.")


async def image_content(call: Call) -> ToolOutcome:
    return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")])


async def audio_content(call: Call) -> ToolOutcome:
    return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")])


def _embedded(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    )


async def embedded_resource(call: Call) -> ToolOutcome:
    return types.CallToolResult(
        content=[_embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]
    )


async def multiple_content_types(call: Call) -> ToolOutcome:
    return types.CallToolResult(
        content=[
            _text("Multiple content types test:"),
            types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png"),
            _embedded("test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})),
        ]
    )


async def tool_with_logging(call: Call) -> ToolOutcome:
    await call.log("info", "Tool execution started")
    await asyncio.sleep(STEP_SECONDS)
    await call.log("info", "Tool processing data")
    await asyncio.sleep(STEP_SECONDS)
    await call.log("info", "Tool execution completed")
    return _result("Tool with logging executed successfully")


async def logging_tool(call: Call) -> ToolOutcome:
    for level in ("debug", "info", "warning"):
        await call.log(level, f"A log entry at {level}")
    return _result("Logged at debug, info and warning (delivered only at the levels the client asked for)")


async def error_handling(call: Call) -> ToolOutcome:
    return _result("This tool intentionally returns an error for testing", is_error=True)


async def tool_with_progress(call: Call) -> ToolOutcome:
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(STEP_SECONDS)
        await call.progress(step, 100, f"Completed step {step} of 100")
    return _result("Progress tool completed: 0, 50 and 100 of 100")


async def sampling_tool(call: Call) -> ToolOutcome:
    answers = await call.inputs.ask({"completion": sampling(call.arguments["prompt"], 100)})
    return _result(f"LLM response: {_sampled_text(answers['completion'])}")


async def elicitation_tool(call: Call) -> ToolOutcome:
    answers = await call.inputs.ask({"user": elicitation(call.arguments["message"], USER_SCHEMA)})
    return _result(f"User response: {_elicited(answers['user'])}")


async def elicitation_defaults(call: Call) -> ToolOutcome:
    answers = await call.inputs.ask({"user": elicitation("Please provide user information", SEP1034_SCHEMA)})
    return _result(f"Elicitation completed: {_elicited(answers['user'])}")


async def elicitation_enums(call: Call) -> ToolOutcome:
    request = elicitation("Please select values using different enum schema types", SEP1330_SCHEMA)
    answers = await call.inputs.ask({"choices": request})
    return _result(f"Elicitation completed: {_elicited(answers['choices'])}")


async def streaming_elicitation(call: Call) -> ToolOutcome:
    """Progress first, then a question: on 2026-07-28 the question is the InputRequiredResult, never a request."""
    await call.progress(1, 2, "Preparing the question")
    answers = await call.inputs.ask({"user_name": elicitation("What is your name?", NAME_SCHEMA)})
    await call.progress(2, 2, "Answer received")
    return _result(f"Streamed elicitation: {_elicited(answers['user_name'])}")


async def missing_capability(call: Call) -> ToolOutcome:
    """Runs only for a client that declared sampling; any other gets MissingRequiredClientCapability."""
    if "sampling" not in declared_capabilities(call.ctx):
        raise MissingCapability({"sampling": {}})
    return _result("The client declared the sampling capability")


async def reconnection(call: Call) -> ToolOutcome:
    """Closes its own SSE stream mid-call (SEP-1699); the client resumes with Last-Event-ID."""
    await call.log("info", "Before disconnect")
    if call.ctx.close_sse_stream is not None:
        await call.ctx.close_sse_stream()
    await call.log("info", "After reconnect")
    return _result("Reconnection test completed")


async def trigger_tool_change(call: Call) -> ToolOutcome:
    """Adds then removes a tool, and says so on both eras' change channels."""
    server = call.server
    server.tools["test_dynamic_tool"] = ToolEntry(
        types.Tool(name="test_dynamic_tool", description="A tool that exists briefly", input_schema=NO_ARGUMENTS),
        simple_text,
    )
    del server.tools["test_dynamic_tool"]
    await server.bus.publish(ToolsListChanged())
    if not call.modern:
        await call.notify(types.ToolListChangedNotification())
    return _result("tool list changed")


async def trigger_prompt_change(call: Call) -> ToolOutcome:
    server = call.server
    server.prompts["test_dynamic_prompt"] = PromptEntry(
        types.Prompt(name="test_dynamic_prompt", description="A prompt that exists briefly"), simple_prompt
    )
    del server.prompts["test_dynamic_prompt"]
    await server.bus.publish(PromptsListChanged())
    if not call.modern:
        await call.notify(types.PromptListChangedNotification())
    return _result("prompt list changed")


async def update_watched_resource(call: Call) -> ToolOutcome:
    """Changes test://watched-resource and notifies whoever subscribed to it, in either era."""
    server = call.server
    server.watched_text = call.arguments["text"]
    await server.bus.publish(ResourceUpdated(uri=WATCHED_URI))
    if not call.modern and WATCHED_URI in server.sessions.get(call.ctx).subscriptions:
        await call.notify(
            types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=WATCHED_URI))
        )
    return _result(f"{WATCHED_URI} now reads {server.watched_text!r}")


async def structured_content(call: Call) -> ToolOutcome:
    a, b = call.arguments["a"], call.arguments["b"]
    value = {"sum": a + b, "operands": [a, b]}
    return types.CallToolResult(content=[_text(json.dumps(value))], structured_content=value)


async def x_mcp_header(call: Call) -> ToolOutcome:
    return _result(f"region={call.arguments['region']}")


async def json_schema_2020_12(call: Call) -> ToolOutcome:
    return types.CallToolResult(content=[_text("Arguments accepted")], structured_content=call.arguments)


async def irr_elicitation(call: Call) -> ToolOutcome:
    answers = await call.inputs.ask({"user_name": elicitation("What is your name?", NAME_SCHEMA)})
    name = (answers["user_name"].content or {}).get("name", "stranger")
    return _result(f"Hello, {name}!")


async def irr_sampling(call: Call) -> ToolOutcome:
    answers = await call.inputs.ask({"capital_question": sampling("What is the capital of France?", 100)})
    return _result(f"Model said: {_sampled_text(answers['capital_question'])}")


async def irr_list_roots(call: Call) -> ToolOutcome:
    answers = await call.inputs.ask({"client_roots": roots()})
    listed = answers["client_roots"].roots
    return _result(f"Client exposed {len(listed)} root(s): {', '.join(str(r.uri) for r in listed)}")


REQUEST_STATE_NONCE: Final = "awaiting-confirmation"


async def irr_request_state(call: Call) -> ToolOutcome:
    answers = await call.inputs.ask(
        {"confirm": elicitation("Please confirm", CONFIRM_SCHEMA)}, state=REQUEST_STATE_NONCE
    )
    if call.modern:
        # The answers count only under the echoed state (Inputs.ask), which the SDK verified as ours.
        return _result(f"state-ok: confirmation received ({_elicited(answers['confirm'])})")
    return _result(f"confirmation received ({_elicited(answers['confirm'])}); no requestState in this era")


async def irr_multiple_inputs(call: Call) -> ToolOutcome:
    await call.inputs.ask(
        {
            "user_name": elicitation("What is your name?", NAME_SCHEMA),
            "greeting": sampling("Generate a greeting", 50),
            "client_roots": roots(),
        },
        state="multiple-inputs",
    )
    return _result("All inputs received.")


async def irr_multi_round(call: Call) -> ToolOutcome:
    """Three rounds: the name, then the colour under a state that carries the name."""
    carried = json.loads(call.inputs.state) if call.inputs.state else {}
    name = carried.get("name")
    if name is None:
        step1 = await call.inputs.ask(
            {"step1": elicitation("Step 1: What is your name?", NAME_SCHEMA)}, state=json.dumps({"round": 1})
        )
        name = (step1["step1"].content or {}).get("name", "stranger")
    step2 = await call.inputs.ask(
        {"step2": elicitation("Step 2: What is your favorite color?", COLOR_SCHEMA)},
        state=json.dumps({"round": 2, "name": name}),
    )
    color = (step2["step2"].content or {}).get("color", "no colour")
    return _result(f"{name} likes {color}.")


async def irr_tampered_state(call: Call) -> ToolOutcome:
    """A sealed state; a tampered echo never reaches this handler (the SDK answers -32602)."""
    answers = await call.inputs.ask({"confirm": elicitation("Please confirm", CONFIRM_SCHEMA)}, state="round-1")
    return _result(f"state-ok: {_elicited(answers['confirm'])}")


async def irr_capabilities(call: Call) -> ToolOutcome:
    """Asks only what the client declared it can answer (SEP-2322)."""
    declared = declared_capabilities(call.ctx)
    wanted: dict[str, InputRequest] = {}
    if "sampling" in declared:
        wanted["sample"] = sampling("Say hello", 50)
    if "elicitation" in declared:
        wanted["ask"] = elicitation("What is your name?", NAME_SCHEMA)
    if "roots" in declared:
        wanted["client_roots"] = roots()
    if not wanted:
        return _result("The client declared none of sampling, elicitation and roots: nothing to ask")
    await call.inputs.ask(wanted, state="capability-gated")
    return _result(f"Answered: {', '.join(sorted(wanted))}")


# The tasks extension's fixtures (SEP-2663): work that runs inline, or as a task when the client
# declared the extension. Work never touches the request that started it (a task outlives it); it asks
# its client through `asker`: Inputs inline, TaskInputs (tasks/get + tasks/update) as a task.

TaskWork = Callable[[dict[str, Any], Any], Awaitable[types.CallToolResult]]
MAX_COMPUTE_SECONDS: Final = 300.0


def task_tool(support: str, work: TaskWork) -> ToolHandler:
    """A tool whose task support is `optional` (inline without the extension) or `required` (refused without)."""

    async def handler(call: Call) -> ToolOutcome | dict[str, Any]:
        if negotiated(call.ctx):
            arguments = dict(call.arguments)
            record = call.server.tasks.start(lambda inputs: work(arguments, inputs))
            return call.server.tasks.created(record)
        if support == "required":
            if call.modern:
                raise missing_extension()
            return _result(f"This tool runs only as a task: it needs {TASKS_EXTENSION} on 2026-07-28", is_error=True)
        return await work(call.arguments, call.inputs)

    return handler


async def greet(call: Call) -> ToolOutcome:
    return _result(f"Hello, {call.arguments['name']}!")


async def slow_compute(arguments: dict[str, Any], asker: Any) -> types.CallToolResult:
    seconds = min(float(arguments["seconds"]), MAX_COMPUTE_SECONDS)
    await asyncio.sleep(seconds)
    return _result(f"Computed {arguments.get('label', 'a result')} in {seconds:g} s")


async def failing_job(arguments: dict[str, Any], asker: Any) -> types.CallToolResult:
    await asyncio.sleep(1.0)  # "returns a tool execution error after ~1s"
    return _result("failing_job failed on purpose", is_error=True)


async def protocol_error_job(arguments: dict[str, Any], asker: Any) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, "protocol_error_job failed below the tool: a protocol-level error")


CONFIRM_DELETE_SCHEMA: Final = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Delete the file"}},
    "required": ["confirm"],
}


async def confirm_delete(arguments: dict[str, Any], asker: Any) -> types.CallToolResult:
    filename = arguments["filename"]
    answers = await asker.ask({"confirm_delete": elicitation(f"Delete {filename}?", CONFIRM_DELETE_SCHEMA)})
    answer = answers["confirm_delete"]
    confirmed = answer.action == "accept" and bool((answer.content or {}).get("confirm"))
    return _result(f"Deleted {filename}" if confirmed else f"Kept {filename}")


async def multi_input(arguments: dict[str, Any], asker: Any) -> types.CallToolResult:
    answers = await asker.ask(
        {
            "first_name": elicitation("First input: a name", NAME_SCHEMA),
            "second_name": elicitation("Second input: another name", NAME_SCHEMA),
        }
    )
    names = [(answers[key].content or {}).get("name", "?") for key in ("first_name", "second_name")]
    return _result(f"Received {names[0]} and {names[1]}")


async def tool_with_task(call: Call) -> ToolOutcome | dict[str, Any]:
    """Asks the user's name by InputRequiredResult, then finishes the work as a task (MRTR, then tasks)."""
    if not negotiated(call.ctx):
        if call.modern:
            raise missing_extension()
        return _result(f"This tool runs only as a task: it needs {TASKS_EXTENSION} on 2026-07-28", is_error=True)
    answers = await call.inputs.ask({"user_name": elicitation("What is your name?", NAME_SCHEMA)})
    name = (answers["user_name"].content or {}).get("name", "stranger")

    async def finish(arguments: dict[str, Any], asker: Any) -> types.CallToolResult:
        return _result(f"Hello, {name}! Your task is done.")

    return call.server.tasks.created(call.server.tasks.start(lambda inputs: finish({}, inputs)))


def _task_support(support: str) -> types.ToolExecution:
    return types.ToolExecution(task_support=support)  # type: ignore[arg-type]


def _tool(
    name: str,
    description: str,
    handler: ToolHandler,
    input_schema: dict[str, Any] = NO_ARGUMENTS,
    **extra: Any,
) -> ToolEntry:
    return ToolEntry(types.Tool(name=name, description=description, input_schema=input_schema, **extra), handler)


def _string_arguments(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": text} for name, text in properties.items()},
        "required": list(properties),
    }


def default_tools() -> dict[str, ToolEntry]:
    entries = [
        _tool("test_simple_text", "Tests simple text content response", simple_text, annotations=READ_ONLY),
        _tool("test_image_content", "Tests image content response", image_content, annotations=READ_ONLY),
        _tool("test_audio_content", "Tests audio content response", audio_content, annotations=READ_ONLY),
        _tool("test_embedded_resource", "Tests embedded resource content response", embedded_resource),
        _tool(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
            multiple_content_types,
        ),
        _tool("test_tool_with_logging", "Tests tool that emits log messages during execution", tool_with_logging),
        _tool("test_logging_tool", "Logs at several levels; only requested levels reach the client", logging_tool),
        _tool("test_error_handling", "Tests error response handling", error_handling),
        _tool("test_tool_with_progress", "Tests tool that reports progress notifications", tool_with_progress),
        _tool(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            sampling_tool,
            _string_arguments(prompt="The prompt to send to the LLM"),
        ),
        _tool(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            elicitation_tool,
            _string_arguments(message="The message to show the user"),
        ),
        _tool(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values for all primitive types (SEP-1034)",
            elicitation_defaults,
        ),
        _tool(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema variations (SEP-1330)",
            elicitation_enums,
        ),
        _tool(
            "test_streaming_elicitation",
            "Reports progress, then asks for the user's name",
            streaming_elicitation,
        ),
        _tool(
            "test_missing_capability",
            "Requires the client's sampling capability (MissingRequiredClientCapability otherwise)",
            missing_capability,
        ),
        _tool("test_reconnection", "Tests SSE polling by closing the stream mid-call (SEP-1699)", reconnection),
        _tool("test_trigger_tool_change", "Changes the tool list and announces it", trigger_tool_change),
        _tool("test_trigger_prompt_change", "Changes the prompt list and announces it", trigger_prompt_change),
        _tool(
            "test_update_watched_resource",
            "Changes test://watched-resource and notifies its subscribers",
            update_watched_resource,
            _string_arguments(text="The resource's new content"),
        ),
        _tool(
            "test_structured_content",
            "Adds two numbers; the result is structured content described by the output schema",
            structured_content,
            {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
            output_schema={
                "type": "object",
                "properties": {"sum": {"type": "number"}, "operands": {"type": "array", "items": {"type": "number"}}},
                "required": ["sum", "operands"],
            },
            annotations=READ_ONLY,
        ),
        _tool(
            "test_x_mcp_header",
            "Mirrors its region argument into the Mcp-Param-Region header (SEP-2243)",
            x_mcp_header,
            {
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                "required": ["region"],
            },
        ),
        _tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json_schema_2020_12,
            JSON_SCHEMA_2020_12,
        ),
        _tool(
            "test_input_required_result_elicitation",
            "Asks for the user's name (InputRequiredResult on 2026-07-28)",
            irr_elicitation,
        ),
        _tool("test_input_required_result_sampling", "Asks the client's model a question", irr_sampling),
        _tool("test_input_required_result_list_roots", "Asks for the client's roots", irr_list_roots),
        _tool(
            "test_input_required_result_request_state",
            "Asks for a confirmation under an opaque requestState",
            irr_request_state,
        ),
        _tool(
            "test_input_required_result_multiple_inputs",
            "Asks for an elicitation, a sampling and the roots at once",
            irr_multiple_inputs,
        ),
        _tool("test_input_required_result_multi_round", "Asks two questions in two rounds", irr_multi_round),
        _tool(
            "test_input_required_result_tampered_state",
            "Asks under an integrity-protected requestState",
            irr_tampered_state,
        ),
        _tool(
            "test_input_required_result_capabilities",
            "Asks only for what the client declared it supports",
            irr_capabilities,
        ),
        _tool(
            "greet",
            "Greets by name, always inline (never a task)",
            greet,
            _string_arguments(name="Who to greet"),
            execution=_task_support("forbidden"),
        ),
        _tool(
            "slow_compute",
            "Waits `seconds` then answers; a task when the client declared the tasks extension",
            task_tool("optional", slow_compute),
            {
                "type": "object",
                "properties": {"seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}},
                "required": ["seconds"],
            },
            execution=_task_support("optional"),
        ),
        _tool(
            "failing_job",
            "A task whose tool reports an error after about a second",
            task_tool("required", failing_job),
            execution=_task_support("required"),
        ),
        _tool(
            "protocol_error_job",
            "A task that fails with a protocol-level error",
            task_tool("optional", protocol_error_job),
            execution=_task_support("optional"),
        ),
        _tool(
            "confirm_delete",
            "Asks for confirmation before deleting a file (a task waits in input_required)",
            task_tool("optional", confirm_delete),
            _string_arguments(filename="The file to delete"),
            execution=_task_support("optional"),
        ),
        _tool(
            "multi_input",
            "Asks two questions at once (a task waits for both answers)",
            task_tool("optional", multi_input),
            execution=_task_support("optional"),
        ),
        _tool(
            "test_tool_with_task",
            "Asks the user's name (InputRequiredResult), then finishes as a task",
            tool_with_task,
            execution=_task_support("required"),
        ),
    ]
    return {entry.tool.name: entry for entry in entries}


# ---------------------------------------------------------------------------------------------
# Resources

STATIC_TEXT_URI: Final = "test://static-text"
STATIC_BINARY_URI: Final = "test://static-binary"
WATCHED_URI: Final = "test://watched-resource"
TEMPLATE: Final = "test://template/{id}/data"
TEMPLATE_PATTERN: Final = re.compile(r"^test://template/(?P<id>[^/]+)/data$")

RESOURCES: Final = [
    types.Resource(
        uri=STATIC_TEXT_URI,
        name="static-text",
        description="A static text resource for testing",
        mime_type="text/plain",
    ),
    types.Resource(
        uri=STATIC_BINARY_URI,
        name="static-binary",
        description="A static binary resource (a PNG image) for testing",
        mime_type="image/png",
    ),
    types.Resource(
        uri=WATCHED_URI,
        name="watched-resource",
        description="A resource that can be subscribed to for updates",
        mime_type="text/plain",
    ),
]

TEMPLATES: Final = [
    types.ResourceTemplate(
        uri_template=TEMPLATE,
        name="template-data",
        description="A resource template with parameter substitution",
        mime_type="application/json",
    )
]


# ---------------------------------------------------------------------------------------------
# Prompts


@dataclass
class PromptCall:
    ctx: Ctx
    arguments: dict[str, str]
    inputs: Inputs


PromptHandler = Callable[[PromptCall], Awaitable[types.GetPromptResult | types.InputRequiredResult]]


@dataclass(frozen=True)
class PromptEntry:
    prompt: types.Prompt
    handler: PromptHandler


def _user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def simple_prompt(call: PromptCall) -> types.GetPromptResult:
    return types.GetPromptResult(messages=[_user(_text("This is a simple prompt for testing."))])


async def prompt_with_arguments(call: PromptCall) -> types.GetPromptResult:
    arg1, arg2 = call.arguments["arg1"], call.arguments["arg2"]
    return types.GetPromptResult(messages=[_user(_text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))])


async def prompt_with_embedded_resource(call: PromptCall) -> types.GetPromptResult:
    uri = call.arguments["resourceUri"]
    return types.GetPromptResult(
        messages=[
            _user(_embedded(uri, "text/plain", "Embedded resource content for testing.")),
            _user(_text("Please process the embedded resource above.")),
        ]
    )


async def prompt_with_image(call: PromptCall) -> types.GetPromptResult:
    return types.GetPromptResult(
        messages=[
            _user(types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")),
            _user(_text("Please analyze the image above.")),
        ]
    )


CONTEXT_SCHEMA: Final = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}


async def input_required_prompt(call: PromptCall) -> types.GetPromptResult:
    answers = await call.inputs.ask(
        {"user_context": elicitation("What context should the prompt use?", CONTEXT_SCHEMA)}
    )
    context = (answers["user_context"].content or {}).get("context", "none given")
    return types.GetPromptResult(messages=[_user(_text(f"Use the following context: {context}"))])


def _argument(name: str, description: str) -> types.PromptArgument:
    return types.PromptArgument(name=name, description=description, required=True)


def default_prompts() -> dict[str, PromptEntry]:
    entries = [
        PromptEntry(
            types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"), simple_prompt
        ),
        PromptEntry(
            types.Prompt(
                name="test_prompt_with_arguments",
                description="A prompt with required arguments",
                arguments=[_argument("arg1", "First test argument"), _argument("arg2", "Second test argument")],
            ),
            prompt_with_arguments,
        ),
        PromptEntry(
            types.Prompt(
                name="test_prompt_with_embedded_resource",
                description="A prompt that includes an embedded resource",
                arguments=[_argument("resourceUri", "URI of the resource to embed")],
            ),
            prompt_with_embedded_resource,
        ),
        PromptEntry(
            types.Prompt(name="test_prompt_with_image", description="A prompt that includes image content"),
            prompt_with_image,
        ),
        PromptEntry(
            types.Prompt(
                name="test_input_required_result_prompt",
                description="A prompt that asks the user for context first (InputRequiredResult on 2026-07-28)",
            ),
            input_required_prompt,
        ),
    ]
    return {entry.prompt.name: entry for entry in entries}


# Completion candidates per (prompt, argument) and per (template, variable), ranked by relevance.
PROMPT_COMPLETIONS: Final[dict[tuple[str, str], list[str]]] = {
    ("test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test", "testValue1"],
    ("test_prompt_with_arguments", "arg2"): ["world", "wonder", "testValue2"],
    ("test_prompt_with_embedded_resource", "resourceUri"): [STATIC_TEXT_URI, STATIC_BINARY_URI, WATCHED_URI],
}
TEMPLATE_COMPLETIONS: Final[dict[tuple[str, str], list[str]]] = {(TEMPLATE, "id"): ["1", "2", "3", "123"]}
MAX_COMPLETIONS: Final = 100  # the spec's cap on values per completion


# ---------------------------------------------------------------------------------------------
# The server


class ReferenceServer:
    """The tools, resources, prompts and per-session state behind one low-level `Server`."""

    def __init__(self) -> None:
        self.tools = default_tools()
        self.prompts = default_prompts()
        self.sessions = Sessions()
        self.bus = InMemorySubscriptionBus()
        self.watched_text = "Watched resource content"
        self.tasks = TaskStore()
        self.server = self._build()

    def _build(self) -> Server[Any]:
        hint = CacheHint(ttl_ms=60_000, scope="public")
        with warnings.catch_warnings():
            # logging/setLevel is deprecated as of 2026-07-28 but required by the handshake-era scenarios.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = _Server(
                SERVER_NAME,
                version=SERVER_VERSION,
                title="Toolplex MCP reference server",
                description="What the MCP conformance suite's server scenarios require, for Toolplex's tests",
                cache_hints={
                    "tools/list": hint,
                    "prompts/list": hint,
                    "resources/list": hint,
                    "resources/templates/list": hint,
                    "resources/read": CacheHint(ttl_ms=0, scope="private"),
                },
                get_tool_input_schema=self._input_schema,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_resources=self._list_resources,
                on_list_resource_templates=self._list_templates,
                on_read_resource=self._read_resource,
                on_subscribe_resource=self._subscribe,
                on_unsubscribe_resource=self._unsubscribe,
                on_subscriptions_listen=ListenHandler(self.bus),
                on_list_prompts=self._list_prompts,
                on_get_prompt=self._get_prompt,
                on_completion=self._complete,
                on_set_logging_level=self._set_logging_level,
            )
        methods = TaskMethods(self.tasks)
        server.add_request_handler("tasks/get", TaskIdParams, methods.get)
        server.add_request_handler("tasks/update", TaskUpdateParams, methods.update)
        server.add_request_handler("tasks/cancel", TaskIdParams, methods.cancel)
        server.extensions[TASKS_EXTENSION] = {}
        # Seals every outgoing requestState and rejects a tampered echo with -32602 before a handler runs.
        server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME))
        return server

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        entry = self.tools.get(name)
        return entry.tool.input_schema if entry is not None else None

    async def _list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[entry.tool for entry in self.tools.values()])

    async def _call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> ToolOutcome | dict[str, Any]:
        entry = self.tools.get(params.name)
        if entry is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}", data={"name": params.name})
        arguments = params.arguments or {}
        problems = sorted(
            jsonschema.Draft202012Validator(entry.tool.input_schema).iter_errors(arguments), key=lambda e: e.path
        )
        if problems:
            # Invalid arguments are a tool error the model can read and correct, not a protocol error.
            return _result(
                "Invalid arguments: "
                + "; ".join(f"{'/'.join(map(str, p.path)) or '(root)'}: {p.message}" for p in problems),
                is_error=True,
            )
        call = Call(ctx, arguments, Inputs(ctx, params.input_responses, params.request_state), self)
        try:
            return await entry.handler(call)
        except NeedInput as need:
            return need.result
        except MissingCapability as missing:
            if _is_modern(ctx):
                raise MCPError(
                    types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    str(missing),
                    data={"requiredCapabilities": missing.required},
                ) from None
            return _result(f"Cannot run {params.name}: {missing}", is_error=True)

    async def _list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=RESOURCES)

    async def _list_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=TEMPLATES)

    async def _read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        contents: types.TextResourceContents | types.BlobResourceContents
        if uri == STATIC_TEXT_URI:
            contents = types.TextResourceContents(
                uri=uri, mime_type="text/plain", text="This is the content of the static text resource."
            )
        elif uri == STATIC_BINARY_URI:
            contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG_BASE64)
        elif uri == WATCHED_URI:
            contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=self.watched_text)
        elif match := TEMPLATE_PATTERN.match(uri):
            item = match["id"]
            text = json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})
            contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
        else:
            raise _resource_not_found(uri)
        return types.ReadResourceResult(contents=[contents])

    async def _subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        if uri not in {resource.uri for resource in RESOURCES}:
            raise _resource_not_found(uri)
        self.sessions.get(ctx).subscriptions.add(uri)
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.sessions.get(ctx).subscriptions.discard(str(params.uri))
        return types.EmptyResult()

    async def _list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[entry.prompt for entry in self.prompts.values()])

    async def _get_prompt(
        self, ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        entry = self.prompts.get(params.name)
        if entry is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}", data={"name": params.name})
        arguments = dict(params.arguments or {})
        missing = [a.name for a in entry.prompt.arguments or [] if a.required and a.name not in arguments]
        if missing:
            raise MCPError(types.INVALID_PARAMS, f"Missing required arguments: {', '.join(missing)}")
        try:
            return await entry.handler(
                PromptCall(ctx, arguments, Inputs(ctx, params.input_responses, params.request_state))
            )
        except NeedInput as need:
            return need.result
        except MissingCapability as missing_capability:
            raise MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                str(missing_capability),
                data={"requiredCapabilities": missing_capability.required},
            ) from None

    async def _complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            if ref.name not in self.prompts:
                raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {ref.name}")
            candidates = PROMPT_COMPLETIONS.get((ref.name, params.argument.name), [])
        else:
            if str(ref.uri) != TEMPLATE:
                raise MCPError(types.INVALID_PARAMS, f"Unknown resource template: {ref.uri}")
            candidates = TEMPLATE_COMPLETIONS.get((TEMPLATE, params.argument.name), [])
        prefix = params.argument.value.lower()
        values = [value for value in candidates if value.lower().startswith(prefix)]
        return types.CompleteResult(
            completion=types.Completion(
                values=values[:MAX_COMPLETIONS], total=len(values), has_more=len(values) > MAX_COMPLETIONS
            )
        )

    async def _set_logging_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.sessions.get(ctx).log_level = params.level
        return types.EmptyResult()

    def app(self) -> Starlette:
        """The ASGI app: /mcp for both eras, with resumable SSE (event store, 100 ms retry hint)."""
        return self.server.streamable_http_app(event_store=BoundedEventStore(), retry_interval=100, host="127.0.0.1")


class _Server(Server[Any]):
    """The low-level server, announcing list changes (and no extension) in the handshake era.

    `initialize` advertises `listChanged` only from `NotificationOptions`, which the HTTP session
    manager never passes; this server does send tools, prompts and resources list changes.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        # The tasks extension is served on 2026-07-28 only: the handshake era does not announce it.
        return super().create_initialization_options(options, experimental_capabilities, extensions or {})


def _resource_not_found(uri: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, "Resource not found", data={"uri": uri})


def main(argv: list[str] | None = None) -> None:
    """Serve on 127.0.0.1 (the SDK then arms its Host/Origin checks for loopback names only)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level (default: warning)")
    args = parser.parse_args(argv)
    # The handshake era's logging and sampling are deprecated as of 2026-07-28, and required by its scenarios.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    # h11, not httptools (uvicorn's default when installed): httptools hands header values over with their
    # surrounding whitespace, which RFC 9110 section 5.5 says a parser must strip, and the SDK then finds
    # `Mcp-Name:  tool ` at odds with the body's name (the http-header-validation scenario sends exactly that).
    config = uvicorn.Config(
        ReferenceServer().app(), host="127.0.0.1", port=args.port, log_level=args.log_level, http="h11"
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
