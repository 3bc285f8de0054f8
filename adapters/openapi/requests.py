"""A tool call's arguments as the HTTP request its operation prescribes.

Parameters are serialised by their `style` and `explode` as OpenAPI 3.1 defines them (RFC 6570 for
matrix, label, form and simple; spaceDelimited, pipeDelimited, deepObject), percent-encoded as its
"Style Examples" table shows (RFC 3986: reserved characters in values are encoded unless the parameter
says `allowReserved`; the style's own delimiters `,` `;` `.` `=` `&` stay literal, `|`, ` `, `[` and `]`
are encoded). A path parameter is one path segment: a value that would be a dot segment is refused.
A parameter described by `content` (not `schema`) is sent as that media type's text (JSON).

Bodies: JSON (any `+json` type too), `application/x-www-form-urlencoded` (each property serialised as
its `encoding` says, by default form/explode), `multipart/form-data` (a part per property, repeated for
arrays; objects as JSON parts; binary properties are files), a binary body (`application/octet-stream`,
images, ...), and text. A file is given as base64 (a string, or `{"base64": ...}`) or as a file of the
caller's workspace (`{"workspace_file": "path"}`), each with an optional `filename` and `media_type`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from gateway.errors import ErrorKind, GatewayError
from gateway.upstream import path_segment

UNRESERVED_EXTRA = "-._~"
RESERVED = ":/?#[]@!$&'()*+,;="
PATH_STYLES = frozenset({"simple", "label", "matrix"})
QUERY_STYLES = frozenset({"form", "spaceDelimited", "pipeDelimited", "deepObject"})
DEFAULT_STYLE = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}


@dataclass(frozen=True)
class Param:
    """One parameter of an operation: where it goes and how it is written."""

    arg: str  # the argument that holds it (its name, unless another parameter or the body took that)
    name: str
    location: str  # path | query | header | cookie
    style: str
    explode: bool
    shape: str = "primitive"  # primitive | array | object
    allow_reserved: bool = False
    media_type: str | None = None  # `content` instead of `schema`: the value is sent as this type's text


@dataclass(frozen=True)
class Encoding:
    """How one property of a form or multipart body is written (the media type's `encoding`)."""

    content_type: str | None = None
    style: str = "form"
    explode: bool = True
    allow_reserved: bool = False


@dataclass(frozen=True)
class Body:
    """An operation's request body: its media type, and which arguments fill it."""

    media_type: str
    arg: str | None  # the argument holding the whole body; None: the body's properties are arguments themselves
    kind: str  # json | form | multipart | binary | text
    required: bool = False
    fields: frozenset[str] = frozenset()  # with arg None: the arguments that are body properties
    files: frozenset[str] = frozenset()  # multipart: the properties that are files
    shapes: dict[str, str] = field(default_factory=dict)  # property -> primitive | array | object
    encoding: dict[str, Encoding] = field(default_factory=dict)


@dataclass
class Built:
    """The request of one call, before credentials are added (`security.Request` takes these parts)."""

    path: str
    query: list[str]
    headers: dict[str, str]
    cookies: list[tuple[str, str]]
    content: bytes | None = None


def encode(text: str, allow_reserved: bool = False) -> str:
    """Percent-encode one value (or name) for a URL: everything but unreserved characters (and reserved
    ones with `allowReserved`)."""
    return quote(text, safe=UNRESERVED_EXTRA + (RESERVED if allow_reserved else ""))


def scalar(value: Any) -> str:
    """A primitive as text: booleans as JSON spells them, nested structures as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)


def _pairs(value: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(str(k), v) for k, v in value.items() if v is not None]


def _shape(value: Any) -> str:
    """What a value is, whatever the schema said: a list serialises as an array, a dict as an object."""
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "primitive"


def expand_path(style: str, explode: bool, name: str, value: Any, enc: Callable[[str], str]) -> str:
    """A path (or header, with `enc` the identity) parameter: simple, label or matrix."""
    shape = _shape(value)
    if style == "simple":
        if shape == "array":
            return ",".join(enc(scalar(v)) for v in value)
        if shape == "object":
            sep = "=" if explode else ","
            return ",".join(f"{enc(k)}{sep}{enc(scalar(v))}" for k, v in _pairs(value))
        return enc(scalar(value))
    if style == "label":
        if value is None or value == "" or value == [] or value == {}:
            return "."
        if shape == "array":
            return "." + ("." if explode else ",").join(enc(scalar(v)) for v in value)
        if shape == "object":
            if explode:
                return "." + ".".join(f"{enc(k)}={enc(scalar(v))}" for k, v in _pairs(value))
            return "." + ",".join(f"{enc(k)},{enc(scalar(v))}" for k, v in _pairs(value))
        return "." + enc(scalar(value))
    if style == "matrix":
        label = enc(name)
        if value is None or value == "" or value == [] or value == {}:
            return f";{label}"
        if shape == "array":
            if explode:
                return "".join(f";{label}={enc(scalar(v))}" for v in value)
            return f";{label}=" + ",".join(enc(scalar(v)) for v in value)
        if shape == "object":
            if explode:
                return "".join(f";{enc(k)}={enc(scalar(v))}" for k, v in _pairs(value))
            return f";{label}=" + ",".join(f"{enc(k)},{enc(scalar(v))}" for k, v in _pairs(value))
        return f";{label}={enc(scalar(value))}"
    raise ValueError(f"style {style!r} is not a path style")


def expand_query(style: str, explode: bool, name: str, value: Any, allow_reserved: bool = False) -> list[str]:
    """A query (or form body) parameter as `name=value` pairs, encoded: form, spaceDelimited,
    pipeDelimited or deepObject."""

    def enc(text: str) -> str:
        return encode(text, allow_reserved)

    label = encode(name)
    shape = _shape(value)
    if style == "deepObject" or (shape == "object" and style in ("spaceDelimited", "pipeDelimited") and explode):
        if shape != "object":
            return [f"{label}={enc(scalar(value))}"]
        return [f"{label}{encode('[' + k + ']')}={enc(scalar(v))}" for k, v in _deep(value)]
    if style in ("spaceDelimited", "pipeDelimited") and not explode and shape != "primitive":
        sep = "%20" if style == "spaceDelimited" else "%7C"
        items = (
            [enc(scalar(v)) for v in value]
            if shape == "array"
            else [part for k, v in _pairs(value) for part in (enc(k), enc(scalar(v)))]
        )
        return [f"{label}={sep.join(items)}"]
    # form (and the delimited styles' undefined combinations, read as form)
    if shape == "array":
        if explode:
            return [f"{label}={enc(scalar(v))}" for v in value]
        return [f"{label}=" + ",".join(enc(scalar(v)) for v in value)]
    if shape == "object":
        if explode:
            return [f"{enc(k)}={enc(scalar(v))}" for k, v in _pairs(value)]
        return [f"{label}=" + ",".join(f"{enc(k)},{enc(scalar(v))}" for k, v in _pairs(value))]
    return [f"{label}={enc(scalar(value))}"]


def _deep(value: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """deepObject's `name[key]` pairs; a nested object nests its brackets (`name[a][b]`), as most servers read it."""
    out: list[tuple[str, Any]] = []
    for key, inner in _pairs(value):
        path = f"{prefix}][{key}" if prefix else key
        if isinstance(inner, dict):
            out.extend(_deep(inner, path))
        elif isinstance(inner, list):
            out.extend((f"{path}][", item) for item in inner)
        else:
            out.append((path, inner))
    return out


def _header_value(name: str, text: str) -> str:
    if "\r" in text or "\n" in text:
        message = f"{name}: a header value cannot hold a line break"
        raise GatewayError.of(ErrorKind.INVALID_ARGUMENTS, message, parameter_errors={name: message})
    return text


def serialise(param: Param, value: Any, into: Built) -> None:
    """Put one parameter's value where it goes in the request."""
    if param.media_type is not None:  # `content`: the value as JSON text
        value = value if isinstance(value, str) and "json" not in param.media_type else scalar(value)
        if not isinstance(value, str):
            value = scalar(value)
    if param.location == "path":
        text = expand_path(param.style, param.explode, param.name, value, lambda t: encode(t, param.allow_reserved))
        into.path = into.path.replace("{" + param.name + "}", _segment(param.arg, text))
    elif param.location == "query":
        into.query.extend(expand_query(param.style, param.explode, param.name, value, param.allow_reserved))
    elif param.location == "header":
        into.headers[param.name] = _header_value(
            param.arg, expand_path("simple", param.explode, param.name, value, str)
        )
    elif param.location == "cookie":
        if isinstance(value, list) and param.explode:
            into.cookies.extend((param.name, encode(scalar(v))) for v in value)
        elif isinstance(value, dict) and param.explode:
            into.cookies.extend((k, encode(scalar(v))) for k, v in _pairs(value))
        else:
            into.cookies.append((param.name, expand_path("simple", False, param.name, value, encode)))


def _segment(arg: str, text: str) -> str:
    """An expanded path parameter as one segment: already encoded; refused when it is, or decodes to, a dot
    segment or nothing (the http backend's rule, `gateway.upstream.path_segment`)."""
    path_segment(arg, text)  # raises when the segment would step elsewhere
    return text


def build(
    method: str,
    path: str,
    params: tuple[Param, ...],
    body: Body | None,
    arguments: dict[str, Any],
    read_file: Callable[[str], bytes],
) -> tuple[Built, dict[str, str] | None, Any]:
    """The request of one call: its parts, the body's headers (its content type) and the body itself
    (bytes; None without a body)."""
    built = Built(path=path, query=[], headers={}, cookies=[])
    taken: set[str] = set()
    for param in params:
        taken.add(param.arg)
        if param.arg in arguments and arguments[param.arg] is not None:
            serialise(param, arguments[param.arg], built)
        elif param.location == "path":
            message = "Missing required parameter"
            raise GatewayError.of(
                ErrorKind.INVALID_ARGUMENTS, f"{param.arg}: {message}", parameter_errors={param.arg: message}
            )
    if body is None:
        return built, None, None
    if body.arg is not None:
        if body.arg not in arguments:
            return built, None, None
        value = arguments[body.arg]
    else:
        value = {k: v for k, v in arguments.items() if k not in taken}
        if not value and not body.required:
            return built, None, None
    headers, content = encode_body(body, value, read_file)
    return built, headers, content


def encode_body(body: Body, value: Any, read_file: Callable[[str], bytes]) -> tuple[dict[str, str], bytes]:
    """The body's bytes and content type, as its media type wants them."""
    if body.kind == "json":
        return {"Content-Type": body.media_type}, orjson.dumps(value)
    if body.kind == "text":
        text = value if isinstance(value, str) else scalar(value)
        return {"Content-Type": body.media_type}, text.encode()
    if body.kind == "binary":
        data, _name, media = file_of(body.arg or "body", value, read_file)
        return {"Content-Type": media or body.media_type}, data
    if not isinstance(value, dict):
        raise _invalid(body.arg or "body", "Must be an object")
    if body.kind == "form":
        pairs: list[str] = []
        for key, inner in value.items():
            if inner is None:
                continue
            encoding = body.encoding.get(key)
            if encoding is not None and encoding.content_type and "json" in encoding.content_type:
                pairs.append(f"{encode(key)}={encode(orjson.dumps(inner).decode())}")
                continue
            encoding = encoding or Encoding()
            pairs += expand_query(encoding.style, encoding.explode, key, inner, encoding.allow_reserved)
        return {"Content-Type": "application/x-www-form-urlencoded"}, "&".join(pairs).encode()
    return _multipart(body, value, read_file)


def _multipart(body: Body, value: dict[str, Any], read_file: Callable[[str], bytes]) -> tuple[dict[str, str], bytes]:
    """A part per property (a part per item of an array), in the arguments' order; files as file parts,
    objects as JSON parts, the rest as text."""
    parts: list[tuple[str, tuple[str | None, bytes, str | None]]] = []
    for key, inner in value.items():
        if inner is None:
            continue
        encoding = body.encoding.get(key)
        declared = encoding.content_type if encoding else None
        items = inner if isinstance(inner, list) and body.shapes.get(key) == "array" else [inner]
        for item in items:
            if key in body.files:
                content, name, media = file_of(key, item, read_file)
                parts.append((key, (name or key, content, media or declared or "application/octet-stream")))
            elif isinstance(item, (dict, list)) or (declared and "json" in declared):
                parts.append((key, (None, orjson.dumps(item), declared or "application/json")))
            else:
                parts.append((key, (None, scalar(item).encode(), declared)))
    request = httpx.Request("POST", "http://body.invalid/", files=parts)
    return {"Content-Type": request.headers["Content-Type"]}, request.read()


def file_of(arg: str, value: Any, read_file: Callable[[str], bytes]) -> tuple[bytes, str | None, str | None]:
    """A file argument's bytes, name and media type: base64 text, `{"base64"}` or `{"workspace_file"}`."""
    name = media = None
    if isinstance(value, dict):
        name = value.get("filename") if isinstance(value.get("filename"), str) else None
        media = value.get("media_type") if isinstance(value.get("media_type"), str) else None
        if isinstance(value.get("workspace_file"), str):
            path = value["workspace_file"]
            return read_file(path), name or path.rsplit("/", 1)[-1], media
        value = value.get("base64")
    if not isinstance(value, str):
        raise _invalid(arg, "Must be base64 text, {base64: ...} or {workspace_file: ...}")
    try:
        return base64.b64decode(value, validate=True), name, media
    except (binascii.Error, ValueError):
        raise _invalid(arg, "Must be base64 text, {base64: ...} or {workspace_file: ...}") from None


def _invalid(arg: str, message: str) -> GatewayError:
    return GatewayError.of(ErrorKind.INVALID_ARGUMENTS, f"{arg}: {message}", parameter_errors={arg: message})


FILE_SCHEMA: dict[str, Any] = {
    "description": "A file: its bytes as base64, or an object naming a file of the caller's workspace",
    "anyOf": [
        {"type": "string", "contentEncoding": "base64"},
        {
            "type": "object",
            "properties": {
                "base64": {"type": "string", "contentEncoding": "base64"},
                "workspace_file": {"type": "string", "description": "A path in the caller's workspace"},
                "filename": {"type": "string"},
                "media_type": {"type": "string"},
            },
            "oneOf": [{"required": ["base64"]}, {"required": ["workspace_file"]}],
            "additionalProperties": False,
        },
    ],
}
