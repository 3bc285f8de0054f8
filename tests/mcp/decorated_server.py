"""An MCP server written the way most are: the `mcp` SDK's high-level `MCPServer` and its decorators.

`tests/mcp/reference_server.py` is built on the low-level `Server` so that it can put exact shapes on the
wire. This one is the shape real servers take (issue 26): `@server.tool()` functions whose signatures
become the input schemas and whose return values the SDK turns into content (a `-> str` tool answers one
text block and `structuredContent: {"result": ...}`), `@server.resource(...)`, `@server.prompt()`,
`@server.completion()`, and the `Context` for logging, progress, elicitation (`ctx.elicit`) and sampling
(`ctx.session.create_message`), all on the call's own session. It implements the tools, resources and
prompts the server scenarios of npm `@modelcontextprotocol/conformance` 0.2.0-alpha.12 call, under the
names and with the behaviour their requirement texts give, so that `make conformance` can grade it directly
(target `decorated`) and behind Toolplex (`toolplex-decorated`) and compare the two.

Both eras on one Streamable HTTP endpoint at /mcp, as `MCPServer` serves them by default: the handshake
era (2025-06-18, 2025-11-25) and the stateless 2026-07-28 era. What the decorators leave to each era:

- Asking the client mid-call (`ctx.elicit`, `ctx.session.create_message`) needs a handshake-era session:
  the request goes to the client on the call's stream. A 2026-07-28 request has no back-channel, and the
  SDK answers "Cannot send 'elicitation/create': this transport context has no back-channel". That is how
  servers are written (the SDK's own conformance server asks this way), and it is why an MCP client of
  the handshake era must reach such a server in the handshake era.
- The 2026-07-28 questions are tools that return an `InputRequiredResult` and read `ctx.input_responses`
  and `ctx.request_state` on the client's retry (the SDK seals the state: a tampered echo is refused).
- `logging/setLevel` and `resources/subscribe`/`unsubscribe` have no decorator (the 2026-07-28 revision
  dropped them); as the SDK's documentation says, they are added with the low-level server's
  `add_request_handler`.

What it does not implement: the tasks extension (SEP-2663), which `MCPServer` has no support for.

    python -m tests.mcp.decorated_server --port 8932      # http://127.0.0.1:8932/mcp
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import warnings
from typing import Annotated, Any, Final, Literal

import mcp_types as types
import uvicorn
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Audio, Context, Image, MCPServer, UserMessage
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from tests.mcp.reference_server import JSON_SCHEMA_2020_12, PNG_BASE64, WAV_BASE64, BoundedEventStore

SERVER_NAME: Final = "toolplex-mcp-decorated"
SERVER_VERSION: Final = "1.0.0"

# The scenarios' "~50 ms" between notifications: how a real slow tool behaves.
STEP_SECONDS: Final = 0.05


def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features"""
    return "Arguments accepted"


def _with_schema(tool: Tool, schema: dict[str, Any]) -> Tool:
    """A decorator derives the input schema from the signature; the suite wants a hand-written 2020-12 schema
    listed as written ($schema, $defs with $anchor, allOf/anyOf, if/then/else), so this one tool is given to
    the server as a `Tool` with its schema in place (the arguments are still checked against the signature)."""
    tool.parameters = schema
    return tool


server: MCPServer[Any] = MCPServer(
    SERVER_NAME,
    title="Toolplex MCP decorated server",
    description="The conformance suite's server scenarios, written with MCPServer decorators",
    version=SERVER_VERSION,
    tools=[_with_schema(Tool.from_function(json_schema_2020_12_tool), JSON_SCHEMA_2020_12)],
)


