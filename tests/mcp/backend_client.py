"""Toolplex's `kind: mcp` backend as the client under test of the conformance suite's client scenarios.

    python -m tests.mcp.backend_client <server-url>

The suite (`conformance client --command "<this> " --scenario NAME`) starts a scenario server, then runs
this program with the server's URL as its last argument and the scenario's name in
`MCP_CONFORMANCE_SCENARIO` (its spec version in `MCP_CONFORMANCE_PROTOCOL_VERSION`, scenario data such
as the tool calls to make in `MCP_CONFORMANCE_CONTEXT`, JSON). Every protocol step is Toolplex's own:
the backend is built from `McpBackendSettings` by the gateway's plugin registry with a `BackendContext`
as the gateway makes one, `discover()` finds the era and lists the tools, routing makes the catalog,
and each call goes through the gateway's call pipeline (`Dispatcher`: resolution, argument validation
against the discovered schema, deadline) into `McpBackend.call`. This program only decides which tools
to call, as an agent behind the gateway would.

No MCP client is behind the gateway here, so an upstream's question (elicitation, sampling, roots) meets
the backend's behaviour with no caller attached: that is what those scenarios grade.

The `auth/*` scenarios grade the backend as an OAuth client (`oauth:`, `gateway.oauth.client`): the settings
are only what an operator would write from what the scenario gives (`oauth_settings`): the client
credentials scenarios' client id and secret or private key (in the context), a pre-registered client's id
and secret, else nothing but `grant: authorization_code` (the suite's authorization server approves without
a login page, so the backend registers itself and reads the redirect). Everything else, from where the
authorization server is to which scope to ask for, the backend discovers from the server's 401.

Each step is printed as one JSON line on stdout (the suite keeps it in stdout.txt). Exit status 0 when
the scenario's script ran to its end, whatever the tools answered (their outcomes are the scenario's to
judge); 1 when the backend could not be built or discovery failed; 2 for a usage error.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Final

from adapters.mcp.client.settings import McpBackendSettings
from adapters.mcp.codec import McpTool
from gateway.backends import Backend, BackendContext
from gateway.catalog import Catalog
from gateway.config.models import LimitsSettings
from gateway.dispatch import Dispatcher
from gateway.errors import GatewayError
from gateway.model import Call, ToolSpec
from gateway.routing import apply_routing
from gateway.runtime import create_backend

BACKEND_NAME: Final = "conformance"
CALL_TIMEOUT_S: Final = 20.0  # each call's deadline; the suite gives the whole client 30 s
# One sample value per JSON Schema type, for the tools a scenario wants called with "any valid arguments".
SAMPLES: Final[dict[str, Any]] = {
    "string": "us-west1",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "object": {},
    "array": [],
    "null": None,
}


def emit(event: str, **fields: Any) -> None:
    """One step of the run, for people reading the scenario's stdout.txt."""
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


class Session:
    """The backend, the catalog it discovered and the call pipeline over it."""

    def __init__(self, backend: Backend, specs: list[ToolSpec]) -> None:
        self.backend = backend
        self.specs = specs
        self.dispatcher = Dispatcher(Catalog(specs), {backend.name: backend}, default_timeout=CALL_TIMEOUT_S)

    def spec_of(self, mcp_name: str) -> ToolSpec | None:
        """The catalog's tool for an upstream tool name (the catalog's own name may differ: `a-b` is `a__b`)."""
        for spec in self.specs:
            if isinstance(spec.binding, McpTool) and spec.binding.name == mcp_name:
                return spec
        return None

    async def call(self, mcp_name: str, arguments: dict[str, Any]) -> bool:
        """Call the upstream tool `mcp_name` through the pipeline; True when it answered a value."""
        spec = self.spec_of(mcp_name)
        if spec is None:
            emit("call_skipped", tool=mcp_name, reason="not in the catalog")
            return False
        outcome = await self.dispatcher.call(Call(spec.flat_name, arguments))
        if outcome.error is None:
            emit("call_ok", tool=mcp_name, flat_name=spec.flat_name, value=outcome.value)
            return True
        failure = outcome.error
        emit("call_failed", tool=mcp_name, flat_name=spec.flat_name, kind=failure.kind, message=failure.message)
        return False


def sample_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments with a sample value for every required property (enough for a permissive test tool)."""
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or []:
        kind = (properties.get(name) or {}).get("type", "string")
        arguments[name] = SAMPLES.get(kind if isinstance(kind, str) else kind[0], "x")
    return arguments


# ---- what each scenario asks of the client ----

Script = Callable[[Session, dict[str, Any]], Awaitable[None]]


async def discover_only(session: Session, context: dict[str, Any]) -> None:
    """`initialize`, `request-metadata`: connecting and listing is the whole test."""


async def tools_call(session: Session, context: dict[str, Any]) -> None:
    await session.call("add_numbers", {"a": 5, "b": 3})


async def auth_tool_call(session: Session, context: dict[str, Any]) -> None:
    """`auth/*`: the scenario's server has one tool; calling it is an authorized request after discovery."""
    await session.call("test-tool", {})


async def elicitation_defaults(session: Session, context: dict[str, Any]) -> None:
    await session.call("test_client_elicitation_defaults", {})


async def sse_retry(session: Session, context: dict[str, Any]) -> None:
    await session.call("test_reconnection", {})


