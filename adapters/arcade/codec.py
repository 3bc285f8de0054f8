"""Arcade's wire: tool definitions (`value_schema`s) to the canonical model, and call responses back."""

from __future__ import annotations

import re
from typing import Any

import httpx

from gateway.errors import ErrorKind, Failure, GatewayError
from gateway.model import AuthorizationRequirement, Requirements
from gateway.upstream import error_body, failure_for_status, plain_message

_SCALARS = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}


def json_schema(value_schema: dict[str, Any] | None, description: str | None = None) -> dict[str, Any]:
    """An Arcade `value_schema` as JSON Schema (`json` is an object, `array` takes `inner_*`)."""
    vs = value_schema or {}
    kind = vs.get("val_type")
    schema: dict[str, Any]
    if kind in _SCALARS:
        schema = {"type": _SCALARS[kind]}
    elif kind == "array":
        inner = {
            "val_type": vs.get("inner_val_type") or "json",
            "properties": vs.get("inner_properties"),
            "required_keys": vs.get("inner_required_keys"),
        }
        schema = {"type": "array", "items": json_schema(inner)}
    else:  # "json" or absent: any object
        schema = {"type": "object"}
        if vs.get("properties"):
            schema["properties"] = {k: json_schema(v) for k, v in vs["properties"].items()}
        if vs.get("required_keys"):
            schema["required"] = list(vs["required_keys"])
    if vs.get("enum"):
        schema["enum"] = list(vs["enum"])
    if vs.get("nullable"):
        schema["type"] = [schema["type"], "null"]
    text = description or vs.get("description")
    if text:
        schema["description"] = text
    return schema


def input_schema(definition: dict[str, Any]) -> dict[str, Any]:
    params = (definition.get("input") or {}).get("parameters") or []
    return {
        "type": "object",
        "properties": {p["name"]: json_schema(p.get("value_schema"), p.get("description")) for p in params},
        "required": [p["name"] for p in params if p.get("required")],
        "additionalProperties": False,
    }


def output_schema(definition: dict[str, Any]) -> dict[str, Any] | None:
    output = definition.get("output") or {}
    if not output.get("value_schema"):
        return None
    return json_schema(output["value_schema"], output.get("description"))


def requirements(definition: dict[str, Any]) -> Requirements:
    reqs = definition.get("requirements") or {}
    auth = reqs.get("authorization")
    authorization: tuple[AuthorizationRequirement, ...] = ()
    if auth:
        provider = auth.get("provider_id") or auth.get("id") or auth.get("provider_type") or "oauth2"
        scopes = tuple((auth.get("oauth2") or {}).get("scopes") or ())
        authorization = (AuthorizationRequirement(id=provider, scopes=scopes),)
    secrets = tuple(s["key"] for s in reqs.get("secrets") or [] if s.get("key"))
    return Requirements(authorization=authorization, secrets=secrets)


def semver_of(version: str | None) -> str:
    """Toolkit versions are usually x.y.z; pad the shorter ones (`1.3` -> `1.3.0`)."""
    parts = re.findall(r"\d+", version or "")[:3]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(str(int(p)) for p in parts)


def outcome_value(body: Any, tool: str) -> Any:
    """The value of a `/worker/tools/invoke` response, or the canonical error it carries."""
    if not isinstance(body, dict) or "success" not in body:
        raise GatewayError.of(
            ErrorKind.UPSTREAM_UNAVAILABLE,
            f"The Arcade worker answered {tool} with something that is not a tool call response",
        )
    output = body.get("output") or {}
    needed = output.get("requires_authorization")
    if needed:
        challenge = {"id": needed.get("authorization_id") or "authorization"}
        if needed.get("authorization_url"):
            challenge["url"] = needed["authorization_url"]
        raise GatewayError.of(
            ErrorKind.AUTHORIZATION_REQUIRED,
            f"Tool {tool} needs your authorization",
            details={"authorization": [challenge], "scopes": needed.get("scopes") or []},
        )
    if body["success"]:
        return output.get("value")
    error = output.get("error") or {}
    raise GatewayError.of(  # the worker's stacktrace stays upstream: never sent to clients
        ErrorKind.TOOL_FAILED,
        error.get("message") or f"Tool {tool} failed",
        developer_message=error.get("developer_message"),
        can_retry=bool(error.get("can_retry")),
        retry_after_ms=error.get("retry_after_ms"),
        additional_prompt_content=error.get("additional_prompt_content"),
    )


def status_failure(upstream: str, response: httpx.Response) -> Failure:
    """A worker's HTTP error answer (FastAPI: `{"detail": ...}`; a proxy: anything) as its canonical kind."""
    body = error_body(response)
    message: Any = plain_message(response)
    if isinstance(body, dict) and ("detail" in body or "message" in body):
        message = body.get("detail", body.get("message"))
    elif body is not None:
        message = body
    failure = failure_for_status(upstream, response.status_code, message, response.headers)
    assert failure is not None  # only called for statuses >= 400
    return failure
