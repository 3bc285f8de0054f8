"""Swagger 2.0 → OpenAPI 3.0.3, by the rules of the reference converter (npm swagger2openapi, patch mode).

    document = convert(swagger)  # a new dict; `swagger` is left as it was

What moves where:
  host + basePath + schemes           → servers (one per scheme; no scheme: a scheme-relative "//host/base")
  definitions / parameters /          → components.schemas / parameters / responses / securitySchemes
  responses / securityDefinitions       (names sanitised as the reference does; every $ref rewritten to match)
  in: body                            → requestBody, one content entry per consumed media type (default
                                        application/json)
  in: formData                        → requestBody of an object schema, multipart/form-data when the operation
                                        consumes it or has a file part, else application/x-www-form-urlencoded;
                                        type: file → string/binary
  collectionFormat                    → style/explode: csv → form + explode false (query, cookie) or simple (path,
                                        header); ssv → spaceDelimited; pipes → pipeDelimited; multi → explode true;
                                        tsv (no OpenAPI 3 equivalent) and ssv/pipes outside the query → kept as
                                        x-collectionFormat
  produces + response schema          → content per produced media type (default */*), examples per media type
  basic / oauth2 flow                 → http basic / flows: implicit, password, application → clientCredentials,
                                        accessCode → authorizationCode; apiKey kept
The operation's consumes/produces win over the document's. Extensions (x-*) are kept.

Departures from the reference: form fields with a collectionFormat other than multi get an `encoding` entry
(style/explode; the reference drops it); request bodies stay inline (the reference hoists identical ones into
components.requestBodies); a form with a file part is multipart/form-data even when consumes does not say so;
path-level body/formData parameters reach every operation of the path (the reference skips operations without
parameters of their own); a $ref into paths (not definitions/parameters/responses) gets a copy of its target
as components.schemas.schemaN (the reference also points the original place at it); ssv/pipes outside the
query are kept as x-collectionFormat (the reference leaves a warning). As the reference in patch mode, small
errors are mended (a path parameter made required, a missing type made string); only a document that is not
Swagger 2.0 raises (ValueError).
"""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import unquote

__all__ = ["TARGET_VERSION", "convert"]

TARGET_VERSION = "3.0.3"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Swagger 2.0 parameter fields that are JSON Schema keywords of the parameter's value (they move to `schema`).
TYPE_KEYWORDS = (
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "additionalProperties",
    "pattern",
    "enum",
    "default",
)
ARRAY_KEYWORDS = ("items", "minItems", "maxItems", "uniqueItems")
FLOWS = {"implicit": "implicit", "password": "password", "application": "clientCredentials"}
FLOWS["accessCode"] = "authorizationCode"
FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
BODY = ("body", "formData")  # the parameters that become a requestBody
Json = dict[str, Any]


def convert(document: Json) -> Json:
    """The OpenAPI 3.0.3 equivalent of the Swagger 2.0 `document` (a new dict; the argument is not changed)."""
    if str(document.get("swagger")) != "2.0":
        raise ValueError(f"not a Swagger 2.0 document (swagger: {document.get('swagger')!r})")
    return _Converter(document).run()


def sanitise(name: str) -> str:
    """A component name as the reference makes it: `[]` → Array, odd characters of the first segment → `_`."""
    name = name.replace("[]", "Array", 1)
    head, sep, rest = name.partition("/")
    return re.sub(r"[^A-Za-z0-9_\-.]+|\s+", "_", head) + sep + rest


def sanitise_all(name: str) -> str:
    """sanitise(), with every `/` turned into `_` first (schema names)."""
    return sanitise(name.replace("/", "_"))


