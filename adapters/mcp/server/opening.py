"""What the MCP front says of itself when a client opens (`initialize`, `server/discover`): its upstreams' word.

Tools are the gateway's own (its catalog; it announces `tools.listChanged` where it sends it). Everything
else it serves is relayed from the MCP backends the caller reaches (`Passthrough.backends`): prompts,
resources, completions and logging. So it announces a capability only when one of those servers does, a
flag (`listChanged`, `subscribe`) only when one of them sets it and the gateway passes it on in that era,
and their `instructions` for the model (joined, in configuration order, when there are several). Through
a gateway in front of one MCP server, a client reads the server's own opening, the gateway's tools aside.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import mcp_types as types

from adapters.mcp.relay import Server

INSTRUCTIONS_SEPARATOR = "\n\n"


def capabilities(own: types.ServerCapabilities, upstreams: Iterable[Server]) -> types.ServerCapabilities:
    """`own` (what the gateway's server serves in this era) narrowed to what the upstreams announced."""
    announced = [s.capabilities for s in upstreams if s.capabilities is not None]
    prompts = [c.prompts for c in announced if c.prompts is not None]
    resources = [c.resources for c in announced if c.resources is not None]
    return own.model_copy(
        update={
            "prompts": _prompts(own.prompts, prompts),
            "resources": _resources(own.resources, resources),
            "completions": own.completions if any(c.completions is not None for c in announced) else None,
            "logging": own.logging if any(c.logging is not None for c in announced) else None,
        }
    )


def instructions(upstreams: Iterable[Server]) -> str | None:
    """The upstreams' instructions, as each wrote them; None when none gave any."""
    given = [s.instructions for s in upstreams if isinstance(s.instructions, str) and s.instructions]
    return INSTRUCTIONS_SEPARATOR.join(given) if given else None


def _prompts(
    own: types.PromptsCapability | None, announced: Sequence[types.PromptsCapability]
) -> types.PromptsCapability | None:
    if own is None or not announced:
        return None
    return types.PromptsCapability(list_changed=bool(own.list_changed) and any(c.list_changed for c in announced))


def _resources(
    own: types.ResourcesCapability | None, announced: Sequence[types.ResourcesCapability]
) -> types.ResourcesCapability | None:
    if own is None or not announced:
        return None
    return types.ResourcesCapability(
        subscribe=bool(own.subscribe) and any(c.subscribe for c in announced),
        list_changed=bool(own.list_changed) and any(c.list_changed for c in announced),
    )
