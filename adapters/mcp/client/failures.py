"""What a relayed request's failure means: the server's own answer, or the transport's.

The SDK reports an HTTP error answer without a JSON-RPC body, a broken connection and the server's own
JSON-RPC error all as `MCPError`; what the request's HTTP exchange showed (`Exchange`) tells them apart.
The server's own error is relayed to an MCP caller as it came (`error_of`, carried by `UpstreamFailed`);
a request that provably never reached the server may be sent once more (`SendAgain`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mcp.shared.exceptions import MCPError

from adapters.mcp import codec
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import UpstreamAnswer, UpstreamFailed

if TYPE_CHECKING:
    from adapters.mcp.client.http import Exchange

# The SDK's stand-ins for an HTTP error answer without a JSON-RPC body: the status (in the Exchange) says more.
SDK_STATUS_MESSAGES: Final = frozenset({"Server returned an error response", "Not Found", "Session terminated"})


def answered(exc: MCPError, exchange: Exchange) -> bool:
    """The error is the server's own JSON-RPC answer, not the SDK's word for a transport or HTTP failure."""
    # A 2026-07-28 server answers an error with HTTP 400 and the JSON-RPC error as the body: still its answer.
    transported = exchange.error is None and not exchange.too_large
    return transported and exc.code != codec.CONNECTION_CLOSED and exc.message not in SDK_STATUS_MESSAGES


def error_of(exc: MCPError) -> UpstreamAnswer:
    """A JSON-RPC error as the MCP front answers its caller with it, as it is."""
    return UpstreamAnswer(codec.PROTOCOL, error={"code": exc.code, "message": exc.message, "data": exc.data})


def refused(exc: MCPError) -> UpstreamFailed:
    """A 2026-07-28 retry the gateway itself refuses (its requestState names no call held for it): the MCP
    front answers the JSON-RPC error as it is (the SDK's own refusal), as it would an upstream's."""
    return UpstreamFailed(Failure(kind=ErrorKind.MALFORMED, message=exc.message), error_of(exc))


class SendAgain(Exception):
    """The request provably never reached the server (or it refused it unrun): it may be sent once more."""

    def __init__(self, error: GatewayError) -> None:
        super().__init__(error.failure.message)
        self.error = error
