"""The `jsonrpc` backend: a seed-002 server (e.g. another Toolplex's `/rpc`), `tool.list` and `tool.execute`.

Discovery asks `tool.list`; each call is one `tool.execute` whose `context.timeout`
is what is left of the call's deadline. Error codes come back as the canonical kinds
they stand for (a Toolplex names the kind in `data.kind`), so a Toolplex behind a
Toolplex loses nothing: names, toolkits, languages, versions, schemas, values and errors.

Each answer also comes back as it came (`UpstreamAnswer("jsonrpc", result=... | error=...)`):
the JSON-RPC front passes it on to its caller (a transparent hop: the upstream's own
`output`, `metadata`, `diagnostics`, error objects); other fronts render the canonical value.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import httpx

from adapters.jsonrpc import codec
from adapters.jsonrpc.settings import JsonRpcBackendSettings
from gateway.backends import BackendContext, BaseBackend
from gateway.catalog import distinct_specs
from gateway.errors import Failure, GatewayError
from gateway.model import Answered, CallContext, ToolSpec, UpstreamAnswer, UpstreamFailed, principal_name
from gateway.upstream import (
    Credentials,
    Upstream,
    UpstreamSettings,
    error_body,
    failure_for_status,
    json_of,
    plain_message,
)

PROTOCOL = "jsonrpc"  # `UpstreamAnswer.protocol` of this backend's answers
# Errors about the gateway's own request (the upstream could not read it): the gateway's failure, never the caller's
# answer (the caller's request was a valid one, or the gateway would have refused it).
NOT_THE_CALLERS = (codec.PARSE_ERROR, codec.INVALID_REQUEST)


class JsonRpcBackend(BaseBackend):
    """One seed-002 server; declares no optional feature (no streaming, no sessions)."""

    relays = PROTOCOL  # a front of this protocol is a transparent hop (`BaseBackend.relays`)

    def __init__(self, settings: JsonRpcBackendSettings, context: BackendContext) -> None:
        self.name = name = settings.name
        self.settings = settings
        self.path = settings.path
        self.credentials = Credentials.of(settings.api_key, settings, context.store)
        self.upstream = Upstream(
            name, UpstreamSettings.from_config(settings, context.max_response_bytes), auth=self.credentials.auth(None)
        )
        # Toolkit of tools whose title is not `Toolkit.Name` (servers other than a Toolplex).
        self.default_toolkit = "".join(w[:1].upper() + w[1:] for w in name.replace("-", "_").split("_")) or "Rpc"

    def _credentials(self) -> dict[str, str]:
        return self.credentials.own()

    def _headers(self, context: CallContext) -> dict[str, str]:
        return self.credentials.for_call(context)

    # ---- discovery ----

    async def discover(self) -> list[ToolSpec]:
        body = {"jsonrpc": "2.0", "protocol": codec.PROTOCOL_VERSION, "id": "discover", "method": "tool.list"}
        response = await self.upstream.request(
            "POST", self.path, json=body, headers=self._credentials(), idempotent=True
        )
        status = response.status_code
        if status in (401, 403):
            raise self.upstream.unavailable(f"tool.list refused the gateway's credentials (HTTP {status})")
        if status != 200:
            raise self.upstream.unavailable(f"tool.list at {self.path} answered HTTP {status}")
        try:
            result, error = codec.read_response(json_of(self.upstream, response))
        except ValueError as exc:
            raise self.upstream.unavailable(f"tool.list at {self.path}: {exc}") from None
        if error is not None:
            raise self.upstream.unavailable(f"tool.list failed: {codec.failure_of(error).message}")
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            raise self.upstream.unavailable("tool.list did not answer {tools: [...]}")
        source = f"backend {self.name!r} ({self.upstream.settings.url})"
        return distinct_specs(
            tools,
            lambda listed: codec.spec_from_registration(
                listed, backend=self.name, toolkit=self.default_toolkit, source=source
            ),
            lambda spec: spec.flat_name,
            event="jsonrpc_registration",
            backend=self.name,
        )

    # ---- calls ----

    def _context(self, context: CallContext) -> dict[str, Any]:
        out: dict[str, Any] = {"messageId": context.message_id or context.call_id}
        # Stable per caller session, distinct between callers, and no principal name leaves the gateway. A
        # call without a session has its principal's own default one: an upstream that keeps state per session
        # (a workspace) never shares one between callers.
        session = context.session_key or f"default/{principal_name(context.principal)}"
        out["sessionId"] = uuid.uuid5(uuid.NAMESPACE_URL, f"toolplex:{session}").hex
        remaining = context.remaining()
        if remaining is not None:
            out["timeout"] = max(1, math.floor(remaining * 1000))
        return out

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Answered:
        """The tool's value with the upstream's `result` as it came, or its failure (raised) with the upstream's
        `error` as it came: the JSON-RPC front passes either on unchanged."""
        body = codec.execute_request(context.call_id, spec.binding, arguments, self._context(context))
        response = await self.upstream.request(
            "POST", self.path, json=body, headers=self._headers(context), deadline=context.deadline
        )
        if response.status_code >= 400:
            raise GatewayError(self._status_failure(response, forwarded=self.credentials.forward_authorization))
        try:
            result, error = codec.read_response(json_of(self.upstream, response))
        except ValueError as exc:
            snippet = response.text[:120].replace("\n", " ")
            raise self.upstream.unavailable(
                f"its answer is not a valid JSON-RPC response ({exc})",
                developer_message=f"HTTP {response.status_code}, first bytes: {snippet!r}",
            ) from None
        if error is not None:
            failure = codec.failure_of(error)
            if error["code"] in NOT_THE_CALLERS:
                raise GatewayError(failure)
            raise UpstreamFailed(failure, UpstreamAnswer(PROTOCOL, error=error))
        return Answered(codec.value_of(result), UpstreamAnswer(PROTOCOL, result=result))

    def _status_failure(self, response: httpx.Response, *, forwarded: bool = False) -> Failure:
        """An HTTP error answer: the status says the kind; a JSON-RPC error body adds its details."""
        body = error_body(response)
        error = body.get("error") if isinstance(body, dict) else None
        fields: dict[str, Any] = {}
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            carried = codec.failure_of(error)
            message: Any = carried.message
            fields = {"parameter_errors": carried.parameter_errors, "details": carried.details}
            if carried.retry_after_ms is not None:
                fields["retry_after_ms"] = carried.retry_after_ms
        elif isinstance(body, (dict, list)):
            message = body
        else:
            message = plain_message(response)
        failure = failure_for_status(
            self.name, response.status_code, message, response.headers, client_credentials=forwarded, **fields
        )
        assert failure is not None  # only called for statuses >= 400
        return failure

    async def close(self) -> None:
        await self.upstream.close()
        await self.credentials.close()
