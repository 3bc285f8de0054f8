"""How the OXP front names tools and answers calls, for the console (`gateway.plugins.Presenter`).

Both come from the codec functions the front itself uses (`codec.tool_id_of` for `GET /tools`,
`codec.call_answer` for `POST /tools/call`), so what the console shows cannot drift from what a client gets.
"""

from __future__ import annotations

from typing import Any

from adapters.oxp import codec
from gateway.model import Outcome, ToolSpec
from gateway.plugins import Presented


class OxpPresenter:
    """The answer stands for the seed's flat request `{"call_id": <the outcome's call id>, "tool_id":
    name_of(spec), "input": arguments}` (not the wrapped `$schema`/`request` shape, whose answers carry
    `$schema` too), answered within the front's patience: 200 with `success` true or false when the tool
    ran, 400 / 422 / 429 with the error body when it was refused before running. Headers (`OXP-Version`,
    `Retry-After`) are not part of it.

    One answer the front words from more than the outcome: a `tool_id` naming no tool at all is refused
    before the pipeline runs, with a `developer_message` listing the toolkits the caller could call
    instead (`front._with_known_tools`); from the pipeline's not-found outcome this shows the catalog's
    own developer message. An unknown version of a known tool is answered exactly.
    """

    def name_of(self, spec: ToolSpec) -> str:
        return codec.tool_id_of(spec)

    def answer(self, spec: ToolSpec, outcome: Outcome, arguments: dict[str, Any]) -> Presented:
        status, body = codec.call_answer(outcome, codec.Shape.FLAT)
        return Presented(status=status, body=body)


PRESENTER = OxpPresenter()
