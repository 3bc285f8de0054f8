"""Each operation of an OpenAPI document as one tool: its name, its input and output schemas, its binding.

Names. A tool is named after its `operationId`, made a valid tool name (every run of characters other
than letters, digits and `_` becomes one `_`: `repos/get-content` -> `repos_get_content`). An operation
without one is named from its method and path: `GET /pets/{petId}/toys` -> `get_pets_by_petId_toys`.
A name that would make the flat name (`Toolkit_name`) longer than 64 characters is cut and ends with
six hex digits of a hash of the whole name; a name taken by an earlier operation gets `_2`, `_3`.

Inputs. One JSON Schema object: every parameter (path, query, header, cookie) is a property under its
own name, and the request body's properties are properties too when the body is an object schema
whose property names collide with no parameter. Otherwise (the body is an array, a string, a file,
a `oneOf`..., or a property shares a parameter's name) the whole body is the one property `body`
(`request_body` when a parameter is called `body`), and the tool's description says so. Two parameters
of one name in different places keep it for the first (path, then query, header, cookie); the others
are `<in>_<name>` (`header_id`). Header parameters `Accept`, `Content-Type` and `Authorization` are
ignored, as the specification says.

Outputs. The first 2xx response (lowest code, then `2XX`) with a JSON schema is the output schema.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from adapters.openapi.document import DocumentError, Documents, NeedDocument, escape, is_url
from adapters.openapi.requests import DEFAULT_STYLE, FILE_SCHEMA, PATH_STYLES, QUERY_STYLES, Body, Encoding, Param
from adapters.openapi.schemas import Schemas
from adapters.openapi.security import Plan, Security
from gateway.model import Requirements, ToolSpec

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
LOCATIONS = ("path", "query", "header", "cookie")
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
IDEMPOTENT_METHODS = frozenset({"PUT", "DELETE"})
MAX_FLAT_NAME = 64
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_SEMVER = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
BODY_NAMES = ("body", "request_body")


@dataclass(frozen=True)
class Operation:
    """What a call of the tool sends: the backend's binding of its ToolSpec."""

    method: str
    path: str
    params: tuple[Param, ...]
    body: Body | None
    plan: Plan
    pointer: str
    operation_id: str | None = None
    server: str | None = None  # a path- or operation-level server (used when the backend has no `url:`)
    accept: str | None = None  # the success answers' media types, JSON first: what the call asks for


@dataclass
class Candidate:
    """An operation the filters let through, before it is built."""

    method: str
    path: str
    node: dict[str, Any]
    item: dict[str, Any]
    item_base: str
    pointer: str
    name: str = ""


@dataclass
class Built:
    """What one pass of building made: tools, the problems of the operations skipped, URLs still to fetch."""

    specs: list[ToolSpec] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    needed: set[str] = field(default_factory=set)


def tool_name(operation_id: Any, method: str, path: str) -> str:
    """The readable name of an operation (see the module's docstring)."""
    if isinstance(operation_id, str):
        name = _NOT_NAME.sub("_", operation_id).strip("_")
        if name:
            return name
    words = [method.lower()]
    for segment in path.split("/"):
        if not segment:
            continue
        found = _PLACEHOLDER.fullmatch(segment)
        words.append(f"by_{found.group(1)}" if found else segment)
    return _NOT_NAME.sub("_", "_".join(words)).strip("_")


def fit(name: str, room: int) -> str:
    """`name` within `room` characters: cut, with a short hash of the whole so cut names stay distinct."""
    if len(name) <= room:
        return name
    digest = hashlib.sha1(name.encode(), usedforsecurity=False).hexdigest()[:6]
    return f"{name[: max(1, room - 7)].rstrip('_')}_{digest}"


