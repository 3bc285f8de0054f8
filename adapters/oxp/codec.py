"""OXP's wire (seed 003, published spec 1.0): tool ids, flat and wrapped bodies, result and error shapes.

Both directions live here so that the OXP front (serving clients) and the
OXP backend (calling upstream OXP servers) speak exactly the same bytes:
`parse_*` / `decode_*` read what the other side sends, `encode_*` and the
body builders write it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import AuthorizationRequirement, Outcome, Requirements, ToolSpec

OXP_VERSION = "1.0"  # what this side speaks; sent as the OXP-Version header on every response
VERSION_HEADER = "OXP-Version"
SCHEMA_URN = "urn:oxp:1.0"  # `$schema` of the wrapped shape
TOOL_ID_PATTERN = re.compile(r"^([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)(?:@([0-9]+|[0-9]+\.[0-9]+\.[0-9]+))?$")
_ACCEPTED_VERSION = re.compile(r"^1(?:\.[0-9]+){0,2}$")  # 1, 1.x (and 1.x.y)
_ACCEPTED_SCHEMA = re.compile(r"^urn:oxp:1(?:\.[0-9]+)?$")
REQUEST_FIELDS = ("call_id", "trace_id", "tool_id", "input", "context")
WRAPPER_FIELDS = ("$schema", "request")
CONTEXT_FIELDS = ("authorization", "secrets", "user_id")
MAX_ID_LENGTH = 256  # call_id / trace_id / user_id: idempotency keys and log fields, so bounded
VALIDATION_MESSAGE = "Some input parameters are invalid"  # the seed's 422 message, byte for byte
_EXACT_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_W3C_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
# How a 400 says "no such tool or version" (the spec's example: "Tool 'Calculator_Add' was not found").
_NOT_FOUND = re.compile(
    r"not\s+(?:be\s+)?found|not\s+available|unknown\s+tool|no\s+such\s+tool|does\s+not\s+exist", re.IGNORECASE
)
# How a 400 says "the server cannot serve now" (the spec's example: "The tool server is temporarily unavailable").
_UNAVAILABLE = re.compile(r"\bunavailable\b|temporarily|try\s+again\s+later", re.IGNORECASE)

# kind -> HTTP status on OXP; the README's error table says the same.
# 200 means "the tool ran (or was still running)": answered with success:false.
KIND_STATUS: dict[ErrorKind, int] = {
    ErrorKind.MALFORMED: 400,
    ErrorKind.TOO_LARGE: 413,
    ErrorKind.NOT_FOUND: 400,
    ErrorKind.INVALID_ARGUMENTS: 422,
    ErrorKind.TOOL_FAILED: 200,
    ErrorKind.DEADLINE: 200,
    ErrorKind.PENDING: 200,
    ErrorKind.UNAUTHENTICATED: 401,
    ErrorKind.FORBIDDEN: 400,
    ErrorKind.MISSING_REQUIREMENT: 400,
    ErrorKind.AUTHORIZATION_REQUIRED: 400,
    ErrorKind.UPSTREAM_UNAVAILABLE: 400,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.INTERNAL: 200,
}


class Shape(StrEnum):
    FLAT = "flat"  # the seed: {"call_id", "tool_id", "input", ...}
    WRAPPED = "wrapped"  # published 1.0 and PyPI `oxp`: {"$schema", "request": {...}} -> {"$schema", "result"}


def malformed(message: str, developer_message: str | None = None) -> GatewayError:
    return GatewayError.of(ErrorKind.MALFORMED, message, developer_message=developer_message)


# ---- tool ids ----


@dataclass(frozen=True)
class ToolId:
    toolkit: str
    name: str
    version: str | None = None  # "x.y.z" exact or "x" meaning x.0.0; None: the latest

    @property
    def qualified_name(self) -> str:
        return f"{self.toolkit}.{self.name}"

    @property
    def wanted_version(self) -> str | None:
        """The exact version this id names (`@1` -> `1.0.0`), or None for the latest."""
        if self.version is None:
            return None
        return f"{self.version}.0.0" if "." not in self.version else self.version

    def __str__(self) -> str:
        return self.qualified_name if self.version is None else f"{self.qualified_name}@{self.version}"


def parse_tool_id(text: Any) -> ToolId:
    """Parse `Toolkit.Tool[@x|@x.y.z]` with the published pattern; say what is wrong otherwise."""
    if not isinstance(text, str) or not text:
        raise malformed(
            "'tool_id' is required: a string such as 'Calculator.Add@1.0.0'",
            f"got {_describe(text)}",
        )
    match = TOOL_ID_PATTERN.match(text)
    if match is None:
        base, at, version = text.partition("@")
        if at and re.match(r"^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$", base):
            why = f"version {version!r} is neither x.y.z nor x (integers only; no pre-release or build tags)"
        elif "." not in base:
            why = "it has no dot between toolkit and tool name"
        else:
            why = "toolkit and tool name may only hold letters, digits and underscores"
        raise malformed(
            f"Invalid tool_id {text!r}",
            f"{why}; the format is Toolkit.Tool, Toolkit.Tool@x or Toolkit.Tool@x.y.z",
        )
    return ToolId(match.group(1), match.group(2), match.group(3))


# ---- versions ----


def check_version_header(value: str | None) -> None:
    """Absent: the latest (1.0); `1`, `1.x` or `1.x.y`: accepted; anything else: a 400 naming what is supported."""
    if value is None or _ACCEPTED_VERSION.match(value.strip()):
        return
    raise malformed(
        f"OXP version {value!r} is not supported",
        f"This server speaks OXP {OXP_VERSION}; send {VERSION_HEADER}: 1 or 1.x, or leave the header out",
    )


# ---- call requests ----


@dataclass
class CallRequest:
    """One `CallToolRequest`, checked field by field."""

    tool_id: ToolId
    raw_tool_id: str
    input: dict[str, Any]
    call_id: str | None = None
    trace_id: str | None = None
    user_id: str | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    authorization: dict[str, str] = field(default_factory=dict)  # provider id -> token


def unwrap(body: Any) -> tuple[Shape, dict[str, Any]]:
    """Tell the flat shape from the wrapped one and return the inner request object."""
    if not isinstance(body, dict):
        raise malformed(f"The body must be a JSON object (a call request), not a JSON {_json_type(body)}")
    if "request" not in body:
        return Shape.FLAT, body
    unknown = [key for key in body if key not in WRAPPER_FIELDS]
    if unknown:
        raise malformed(
            f"Unknown field(s) next to 'request': {', '.join(unknown)}",
            "A wrapped call has only '$schema' and 'request'",
        )
    schema = body.get("$schema")
    if schema is not None and (not isinstance(schema, str) or not _ACCEPTED_SCHEMA.match(schema)):
        raise malformed(
            f"'$schema' {schema!r} is not supported",
            f"This server speaks {SCHEMA_URN} (any urn:oxp:1.x is accepted)",
        )
    request = body["request"]
    if not isinstance(request, dict):
        raise malformed(f"'request' must be an object, not a JSON {_json_type(request)}")
    return Shape.WRAPPED, request


def parse_call_request(data: dict[str, Any]) -> CallRequest:
    unknown = [key for key in data if key not in REQUEST_FIELDS]
    if unknown:
        raise malformed(
            f"Unknown field(s) in the call request: {', '.join(unknown)}",
            f"A call request has only {', '.join(REQUEST_FIELDS)}",
        )
    tool_id = parse_tool_id(data.get("tool_id"))
    raw_input = data.get("input")
    if raw_input is None:
        raw_input = {}
    if not isinstance(raw_input, dict):
        raise malformed(
            f"'input' must be an object keyed by parameter name, not a JSON {_json_type(raw_input)}",
            "Leave 'input' out (or send {}) for a tool without parameters",
        )
    request = CallRequest(
        tool_id=tool_id,
        raw_tool_id=data["tool_id"],
        input=raw_input,
        call_id=_optional_id(data, "call_id"),
        trace_id=_optional_id(data, "trace_id"),
    )
    _parse_context(data.get("context"), request)
    return request


def _parse_context(context: Any, request: CallRequest) -> None:
    if context is None:
        return
    if not isinstance(context, dict):
        raise malformed(f"'context' must be an object, not a JSON {_json_type(context)}")
    unknown = [key for key in context if key not in CONTEXT_FIELDS]
    if unknown:
        raise malformed(
            f"Unknown field(s) in 'context': {', '.join(unknown)}",
            f"'context' has only {', '.join(CONTEXT_FIELDS)}",
        )
    request.user_id = _optional_id(context, "user_id", "context.user_id")
    request.secrets = _pairs(context.get("secrets"), "secrets", "value")
    request.authorization = _pairs(context.get("authorization"), "authorization", "token")


def _pairs(items: Any, name: str, value_key: str) -> dict[str, str]:
    """`[{"id", value_key}]` -> {id: value}; each item checked, duplicates refused."""
    if items is None:
        return {}
    where = f"context.{name}"
    if not isinstance(items, list):
        raise malformed(f"'{where}' must be an array of {{id, {value_key}}} objects, not a JSON {_json_type(items)}")
    out: dict[str, str] = {}
    for index, item in enumerate(items):
        here = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise malformed(f"'{here}' must be an object with 'id' and '{value_key}'")
        unknown = [key for key in item if key not in ("id", value_key)]
        if unknown:
            raise malformed(f"Unknown field(s) in '{here}': {', '.join(unknown)}")
        ident, value = item.get("id"), item.get(value_key)
        if not isinstance(ident, str) or not ident:
            raise malformed(f"'{here}.id' must be a non-empty string")
        if not isinstance(value, str):
            raise malformed(f"'{here}.{value_key}' must be a string")
        if ident in out:
            raise malformed(f"'{where}' names {ident!r} twice")
        out[ident] = value
    return out


def _optional_id(data: dict[str, Any], key: str, where: str | None = None) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    where = where or key
    if not isinstance(value, str) or not value:
        raise malformed(f"'{where}' must be a non-empty string, got {_describe(value)}")
    if len(value) > MAX_ID_LENGTH:
        raise malformed(f"'{where}' is longer than {MAX_ID_LENGTH} characters")
    return value


def w3c_trace_id(trace_id: str | None) -> str | None:
    """A request's free-form `trace_id` as a W3C trace id (32 lowercase hex digits), to join its trace.

    One that already is one (a UUID's dashes and upper case aside) is kept; any other is hashed
    (the first 128 bits of its SHA-256), so every call sent with the same `trace_id` lands in one trace.
    """
    if trace_id is None:
        return None
    compact = trace_id.replace("-", "").lower()
    if _W3C_TRACE_ID.match(compact) and int(compact, 16):
        return compact
    return hashlib.sha256(trace_id.encode()).hexdigest()[:32]


# ---- call_id as an idempotency key (gateway/detached.py holds the records) ----

CALL_IDENTITY = "the same tool_id, input and user_id"  # what a call_id must keep naming while it is recorded


def fingerprint(tool_id: str, arguments: dict[str, Any], user_id: str | None) -> str:
    """What makes two requests with one call id "the same call": tool id as sent, input, user."""
    canonical = orjson.dumps({"tool_id": tool_id, "input": arguments, "user_id": user_id}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def recorded_by_tool(outcome: Outcome) -> bool:
    """True when the tool ran (a 200 answer); only those outcomes are recorded and replayed."""
    return status_of(outcome.error) == 200


def encode_call_request(request: CallRequest, shape: Shape = Shape.WRAPPED) -> dict[str, Any]:
    """A `CallToolRequest` body, for a client of an OXP server (the inverse of `parse_call_request`)."""
    body: dict[str, Any] = {}
    if request.call_id is not None:
        body["call_id"] = request.call_id
    if request.trace_id is not None:
        body["trace_id"] = request.trace_id
    body["tool_id"] = request.raw_tool_id
    body["input"] = request.input
    context: dict[str, Any] = {}
    if request.authorization:
        context["authorization"] = [{"id": k, "token": v} for k, v in request.authorization.items()]
    if request.secrets:
        context["secrets"] = [{"id": k, "value": v} for k, v in request.secrets.items()]
    if request.user_id is not None:
        context["user_id"] = request.user_id
    if context:
        body["context"] = context
    return {"$schema": SCHEMA_URN, "request": body} if shape is Shape.WRAPPED else body


# ---- responses ----


def status_of(failure: Failure | None) -> int:
    return 200 if failure is None else KIND_STATUS[failure.kind]


def tool_error(failure: Failure) -> dict[str, Any]:
    """The `error` of a 200 `success: false`, in the seed's field order, every ToolError field kept."""
    error: dict[str, Any] = {"message": failure.message}
    if failure.developer_message is not None:
        error["developer_message"] = failure.developer_message
    error["can_retry"] = failure.can_retry
    if failure.additional_prompt_content is not None:
        error["additional_prompt_content"] = failure.additional_prompt_content
    if failure.retry_after_ms is not None:
        error["retry_after_ms"] = failure.retry_after_ms
    return error


def call_result(call_id: str, duration_ms: float, value: Any = None, failure: Failure | None = None) -> dict[str, Any]:
    """A `CallToolResponse`: `success` + `value`, or `success: false` + `error`."""
    body: dict[str, Any] = {"call_id": call_id, "duration": round(duration_ms, 3)}
    if failure is None:
        body["success"] = True
        body["value"] = value
    else:
        body["success"] = False
        body["error"] = tool_error(failure)
    return body


def server_error(failure: Failure) -> dict[str, Any]:
    """A `ServerErrorResponse` (400, 401, 413): message, developer message, missing requirements."""
    body: dict[str, Any] = {"message": failure.message}
    if failure.developer_message is not None:
        body["developer_message"] = failure.developer_message
    if failure.retry_after_ms is not None and failure.kind is ErrorKind.RATE_LIMITED:
        body["retry_after_ms"] = failure.retry_after_ms
    missing: dict[str, Any] = {}
    if failure.kind is ErrorKind.AUTHORIZATION_REQUIRED and failure.details.get("authorization"):
        missing["authorization"] = [
            {key: c[key] for key in ("id", "url", "check_url") if c.get(key) is not None}
            for c in failure.details["authorization"]
        ]
    if failure.kind is ErrorKind.MISSING_REQUIREMENT:
        if failure.details.get("secrets"):
            missing["secrets"] = [{"id": s} for s in failure.details["secrets"]]
        if failure.details.get("user_id"):
            missing["user_id"] = True
    if missing:
        body["missing_requirements"] = missing
    return body


def validation_error(failure: Failure) -> dict[str, Any]:
    """A `ValidationErrorResponse` (422), exactly as the seed writes it.

    Input refused without naming a parameter (an upstream's bare 400) keeps its own message.
    """
    if not failure.parameter_errors:
        body: dict[str, Any] = {"message": failure.message, "parameter_errors": {}}
        if failure.developer_message is not None:
            body["developer_message"] = failure.developer_message
        return body
    return {"message": VALIDATION_MESSAGE, "parameter_errors": dict(failure.parameter_errors)}


def error_body(failure: Failure) -> dict[str, Any]:
    """The body for a failure answered before the tool ran (any status but 200)."""
    return validation_error(failure) if failure.kind is ErrorKind.INVALID_ARGUMENTS else server_error(failure)


def wrap(shape: Shape, result: dict[str, Any]) -> dict[str, Any]:
    """A call result in the request's shape."""
    return {"$schema": SCHEMA_URN, "result": result} if shape is Shape.WRAPPED else result


def wrap_error(shape: Shape, body: dict[str, Any]) -> dict[str, Any]:
    """Error bodies stay flat (as the spec defines them); wrapped callers also get `$schema`."""
    return {"$schema": SCHEMA_URN, **body} if shape is Shape.WRAPPED else body


def call_answer(outcome: Outcome, shape: Shape = Shape.FLAT) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body `POST /tools/call` answers an outcome with, in the request's shape: 200 with a
    `CallToolResponse` when the tool ran (`success` true or false), else the error body of its status (400,
    422, 429, ...) before the tool ran."""
    if outcome.error is not None and status_of(outcome.error) != 200:
        return status_of(outcome.error), wrap_error(shape, error_body(outcome.error))
    return 200, wrap(shape, call_result(outcome.call_id, outcome.duration_ms, outcome.value, outcome.error))


def decode_call_result(body: Any) -> tuple[str | None, float | None, Any, Failure | None]:
    """Read a 200 call response of either shape: (call_id, duration, value, failure)."""
    result = body.get("result") if isinstance(body, dict) and "result" in body else body
    if not isinstance(result, dict) or not isinstance(result.get("success"), bool):
        raise ValueError("not an OXP call response: no boolean 'success'")
    call_id, duration = result.get("call_id"), result.get("duration")
    if result["success"]:
        return call_id, duration, result.get("value"), None
    error = result.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        raise ValueError("an OXP call response with success:false needs an error with a message")
    retry_after = error.get("retry_after_ms")
    prompt = error.get("additional_prompt_content")
    developer = error.get("developer_message")
    failure = Failure(
        kind=ErrorKind.TOOL_FAILED,
        message=error["message"],
        developer_message=developer if isinstance(developer, str) else None,
        can_retry=bool(error.get("can_retry", False)),
        retry_after_ms=int(retry_after) if isinstance(retry_after, (int, float)) and retry_after >= 0 else None,
        additional_prompt_content=prompt if isinstance(prompt, str) else None,
    )
    return call_id, duration, None, failure


def decode_error(status: int, body: Any) -> Failure:
    """Read a non-200 answer of an OXP server back into a canonical failure."""
    data = body if isinstance(body, dict) else {}
    message = _text(data.get("message")) or f"OXP server answered HTTP {status}"
    developer_message = _text(data.get("developer_message"))
    missing = data.get("missing_requirements") if isinstance(data.get("missing_requirements"), dict) else {}
    if status == 422:
        errors = data.get("parameter_errors")
        return Failure(
            kind=ErrorKind.INVALID_ARGUMENTS,
            message=message,
            developer_message=developer_message,
            parameter_errors={str(k): _text(v) or "" for k, v in errors.items()} if isinstance(errors, dict) else {},
        )
    if status == 401:
        return Failure(kind=ErrorKind.UNAUTHENTICATED, message=message, developer_message=developer_message)
    challenges = [
        {key: c[key] for key in ("id", "url", "check_url") if isinstance(c.get(key), str)}
        for c in _listed(missing.get("authorization"))
        if isinstance(c, dict) and isinstance(c.get("id"), str)
    ]
    if challenges:
        return Failure(
            kind=ErrorKind.AUTHORIZATION_REQUIRED,
            message=message,
            developer_message=developer_message,
            details={"authorization": challenges},
        )
    secrets = [s["id"] for s in _listed(missing.get("secrets")) if isinstance(s, dict) and isinstance(s.get("id"), str)]
    if secrets or missing.get("user_id") is True:
        details: dict[str, Any] = {}
        if secrets:
            details["secrets"] = secrets
        if missing.get("user_id") is True:
            details["user_id"] = True
        return Failure(
            kind=ErrorKind.MISSING_REQUIREMENT, message=message, developer_message=developer_message, details=details
        )
    kind = ErrorKind.MALFORMED if 400 <= status < 500 else ErrorKind.UPSTREAM_UNAVAILABLE  # 5xx: the server's fault
    return Failure(kind=kind, message=message, developer_message=developer_message, details={"status": status})


# ---- tool definitions ----


def tool_id_of(spec: ToolSpec) -> str:
    """A tool's `id` as `GET /tools` lists it and a call may name it: `Toolkit.Name@x.y.z` (every version is
    listed, so the id names the version); one rule for the listing and the console's view of it."""
    return spec.versioned_id


