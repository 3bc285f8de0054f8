"""Seed 002's wire: JSON-RPC 2.0 envelopes, `tool.execute` params, results and -32xxx errors.

Pure functions over parsed JSON, so the envelope rules can be read (and
tested) without a server. The front decides what to run; this module only
says what is well-formed and how answers look.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.errors import ErrorKind, Failure
from gateway.model import PART_PATTERN as PART
from gateway.model import VERSION_PATTERN as VERSION
from gateway.model import Outcome, ToolSpec, UpstreamAnswer

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601  # also "tool not found"
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TOOL_FAILED = -32000
TIMEOUT = -32001
PERMISSION_DENIED = -32002
RATE_LIMITED = -32003  # a server error (-32000..-32099): too many calls now; data.retryAfterMs says when to retry

PROTOCOL = "jsonrpc"  # the `UpstreamAnswer.protocol` a transparent hop passes on as it came
PROTOCOL_VERSION = "1.0.0"  # the seed's top-level "protocol"; answers always carry it
EXTENSION = "x-toolplex"  # per tool.list entry: {toolkit, name, output_schema}
_PROTOCOL = re.compile(r"^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*)){0,2}$")
ENVELOPE_FIELDS = ("jsonrpc", "id", "method", "params", "protocol")
EXECUTE_FIELDS = ("tool", "language", "parameters", "context")
CONTEXT_FIELDS = ("sessionId", "messageId", "timeout")
LANGUAGES = ("python", "typescript", "remote")

# The README's error table says the same (design.md, "JSON-RPC (seed 002)").
KIND_CODES: dict[ErrorKind, int] = {
    ErrorKind.MALFORMED: INVALID_REQUEST,
    ErrorKind.TOO_LARGE: INVALID_REQUEST,
    ErrorKind.NOT_FOUND: METHOD_NOT_FOUND,
    ErrorKind.INVALID_ARGUMENTS: INVALID_PARAMS,
    ErrorKind.TOOL_FAILED: TOOL_FAILED,
    ErrorKind.DEADLINE: TIMEOUT,
    ErrorKind.PENDING: TIMEOUT,
    ErrorKind.UNAUTHENTICATED: PERMISSION_DENIED,
    ErrorKind.FORBIDDEN: PERMISSION_DENIED,
    ErrorKind.MISSING_REQUIREMENT: PERMISSION_DENIED,
    ErrorKind.AUTHORIZATION_REQUIRED: PERMISSION_DENIED,
    ErrorKind.UPSTREAM_UNAVAILABLE: INTERNAL_ERROR,
    ErrorKind.RATE_LIMITED: RATE_LIMITED,
    ErrorKind.INTERNAL: INTERNAL_ERROR,
}


class RpcError(Exception):
    """One JSON-RPC error object, with the request id when it is known.

    `body`, when set, is the error object to answer exactly (a JSON-RPC upstream's own, `relayed`).
    """

    def __init__(
        self,
        code: int,
        message: str,
        data: dict[str, Any] | None = None,
        request_id: Any = None,
        *,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id
        self.body = body


@dataclass
class Request:
    method: str
    params: dict[str, Any]
    id: str | int | float | None = None
    notification: bool = False  # no "id" member: run, never answer
    rejected: RpcError | None = None  # a params problem, answered (unless a notification) instead of running


@dataclass
class Execute:
    """`tool.execute` params, checked."""

    tool: str
    version: str | None = None
    language: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    message_id: str | None = None
    timeout_ms: float | None = None


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def parse_request(item: Any) -> Request:
    """Check one request object (a batch entry or the whole body); raise RpcError when it is not valid."""
    if not isinstance(item, dict):
        raise RpcError(INVALID_REQUEST, f"A request must be a JSON object, not a JSON {_type_name(item)}")
    request_id = item.get("id")
    if not _valid_id(request_id):
        raise RpcError(INVALID_REQUEST, f"'id' must be a string, a number or null, not a JSON {_type_name(request_id)}")
    if item.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, f"'jsonrpc' must be \"2.0\", got {item.get('jsonrpc')!r}", None, request_id)
    protocol = item.get("protocol")
    if protocol is not None:
        major = protocol.split(".", 1)[0] if isinstance(protocol, str) and _PROTOCOL.match(protocol) else None
        if major != "1":
            raise RpcError(
                INVALID_REQUEST,
                f"Protocol {protocol!r} is not supported; this server speaks {PROTOCOL_VERSION} (any 1.x is accepted)",
                {"supported": PROTOCOL_VERSION},
                request_id,
            )
    unknown = sorted(set(item) - set(ENVELOPE_FIELDS))
    if unknown:
        raise RpcError(
            INVALID_REQUEST,
            f"Unknown request member(s) {', '.join(unknown)}; a request has {', '.join(ENVELOPE_FIELDS)}",
            None,
            request_id,
        )
    method = item.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, "'method' is required: a non-empty string", None, request_id)
    params = item.get("params")
    if params is not None and not isinstance(params, (dict, list)):
        raise RpcError(
            INVALID_REQUEST, f"'params' must be an object, not a JSON {_type_name(params)}", None, request_id
        )
    request = Request(method=method, params={}, id=request_id, notification="id" not in item)
    if isinstance(params, list):  # a valid envelope, so a notification still goes unanswered
        request.rejected = RpcError(
            INVALID_PARAMS,
            "'params' must be an object of named parameters; positional (array) params are not supported",
            {"parameter_errors": {"params": "must be an object, not an array"}},
        )
    else:
        request.params = params or {}
    return request


def _params_error(problems: dict[str, str], tool: str | None = None, language: str | None = None) -> RpcError:
    listed = "; ".join(f"{name}: {problem}" for name, problem in problems.items())
    return RpcError(
        INVALID_PARAMS,
        f"Invalid params: {listed}",
        {
            "tool": tool,
            "language": language,
            "details": listed,
            "kind": "invalid_arguments",
            "parameter_errors": problems,
        },
    )


def parse_execute(params: dict[str, Any]) -> Execute:
    """Check `tool.execute` params, naming every problem at once (all become one -32602)."""
    problems: dict[str, str] = {}
    for key in sorted(set(params) - set(EXECUTE_FIELDS)):
        problems[key] = f"unknown member; tool.execute takes {', '.join(EXECUTE_FIELDS)}"
    tool = params.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        problems["tool"] = "is required: the tool's name (e.g. Math_Add, Math.Add or Math.Add@1.0.0)"
        tool = ""
    name, at, version = tool.partition("@")
    if at and not (name and version):
        problems["tool"] = f"{tool!r} is neither a name nor name@version"
    language = params.get("language")
    if language is not None and language not in LANGUAGES:
        problems["language"] = f"must be one of {', '.join(LANGUAGES)}, got {language!r}"
    parameters = params.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        problems["parameters"] = f"must be an object of the tool's arguments, not a JSON {_type_name(parameters)}"
    context = params.get("context")
    if context is not None and not isinstance(context, dict):
        problems["context"] = f"must be an object, not a JSON {_type_name(context)}"
        context = None
    context = context or {}
    for key in sorted(set(context) - set(CONTEXT_FIELDS)):
        problems[f"context.{key}"] = f"unknown member; context takes {', '.join(CONTEXT_FIELDS)}"
    for key in ("sessionId", "messageId"):
        if context.get(key) is not None and not isinstance(context[key], str):
            problems[f"context.{key}"] = f"must be a string, not a JSON {_type_name(context[key])}"
    timeout = context.get("timeout")
    if timeout is not None and not (
        isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and math.isfinite(timeout) and timeout > 0
    ):
        problems["context.timeout"] = f"must be a positive number of milliseconds, got {orjson.dumps(timeout).decode()}"
    if problems:
        raise _params_error(problems, tool or None, language if isinstance(language, str) else None)
    return Execute(
        tool=name,
        version=version or None,
        language=language,
        parameters=parameters or {},
        session_id=context.get("sessionId"),
        message_id=context.get("messageId"),
        timeout_ms=float(timeout) if timeout is not None else None,
    )


def parse_list(params: dict[str, Any]) -> str | None:
    """Check `tool.list` params; the language to filter by, if any."""
    problems = {key: "unknown member; tool.list takes language" for key in sorted(set(params) - {"language"})}
    language = params.get("language")
    if language is not None and language not in LANGUAGES:
        problems["language"] = f"must be one of {', '.join(LANGUAGES)}, got {language!r}"
    if problems:
        raise _params_error(problems)
    return language


def language_mismatch(spec: ToolSpec, wanted: str) -> RpcError:
    return _params_error(
        {"language": f"tool {spec.flat_name} is implemented in {spec.language}, not {wanted}"},
        spec.flat_name,
        wanted,
    )


def output_text(value: Any) -> str:
    """The seed's `output` is a string: strings pass as they are, anything else becomes JSON."""
    return value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def result(outcome: Outcome) -> dict[str, Any]:
    """`{output, metadata, diagnostics}`; metadata.value keeps the structured value."""
    spec = outcome.spec
    assert spec is not None  # a successful outcome always has its tool
    return {
        "output": output_text(outcome.value),
        "metadata": {
            "title": spec.qualified_name,
            "tool": spec.flat_name,
            "version": spec.version,
            "language": spec.language,
            "callId": outcome.call_id,
            "durationMs": outcome.duration_ms,
            "cached": outcome.cached,
            "value": outcome.value,
        },
        "diagnostics": [],
    }


def failure_error(failure: Failure, tool: str | None, language: str | None, call_id: str | None) -> RpcError:
    """A canonical failure as a JSON-RPC error; `data` always has the seed's tool, language, details."""
    data: dict[str, Any] = {
        "tool": tool,
        "language": language,
        "details": failure.developer_message or failure.message,
        "kind": failure.kind.value,
    }
    if call_id is not None:
        data["callId"] = call_id
    if failure.parameter_errors:
        data["parameter_errors"] = failure.parameter_errors
    if failure.can_retry:
        data["canRetry"] = True
    if failure.retry_after_ms is not None:
        data["retryAfterMs"] = failure.retry_after_ms
    if failure.additional_prompt_content:
        data["additionalPromptContent"] = failure.additional_prompt_content
    challenges = failure.details.get("authorization") if failure.kind == ErrorKind.AUTHORIZATION_REQUIRED else None
    if challenges:
        data["authorization"] = challenges
        urls = [c["url"] for c in challenges if c.get("url")]
        if urls:
            data["url"] = urls[0]
    extra = {k: v for k, v in failure.details.items() if k != "authorization"}
    if extra:
        data["info"] = extra
    return RpcError(KIND_CODES[failure.kind], failure.message, data)


def tool_name(spec: ToolSpec) -> str:
    """The name `tool.list` gives a tool (its registration's `id`) and `tool.execute` calls it by: the flat name.
    One rule for the listing and the console's view of it (`adapters.jsonrpc.presenter`)."""
    return spec.flat_name


def registration(spec: ToolSpec) -> dict[str, Any]:
    """The seed's ToolRegistration, without the handler: what `tool.list` returns per tool.

    `x-toolplex` (an extension other clients ignore) says what the seed's fields cannot:
    the toolkit and name apart, and the output schema. A JSON-RPC upstream's tool keeps its
    registration as the upstream listed it (any member of its own, a title that is no
    `Toolkit.Name`), with the gateway's members in place of the upstream's.
    """
    own = {
        "id": tool_name(spec),
        "title": spec.qualified_name,
        "version": spec.version,
        "description": spec.description,
        "language": spec.language,
        "schema": spec.input_schema,
        EXTENSION: {"toolkit": spec.toolkit, "name": spec.name, "output_schema": spec.output_schema},
    }
    binding = spec.binding
    if not isinstance(binding, Registration) or not binding.entry:
        return own
    listed = binding.entry
    title = listed.get("title")
    if isinstance(title, str) and title != binding.title:  # its own title, not the tool's `Toolkit.Name`
        own["title"] = title
    return {**listed, **own}


def own_answer(upstream: UpstreamAnswer | None) -> UpstreamAnswer | None:
    """A JSON-RPC upstream's own answer (a transparent hop), else None."""
    return upstream if upstream is not None and upstream.protocol == PROTOCOL else None


def execute_result(outcome: Outcome, tool: str | None, language: str | None) -> Any:
    """The `result` of a `tool.execute` for an outcome; raises the RpcError it is answered with instead.

    A JSON-RPC upstream's own result or error comes back as it came (`relayed_*`); a failure of a call whose tool
    was not resolved names the tool and language as the request did (`tool`, `language`).
    """
    own = own_answer(outcome.upstream)
    if outcome.error is not None:
        if own is not None and isinstance(own.error, dict):  # a JSON-RPC upstream's own error, as it came
            raise relayed_error(own.error, outcome.spec, outcome.call_id)
        spec = outcome.spec
        named, written = (spec.flat_name, spec.language) if spec else (tool, language)
        raise failure_error(outcome.error, named, written, outcome.call_id)
    if own is not None:  # a JSON-RPC upstream's own result, as it came
        return relayed_result(own.result, outcome)
    return result(outcome)


def execute_answer(request_id: Any, outcome: Outcome, tool: str | None, language: str | None) -> dict[str, Any]:
    """The response object to a `tool.execute` request (not a notification) that ran to `outcome`."""
    try:
        return success(request_id, execute_result(outcome, tool, language))
    except RpcError as err:
        return error(request_id, err)


def success(request_id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "protocol": PROTOCOL_VERSION, "id": request_id, "result": value}


def error(request_id: Any, err: RpcError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.data is not None:
        body["data"] = err.data
    if err.body is not None:
        body = err.body
    return {"jsonrpc": "2.0", "protocol": PROTOCOL_VERSION, "id": request_id, "error": body}


# ---- the client side: reading another seed-002 server (the `jsonrpc` backend) ----

_TITLE = re.compile(r"^([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)$")
_NOT_A_PART = re.compile(r"[^A-Za-z0-9_]")

# error code -> canonical kind, the inverse of KIND_CODES where it is one-to-one.
CODE_KINDS: dict[int, ErrorKind] = {
    PARSE_ERROR: ErrorKind.UPSTREAM_UNAVAILABLE,  # the upstream could not read the gateway's request
    INVALID_REQUEST: ErrorKind.UPSTREAM_UNAVAILABLE,
    METHOD_NOT_FOUND: ErrorKind.NOT_FOUND,
    INVALID_PARAMS: ErrorKind.INVALID_ARGUMENTS,
    INTERNAL_ERROR: ErrorKind.UPSTREAM_UNAVAILABLE,
    TOOL_FAILED: ErrorKind.TOOL_FAILED,
    TIMEOUT: ErrorKind.DEADLINE,
    PERMISSION_DENIED: ErrorKind.FORBIDDEN,  # or an authorization challenge, when it carries a URL
    RATE_LIMITED: ErrorKind.RATE_LIMITED,
}


@dataclass(frozen=True)
class Registration:
    """A `jsonrpc` backend's tool binding: what a call must send, and how the upstream's own answers name the tool
    (before routing renames it), so that the front can put the gateway's names in their place."""

    id: str  # the upstream's id: `params.tool` of each call, `data.tool` of its errors
    language: str | None  # the registration's `language`, sent as it was listed
    title: str  # `Toolkit.Name` as the upstream names the tool (a Toolplex's `metadata.title`)
    version: str  # the upstream's version of the tool (a Toolplex's `metadata.version`)
    toolplex: bool = False  # the registration has `x-toolplex`: a Toolplex, whose `metadata` members it defines
    entry: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the registration as listed


def spec_from_registration(data: Any, *, backend: str, toolkit: str, source: str = "") -> ToolSpec:
    """A `tool.list` entry read back as a ToolSpec; ValueError when it is not a registration.

    Toolkit and name come from `x-toolplex`, else from a `Toolkit.Name` title (a Toolplex's
    form), else the toolkit is `toolkit` and the name the id. The registration's language is
    the tool's (`remote` when it names none the seed knows). `binding` (a `Registration`) keeps
    what a call must send and how the upstream's answers name the tool.
    """
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        raise ValueError("a tool registration must be an object with a non-empty string 'id'")
    extension = data.get(EXTENSION) if isinstance(data.get(EXTENSION), dict) else {}
    title = data.get("title") if isinstance(data.get("title"), str) else ""
    titled = _TITLE.match(title)
    kit, name = (titled.group(1), titled.group(2)) if titled else (toolkit, _NOT_A_PART.sub("_", data["id"]))
    if isinstance(extension.get("toolkit"), str) and isinstance(extension.get("name"), str):
        kit, name = extension["toolkit"], extension["name"]
    if not (PART.match(kit) and PART.match(name)):
        raise ValueError(f"tool {data['id']!r}: {kit}.{name} is not a valid Toolkit.Name")
    version = data.get("version") if isinstance(data.get("version"), str) else ""
    version = version if VERSION.match(version) else "1.0.0"
    schema = data.get("schema")
    output = extension.get("output_schema")
    listed = data.get("language")
    language = listed if isinstance(listed, str) and listed else None
    return ToolSpec(
        toolkit=kit,
        name=name,
        version=version,
        description=data.get("description") if isinstance(data.get("description"), str) else "",
        input_schema=schema if isinstance(schema, dict) else {"type": "object"},
        output_schema=output if isinstance(output, dict) else None,
        backend=backend,
        source=source,
        language=language if language in LANGUAGES else "remote",
        binding=Registration(data["id"], language, f"{kit}.{name}", version, EXTENSION in data, entry=data),
    )


def execute_request(
    request_id: str, binding: Registration, arguments: dict[str, Any], context: dict[str, Any]
) -> dict[str, Any]:
    """A `tool.execute` request as the seed writes it."""
    params: dict[str, Any] = {"tool": binding.id, "parameters": arguments, "context": context}
    if binding.language:
        params["language"] = binding.language
    envelope = {"jsonrpc": "2.0", "protocol": PROTOCOL_VERSION, "id": request_id, "method": "tool.execute"}
    return {**envelope, "params": params}


def read_response(body: Any) -> tuple[Any, dict[str, Any] | None]:
    """(result, error) of one JSON-RPC response; ValueError when it is not one."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        raise ValueError("not a JSON-RPC 2.0 response object")
    if "error" in body and body["error"] is not None:
        error = body["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            raise ValueError("'error' must be an object with an integer 'code'")
        return None, error
    if "result" not in body:
        raise ValueError("a JSON-RPC response with neither 'result' nor 'error'")
    return body["result"], None


def value_of(result: Any) -> Any:
    """The tool's value: a Toolplex's `metadata.value` (structured), else the seed's `output` string."""
    if isinstance(result, dict):
        metadata = result.get("metadata")
        if isinstance(metadata, dict) and "value" in metadata:
            return metadata["value"]
        if "output" in result:
            return result["output"]
    return result


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def failure_of(error: dict[str, Any]) -> Failure:
    """An upstream's JSON-RPC error as the canonical failure it stands for.

    A Toolplex upstream names the kind in `data.kind`; otherwise the code says it.
    -32002 with a URL (`data.url` / `data.authorization`) is an authorization challenge,
    and keeps the URL. A malformed request is the gateway's problem, not the caller's.
    """
    code = error["code"]
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    kind = CODE_KINDS.get(code, ErrorKind.TOOL_FAILED if -32099 <= code <= -32000 else ErrorKind.UPSTREAM_UNAVAILABLE)
    named = data.get("kind")
    if isinstance(named, str) and named in ErrorKind.__members__.values():
        kind = ErrorKind(named)
    if kind in (ErrorKind.MALFORMED, ErrorKind.TOO_LARGE):
        kind = ErrorKind.UPSTREAM_UNAVAILABLE
    challenges = [c for c in data.get("authorization") or [] if isinstance(c, dict) and c.get("id")]
    if not challenges and isinstance(data.get("url"), str):
        challenges = [{"id": "authorization", "url": data["url"]}]
    details: dict[str, Any] = {}
    if code == PERMISSION_DENIED and challenges and kind in (ErrorKind.FORBIDDEN, ErrorKind.AUTHORIZATION_REQUIRED):
        kind = ErrorKind.AUTHORIZATION_REQUIRED
        details["authorization"] = challenges
    if isinstance(data.get("info"), dict):
        details.update(data["info"])
    message = _text(error.get("message") or "The upstream tool failed")
    developer = data.get("details")
    problems = data.get("parameter_errors")
    retry_after = data.get("retryAfterMs")
    return Failure(
        kind=kind,
        message=message,
        developer_message=_text(developer) if developer is not None and developer != message else None,
        can_retry=bool(data.get("canRetry", kind in (ErrorKind.DEADLINE, ErrorKind.RATE_LIMITED))),
        retry_after_ms=int(retry_after) if isinstance(retry_after, (int, float)) else None,
        additional_prompt_content=_text(data["additionalPromptContent"])
        if data.get("additionalPromptContent") is not None
        else None,
        parameter_errors={str(k): _text(v) for k, v in problems.items()} if isinstance(problems, dict) else None,
        details=details,
    )


# ---- a transparent hop: a JSON-RPC upstream's own answer, as the front passes it on ----

# What a Toolplex's `metadata` and error `data` say about the hop that answered, not about the tool: the call id
# its operator finds in its logs, its own timing, whether its result cache answered. The answering hop is the
# gateway, so they are the gateway's (its call id was the upstream request's `id`: the upstream logs it as the
# call's trace id, so the chain can be followed from it).
HOP_MEMBERS = ("callId", "durationMs", "cached")


def relayed_result(result: Any, outcome: Outcome) -> Any:
    """A JSON-RPC upstream's `result` as it came (`output`, `metadata`, `diagnostics` and anything else), but for
    what is necessarily the gateway's own: in a Toolplex's `metadata`, the tool's name and version as the gateway
    lists them (when routing renames them) and the `HOP_MEMBERS` of this hop. Another server's `metadata` is its
    own entirely and is left as it came."""
    spec = outcome.spec
    binding = spec.binding if spec is not None else None
    if not isinstance(binding, Registration) or not binding.toolplex or not isinstance(result, dict):
        return result
    metadata = result.get("metadata")
    if not isinstance(metadata, dict):
        return result
    assert spec is not None
    meta = dict(metadata)
    for key, upstream, gateway in (
        ("tool", binding.id, spec.flat_name),
        ("title", binding.title, spec.qualified_name),
        ("version", binding.version, spec.version),
    ):
        if meta.get(key) == upstream:
            meta[key] = gateway
    hop = {
        "callId": outcome.call_id,
        "durationMs": outcome.duration_ms,
        # the tool did not run for this call when either cache answered it
        "cached": outcome.cached or meta.get("cached") is True,
    }
    for key in HOP_MEMBERS:
        if key in meta:
            meta[key] = hop[key]
    return {**result, "metadata": meta}


def relayed_error(error: dict[str, Any], spec: ToolSpec | None, call_id: str) -> RpcError:
    """A JSON-RPC upstream's own error object, answered as it came but for the seed's `data.tool` (the tool's name
    as the gateway lists it) and, from a Toolplex, `data.callId` (this hop's)."""
    binding = spec.binding if spec is not None else None
    data = error.get("data")
    body = error
    if spec is not None and isinstance(binding, Registration) and isinstance(data, dict):
        kept = dict(data)
        if kept.get("tool") == binding.id:
            kept["tool"] = spec.flat_name
        if binding.toolplex and "callId" in kept:
            kept["callId"] = call_id
        body = {**error, "data": kept}
    message = error.get("message")
    return RpcError(error["code"], message if isinstance(message, str) else _text(message), body=body)