def matches(patterns: list[str], candidate: Candidate, operation_id: Any) -> bool:
    """Whether an operation matches one filter entry: `tag:`, `method:`, `path:` or an operationId/name glob."""
    tags = candidate.node.get("tags") if isinstance(candidate.node.get("tags"), list) else []
    for pattern in patterns:
        kind, _, value = pattern.partition(":")
        if value and kind == "tag":
            if any(fnmatchcase(str(t), value) for t in tags):
                return True
        elif value and kind == "method":
            if fnmatchcase(candidate.method.upper(), value.upper()):
                return True
        elif value and kind == "path":
            if fnmatchcase(candidate.path, value):
                return True
        elif fnmatchcase(str(operation_id or ""), pattern) or fnmatchcase(candidate.name, pattern):
            return True
    return False


class Builder:
    """Builds the tools of one document; every schema and `$ref` it meets is converted once (`Schemas`)."""

    def __init__(
        self,
        documents: Documents,
        version: str,
        security: Security,
        *,
        backend: str,
        toolkit: str,
        routed_toolkit: str,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
    ) -> None:
        self.documents = documents
        self.root = documents.root
        self.main = documents.main
        self.schemas = Schemas(documents, version)
        self.security = security
        self.backend = backend
        self.toolkit = toolkit
        self.room = MAX_FLAT_NAME - len(routed_toolkit) - 1
        self.include = include
        self.exclude = exclude
        info = self.root.get("info") if isinstance(self.root.get("info"), dict) else {}
        version_text = str(info.get("version", ""))
        self.version = version_text if _SEMVER.match(version_text) else "1.0.0"
        self.problems: list[str] = []  # of the listing itself (a path item that is no object)
        self.without = 0  # operations sent without credentials
        self.unmet: dict[str, int] = {}  # a security scheme no credential meets -> operations left without any

    # ---- which operations ----

    def candidates(self) -> list[Candidate]:
        """The operations the filters let through, in document order, named (names unique)."""
        found: list[Candidate] = []
        paths = self.root.get("paths") or {}
        for path, raw in paths.items():
            where = f"/paths/{escape(str(path))}"
            try:
                item, base, _ = self.documents.follow(raw, self.main, where)
            except DocumentError as exc:
                self.problems.append(str(exc))
                continue
            if not isinstance(item, dict):
                self.problems.append(str(DocumentError(self.main, where, "a path item must be an object")))
                continue
            for method in METHODS:
                node = item.get(method)
                if node is None:
                    continue
                pointer = f"{where}/{method}"
                if not isinstance(node, dict):
                    self.problems.append(str(DocumentError(self.main, pointer, "an operation must be an object")))
                    continue
                found.append(Candidate(method.upper(), str(path), node, item, base, pointer))
        taken: set[str] = set()
        chosen = []
        for candidate in found:
            operation_id = candidate.node.get("operationId")
            candidate.name = tool_name(operation_id, candidate.method, candidate.path)
            if self.include and not matches(self.include, candidate, operation_id):
                continue
            if self.exclude and matches(self.exclude, candidate, operation_id):
                continue
            name, n = fit(candidate.name, self.room), 1
            while name.lower() in taken:
                n += 1
                name = fit(f"{candidate.name}_{n}", self.room)
            taken.add(name.lower())
            candidate.name = name
            chosen.append(candidate)
        return chosen

    def build_all(self, candidates: list[Candidate]) -> Built:
        """Every candidate as a tool; an unusable one becomes a problem (document, pointer, what)."""
        built = Built(problems=list(self.problems))
        for candidate in candidates:
            try:
                built.specs.append(self.build(candidate))
            except NeedDocument as need:
                built.needed.add(need.url)
            except DocumentError as exc:
                built.problems.append(str(exc))
            except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a shape the rules above did not expect
                built.problems.append(f"{self.main}#{candidate.pointer}: unusable ({type(exc).__name__}: {exc})")
        return built

    # ---- one operation ----

    def build(self, candidate: Candidate) -> ToolSpec:
        node, pointer = candidate.node, candidate.pointer
        refs: set[str] = set()
        properties: dict[str, Any] = {}
        required: list[str] = []
        params = self._params(candidate, properties, required, refs)
        body, closed, note = self._body(candidate, params, properties, required, refs)
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = list(dict.fromkeys(required))
        if closed:
            schema["additionalProperties"] = False
        input_schema = self.schemas.bundle(schema, refs)
        output_schema = self._output(node, candidate.item_base, pointer)
        plan = self._plan(node, pointer)
        deprecated = node.get("deprecated") is True
        tags = [str(t) for t in node.get("tags") or () if isinstance(t, str)]
        if deprecated:
            tags.append("deprecated")
        if candidate.method in IDEMPOTENT_METHODS:
            tags.append("idempotent")
        return ToolSpec(
            toolkit=self.toolkit,
            name=candidate.name,
            version=self.version,
            description=self._description(candidate, deprecated, note),
            input_schema=input_schema,
            output_schema=output_schema,
            requirements=Requirements(secrets=plan.secrets),
            tags=tuple(dict.fromkeys(tags)),
            backend=self.backend,
            language="remote",
            side_effects=candidate.method not in SAFE_METHODS,
            source=f"backend {self.backend!r} ({candidate.method} {candidate.path})",
            binding=Operation(
                method=candidate.method,
                path=candidate.path,
                params=params,
                body=body,
                plan=plan,
                pointer=pointer,
                operation_id=node.get("operationId") if isinstance(node.get("operationId"), str) else None,
                server=self._server(node, candidate.item),
                accept=self._accept(node, candidate.item_base, pointer),
            ),
        )

    def _params(
        self, candidate: Candidate, properties: dict[str, Any], required: list[str], refs: set[str]
    ) -> tuple[Param, ...]:
        declared: dict[tuple[str, str], tuple[dict[str, Any], str, str]] = {}
        sources = (
            (candidate.item.get("parameters"), candidate.item_base, candidate.pointer.rsplit("/", 1)[0]),
            (candidate.node.get("parameters"), candidate.item_base, candidate.pointer),
        )
        for raw_list, base, where in sources:  # the operation's own override the path item's
            if raw_list is None:
                continue
            if not isinstance(raw_list, list):
                raise DocumentError(base, f"{where}/parameters", "parameters must be a list")
            for index, raw in enumerate(raw_list):
                at = f"{where}/parameters/{index}"
                param, param_base, param_at = self.documents.follow(raw, base, at)
                if not isinstance(param, dict) or not isinstance(param.get("name"), str):
                    raise DocumentError(param_base, param_at, "a parameter needs a name")
                location = param.get("in")
                if location not in LOCATIONS:
                    raise DocumentError(param_base, param_at, f"parameter 'in' must be one of {LOCATIONS}")
                if location == "header" and param["name"].lower() in IGNORED_HEADERS:
                    continue
                declared[(location, param["name"])] = (param, param_base, param_at)
        placeholders = _PLACEHOLDER.findall(candidate.path)
        for name in placeholders:  # a path placeholder nobody declared: a string parameter all the same
            declared.setdefault(("path", name), ({"name": name, "in": "path", "schema": {"type": "string"}}, "", ""))
        for (location, name), (_, base, at) in declared.items():
            if location == "path" and name not in placeholders:
                raise DocumentError(base, at, f"path parameter {name!r} is not in the path {candidate.path!r}")
        ordered = sorted(declared.items(), key=lambda item: LOCATIONS.index(item[0][0]))
        params: list[Param] = []
        for (location, name), (param, base, at) in ordered:
            arg = name if name not in properties else f"{location}_{name}"
            n = 1
            while arg in properties:
                n += 1
                arg = f"{location}_{name}_{n}"
            style = param.get("style", DEFAULT_STYLE[location])
            allowed = PATH_STYLES if location == "path" else QUERY_STYLES if location == "query" else None
            if (allowed is not None and style not in allowed) or (
                location in ("header", "cookie")
                and style
                not in (
                    "simple",
                    "form",
                )
            ):
                raise DocumentError(base, at, f"style {style!r} is not defined for {location} parameters")
            explode = param.get("explode", style == "form")
            schema_node, media_type = param.get("schema"), None
            schema_at = f"{at}/schema"
            if schema_node is None and isinstance(param.get("content"), dict) and param["content"]:
                media_type, media = next(iter(param["content"].items()))
                schema_node = media.get("schema", {}) if isinstance(media, dict) else {}
                schema_at = f"{at}/content/{escape(media_type)}/schema"
            schema = self.schemas.convert(
                schema_node if schema_node is not None else {}, base or self.main, schema_at, refs
            )
            properties[arg] = _annotated(schema, param)
            if location == "path" or param.get("required") is True:
                required.append(arg)
            params.append(
                Param(
                    arg=arg,
                    name=name,
                    location=location,
                    style=style,
                    explode=bool(explode),
                    shape=self.schemas.shape(schema),
                    allow_reserved=param.get("allowReserved") is True,
                    media_type=media_type,
                )
            )
        return tuple(params)

    def _body(
        self,
        candidate: Candidate,
        params: tuple[Param, ...],
        properties: dict[str, Any],
        required: list[str],
        refs: set[str],
    ) -> tuple[Body | None, bool, str | None]:
        """The body's binding, its properties added to the input; whether the input is closed; a note for the
        description when the body sits under one argument because it must."""
        raw = candidate.node.get("requestBody")
        if raw is None:
            return None, True, None
        at = f"{candidate.pointer}/requestBody"
        node, base, at = self.documents.follow(raw, candidate.item_base, at)
        if not isinstance(node, dict) or not isinstance(node.get("content"), dict) or not node["content"]:
            raise DocumentError(base, at, "a request body needs content")
        media_type, kind = _pick(node["content"])
        media = node["content"][media_type]
        media = media if isinstance(media, dict) else {}
        body_required = node.get("required") is True
        schema = self.schemas.convert(media.get("schema", {}), base, f"{at}/content/{escape(media_type)}/schema", refs)
        description = node.get("description") if isinstance(node.get("description"), str) else None
        encoding = _encodings(media.get("encoding"))
        files: set[str] = set()
        shapes: dict[str, str] = {}
        resolved = self.schemas.resolved(schema)
        if (
            kind in ("form", "multipart")
            and isinstance(resolved, dict)
            and isinstance(resolved.get("properties"), dict)
        ):
            fields: dict[str, Any] = {}
            for name, inner in resolved["properties"].items():
                shapes[name] = self.schemas.shape(inner)
                if kind == "multipart" and self._is_file(inner, encoding.get(name)):
                    files.add(name)
                    fields[name] = {**FILE_SCHEMA, **_about(inner)}
                elif (
                    kind == "multipart"
                    and shapes[name] == "array"
                    and self._is_file(self.schemas.resolved(inner).get("items", {}), encoding.get(name))
                ):
                    files.add(name)
                    fields[name] = {"type": "array", "items": FILE_SCHEMA, **_about(inner)}
                else:
                    fields[name] = inner
            schema = {**resolved, "properties": fields}
            resolved = schema
        elif kind == "binary":
            schema = {**FILE_SCHEMA, **({"description": description} if description else {})}
            resolved = schema
        taken = {p.arg for p in params}
        flat = (
            kind in ("json", "form", "multipart")
            and isinstance(resolved, dict)
            and isinstance(resolved.get("properties"), dict)
            and resolved.get("type", "object") in ("object", ["object"])
            and not any(k in resolved for k in ("allOf", "anyOf", "oneOf", "not", "if", "$ref"))
            and not taken & set(resolved["properties"])
        )
        if flat:
            properties.update(resolved["properties"])
            if body_required:
                required.extend(r for r in resolved.get("required", ()) if isinstance(r, str))
            closed = resolved.get("additionalProperties") is False
            return (
                Body(
                    media_type,
                    None,
                    kind,
                    body_required,
                    frozenset(resolved["properties"]),
                    frozenset(files),
                    shapes,
                    encoding,
                ),
                closed,
                None,
            )
        arg = next((n for n in BODY_NAMES if n not in taken), "request_body_")
        properties[arg] = {**schema, "description": description} if description and isinstance(schema, dict) else schema
        if body_required:
            required.append(arg)
        collides = sorted(taken & set(resolved.get("properties", {}))) if isinstance(resolved, dict) else []
        why = (
            f"the body's {', '.join(collides)} share names with parameters"
            if collides
            else "the body is not an object of named properties"
        )
        note = f"The request body is the argument `{arg}` ({why})."
        return Body(media_type, arg, kind, body_required, frozenset(), frozenset(files), shapes, encoding), True, note

    def _is_file(self, schema: Any, encoding: Encoding | None) -> bool:
        resolved = self.schemas.resolved(schema)
        if not isinstance(resolved, dict):
            return False
        if resolved.get("format") == "binary" or "contentMediaType" in resolved:
            return True
        content_type = encoding.content_type if encoding else None
        return bool(content_type) and not any(t in content_type for t in ("text/", "json", "*/*"))  # type: ignore[operator]

    def _output(self, node: dict[str, Any], base: str, pointer: str) -> Any:
        responses = node.get("responses")
        if not isinstance(responses, dict):
            return None
        by_code = {str(code): value for code, value in responses.items()}  # YAML reads `200:` as a number
        codes = sorted((code for code in by_code if code.startswith("2")), key=lambda c: (not c.isdigit(), c))
        for code in codes:
            at = f"{pointer}/responses/{escape(code)}"
            response, response_base, at = self.documents.follow(by_code[code], base, at)
            content = response.get("content") if isinstance(response, dict) else None
            if not isinstance(content, dict) or not content:
                return None  # the first success says nothing of a body (204): no output schema
            for media_type, media in content.items():
                if _is_json(media_type) and isinstance(media, dict) and "schema" in media:
                    refs: set[str] = set()
                    where = f"{at}/content/{escape(media_type)}/schema"
                    schema = self.schemas.convert(media["schema"], response_base, where, refs)
                    return self.schemas.bundle(schema, refs)
            return None
        return None

    def _accept(self, node: dict[str, Any], base: str, pointer: str) -> str | None:
        """`Accept` for the operation's calls: its 2xx media types, JSON ones first (a server offering XML and
        JSON, as many published documents do, answers its first listed otherwise); None when none is listed."""
        responses = node.get("responses")
        if not isinstance(responses, dict):
            return None
        found: dict[str, None] = {}
        for code, value in responses.items():
            if not str(code).startswith("2"):
                continue
            response, _base, _at = self.documents.follow(value, base, f"{pointer}/responses/{escape(str(code))}")
            content = response.get("content") if isinstance(response, dict) else None
            found.update(dict.fromkeys(str(media) for media in content or () if "*" not in str(media)))
        if not found:
            return None
        ordered = sorted(found, key=lambda media: not _is_json(media))
        return ", ".join(media if _is_json(media) else f"{media};q=0.5" for media in ordered)

    def _plan(self, node: dict[str, Any], pointer: str) -> Plan:
        requirements = node["security"] if "security" in node else self.root.get("security")
        plan = self.security.plan(requirements, f"{pointer}/security" if "security" in node else "/security")
        for scheme in plan.unmet:
            self.unmet[scheme] = self.unmet.get(scheme, 0) + 1
        self.without += bool(plan.unmet)
        return plan

    def warnings(self) -> list[str]:
        """What discovery doubts besides skipped operations: credentials it cannot send."""
        found = []
        if self.security.undeclared:
            names = ", ".join(sorted(self.security.undeclared))
            found.append(f"{self.main}: security names undeclared scheme(s) {names}: those requirements cannot be met")
        if self.without:
            schemes = ", ".join(f"{name} ({count})" for name, count in sorted(self.unmet.items()))
            found.append(
                f"{self.without} operation(s) are sent without credentials: none is configured for the schemes "
                f"their security asks for: {schemes} (give credentials:, oauth: or forward_authorization)"
            )
        return found

    def _server(self, node: dict[str, Any], item: dict[str, Any]) -> str | None:
        for holder in (node, item):
            servers = holder.get("servers")
            if isinstance(servers, list) and servers and isinstance(servers[0], dict):
                return server_url(servers[0], {}, self.main)
        return None

    def _description(self, candidate: Candidate, deprecated: bool, note: str | None) -> str:
        node = candidate.node
        parts = [t.strip() for t in (node.get("summary"), node.get("description")) if isinstance(t, str) and t.strip()]
        if len(parts) == 2 and parts[1].startswith(parts[0]):
            parts = parts[1:]
        if not parts:
            parts = [f"{candidate.method} {candidate.path}"]
        if deprecated:
            parts.insert(0, "Deprecated.")
        if note:
            parts.append(note)
        return "\n\n".join(parts)


