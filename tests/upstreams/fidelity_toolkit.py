"""Tools whose values and errors are easy to lose between two gateways (issue 11.8, 11.7).

Served by the upstream gateway in tests/upstreams/test_jsonrpc_upstream.py; every value
must reach the client of the gateway in front unchanged, whatever protocol joins them.
"""

from __future__ import annotations

from typing import Any

from adapters.python import AuthorizationRequirement, CallContext, ToolError, Toolkit, tool


@tool(name="Nested", side_effects=False)
def nested() -> dict[str, Any]:
    """An object whose only key is `result`: the OpenTool wrapping must not flatten it."""
    return {"result": {"x": 1}}


@tool(name="Untyped", side_effects=False)
def untyped(value: Any):  # type: ignore[no-untyped-def]  # no return annotation: no output schema, on purpose
    """Whatever it is given, without a declared output schema."""
    return value


@tool(name="Fail", side_effects=False)
def fail() -> None:
    """Always fails, with every field a tool error can carry."""
    raise ToolError(
        "it broke",
        developer_message="Fidelity.Fail always fails",
        can_retry=True,
        retry_after_ms=250,
        additional_prompt_content="Try something else.",
    )


@tool(name="Guarded", authorization=[AuthorizationRequirement(id="vault", scopes=("read",))], side_effects=False)
def guarded(context: CallContext) -> str:
    """Needs the caller's authorization with the `vault` provider."""
    return "opened"


toolkit = Toolkit("Fidelity", [nested, untyped, fail, guarded], description="Values and errors that must survive a hop")
