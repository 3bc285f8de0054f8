"""adapters/openapi/swagger2.py: Swagger 2.0 → OpenAPI 3.0.3, checked rule by rule, on every Swagger 2.0 example
of npm @readme/oas-examples, against the OpenAPI specification (openapi-spec-validator) and against the
reference converter itself (npm swagger2openapi)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from adapters.openapi.swagger2 import TARGET_VERSION, convert
from tests.openapi.fixtures import Documents, reference_convert, unresolved_refs, validate_spec

SWAGGER_ONLY = {"swagger", "host", "basePath", "schemes", "consumes", "produces", "definitions", "parameters"}
SWAGGER_ONLY |= {"responses", "securityDefinitions"}

# Every rule once: a document as odd as real ones are.
KITCHEN: dict[str, Any] = {
    "swagger": "2.0",
    "info": {"title": "Kitchen sink", "version": 3, "x-audience": "tests", "termsOfService": None},
    "host": "api.example.com:8443",
    "basePath": "/v1/",
    "schemes": ["https", "http"],
    "consumes": ["application/json", "application/xml"],
    "produces": ["application/json"],
    "x-top": {"kept": True},
    "tags": [{"name": "things"}],
    "securityDefinitions": {
        "basicAuth": {"type": "basic"},
        "key": {"type": "apiKey", "name": "X-Key", "in": "header"},
        "implicit": {
            "type": "oauth2",
            "flow": "implicit",
            "authorizationUrl": "https://a.example/auth",
            "scopes": {"r": "read"},
        },
        "password": {"type": "oauth2", "flow": "password", "tokenUrl": "https://a.example/token", "scopes": {}},
        "app": {"type": "oauth2", "flow": "application", "tokenUrl": "https://a.example/token", "scopes": {"w": "w"}},
        "code": {
            "type": "oauth2",
            "flow": "accessCode",
            "authorizationUrl": "https://a.example/auth",
            "tokenUrl": "https://a.example/token?x=1",
            "scopes": {"r": "read"},
        },
    },
    "security": [{"basicAuth": []}, {"app": ["w"]}],
    "definitions": {
        "Thing": {
            "type": "object",
            "required": ["id"],
            "discriminator": "kind",
            "properties": {
                "id": {"type": "integer", "format": "int64"},
                "kind": {"type": "string"},
                "owner": {"$ref": "#/definitions/Owner"},
                "note": {"type": "string", "x-nullable": True},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "x-entity": "thing",
        },
        "Owner": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "parent": {"$ref": "#/definitions/Owner"}},
        },
        "Thing List": {"type": "array", "items": {"$ref": "#/definitions/Thing"}},
    },
    "parameters": {
        "limit": {"name": "limit", "in": "query", "type": "integer", "minimum": 1, "default": 10},
        "ids": {
            "name": "ids",
            "in": "query",
            "type": "array",
            "items": {"type": "integer"},
            "collectionFormat": "pipes",
        },
        "thingBody": {"name": "thing", "in": "body", "required": True, "schema": {"$ref": "#/definitions/Thing"}},
    },
    "responses": {
        "NotFound": {
            "description": "not found",
            "schema": {"type": "object", "properties": {"message": {"type": "string"}}},
        },
    },
    "paths": {
        "/things": {
            "x-path-extension": 1,
            "get": {
                "operationId": "listThings",
                "tags": ["things"],
                "parameters": [
                    {"$ref": "#/parameters/limit"},
                    {"$ref": "#/parameters/ids"},
                    {"name": "csv", "in": "query", "type": "array", "items": {"type": "string"}},
                    {
                        "name": "ssv",
                        "in": "query",
                        "type": "array",
                        "items": {"type": "string"},
                        "collectionFormat": "ssv",
                    },
                    {
                        "name": "multi",
                        "in": "query",
                        "type": "array",
                        "items": {"type": "string"},
                        "collectionFormat": "multi",
                    },
                    {
                        "name": "tsv",
                        "in": "query",
                        "type": "array",
                        "items": {"type": "string"},
                        "collectionFormat": "tsv",
                    },
                    {
                        "name": "X-Trace",
                        "in": "header",
                        "type": "array",
                        "items": {"type": "string"},
                        "x-example": ["a"],
                    },
                    {"name": "sort", "in": "query", "type": "string", "enum": ["asc", "desc"], "x-deprecated": True},
                ],
                "produces": ["application/json", "text/csv"],
                "responses": {
                    "200": {
                        "description": "things",
                        "schema": {"$ref": "#/definitions/Thing List"},
                        "headers": {
                            "X-Rate": {"type": "integer", "format": "int32"},
                            "X-Ids": {"type": "array", "items": {"type": "integer"}},
                        },
                        "examples": {"application/json": [{"id": 1}], "text/plain": "1"},
                    },
                    "404": {"$ref": "#/responses/NotFound"},
                },
            },
            "post": {
                "operationId": "createThing",
                "consumes": ["application/json"],
                "parameters": [{"$ref": "#/parameters/thingBody"}],
                "responses": {"201": {"description": "created", "schema": {"$ref": "#/definitions/Thing"}}},
                "security": [{"key": []}],
                "x-op": "yes",
            },
        },
        "/things/{id}": {
            "parameters": [{"name": "id", "in": "path", "type": "array", "items": {"type": "integer"}}],
            "put": {
                "operationId": "uploadThing",
                "consumes": ["multipart/form-data"],
                "parameters": [
                    {"name": "file", "in": "formData", "type": "file", "required": True, "description": "the file"},
                    {"name": "label", "in": "formData", "type": "string", "x-extra": 1},
                ],
                "responses": {"200": {"description": "ok"}},
            },
            "patch": {
                "parameters": [
                    {"name": "name", "in": "formData", "type": "string", "required": True},
                    {"name": "colours", "in": "formData", "type": "array", "items": {"type": "string"}},
                ],
                "consumes": ["application/x-www-form-urlencoded"],
                "responses": {"204": {"description": "done"}},
            },
            "delete": {"schemes": ["wss"], "responses": {"204": {"description": "gone"}}},
            "get": {
                "produces": ["application/octet-stream"],
                "responses": {"200": {"description": "bytes", "schema": {"type": "file"}}},
            },
        },
    },
}


def check(document: dict[str, Any]) -> dict[str, Any]:
    """convert(), with what holds for every document: the input untouched, a 3.0.3 document whose $refs resolve,
    valid by the specification's schema (where openapi-spec-validator is installed)."""
    before = copy.deepcopy(document)
    converted = convert(document)
    assert document == before, "convert() changed its input"
    assert converted["openapi"] == TARGET_VERSION
    assert not SWAGGER_ONLY & set(converted)
    assert unresolved_refs(converted) == []
    assert "#/definitions/" not in json.dumps(converted)
    if validate_spec is not None:
        validate_spec(converted)
    return converted


