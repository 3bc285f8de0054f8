"""How the ToolServerNode front names tools and answers calls, for the console (`gateway.plugins.Presenter`).

Both come from the codec functions the front itself uses (`codec.tool_name` for its listings,
`codec.call_answer` for `/execute_tool`), so what the console shows cannot drift from what a client gets.
"""

from __future__ import annotations

from typing import Any

from adapters.toolserver import codec
from gateway.model import Outcome, ToolSpec
from gateway.plugins import Presented


class ToolServerPresenter:
    """The answer stands for `POST /execute_tool` with `{"tool_name": name_of(spec), "arguments": arguments}` (no
    `env_name`) in a session, for a call that ended: answered at once when it ends within the front's patience,
    else the same answer once its 450 handle is collected (`Toolplex_collect_result`). The 450 itself, naming a
    handle made per request, is not shown; an outcome still pending shows the pending failure's own answer.
    Headers (`Retry-After`, an upstream node's own) are not part of it.
    """

    def name_of(self, spec: ToolSpec) -> str:
        return codec.tool_name(spec)

    def answer(self, spec: ToolSpec, outcome: Outcome, arguments: dict[str, Any]) -> Presented:
        answer = codec.call_answer(outcome, codec.tool_name(spec), arguments)
        return Presented(status=answer.status, body=answer.body)


PRESENTER = ToolServerPresenter()