def tool_definition(spec: ToolSpec) -> dict[str, Any]:
    """A `ToolDefinition` with exactly the published fields."""
    needs = spec.requirements
    return {
        "id": tool_id_of(spec),
        "name": spec.flat_name,
        "description": spec.description,
        "version": spec.version,
        "input_schema": spec.input_schema,
        "output_schema": spec.output_schema,
        "requirements": {
            "authorization": [{"id": a.id, "oauth2": {"scopes": list(a.scopes)}} for a in needs.authorization],
            "secrets": [{"id": s} for s in needs.secrets],
            "user_id": needs.user_id,
        },
    }


def spec_from_definition(data: Any, *, backend: str, source: str = "", language: str = "remote") -> ToolSpec:
    """A `ToolDefinition` read back as a `ToolSpec` (for the OXP backend); raises ValueError when malformed.

    `binding` is the exact upstream id (`Toolkit.Name@x.y.z`): routing may rename
    the tool on the gateway's side, but calls must name it as the upstream does.
    """
    if not isinstance(data, dict):
        raise ValueError("a tool definition must be an object")
    try:
        tool_id = parse_tool_id(data.get("id"))
    except GatewayError:
        raise ValueError(f"tool definition without a valid 'id': {data.get('id')!r}") from None
    version = data.get("version") or tool_id.wanted_version
    if not isinstance(version, str) or not _EXACT_VERSION.match(version):
        raise ValueError(f"tool {tool_id}: 'version' must be x.y.z, got {version!r}")
    if tool_id.version is not None and tool_id.wanted_version != version:
        raise ValueError(f"tool {tool_id}: its id and its 'version' ({version}) disagree")
    schema = data.get("input_schema") or {"type": "object", "properties": {}}
    if not isinstance(schema, dict) or not isinstance(data.get("output_schema") or {}, dict):
        raise ValueError(f"tool {tool_id}: 'input_schema' and 'output_schema' must be JSON Schema objects")
    needs = data.get("requirements") or {}
    if not isinstance(needs, dict):
        raise ValueError(f"tool {tool_id}: 'requirements' must be an object")
    authorization = tuple(
        AuthorizationRequirement(id=str(item["id"]), scopes=tuple((item.get("oauth2") or {}).get("scopes") or ()))
        for item in needs.get("authorization") or []
        if isinstance(item, dict) and item.get("id")
    )
    secrets = tuple(str(item["id"]) for item in needs.get("secrets") or [] if isinstance(item, dict) and "id" in item)
    return ToolSpec(
        toolkit=tool_id.toolkit,
        name=tool_id.name,
        version=version,
        description=str(data.get("description") or ""),
        input_schema=schema,
        output_schema=data.get("output_schema"),
        requirements=Requirements(authorization=authorization, secrets=secrets, user_id=bool(needs.get("user_id"))),
        backend=backend,
        language=language,
        source=source,
        binding=f"{tool_id.qualified_name}@{version}",
    )