def _pointer_unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer_escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _resolve(document: Any, ref: str) -> Any:
    """The value at the local JSON pointer `ref` ("#/a/b"), or None."""
    if not ref.startswith("#"):
        return None
    node = document
    for raw in ref[1:].split("/")[1:]:
        token = _pointer_unescape(unquote(raw))
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def _drop_nulls(node: Any, in_example: bool = False) -> Any:
    """A copy without null members (the reference drops them), except under x-*, default and examples."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            keep = in_example or key.startswith("x-") or key == "default" or key.startswith("example")
            if value is None and not keep:
                continue
            out[key] = value if value is None else _drop_nulls(value, in_example or key.startswith("example"))
        return out
    if isinstance(node, list):
        return [_drop_nulls(item, in_example) for item in node]
    return node


def _extensions(node: Json) -> Json:
    return {key: value for key, value in node.items() if key.startswith("x-")}


def _walk_schema(schema: Any, visit: Any, seen: set[int] | None = None) -> None:
    """Call visit(schema, parent) on `schema` and each of its subschemas (once each, cycles allowed)."""
    seen = set() if seen is None else seen

    def walk(node: Any, parent: Json | None) -> None:
        if not isinstance(node, dict) or id(node) in seen:
            return
        seen.add(id(node))
        visit(node, parent)
        if "$ref" in node:
            return
        for key in ("items", "additionalItems", "additionalProperties", "not"):
            if isinstance(node.get(key), dict):
                walk(node[key], node)
        if isinstance(node.get("items"), list):
            for item in node["items"]:
                walk(item, node)
        for key in ("properties", "patternProperties"):
            if isinstance(node.get(key), dict):
                for child in node[key].values():
                    walk(child, node)
        for key in ("allOf", "anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                for child in node[key]:
                    walk(child, node)

    walk(schema, None)


def _fix_subschema(schema: Json, parent: Json | None) -> None:
    """One Swagger 2.0 schema object made an OpenAPI 3.0 one, in place."""
    if isinstance(schema.get("x-required"), list):
        schema["required"] = [*schema.get("required", []), *schema.pop("x-required")]
    for keyword in ("anyOf", "oneOf", "not"):
        if f"x-{keyword}" in schema:
            schema[keyword] = schema.pop(f"x-{keyword}")
    if isinstance(schema.get("x-nullable"), bool):
        schema["nullable"] = schema.pop("x-nullable")
    discriminator = schema.get("x-discriminator")
    if isinstance(discriminator, dict) and isinstance(discriminator.get("propertyName"), str):
        schema["discriminator"] = schema.pop("x-discriminator")
    if isinstance(schema.get("discriminator"), str):
        schema["discriminator"] = {"propertyName": schema["discriminator"]}
    items = schema.get("items")
    if isinstance(items, list):
        schema["items"] = {} if not items else items[0] if len(items) == 1 else {"anyOf": items}
    kind = schema.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        if "null" in kind:
            schema["nullable"] = True
        del schema["type"]
        if len(types) == 1:
            schema["type"] = types[0]
        elif types:
            schema.setdefault("oneOf", []).extend({"type": t} for t in types)
    if schema.get("type") == "null":
        del schema["type"]
        schema["nullable"] = True
    if schema.get("type") == "array" and "items" not in schema:
        schema["items"] = {}
    if schema.get("type") == "file":
        schema["type"], schema["format"] = "string", "binary"
    if isinstance(schema.get("required"), bool):
        required = schema.pop("required")
        if required and isinstance(schema.get("name"), str) and parent is not None:
            parent.setdefault("required", []).append(schema["name"])
    xml = schema.get("xml")
    if isinstance(xml, dict) and xml.get("namespace") == "":
        del xml["namespace"]
    schema.pop("allowEmptyValue", None)


def fix_schema(schema: Any) -> Any:
    """Every subschema of `schema` fixed up in place (see _fix_subschema); returns `schema`."""
    _walk_schema(schema, _fix_subschema)
    return schema


class _Converter:
    """One conversion; works on a deep copy of the input."""

    def __init__(self, document: Json) -> None:
        self.original = document
        self.swagger: Json = _drop_nulls(copy.deepcopy(document))
        self.schema_names: dict[str, str] = {}
        self.body_parameters: dict[str, Json] = {}  # components.parameters that were body/formData, by new name
        self.hoisted: dict[str, str] = {}  # other local $ref → its new components.schemas pointer
        self.components: Json = {}

    # ---- the document
    def run(self) -> Json:
        sw = self.swagger
        out: Json = {"openapi": TARGET_VERSION}
        out["info"] = self._info(sw.get("info"))
        servers = self._servers(sw)
        if servers:
            out["servers"] = servers
        skipped = {"swagger", "info", "host", "basePath", "schemes", "consumes", "produces", "x-servers"}
        skipped |= {"definitions", "parameters", "responses", "securityDefinitions", "paths", "x-callbacks", "x-links"}
        for key, value in sw.items():
            if key not in skipped:
                out[key] = value
        self.consumes = self._media_types(sw.get("consumes"))
        self.produces = self._media_types(sw.get("produces"))

        self._schemas(sw.get("definitions") or {})
        paths = sw.get("paths") or {}
        # $refs first: every later step sees the new pointers.
        for key in ("parameters", "responses", "securityDefinitions"):
            sw[key] = self._rewrite_refs(sw.get(key) or {})
        paths = self._rewrite_refs(paths)
        for key, value in list(out.items()):
            if key not in ("openapi", "info", "servers"):
                out[key] = self._rewrite_refs(value)
        self.components["schemas"] = self._rewrite_refs(self.components.get("schemas", {}))
        for schema in self.components["schemas"].values():
            fix_schema(schema)

        self._parameters(sw["parameters"])
        self._responses(sw["responses"])
        self._security_schemes(sw["securityDefinitions"])
        if isinstance(out.get("security"), list):
            out["security"] = self._security(out["security"])
        out["paths"] = self._paths(paths)

        components: Json = {}
        if "x-callbacks" in sw:
            components["callbacks"] = sw["x-callbacks"]
        if "x-links" in sw:
            components["links"] = sw["x-links"]
        for key in ("schemas", "responses", "parameters", "securitySchemes"):
            if self.components.get(key):
                components[key] = self.components[key]
        if components:
            out["components"] = components
        return out

    @staticmethod
    def _info(info: Any) -> Json:
        info = dict(info) if isinstance(info, dict) else {}
        info.setdefault("title", "")
        info["version"] = str(info.get("version", ""))
        if "logo" in info:
            info["x-logo"] = info.pop("logo")
        return info

    @staticmethod
    def _servers(sw: Json) -> list[Json]:
        if isinstance(sw.get("x-servers"), list):
            return sw["x-servers"]
        base = str(sw.get("basePath") or "")
        if sw.get("host"):
            schemes = sw.get("schemes") if isinstance(sw.get("schemes"), list) and sw["schemes"] else [""]
            urls = [f"{scheme + ':' if scheme else ''}//{sw['host']}{base.rstrip('/')}" for scheme in schemes]
        elif base:
            urls = [base]
        else:
            return []
        servers = []
        for url in urls:
            url = url.replace("{{", "{").replace("}}", "}")
            server: Json = {"url": url}
            names = re.findall(r"\{(.+?)\}", url)
            if names:
                server["variables"] = {name: {"default": "unknown"} for name in names}
            servers.append(server)
        return servers

    @staticmethod
    def _media_types(value: Any) -> list[str]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return []
        return list(dict.fromkeys(v for v in value if isinstance(v, str)))

    # ---- $refs
    def _schemas(self, definitions: Json) -> None:
        schemas: Json = {}
        for name, schema in definitions.items():
            new = sanitise_all(name)
            suffix = ""
            if new != name:
                while new + str(suffix) in schemas or new + str(suffix) in definitions:
                    suffix = 2 if suffix == "" else int(suffix) + 1
            schemas[new + str(suffix)] = schema
            self.schema_names[name] = new + str(suffix)
        self.components["schemas"] = schemas

    def _new_ref(self, ref: str) -> str:
        if ref.startswith("#/definitions/"):
            head, sep, rest = ref[len("#/definitions/") :].partition("/")
            name = unquote(_pointer_unescape(head))
            new = self.schema_names.get(name, sanitise_all(name))
            return f"#/components/schemas/{_pointer_escape(new)}{sep}{rest}"
        if ref.startswith("#/parameters/"):
            return "#/components/parameters/" + sanitise(ref[len("#/parameters/") :])
        if ref.startswith("#/responses/"):
            return "#/components/responses/" + sanitise(unquote(ref[len("#/responses/") :]))
        if ref.startswith("#/") and not ref.startswith("#/components/"):
            return self._hoist(ref)
        return ref

    def _hoist(self, ref: str) -> str:
        """A $ref into the document elsewhere (e.g. a path's schema): a copy of the target as a schema component."""
        if ref in self.hoisted:
            return self.hoisted[ref]
        target = _resolve(self.original, ref)
        if not isinstance(target, dict):
            return ref  # left as it is: it did not resolve in the input either
        n = 1
        while f"schema{n}" in self.components["schemas"]:
            n += 1
        name = f"schema{n}"
        self.hoisted[ref] = pointer = f"#/components/schemas/{name}"
        self.components["schemas"][name] = {}  # reserved before the target's own $refs are rewritten
        self.components["schemas"][name] = fix_schema(self._rewrite_refs(_drop_nulls(copy.deepcopy(target))))
        return pointer

    def _rewrite_refs(self, node: Any) -> Any:
        """`node` with every local $ref rewritten; a $ref's siblings go (OpenAPI 3.0 ignores them)."""
        if isinstance(node, list):
            return [self._rewrite_refs(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref == "#/consumes":
                return list(self.swagger.get("consumes") or [])
            if ref == "#/produces":
                return list(self.swagger.get("produces") or [])
            return {"$ref": self._new_ref(ref)}
        out = {}
        for key, value in node.items():
            if key == "discriminator" and isinstance(value, dict) and isinstance(value.get("mapping"), dict):
                value = {**value, "mapping": {k: self._mapping_ref(v) for k, v in value["mapping"].items()}}
            out[key] = self._rewrite_refs(value)
        return out

    def _mapping_ref(self, value: Any) -> Any:
        return self._new_ref(value) if isinstance(value, str) and value.startswith("#/definitions/") else value

    # ---- components
    def _parameters(self, parameters: Json) -> None:
        converted: Json = {}
        for name, parameter in parameters.items():
            new = sanitise(name)
            if isinstance(parameter, dict) and parameter.get("in") in BODY:
                self.body_parameters[new] = parameter  # inlined into each operation's requestBody
                continue
            converted[new] = self._parameter(parameter) if isinstance(parameter, dict) else parameter
        self.components["parameters"] = converted

    def _responses(self, responses: Json) -> None:
        self.components["responses"] = {
            sanitise(name): self._response(response, self.produces) for name, response in responses.items()
        }

    def _security_schemes(self, schemes: Json) -> None:
        converted: Json = {}
        for name, scheme in schemes.items():
            scheme = dict(scheme) if isinstance(scheme, dict) else scheme
            if isinstance(scheme, dict):
                if scheme.get("type") == "basic":
                    scheme["type"], scheme["scheme"] = "http", "basic"
                elif scheme.get("type") == "oauth2":
                    scheme = self._oauth2(scheme)
            converted[sanitise(name)] = scheme
        self.components["securitySchemes"] = converted

    @staticmethod
    def _oauth2(scheme: Json) -> Json:
        flow_name = str(scheme.pop("flow", ""))
        flow: Json = {}
        for key in ("authorizationUrl", "tokenUrl"):
            if isinstance(scheme.get(key), str):
                flow[key] = scheme[key].split("?")[0].strip() or "/"
            scheme.pop(key, None)
        flow["scopes"] = scheme.pop("scopes", None) or {}
        scheme.pop("name", None)
        scheme["flows"] = {FLOWS.get(flow_name, flow_name): flow}
        return scheme

    @staticmethod
    def _security(requirements: list[Any]) -> list[Any]:
        return [
            {sanitise(name): scopes for name, scopes in requirement.items()}
            if isinstance(requirement, dict)
            else requirement
            for requirement in requirements
        ]

    # ---- parameters
    @staticmethod
    def _style(parameter: Json) -> None:
        """collectionFormat → style/explode (in place)."""
        fmt = parameter.pop("collectionFormat", None)
        if parameter.get("type") != "array":
            return
        fmt = fmt or "csv"
        where = parameter.get("in")
        if fmt == "csv":
            if where in ("query", "cookie"):
                parameter["style"], parameter["explode"] = "form", False
            elif where in ("path", "header"):
                parameter["style"] = "simple"
        elif fmt == "ssv" and where == "query":
            parameter["style"] = "spaceDelimited"
        elif fmt == "pipes" and where == "query":
            parameter["style"] = "pipeDelimited"
        elif fmt == "multi":
            parameter["explode"] = True
        else:  # tsv, or ssv/pipes outside the query: OpenAPI 3 has no such style
            parameter["x-collectionFormat"] = fmt

    @staticmethod
    def _items(items: Any) -> Any:
        """Swagger 2.0 `items` (a subset of JSON Schema) as a schema: nested collectionFormats dropped."""
        if isinstance(items, dict):
            items = {
                k: _Converter._items(v) if k == "items" else v for k, v in items.items() if k != "collectionFormat"
            }
        return items

    def _parameter(self, parameter: Json) -> Json:
        """A non-body Swagger 2.0 parameter as an OpenAPI 3.0 one."""
        if "$ref" in parameter:
            return parameter
        p = dict(parameter)
        if isinstance(p.get("x-deprecated"), bool):
            p["deprecated"] = p.pop("x-deprecated")
        if "x-example" in p:
            p["example"] = p.pop("x-example")
        if not p.get("type"):
            p["type"] = "string"
        self._style(p)
        schema = p["schema"] if isinstance(p.get("schema"), dict) else {}
        schema["type"] = p.pop("type")
        if "items" in p:
            schema["items"] = self._items(p.pop("items"))
        for key in TYPE_KEYWORDS:
            if key in p:
                schema[key] = p.pop(key)
        p["schema"] = fix_schema(schema)
        if p.get("x-ms-skip-url-encoding") and p.get("in") == "query":
            del p["x-ms-skip-url-encoding"]
            p["allowReserved"] = True
        if p.get("in") == "path":
            p["required"] = True
        return p

    def _dereference_parameter(self, parameter: Any) -> Any:
        """A body/formData parameter component in place of its $ref; other parameters as they are."""
        if isinstance(parameter, dict) and isinstance(parameter.get("$ref"), str):
            name = unquote(parameter["$ref"].removeprefix("#/components/parameters/"))
            return self.body_parameters.get(name, parameter)
        return parameter

    def _key(self, parameter: Any) -> tuple[Any, Any]:
        if isinstance(parameter, dict) and isinstance(parameter.get("$ref"), str):
            name = unquote(parameter["$ref"].removeprefix("#/components/parameters/"))
            parameter = self.components["parameters"].get(name) or self.body_parameters.get(name) or parameter
        return (parameter.get("name"), parameter.get("in")) if isinstance(parameter, dict) else (None, None)

    # ---- request bodies
    def _request_body(self, parameters: list[Json], operation: Json, consumes: list[str]) -> Json | None:
        """The requestBody of an operation's body parameter, or of its formData parameters, or None."""
        body = next((p for p in parameters if p.get("in") == "body"), None)
        form = [p for p in parameters if p.get("in") == "formData"]
        if body is not None:
            rb: Json = {}
            if body.get("description"):
                rb["description"] = body["description"]
            rb["content"] = {
                media: {"schema": fix_schema(copy.deepcopy(body.get("schema") or {}))}
                for media in consumes or ["application/json"]
            }
            if body.get("required"):
                rb["required"] = True
            rb.update({k: v for k, v in _extensions(body).items() if not k.startswith("x-s2o")})
            return rb
        if not form:
            return None
        has_file = any(p.get("type") == "file" for p in form)
        media = MULTIPART if MULTIPART in consumes or has_file else FORM
        schema: Json = {"type": "object", "properties": {}}
        encoding: Json = {}
        for p in form:
            name = str(p.get("name", ""))
            prop: Json = {}
            if p.get("description"):
                prop["description"] = p["description"]
            if "x-example" in p or "example" in p:
                prop["example"] = p.get("x-example", p.get("example"))
            prop["type"] = p.get("type") or "string"
            for key in TYPE_KEYWORDS:
                if key in p:
                    prop[key] = p[key]
            if prop["type"] == "array":
                prop["items"] = self._items(p.get("items") or {})
                style = {"in": "query", "type": "array", "collectionFormat": p.get("collectionFormat")}
                self._style(style)
                if style.get("explode") is not True:
                    encoding[name] = {k: v for k, v in style.items() if k in ("style", "explode") or k.startswith("x-")}
            if prop["type"] == "file":
                prop["type"], prop["format"] = "string", "binary"
            prop.update({k: v for k, v in _extensions(p).items() if k not in ("x-example", "x-deprecated")})
            schema["properties"][name] = fix_schema(prop)
            if p.get("required") is True:
                schema.setdefault("required", []).append(name)
        content: Json = {"schema": schema}
        if encoding:
            content["encoding"] = encoding
        rb = {"content": {media: content}}
        if "required" in schema:
            rb["required"] = True
        return rb

    # ---- responses
    def _response(self, response: Any, produces: list[str]) -> Any:
        if not isinstance(response, dict) or "$ref" in response:
            return response
        r = dict(response)
        if not isinstance(r.get("description"), str):
            r["description"] = ""
        examples = r.pop("examples", None)
        examples = examples if isinstance(examples, dict) else {}
        content: Json = {}
        if "schema" in r:
            schema = fix_schema(r.pop("schema"))
            for media in produces or ["*/*"]:
                entry: Json = {"schema": copy.deepcopy(schema)}
                if media in examples:
                    entry["examples"] = {"response": {"value": examples.pop(media)}}
                content[media] = entry
        for media, value in examples.items():
            content.setdefault(media, {})["examples"] = {"response": {"value": value}}
        if content:
            r["content"] = content
        if isinstance(r.get("headers"), dict):
            r["headers"] = {
                name: self._header(header) for name, header in r["headers"].items() if name.lower() != "status code"
            }
        return r

    def _header(self, header: Any) -> Any:
        if not isinstance(header, dict) or "$ref" in header:
            return header
        h = dict(header)
        schema: Json = {}
        if "type" in h:
            schema["type"] = h["type"]
        fmt = h.pop("collectionFormat", None)
        if h.get("type") == "array":
            if fmt == "multi":
                h["explode"] = True
            elif fmt in (None, "csv"):
                h["style"] = "simple"
            else:
                h["x-collectionFormat"] = fmt
        h.pop("type", None)
        if "items" in h:
            schema["items"] = self._items(h.pop("items"))
        for key in (*TYPE_KEYWORDS, *ARRAY_KEYWORDS):
            if key in h:
                schema[key] = h.pop(key)
        if schema:
            h["schema"] = fix_schema(schema)
        return h

    # ---- paths
    def _paths(self, paths: Json) -> Json:
        out: Json = {}
        for template, item in paths.items():
            if not isinstance(item, dict) or ("$ref" in item and len(item) == 1):
                out[template] = item
                continue
            item = dict(item)
            for name in ("trace", "summary", "description", "servers"):
                value = item.get(f"x-{name}")
                if isinstance(value, dict if name == "trace" else list if name == "servers" else str):
                    item[name] = item.pop(f"x-{name}")
            shared = [self._dereference_parameter(p) for p in item.get("parameters") or []]
            for method in METHODS:
                if isinstance(item.get(method), dict):
                    item[method] = self._operation(item[method], shared)
            kept = [
                self._parameter(p) for p in shared if isinstance(p, dict) and p.get("in") not in ("body", "formData")
            ]
            if kept:
                item["parameters"] = kept
            else:
                item.pop("parameters", None)
            out[template] = item
        return out

    def _operation(self, operation: Json, shared: list[Json]) -> Json:
        op = dict(operation)
        consumes = self._media_types(op.pop("consumes", None)) or self.consumes
        produces = self._media_types(op.pop("produces", None)) or self.produces
        own = [self._dereference_parameter(p) for p in op.get("parameters") or []]
        keys = {self._key(p) for p in own}
        inherited = [p for p in shared if isinstance(p, dict) and p.get("in") in BODY and self._key(p) not in keys]
        body = [p for p in [*inherited, *own] if isinstance(p, dict) and p.get("in") in BODY]
        parameters = [self._parameter(p) for p in own if isinstance(p, dict) and all(p is not b for b in body)]
        request_body = self._request_body(body, op, consumes)
        rebuilt: Json = {}
        for key, value in op.items():  # requestBody right after parameters, as the reference places it
            if key == "parameters":
                if parameters:
                    rebuilt["parameters"] = parameters
                if request_body is not None:
                    rebuilt["requestBody"] = request_body
            else:
                rebuilt[key] = value
        if request_body is not None and "requestBody" not in rebuilt:
            rebuilt["requestBody"] = request_body
        responses = rebuilt.get("responses")
        if not isinstance(responses, dict) or not responses:
            rebuilt["responses"] = {"default": {"description": "Default response"}}
        else:
            rebuilt["responses"] = {code: self._response(r, produces) for code, r in responses.items()}
        if isinstance(rebuilt.get("security"), list):
            rebuilt["security"] = self._security(rebuilt["security"])
        schemes = rebuilt.pop("schemes", None)
        if isinstance(rebuilt.get("x-servers"), list):
            rebuilt["servers"] = rebuilt.pop("x-servers")
        elif isinstance(schemes, list) and schemes:
            servers = self._operation_servers(schemes)
            if servers:
                rebuilt["servers"] = servers
        return rebuilt

    def _operation_servers(self, schemes: list[str]) -> list[Json]:
        """Servers for an operation whose schemes differ from the document's."""
        document = self.swagger.get("schemes") or []
        if all(scheme in document for scheme in schemes):
            return []
        servers = []
        for server in self._servers(self.swagger):
            for scheme in schemes:
                rest = server["url"].split("//", 1)[1] if "//" in server["url"] else server["url"].lstrip("/")
                servers.append({**server, "url": f"{scheme}://{rest}"})
        return list({s["url"]: s for s in servers}.values())
