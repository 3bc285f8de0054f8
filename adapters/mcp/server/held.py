"""Where a held call lives (`adapters.mcp.client.held`), so that its caller's retry reaches it from any replica.

A held call lives in the replica that holds the upstream's connection. The front records that replica as
its home under the caller's principal (`gateway.homes`, space `STORE_SPACE`), as it does a session's, and a
stateless retry (`relay.HELD_METHODS`) naming a call another replica holds is forwarded there (`route`).
Another principal's retry finds no record: it is served here, and refused as an unknown state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import mcp_types as types
import orjson
import structlog
from starlette.requests import Request
from starlette.types import Message, Receive, Scope

from adapters.mcp.relay import is_held
from adapters.mcp.server import direct
from gateway.errors import GatewayError
from gateway.homes import Where
from gateway.http import json_response
from gateway.model import Principal, principal_name

if TYPE_CHECKING:
    from starlette.responses import Response

    from adapters.mcp.server.endpoint import Endpoint

log = structlog.get_logger("toolplex.mcp")

STORE_SPACE: Final = "held.mcp"  # `gateway.homes` space of the held calls' homes, named by their token
RECORD_SLACK_S: Final = 60.0  # a hold's record outlives its answer wait by this (the retry's round included)


async def record(endpoint: Endpoint, token: str | None, principal: Principal | None, answer_s: float) -> None:
    """Note in the state store that this replica holds the call `token` names (its home, for `route`), for
    its backend's answer wait `answer_s` and `RECORD_SLACK_S`, under the caller's principal. A round that
    ended leaves its record to expire: a retry naming it is refused where it is routed, as anywhere.
    A store failure costs only the forwarding (a retry that reaches this replica still finds the call)."""
    if not is_held(token):
        return
    try:
        await endpoint.services.homes.record(
            STORE_SPACE, principal_name(principal), str(token), answer_s + RECORD_SLACK_S
        )
    except GatewayError as exc:
        log.warning("mcp_held_call_not_recorded", error=exc.failure.message)


async def route(
    endpoint: Endpoint, principal: Principal | None, scope: Scope, receive: Receive
) -> tuple[Response | None, Receive]:
    """A stateless retry (`METHODS`) whose `requestState` names a call another replica holds: that replica's
    answer. Else (None, a `receive` that replays what was read): the request is served here."""
    messages: list[Message] = []
    size, limit = 0, endpoint.manager.max_request_body_size
    while True:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))
        if message["type"] != "http.request" or size > limit or not message.get("more_body", False):
            break
    replayed = direct.replay(messages, receive)
    body = b"".join(m.get("body", b"") for m in messages)
    if b'"requestState"' not in body or size > limit:
        return None, replayed
    try:
        decoded = orjson.loads(body)
        token = decoded["params"]["requestState"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None, replayed
    if not is_held(token):
        return None, replayed
    homes = endpoint.services.homes
    try:
        found = await homes.find(STORE_SPACE, principal_name(principal), token)  # another principal's: None
    except GatewayError:
        return None, replayed  # the store is out of reach: served here (the call is unknown here if held elsewhere)
    if found is None:
        return None, replayed
    request = Request(scope, replayed)
    where = await homes.route(found.get("home"), request)
    if where.where is not Where.THERE:
        return None, replayed  # held here; or its replica is gone, and the call with it: refused here
    try:
        return await homes.forward(request, str(where.url), body=body), replayed
    except GatewayError as exc:
        error = {"code": types.INTERNAL_ERROR, "message": exc.failure.message}
        return json_response({"jsonrpc": "2.0", "id": _id_of(decoded), "error": error}, status=503), replayed


def _id_of(decoded: Any) -> Any:
    return decoded.get("id") if isinstance(decoded, dict) else None