def operation(document: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    return dict(document["paths"][path][method])


def parameter(op: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in op["parameters"] if p.get("name") == name)


# ---- rule by rule (no npm package needed)
def test_servers_from_host_base_path_and_schemes() -> None:
    converted = check(KITCHEN)
    assert converted["servers"] == [
        {"url": "https://api.example.com:8443/v1"},
        {"url": "http://api.example.com:8443/v1"},
    ]
    no_scheme = check({**KITCHEN, "schemes": [], "host": "{tenant}.example.com"})
    assert no_scheme["servers"] == [
        {"url": "//{tenant}.example.com/v1", "variables": {"tenant": {"default": "unknown"}}}
    ]
    base_only = {k: v for k, v in KITCHEN.items() if k != "host"}
    assert check(base_only)["servers"] == [{"url": "/v1/"}]
    neither = {k: v for k, v in KITCHEN.items() if k not in ("host", "basePath")}
    assert "servers" not in check(neither)
    # An operation on other schemes than the document's gets its own servers.
    assert operation(converted, "/things/{id}", "delete")["servers"] == [{"url": "wss://api.example.com:8443/v1"}]


def test_info_and_extensions_are_kept() -> None:
    converted = check(KITCHEN)
    assert converted["info"] == {"title": "Kitchen sink", "version": "3", "x-audience": "tests"}
    assert converted["x-top"] == {"kept": True}
    assert converted["tags"] == [{"name": "things"}]
    assert converted["paths"]["/things"]["x-path-extension"] == 1
    assert operation(converted, "/things", "post")["x-op"] == "yes"
    assert converted["components"]["schemas"]["Thing"]["x-entity"] == "thing"


def test_components_and_refs() -> None:
    converted = check(KITCHEN)
    schemas = converted["components"]["schemas"]
    assert set(schemas) == {"Thing", "Owner", "Thing_List"}  # names sanitised as the reference does
    assert schemas["Thing_List"]["items"] == {"$ref": "#/components/schemas/Thing"}
    assert schemas["Owner"]["properties"]["parent"] == {"$ref": "#/components/schemas/Owner"}
    assert schemas["Thing"]["discriminator"] == {"propertyName": "kind"}
    assert schemas["Thing"]["properties"]["note"] == {"type": "string", "nullable": True}
    assert converted["components"]["parameters"]["limit"] == {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer", "minimum": 1, "default": 10},
    }
    assert "thingBody" not in converted["components"]["parameters"]  # a body: inlined as requestBody
    listing = operation(converted, "/things", "get")
    assert listing["parameters"][0] == {"$ref": "#/components/parameters/limit"}
    assert listing["responses"]["404"] == {"$ref": "#/components/responses/NotFound"}
    not_found = converted["components"]["responses"]["NotFound"]
    assert not_found["content"]["application/json"]["schema"]["properties"]["message"] == {"type": "string"}


def test_security_schemes() -> None:
    schemes = check(KITCHEN)["components"]["securitySchemes"]
    assert schemes["basicAuth"] == {"type": "http", "scheme": "basic"}
    assert schemes["key"] == {"type": "apiKey", "name": "X-Key", "in": "header"}
    assert schemes["implicit"]["flows"] == {
        "implicit": {"authorizationUrl": "https://a.example/auth", "scopes": {"r": "read"}}
    }
    assert schemes["password"]["flows"] == {"password": {"tokenUrl": "https://a.example/token", "scopes": {}}}
    assert schemes["app"]["flows"] == {
        "clientCredentials": {"tokenUrl": "https://a.example/token", "scopes": {"w": "w"}}
    }
    assert schemes["code"]["flows"] == {
        "authorizationCode": {
            "authorizationUrl": "https://a.example/auth",
            "tokenUrl": "https://a.example/token",  # the query goes, as the reference drops it
            "scopes": {"r": "read"},
        }
    }
    assert all("flow" not in s and "scopes" not in s for s in schemes.values())


def test_collection_formats_become_styles() -> None:
    converted = check(KITCHEN)
    listing = operation(converted, "/things", "get")
    assert parameter(listing, "csv") == {
        "name": "csv",
        "in": "query",
        "style": "form",
        "explode": False,
        "schema": {"type": "array", "items": {"type": "string"}},
    }
    assert parameter(listing, "ssv")["style"] == "spaceDelimited"
    multi = parameter(listing, "multi")
    assert multi["explode"] is True and "style" not in multi  # form is a query's default style
    assert parameter(listing, "tsv")["x-collectionFormat"] == "tsv"  # OpenAPI 3 has no tab-separated style
    pipes = converted["components"]["parameters"]["ids"]
    assert (pipes["style"], pipes["schema"]) == ("pipeDelimited", {"type": "array", "items": {"type": "integer"}})
    header = parameter(listing, "X-Trace")
    assert (header["style"], header["example"]) == ("simple", ["a"])
    assert parameter(listing, "sort")["deprecated"] is True
    path = converted["paths"]["/things/{id}"]["parameters"][0]
    assert path == {
        "name": "id",
        "in": "path",
        "style": "simple",
        "required": True,
        "schema": {"type": "array", "items": {"type": "integer"}},
    }


def test_body_parameter_becomes_request_body() -> None:
    converted = check(KITCHEN)
    create = operation(converted, "/things", "post")
    assert "parameters" not in create
    # The operation's consumes (json only) over the document's (json and xml).
    assert create["requestBody"] == {
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}},
        "required": True,
    }
    inherited = {k: v for k, v in KITCHEN.items() if k != "paths"}
    inherited["paths"] = {"/x": {"post": {"parameters": [{"in": "body", "name": "b", "schema": {"type": "string"}}]}}}
    body = check(inherited)["paths"]["/x"]["post"]["requestBody"]
    assert set(body["content"]) == {"application/json", "application/xml"}  # the document's consumes
    bare = {"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": inherited["paths"]}
    converted_bare = check(bare)
    assert set(converted_bare["paths"]["/x"]["post"]["requestBody"]["content"]) == {"application/json"}
    assert converted_bare["paths"]["/x"]["post"]["responses"] == {"default": {"description": "Default response"}}