def _modern(ctx: Context[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


# ---------------------------------------------------------------------------------------------
# Tools: content


@server.tool()
def test_simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> Image:
    """Tests image content response"""
    return Image(data=base64.b64decode(PNG_BASE64), format="png")


@server.tool()
def test_audio_content() -> Audio:
    """Tests audio content response"""
    return Audio(data=base64.b64decode(WAV_BASE64), format="wav")


def _embedded(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    )


@server.tool()
def test_embedded_resource() -> types.EmbeddedResource:
    """Tests embedded resource content response"""
    return _embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")


@server.tool()
def test_multiple_content_types() -> list[types.TextContent | types.ImageContent | types.EmbeddedResource]:
    """Tests response with multiple content types (text, image, resource)"""
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        Image(data=base64.b64decode(PNG_BASE64), format="png").to_image_content(),
        _embedded("test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})),
    ]


@server.tool()
def test_error_handling() -> str:
    """Tests error response handling"""
    raise ToolError("This tool intentionally returns an error for testing")


# ---------------------------------------------------------------------------------------------
# Tools: logging and progress (the Context)


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution"""
    await ctx.info("Tool execution started")
    await asyncio.sleep(STEP_SECONDS)
    await ctx.info("Tool processing data")
    await asyncio.sleep(STEP_SECONDS)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs at several levels; only requested levels reach the client"""
    await ctx.debug("A log entry at debug")
    await ctx.info("A log entry at info")
    await ctx.warning("A log entry at warning")
    return "Logged at debug, info and warning"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications"""
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(STEP_SECONDS)
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    return "Progress tool completed: 0, 50 and 100 of 100"


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Tests SSE polling by closing the stream mid-call (SEP-1699)"""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)  # the client reconnects with Last-Event-ID meanwhile
    await ctx.info("After reconnect")
    return "Reconnection test completed"


# ---------------------------------------------------------------------------------------------
# Tools: asking the client mid-call, on the handshake era's session


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Tests server-initiated sampling (LLM completion request)"""
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = result.content
    return f"LLM response: {content.text if isinstance(content, types.TextContent) else f'<{content.type}>'}"


class UserInfo(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Tests server-initiated elicitation (user input request)"""
    result = await ctx.elicit(message=message, schema=UserInfo)
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"User response: action={result.action}, content={content}"


class Defaults(BaseModel):
    """SEP-1034: a default for every primitive type."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: Literal["active", "inactive", "pending"] = Field(default="active", description="User status")
    verified: bool = Field(default=True, description="Verification status")


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)"""
    result = await ctx.elicit(message="Please provide user information", schema=Defaults)
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"Elicitation completed: action={result.action}, content={content}"


def _titled(options: dict[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in options.items()]


class EnumChoices(BaseModel):
    """SEP-1330: the five enum variants."""

    untitledSingle: Literal["option1", "option2", "option3"]
    titledSingle: str = Field(
        json_schema_extra={"oneOf": _titled({"value1": "First Option", "value2": "Second Option", "value3": "Third"})}
    )
    legacyEnum: str = Field(
        json_schema_extra={"enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]}
    )
    untitledMulti: list[Literal["option1", "option2", "option3"]]
    titledMulti: list[str] = Field(
        json_schema_extra={
            "items": {"anyOf": _titled({"value1": "First Choice", "value2": "Second Choice", "value3": "Third"})}
        }
    )


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Tests elicitation with enum schema variations (SEP-1330)"""
    result = await ctx.elicit(message="Please select values using different enum schema types", schema=EnumChoices)
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"Elicitation completed: action={result.action}, content={content}"


class Name(BaseModel):
    name: str


NAME_SCHEMA: Final = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM_SCHEMA: Final = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
COLOR_SCHEMA: Final = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
CONTEXT_SCHEMA: Final = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}


def _elicit(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str | types.InputRequiredResult:
    """Reports progress, then asks for the user's name"""
    await ctx.report_progress(1, 2, "Preparing the question")
    if _modern(ctx):
        answer = (ctx.input_responses or {}).get("user_name")
        if not isinstance(answer, types.ElicitResult):
            return types.InputRequiredResult(input_requests={"user_name": _elicit("What is your name?", NAME_SCHEMA)})
        action, name = answer.action, (answer.content or {}).get("name")
    else:
        result = await ctx.elicit(message="What is your name?", schema=Name)
        action, name = result.action, result.data.name if result.action == "accept" else None
    await ctx.report_progress(2, 2, "Answer received")
    return f"Streamed elicitation: action={action}, name={name}"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Requires the client's sampling capability (MissingRequiredClientCapability otherwise)"""
    declared = ctx.client_capabilities
    if declared is None or declared.sampling is None:
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            "This tool requires the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "The client declared the sampling capability"


# ---------------------------------------------------------------------------------------------
# Tools: the 2026-07-28 questions (SEP-2322), an InputRequiredResult answered by the client's retry


def _answer(ctx: Context, key: str, kind: type[Any]) -> Any:
    answer = (ctx.input_responses or {}).get(key)
    return answer if isinstance(answer, kind) else None


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | types.InputRequiredResult:
    """Asks for the user's name"""
    answer = _answer(ctx, "user_name", types.ElicitResult)
    if answer is None:
        return types.InputRequiredResult(input_requests={"user_name": _elicit("What is your name?", NAME_SCHEMA)})
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | types.InputRequiredResult:
    """Asks the client's model a question"""
    answer = _answer(ctx, "capital_question", types.CreateMessageResult)
    if answer is None:
        request = _sample("What is the capital of France?", 100)
        return types.InputRequiredResult(input_requests={"capital_question": request})
    content = answer.content
    return f"Model said: {content.text if isinstance(content, types.TextContent) else f'<{content.type}>'}"


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | types.InputRequiredResult:
    """Asks for the client's roots"""
    answer = _answer(ctx, "client_roots", types.ListRootsResult)
    if answer is None:
        return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})
    return f"Client exposed {len(answer.roots)} root(s): {', '.join(str(root.uri) for root in answer.roots)}"


REQUEST_STATE_NONCE: Final = "awaiting-confirmation"


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | types.InputRequiredResult:
    """Asks for a confirmation under an opaque requestState"""
    answer = _answer(ctx, "confirm", types.ElicitResult)
    if answer is None or ctx.request_state != REQUEST_STATE_NONCE:
        request = _elicit("Please confirm", CONFIRM_SCHEMA)
        return types.InputRequiredResult(input_requests={"confirm": request}, request_state=REQUEST_STATE_NONCE)
    return f"state-ok: confirmation received (action={answer.action})"


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | types.InputRequiredResult:
    """Asks for an elicitation, a sampling and the roots at once"""
    wanted = {
        "user_name": types.ElicitResult,
        "greeting": types.CreateMessageResult,
        "client_roots": types.ListRootsResult,
    }
    if ctx.request_state == "multiple-inputs" and all(_answer(ctx, key, kind) for key, kind in wanted.items()):
        return "All inputs received."
    return types.InputRequiredResult(
        input_requests={
            "user_name": _elicit("What is your name?", NAME_SCHEMA),
            "greeting": _sample("Generate a greeting", 50),
            "client_roots": types.ListRootsRequest(),
        },
        request_state="multiple-inputs",
    )


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | types.InputRequiredResult:
    """Asks two questions in two rounds; the state carries the first answer"""
    state = json.loads(ctx.request_state) if ctx.request_state else {}
    if state.get("round") == 2 and (color := _answer(ctx, "step2", types.ElicitResult)) is not None:
        return f"{state.get('name')} likes {(color.content or {}).get('color', 'no colour')}."
    if state.get("round") == 1 and (name := _answer(ctx, "step1", types.ElicitResult)) is not None:
        return types.InputRequiredResult(
            input_requests={"step2": _elicit("Step 2: What is your favorite color?", COLOR_SCHEMA)},
            request_state=json.dumps({"round": 2, "name": (name.content or {}).get("name", "stranger")}),
        )
    return types.InputRequiredResult(
        input_requests={"step1": _elicit("Step 1: What is your name?", NAME_SCHEMA)},
        request_state=json.dumps({"round": 1}),
    )


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | types.InputRequiredResult:
    """Asks under an integrity-protected requestState (the SDK refuses a tampered echo)"""
    answer = _answer(ctx, "confirm", types.ElicitResult)
    if answer is None or ctx.request_state != "round-1":
        request = _elicit("Please confirm", CONFIRM_SCHEMA)
        return types.InputRequiredResult(input_requests={"confirm": request}, request_state="round-1")
    return f"state-ok: action={answer.action}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str | types.InputRequiredResult:
    """Asks only for what the client declared it supports"""
    declared = ctx.client_capabilities or types.ClientCapabilities()
    wanted: dict[str, types.InputRequest] = {}
    if declared.sampling is not None:
        wanted["sample"] = _sample("Say hello", 50)
    if declared.elicitation is not None:
        wanted["ask"] = _elicit("What is your name?", NAME_SCHEMA)
    if declared.roots is not None:
        wanted["client_roots"] = types.ListRootsRequest()
    if not wanted:
        return "The client declared none of sampling, elicitation and roots: nothing to ask"
    if ctx.request_state == "capability-gated" and all(key in (ctx.input_responses or {}) for key in wanted):
        return f"Answered: {', '.join(sorted(wanted))}"
    return types.InputRequiredResult(input_requests=wanted, request_state="capability-gated")


# ---------------------------------------------------------------------------------------------
# Tools: list changes, schemas


def _dynamic_tool() -> str:
    """A tool that exists briefly"""
    return "dynamic"


@server.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Changes the tool list and announces it"""
    server.add_tool(_dynamic_tool, name="test_dynamic_tool")
    server.remove_tool("test_dynamic_tool")
    await ctx.notify_tools_changed()  # subscriptions/listen streams (2026-07-28)
    if not _modern(ctx):
        await ctx.session.send_tool_list_changed()
    return "tool list changed"


@server.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Changes the prompt list and announces it"""
    server.prompt(name="test_dynamic_prompt", description="A prompt that exists briefly")(_dynamic_tool)
    server.remove_prompt("test_dynamic_prompt")
    await ctx.notify_prompts_changed()
    if not _modern(ctx):
        await ctx.session.send_prompt_list_changed()
    return "prompt list changed"


@server.tool()
def test_x_mcp_header(
    region: Annotated[str, Field(description="The region", json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    """Mirrors its region argument into the Mcp-Param-Region header (SEP-2243)"""
    return f"region={region}"


# ---------------------------------------------------------------------------------------------
# Resources


@server.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource for testing"""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a PNG image) for testing"""
    return base64.b64decode(PNG_BASE64)


WATCHED: dict[str, str] = {"text": "Watched resource content"}


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource that can be subscribed to for updates"""
    return WATCHED["text"]


@server.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:
    """A resource template with parameter substitution"""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# ---------------------------------------------------------------------------------------------
# Prompts and completion


@server.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments"""
    return "This is a simple prompt for testing."


@server.prompt()
def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> str:
    """A prompt with required arguments"""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt()
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
) -> list[UserMessage]:
    """A prompt that includes an embedded resource"""
    return [
        UserMessage(content=_embedded(resourceUri, "text/plain", "Embedded resource content for testing.")),
        UserMessage(content="Please process the embedded resource above."),
    ]


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt that includes image content"""
    return [
        UserMessage(content=types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")),
        UserMessage(content="Please analyze the image above."),
    ]


class PromptContext(BaseModel):
    context: str


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str | types.InputRequiredResult:
    """A prompt that asks the user for context first"""
    if _modern(ctx):
        answer = _answer(ctx, "user_context", types.ElicitResult)
        if answer is None:
            question = _elicit("What context should the prompt use?", CONTEXT_SCHEMA)
            return types.InputRequiredResult(input_requests={"user_context": question})
        context = (answer.content or {}).get("context", "none given")
    else:
        result = await ctx.elicit(message="What context should the prompt use?", schema=PromptContext)
        context = result.data.context if result.action == "accept" else "none given"
    return f"Use the following context: {context}"


# Completion candidates per (prompt, argument) and per (template, variable).
COMPLETIONS: Final[dict[tuple[str, str], list[str]]] = {
    ("test_prompt_with_arguments", "arg1"): ["paris", "park", "party", "test", "testValue1"],
    ("test_prompt_with_arguments", "arg2"): ["world", "wonder", "testValue2"],
    ("test_prompt_with_embedded_resource", "resourceUri"): [
        "test://static-text",
        "test://static-binary",
        "test://watched-resource",
    ],
    ("test://template/{id}/data", "id"): ["1", "2", "3", "123"],
}


@server.completion()
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion:
    name = ref.name if isinstance(ref, types.PromptReference) else str(ref.uri)
    candidates = COMPLETIONS.get((name, argument.name), [])
    values = [value for value in candidates if value.lower().startswith(argument.value.lower())]
    return types.Completion(values=values, total=len(values), has_more=False)


# ---------------------------------------------------------------------------------------------
# What the 2026-07-28 revision removed and the decorators do not offer: the handshake era's log level and
# resource subscriptions, added on the low-level server as the SDK's documentation says.

SUBSCRIBED: set[str] = set()


async def set_logging_level(
    ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    return types.EmptyResult()


async def subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return types.EmptyResult()


_lowlevel = server._lowlevel_server
_lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_logging_level)
_lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
_lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)


def app() -> Starlette:
    """The ASGI app: /mcp for both eras, with resumable SSE (an event store and a 100 ms retry hint)."""
    return server.streamable_http_app(event_store=BoundedEventStore(), retry_interval=100, host="127.0.0.1")


def main(argv: list[str] | None = None) -> None:
    """Serve on 127.0.0.1 (the SDK then arms its Host/Origin checks for loopback names only)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level (default: warning)")
    args = parser.parse_args(argv)
    # The handshake era's logging and sampling are deprecated as of 2026-07-28, and required by its scenarios.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    # h11 strips header values' surrounding whitespace, as RFC 9110 asks (see reference_server.main).
    uvicorn.Server(uvicorn.Config(app(), host="127.0.0.1", port=args.port, log_level=args.log_level, http="h11")).run()


if __name__ == "__main__":
    main()