def server_url(server: dict[str, Any], values: dict[str, str], document: str) -> str | None:
    """A Server Object's URL, its {variables} filled (given values, else defaults), made absolute against
    the document's URL when it is relative; None when it stays relative (a document on disk)."""
    url = server.get("url")
    if not isinstance(url, str):
        return None
    variables = server.get("variables") if isinstance(server.get("variables"), dict) else {}

    def fill(found: re.Match[str]) -> str:
        name = found.group(1)
        if name in values:
            return values[name]
        variable = variables.get(name)
        return str(variable.get("default", "")) if isinstance(variable, dict) else found.group(0)

    url = _PLACEHOLDER.sub(fill, url)
    if is_url(url):
        return url
    if is_url(document):
        from urllib.parse import urljoin

        return urljoin(document, url)
    return None


def _pick(content: dict[str, Any]) -> tuple[str, str]:
    """The body's media type: JSON first, then a form, multipart, text, anything else as a file."""
    kinds = [(media_type, _kind(media_type)) for media_type in content]
    for wanted in ("json", "form", "multipart", "binary", "text"):
        for media_type, kind in kinds:
            if kind == wanted:
                return media_type, kind
    return kinds[0]


def _kind(media_type: str) -> str:
    media = media_type.split(";", 1)[0].strip().lower()
    if _is_json(media) or media == "*/*":
        return "json"
    if media == "application/x-www-form-urlencoded":
        return "form"
    if media.startswith("multipart/"):
        return "multipart"
    if media.startswith("text/") or media.endswith(("+xml", "/xml")):
        return "text"
    return "binary"