def test_form_data_becomes_form_or_multipart_body() -> None:
    converted = check(KITCHEN)
    upload = operation(converted, "/things/{id}", "put")
    assert "parameters" not in upload
    assert upload["requestBody"] == {
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"description": "the file", "type": "string", "format": "binary"},
                        "label": {"type": "string", "x-extra": 1},
                    },
                    "required": ["file"],
                }
            }
        },
        "required": True,
    }
    form = operation(converted, "/things/{id}", "patch")["requestBody"]["content"]
    assert list(form) == ["application/x-www-form-urlencoded"]
    schema = form["application/x-www-form-urlencoded"]["schema"]
    assert schema["required"] == ["name"]
    assert schema["properties"]["colours"] == {"type": "array", "items": {"type": "string"}}
    # csv (the default) has no form-body equivalent by default: kept as an encoding (the reference drops it).
    assert form["application/x-www-form-urlencoded"]["encoding"] == {"colours": {"style": "form", "explode": False}}


def test_produces_and_response_schemas_become_content() -> None:
    converted = check(KITCHEN)
    ok = operation(converted, "/things", "get")["responses"]["200"]
    assert list(ok["content"]) == ["application/json", "text/csv", "text/plain"]
    assert ok["content"]["application/json"] == {
        "schema": {"$ref": "#/components/schemas/Thing_List"},
        "examples": {"response": {"value": [{"id": 1}]}},
    }
    assert ok["content"]["text/plain"] == {"examples": {"response": {"value": "1"}}}  # an example, not produced
    assert ok["headers"] == {
        "X-Rate": {"schema": {"type": "integer", "format": "int32"}},
        "X-Ids": {"style": "simple", "schema": {"type": "array", "items": {"type": "integer"}}},
    }
    download = operation(converted, "/things/{id}", "get")["responses"]["200"]
    assert download["content"] == {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    assert "content" not in operation(converted, "/things/{id}", "put")["responses"]["200"]


def test_rejects_what_is_not_swagger_2() -> None:
    with pytest.raises(ValueError, match=r"not a Swagger 2\.0 document"):
        convert({"openapi": "3.0.3", "info": {}, "paths": {}})


# ---- the real documents
def swagger_examples(documents: Documents) -> dict[str, dict[str, Any]]:
    examples = {}
    for fmt in ("json", "yaml"):
        for path in documents.examples("2.0", fmt):
            examples[f"{fmt}/{path.name}"] = yaml.safe_load(path.read_text())
    return examples


def test_every_swagger_example_converts(openapi_documents: Documents) -> None:
    examples = swagger_examples(openapi_documents)
    assert len(examples) == 14
    for name, document in examples.items():
        converted = check(document)
        assert converted["paths"].keys() == document["paths"].keys(), name


def normalised(document: dict[str, Any], reference: bool) -> dict[str, Any]:
    """A conversion with the known, deliberate differences between the reference's output and ours taken out."""
    document = copy.deepcopy(document)
    document.pop("openapi")
    bodies = document.get("components", {}).pop("requestBodies", {})  # the reference hoists shared bodies
    for item in document.get("paths", {}).values():
        for op in item.values():
            if not isinstance(op, dict):
                continue
            ref = op.get("requestBody", {}).get("$ref", "") if reference else ""
            if ref:
                op["requestBody"] = bodies[ref.rsplit("/", 1)[1]]
            for media in op.get("requestBody", {}).get("content", {}).values():
                media.pop("encoding", None)  # ours keeps form fields' collectionFormat
            if reference and "servers" in op:  # the reference repeats a server per document scheme
                op["servers"] = list({s["url"]: s for s in op["servers"]}.values())
    text = json.dumps(document, sort_keys=True)
    return dict(json.loads(text.replace(', "x-s2o-warning": "collectionFormat:tsv is no longer supported"', "")))


def test_same_as_the_reference_converter(node_tools: Documents) -> None:
    examples = swagger_examples(node_tools)
    examples["kitchen"] = KITCHEN
    references = reference_convert(list(examples.values()))
    for (name, document), reference in zip(examples.items(), references, strict=True):
        assert normalised(convert(document), False) == normalised(reference, True), name
