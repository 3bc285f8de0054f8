"""How the MCP front names tools and answers calls, for the console (`gateway.plugins.Presenter`).

Both come from the functions the front itself uses: `listing.own_mcp_name` (the `tools/list` name),
`listing.call_answer` (a call's outcome as MCP), `direct.wire_result` (the result as the SDK shapes and stamps
it), and for a protocol error the SDK's own mapping (`modern_error_data`, `ERROR_CODE_HTTP_STATUS`), so what the
console shows cannot drift from what a client gets.
"""

from __future__ import annotations

import copy
import warnings
from functools import cache
from typing import Any, Final

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.runner import modern_error_data
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from pydantic import ValidationError

from adapters.mcp.server import direct
from adapters.mcp.server.endpoint import SERVER_DESCRIPTION, SERVER_NAME, SERVER_TITLE
from adapters.mcp.server.listing import call_answer, own_mcp_name
from gateway.model import Outcome, ToolSpec
from gateway.plugins import Presented
from gateway.runtime import GATEWAY_VERSION

MODERN: Final = "2026-07-28"  # the stateless era whose answer is presented
OK: Final = 200  # the SDK's status for a result, and for an error its table does not name


@cache
def _identity(version: str) -> Server[Any]:
    """A server with the endpoint's identity, for the `serverInfo` stamp the SDK puts in every result's `_meta`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(SERVER_NAME, version=version, title=SERVER_TITLE, description=SERVER_DESCRIPTION)


class McpPresenter:
    """The answer stands for a plain 2026-07-28 `tools/call` (`MCP-Protocol-Version: 2026-07-28`, no session,
    `id` the outcome's call id, params `{"name": name_of(spec), "arguments": arguments, "_meta": <the envelope>}`,
    no progress token) answered as JSON before the SDK's SSE window (15 s) passes: 200 with a `CallToolResult` (a
    tool's failure an `isError` result, `_meta` naming its kind and the gateway's call id), or the JSON-RPC error
    of a protocol failure with the SDK's status for its code (400 for -32602: an unknown tool, a malformed call).

    What the front decides from more than one outcome, this cannot show:
    - `name_of` is the tool's own MCP name; the listing falls back to the flat name for an MCP upstream's tool whose
      own name another tool of the whole catalog also has (`listing.mcp_names`), which one spec cannot tell.
    - A caller the front does not let call the tool is answered `Unknown tool` before the pipeline runs; the
      pipeline's `forbidden` outcome shows as the `isError` result the front gives a tool a stage refused (a
      quarantined one).
    - An MCP upstream's new task is answered with its id sealed for the caller; here it shows as the upstream
      gave it.
    """

    def name_of(self, spec: ToolSpec) -> str:
        return own_mcp_name(spec)

    def answer(self, spec: ToolSpec, outcome: Outcome, arguments: dict[str, Any]) -> Presented:
        try:
            result = direct.wire_result(
                _identity(GATEWAY_VERSION), MODERN, call_answer(own_mcp_name(spec), spec, outcome)
            )
        except (MCPError, ValidationError) as exc:
            error = types.JSONRPCError(jsonrpc="2.0", id=outcome.call_id, error=modern_error_data(exc))
            body = error.model_dump(mode="json", by_alias=True, exclude_none=True)
            return Presented(status=ERROR_CODE_HTTP_STATUS.get(error.error.code, OK), body=body)
        # A copy: the stamp in `_meta` is the server's one dump, shared by every answer, and the body is the console's.
        result = copy.deepcopy(result)
        return Presented(status=OK, body={"jsonrpc": "2.0", "id": outcome.call_id, "result": result})


PRESENTER = McpPresenter()
