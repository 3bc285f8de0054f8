"""How the JSON-RPC front names tools and answers calls, for the console (`gateway.plugins.Presenter`).

Both come from the codec functions the front itself uses (`codec.tool_name` for `tool.list`,
`codec.execute_result` and the envelopes for `tool.execute`), so what the console shows cannot drift from
what a client gets.
"""

from __future__ import annotations

from typing import Any

from adapters.jsonrpc import codec
from gateway.model import Outcome, ToolSpec
from gateway.plugins import Presented

STATUS = 200  # every JSON-RPC answer of the front is HTTP 200; only transport problems change it


class JsonRpcPresenter:
    """The answer stands for one `tool.execute` request (not a batch, not a notification) with `id` the outcome's
    call id and params `{"tool": name_of(spec), "parameters": arguments}`: no `language` (whose mismatch the
    front refuses before the call runs), no `context` (a client's `timeout` would change the outcome, not how it
    is answered)."""

    def name_of(self, spec: ToolSpec) -> str:
        return codec.tool_name(spec)

    def answer(self, spec: ToolSpec, outcome: Outcome, arguments: dict[str, Any]) -> Presented:
        return Presented(
            status=STATUS, body=codec.execute_answer(outcome.call_id, outcome, codec.tool_name(spec), None)
        )


PRESENTER = JsonRpcPresenter()
