"""What a request's permission checks said about its token's scopes, for the answer's OAuth challenge.

The pipeline's permission check (and a front's lookup of a tool the caller may not see) tells which scopes would
have allowed what was refused; the OAuth layer (`gateway.oauth.challenge`) listens for the request's whole
life and turns a refusal into `403 insufficient_scope` naming them. Without that layer (no `auth.oauth`)
nobody listens and the notes cost a context-variable lookup.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class RequestAuth:
    """What one request's permission checks said."""

    scopes_needed: dict[str, None] = field(default_factory=dict)  # an ordered set
    allowed: int = 0  # checks passed (a batch with some allowed calls is not turned into a 403)


_current: contextvars.ContextVar[RequestAuth | None] = contextvars.ContextVar("toolplex_request_auth", default=None)
STATE_KEY = "toolplex_request_auth"  # where the layer leaves it in the ASGI scope's `state`


@contextmanager
def listening(said: RequestAuth | None) -> Iterator[RequestAuth | None]:
    """Collect the notes of the code run in this block (and the tasks it starts) into `said` (None: nowhere)."""
    reset = _current.set(said)
    try:
        yield said
    finally:
        _current.reset(reset)


def said_of(request: object) -> RequestAuth | None:
    """The request's own notes, for code that runs it in another task than the request's (the MCP SDK's
    session tasks): `with listening(said_of(ctx.request))`."""
    state = getattr(request, "scope", {}).get("state")
    found = state.get(STATE_KEY) if isinstance(state, dict) else None
    return found if isinstance(found, RequestAuth) else None


def note_insufficient_scope(scopes: tuple[str, ...]) -> None:
    """A permission check refused a tool that these scopes would allow (`Principal.scopes_for`)."""
    found = _current.get()
    if found is not None and scopes:
        found.scopes_needed.update(dict.fromkeys(scopes))


def note_allowed() -> None:
    """A permission check of this request passed."""
    found = _current.get()
    if found is not None:
        found.allowed += 1
