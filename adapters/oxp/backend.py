"""The `oxp` backend: an upstream OXP server's `GET {path}/tools` and `POST {path}/tools/call`.

Every upstream version of a tool stays its own ToolSpec, and a call names the
exact upstream id (`Toolkit.Name@x.y.z`, kept in `ToolSpec.binding`) so that
routing may rename the tool without changing what the upstream runs. The wire
is the OXP front's codec, read from the other side.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any
from urllib.parse import quote

import httpx
import jwt
import structlog

from adapters.oxp import codec
from adapters.oxp.settings import OxpBackendSettings
from gateway.backends import BackendContext, BaseBackend, Feature
from gateway.catalog import distinct_specs
from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import CallContext, ToolSpec, principal_name
from gateway.upstream import Credentials, Upstream, UpstreamSettings, failure_for_status, json_of

log = structlog.get_logger("toolplex.oxp.backend")


class OxpBackend(BaseBackend):
    """One OXP server upstream, reached with an API key, a minted JWT, both, or the client's own header."""

    relays = "oxp"  # a front of this protocol is a transparent hop (`BaseBackend.relays`)

    # An OXP server checks each tool's requirements itself, and its challenge carries the
    # authorization URL: the pipeline leaves an authorization it knows no URL for to it.
    features = frozenset({Feature.CHECKS_REQUIREMENTS})

    def __init__(self, settings: OxpBackendSettings, context: BackendContext) -> None:
        self.name = settings.name
        self.settings = settings
        self.path = settings.path.rstrip("/")
        self.shape = codec.Shape(settings.shape)
        self.credentials = Credentials.of(settings.api_key, settings, context.store)
        self.jwt = settings.jwt
        self.upstream = Upstream(
            self.name,
            UpstreamSettings.from_config(settings, context.max_response_bytes),
            auth=self.credentials.auth(None),
        )

    # ---- headers ----

    def _token(self) -> str:
        """A fresh HS256 JWT for one request: short-lived, `exp` always set, `aud` when configured."""
        assert self.jwt is not None
        now = int(time.time())
        claims: dict[str, Any] = {
            "sub": "toolplex",
            "iat": now,
            "exp": now + max(1, round(self.jwt.ttl_s)),
            "jti": uuid.uuid4().hex,
        }
        if self.jwt.audience:
            claims["aud"] = self.jwt.audience
        return jwt.encode(claims, self.jwt.secret, algorithm="HS256")

    def _credentials(self) -> dict[str, str]:
        """The backend's own credentials: the JWT as the bearer (the API key then goes in X-API-Key)."""
        if self.jwt is None:
            return self.credentials.own()
        headers = {"Authorization": f"Bearer {self._token()}"}
        if self.credentials.api_key:
            headers["X-API-Key"] = self.credentials.api_key
        return headers

    def _headers(self, context: CallContext | None = None) -> dict[str, str]:
        headers = {codec.VERSION_HEADER: codec.OXP_VERSION}
        if context is not None and self.credentials.forward_authorization:
            return {**headers, **self.credentials.for_call(context)}  # the client's own, none of the backend's
        return {**headers, **self._credentials()}

    # ---- discovery ----

    async def discover(self) -> list[ToolSpec]:
        where = f"{self.path}/tools"
        response = await self.upstream.request("GET", where, headers=self._headers(), idempotent=True)
        if response.status_code in (401, 403):
            status = response.status_code
            raise self.upstream.unavailable(f"GET {where} refused the gateway's credentials (HTTP {status})")
        if response.status_code != 200:
            raise self.upstream.unavailable(f"GET {where} answered HTTP {response.status_code}")
        try:
            definitions = codec.definitions_of(json_of(self.upstream, response))
        except ValueError as exc:
            raise self.upstream.unavailable(f"GET {where}: {exc}") from None
        source = f"backend {self.name!r} ({self.upstream.settings.url})"
        return distinct_specs(
            definitions,
            lambda definition: codec.spec_from_definition(definition, backend=self.name, source=source),
            lambda spec: str(spec.binding),
            event="oxp_definition",
            backend=self.name,
        )

    # ---- calls ----

    def _request(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
        upstream_id = str(spec.binding or spec.versioned_id)
        request = codec.CallRequest(
            tool_id=codec.parse_tool_id(upstream_id),
            raw_tool_id=upstream_id,
            input=arguments,
            call_id=upstream_call_id(context),
            trace_id=context.trace_id,
            user_id=context.user_id,
            secrets=dict(context.secrets),
            authorization=dict(context.authorization),
        )
        return codec.encode_call_request(request, self.shape)

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], context: CallContext) -> Any:
        where = f"{self.path}/tools/call"
        response = await self.upstream.request(
            "POST",
            where,
            json=self._request(spec, arguments, context),
            headers=self._headers(context),
            deadline=context.deadline,
        )
        failure = self._failure(response, spec, self.credentials.forward_authorization)
        if failure is not None:
            raise GatewayError(failure)
        try:
            call_id, _duration, value, tool_failure = codec.decode_call_result(json_of(self.upstream, response))
        except ValueError as exc:
            raise self._invalid(response, str(exc)) from None
        if call_id is not None and call_id != upstream_call_id(context):
            log.warning("oxp_call_id_mismatch", backend=self.name, sent=upstream_call_id(context), received=call_id)
        if tool_failure is not None:
            raise GatewayError(tool_failure)
        return value

    def _failure(self, response: httpx.Response, spec: ToolSpec, forwarded: bool) -> Failure | None:
        """The canonical failure of any answer but 200; None for a 200.

        An OXP error body says more than its status (a challenge with its URL, missing
        secrets, parameter errors, "not found"); where it says nothing more, the status
        decides, as for every upstream (`failure_for_status`).
        """
        status = response.status_code
        if status == 200:
            return None
        if status == 401 and not forwarded:  # the gateway's own credentials: the operator's problem
            return self.upstream.unavailable(
                "it refused the gateway's credentials (HTTP 401): check the backend's api_key / jwt",
                developer_message=_message_of(response),
            ).failure
        if status in (400, 422):
            return self._refusal(response, status)
        if status == 413:
            return Failure(kind=ErrorKind.TOO_LARGE, message=f"The upstream of {spec.flat_name} refused the body")
        developer = f"check the backend's 'path' ({self.path or '/'})" if status == 404 else None
        failure = failure_for_status(
            self.name,
            status,
            _said(response),
            response.headers,
            client_credentials=forwarded,
            developer_message=developer,
        )
        if failure is None:  # a 1xx / 2xx / 3xx other than 200
            raise self._invalid(response, f"OXP servers answer 200, 400, 401 or 422, not HTTP {status}")
        return failure

    def _refusal(self, response: httpx.Response, status: int) -> Failure:
        """A 400 / 422 before the tool ran, read from its OXP error body."""
        body = json_of(self.upstream, response)
        try:
            failure = codec.decode_refusal(status, body)
        except ValueError as exc:
            raise self._invalid(response, str(exc)) from None
        if failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE:
            return self.upstream.unavailable(failure.message, developer_message=failure.developer_message).failure
        if failure.kind is ErrorKind.MALFORMED:  # refused, nothing more said: as any upstream's 400
            refused = failure_for_status(self.name, status, failure.message, response.headers)
            return dataclasses.replace(refused or failure, developer_message=failure.developer_message)
        return failure

    def _invalid(self, response: httpx.Response, why: str) -> GatewayError:
        snippet = response.text[:120].replace("\n", " ")
        return self.upstream.unavailable(
            f"its answer is not a valid OXP response ({why})",
            developer_message=f"HTTP {response.status_code}, first bytes: {snippet!r}",
        )

    async def close(self) -> None:
        await self.upstream.close()
        await self.credentials.close()


def _said(response: httpx.Response) -> Any:
    """What an error answer says: its JSON `message`, else its JSON body, else its first bytes of text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip() or f"HTTP {response.status_code} with an empty body"
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else body


def _message_of(response: httpx.Response) -> str | None:
    """The `message` of a JSON error body, for the developer message; None when there is none."""
    try:
        body = response.json()
    except ValueError:
        return None
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else None


def upstream_call_id(context: CallContext) -> str:
    """The call id sent upstream: stable for one caller's retries, distinct between callers.

    A front may carry the client's own call id; two clients can pick the same one,
    and the upstream sees them all as one caller (the gateway), so scope it.
    """
    caller = quote(principal_name(context.principal), safe="")  # quoted: a ':' in a name cannot shift the parts
    return uuid.uuid5(uuid.NAMESPACE_URL, f"toolplex:{context.front}:{caller}:{context.call_id}").hex
