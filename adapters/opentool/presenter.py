"""How the OpenTool front names tools and answers calls, for the console (`gateway.plugins.Presenter`).

Both come from the functions the front itself uses (`document.function_name` for `/load`,
`codec.call_answer` for `/call`), so what the console shows cannot drift from what a client gets.
"""

from __future__ import annotations

from typing import Any

from adapters.opentool import codec
from adapters.opentool.document import function_name
from gateway.model import Outcome, ToolSpec
from gateway.plugins import Presented


class OpenToolPresenter:
    """The answer stands for a plain `POST /call` (a JSON-RPC request naming the tool by its `/load` function name,
    `id` the outcome's call id), not `/streamCall` (SSE events). Headers (`Retry-After`) are not part of it."""

    def name_of(self, spec: ToolSpec) -> str:
        return function_name(spec)

    def answer(self, spec: ToolSpec, outcome: Outcome, arguments: dict[str, Any]) -> Presented:
        status, body = codec.call_answer(outcome.call_id, function_name(spec), outcome)
        return Presented(status=status, body=body)


PRESENTER = OpenToolPresenter()