def _is_json(media_type: str) -> bool:
    media = media_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _encodings(raw: Any) -> dict[str, Encoding]:
    if not isinstance(raw, dict):
        return {}
    out = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict):
            continue
        style = entry.get("style", "form")
        out[str(name)] = Encoding(
            content_type=entry.get("contentType") if isinstance(entry.get("contentType"), str) else None,
            style=style,
            explode=bool(entry.get("explode", style == "form")),
            allow_reserved=entry.get("allowReserved") is True,
        )
    return out


def _about(schema: Any) -> dict[str, Any]:
    """A property's own description, carried onto the schema that replaces it (a file)."""
    return {"description": schema["description"]} if isinstance(schema, dict) and "description" in schema else {}


def _annotated(schema: Any, param: dict[str, Any]) -> Any:
    """A parameter's schema with what the parameter itself says: description, deprecated, example(s)."""
    extra: dict[str, Any] = {}
    if isinstance(param.get("description"), str):
        extra["description"] = param["description"]
    if param.get("deprecated") is True:
        extra["deprecated"] = True
    if "example" in param:
        extra["examples"] = [param["example"]]
    elif isinstance(param.get("examples"), dict):
        values = [e["value"] for e in param["examples"].values() if isinstance(e, dict) and "value" in e]
        if values:
            extra["examples"] = values
    if not extra:
        return schema
    if isinstance(schema, bool):
        return extra if schema else {**extra, "not": {}}
    return {**schema, **extra}