async def request_state(session: Session, context: dict[str, Any]) -> None:
    """SEP-2322: two tools answer `InputRequiredResult` (with and without `requestState`), one is called
    between them, one answers without `resultType`."""
    for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
        await session.call(name, {})


async def every_listed_tool(session: Session, context: dict[str, Any]) -> None:
    """`http-standard-headers`, `http-invalid-tool-headers`: call every tool the catalog holds (a tool whose
    `x-mcp-header` is invalid must not be there to call)."""
    for spec in session.specs:
        assert isinstance(spec.binding, McpTool)
        await session.call(spec.binding.name, sample_arguments(spec.input_schema))


async def context_calls(session: Session, context: dict[str, Any]) -> None:
    """`http-custom-headers`: the calls the scenario names in its context, arguments as given."""
    for entry in context.get("toolCalls") or []:
        await session.call(entry["name"], dict(entry.get("arguments") or {}))


async def ref_no_deref(session: Session, context: dict[str, Any]) -> None:
    """SEP-2106: the tool's `profile` is a `$ref` to a network URI; validating arguments against the schema
    (the pipeline does, before the call leaves) must not fetch it."""
    await session.call("lookup_user", {"id": "user-1", "profile": {"displayName": "User One"}})


async def schema_preservation(session: Session, context: dict[str, Any]) -> None:
    """SEP-1613/2106: echo the focal tool's input schema, as the catalog holds it, to the echo tool."""
    focal = session.spec_of("json_schema_2020_12_tool")
    if focal is None:
        emit("call_skipped", tool="json_schema_echo", reason="json_schema_2020_12_tool is not in the catalog")
        return
    await session.call("json_schema_echo", {"schema": focal.input_schema})


SCRIPTS: Final[dict[str, Script]] = {
    "initialize": discover_only,
    "tools_call": tools_call,
    "elicitation-sep1034-client-defaults": elicitation_defaults,
    "sse-retry": sse_retry,
    "request-metadata": discover_only,
    "sep-2322-client-request-state": request_state,
    "http-standard-headers": every_listed_tool,
    "http-custom-headers": context_calls,
    "http-invalid-tool-headers": every_listed_tool,
    "json-schema-ref-no-deref": ref_no_deref,
    "json-schema-2020-12-preservation": schema_preservation,
}


def oauth_settings(scenario: str, context: dict[str, Any]) -> dict[str, Any] | None:
    """The `oauth:` an operator would configure for an `auth/*` scenario, from what the scenario gives."""
    if not scenario.startswith("auth/"):
        return None
    if "private_key_pem" in context:  # auth/client-credentials-jwt (SEP-1046)
        return {
            "client_id": context["client_id"],
            "auth_method": "private_key_jwt",
            "private_key": context["private_key_pem"],
            "signing_alg": context.get("signing_algorithm", "ES256"),
        }
    if scenario.startswith("auth/client-credentials-"):
        return {"client_id": context["client_id"], "client_secret": context["client_secret"]}
    if "client_id" in context:  # a pre-registered client of the authorization code grant
        return {
            "grant": "authorization_code",
            "client_id": context["client_id"],
            "client_secret": context.get("client_secret"),
            "auth_method": "client_secret_basic" if context.get("client_secret") else "none",
        }
    return {"grant": "authorization_code"}


def build_backend(url: str, era: str, scenario: str = "", context: dict[str, Any] | None = None) -> Backend:
    """The backend as the gateway builds it: validated settings, the plugin registry's factory, a context."""
    config: dict[str, Any] = {"name": BACKEND_NAME, "kind": "mcp", "url": url, "era": era}
    oauth = oauth_settings(scenario, context or {})
    if oauth is not None:
        config["oauth"] = oauth
    settings = McpBackendSettings.model_validate(config)
    context = BackendContext(
        max_response_bytes=LimitsSettings().max_upstream_response_bytes,
        rediscover=lambda name: emit("rediscover_requested", backend=name),
    )
    return create_backend(settings, context)


async def run(url: str, scenario: str, context: dict[str, Any], era: str) -> int:
    script = SCRIPTS.get(scenario, auth_tool_call if scenario.startswith("auth/") else discover_only)
    backend = build_backend(url, era, scenario, context)
    try:
        await backend.start()
        try:
            specs = apply_routing(await backend.discover(), backend.settings)
        except GatewayError as exc:
            emit("discovery_failed", kind=exc.failure.kind, message=exc.failure.message)
            return 1
        emit(
            "discovered",
            protocol_version=getattr(backend, "protocol_version", None),
            tools={spec.flat_name: spec.binding.name for spec in specs if isinstance(spec.binding, McpTool)},
        )
        await script(Session(backend, specs), context)
        emit("done", scenario=scenario)
        return 0
    finally:
        await backend.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or not args[-1].startswith(("http://", "https://")):
        print("usage: python -m tests.mcp.backend_client [--era auto|legacy|modern] <server-url>", file=sys.stderr)
        return 2
    era = "auto"
    if len(args) >= 3 and args[0] == "--era":
        era = args[1]
    url = args[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    raw_context = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    context = json.loads(raw_context) if raw_context else {}
    emit(
        "start",
        scenario=scenario,
        spec_version=os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION"),
        url=url,
        era=era,
        known=scenario in SCRIPTS or scenario.startswith("auth/"),
    )
    return asyncio.run(run(url, scenario, context, era))


if __name__ == "__main__":
    sys.exit(main())