def definitions_of(document: Any) -> list[Any]:
    """The tool definitions of a `GET /tools` answer: `items` (1.0), or `tools` (older texts)."""
    if isinstance(document, dict):
        for key in ("items", "tools"):
            if isinstance(document.get(key), list):
                return list(document[key])
    raise ValueError("not an OXP tool list: expected an object with an 'items' (or 'tools') array")


def decode_refusal(status: int, body: Any) -> Failure:
    """A 400 or 422 read by a client of an OXP server: the kind its body says.

    422 is a `ValidationErrorResponse`: invalid arguments, `parameter_errors` kept.
    A 400 gives no code, so besides missing requirements (which have their own
    field) the message tells "tool or version not found" and "server unavailable"
    from the rest; anything else stays `MALFORMED` (the request was refused) for
    the caller to map by status. Raises ValueError when the body is no OXP error.
    """
    if not isinstance(body, dict):
        raise ValueError(f"a {status} without an OXP error object")
    if status == 422:
        return decode_error(422, body)
    if not isinstance(body.get("message"), str):
        raise ValueError("not an OXP server error: expected an object with a 'message' string")
    failure = decode_error(400, body)
    if failure.kind is not ErrorKind.MALFORMED:
        return failure
    if body.get("missing_requirements"):
        raise ValueError("'missing_requirements' names nothing this side can read")
    text = f"{failure.message} {failure.developer_message or ''}"
    if _NOT_FOUND.search(text):
        kind = ErrorKind.NOT_FOUND
    elif _UNAVAILABLE.search(text):
        kind = ErrorKind.UPSTREAM_UNAVAILABLE
    else:
        return failure
    return Failure(
        kind=kind,
        message=failure.message,
        developer_message=failure.developer_message,
        can_retry=kind is ErrorKind.UPSTREAM_UNAVAILABLE,
    )


def _text(value: Any) -> str | None:
    """A message as text: a string as is, anything else JSON (never a Python repr); None when absent."""
    if value is None:
        return None
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _describe(value: Any) -> str:
    return "nothing" if value is None else f"a JSON {_json_type(value)}"
