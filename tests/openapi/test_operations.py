"""Operations as tools: names, the input schema (parameters, body, the collision rule, 3.0 and 3.1 schema words,
`$ref`s under `$defs`), the output schema, filters, deprecation, and unusable operations named and skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters.openapi.backend import OpenApiBackend
from adapters.openapi.operations import Operation, tool_name
from adapters.openapi.settings import OpenApiBackendSettings
from gateway.backends import BackendContext
from gateway.model import ToolSpec
from gateway.validation import SchemaValidator

PET = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "id": {"type": "integer", "format": "int64"},
        "name": {"type": "string", "example": "Rex"},
        "tag": {"type": "string", "nullable": True},
        "status": {"type": "string", "enum": ["available", "sold"], "default": "available"},
        "owner": {"$ref": "#/components/schemas/Owner"},
        "parent": {"$ref": "#/components/schemas/Pet"},
    },
}


def document(paths: dict[str, Any], version: str = "3.0.3", **extra: Any) -> dict[str, Any]:
    return {
        "openapi": version,
        "info": {"title": "T", "version": "2.1.0"},
        "paths": paths,
        "components": {
            "schemas": {
                "Pet": PET,
                "Owner": {"type": "object", "properties": {"name": {"type": "string"}}, "nullable": True},
            }
        },
        **extra,
    }


async def discover(tmp_path: Path, doc: dict[str, Any], **settings: Any) -> tuple[dict[str, ToolSpec], OpenApiBackend]:
    path = tmp_path / "doc.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    backend = OpenApiBackend(
        OpenApiBackendSettings(name="t", kind="openapi", spec=str(path), url="http://127.0.0.1:9", **settings),
        BackendContext(),
    )
    try:
        specs = await backend.discover()
    finally:
        await backend.close()
    return {spec.name: spec for spec in specs}, backend


def test_names() -> None:
    assert tool_name("repos/get-content", "GET", "/x") == "repos_get_content"
    assert tool_name("listPets", "GET", "/pets") == "listPets"
    assert tool_name(None, "GET", "/pets/{petId}/toys") == "get_pets_by_petId_toys"
    assert tool_name("", "POST", "/v1/users.json") == "post_v1_users_json"
    assert tool_name("---", "DELETE", "/") == "delete"


async def test_long_and_repeated_names_stay_valid_and_distinct(tmp_path: Path) -> None:
    long_id = "a" * 80
    doc = document(
        {
            "/a": {
                "get": {"operationId": long_id, "responses": {}},
                "put": {"operationId": long_id + "b", "responses": {}},
            },
            "/b": {"get": {"operationId": "same", "responses": {}}, "put": {"operationId": "same", "responses": {}}},
        }
    )
    tools, _ = await discover(tmp_path, doc, toolkit="Toolkit")
    assert sorted(tools) == sorted(tools, key=str)
    assert "same" in tools and "same_2" in tools
    long_names = [name for name in tools if name.startswith("aaa")]
    assert len(long_names) == 2 and len(set(long_names)) == 2
    assert all(len(f"Toolkit_{name}") <= 64 for name in long_names)


async def test_input_schema_from_parameters_and_body(tmp_path: Path) -> None:
    doc = document(
        {
            "/pets/{petId}": {
                "parameters": [{"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}}],
                "put": {
                    "operationId": "updatePet",
                    "summary": "Update a pet",
                    "description": "Replaces the pet.",
                    "tags": ["pets"],
                    "parameters": [
                        {"name": "dryRun", "in": "query", "schema": {"type": "boolean", "default": False}},
                        {"name": "X-Trace", "in": "header", "description": "A trace id", "schema": {"type": "string"}},
                        {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                        {"name": "session", "in": "cookie", "schema": {"type": "string"}, "deprecated": True},
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}},
                    },
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}},
                        },
                        "default": {"description": "error"},
                    },
                },
            }
        }
    )
    tools, _ = await discover(tmp_path, doc)
    spec = tools["updatePet"]
    schema = spec.input_schema
    assert list(schema["properties"]) == [
        "petId",
        "dryRun",
        "X-Trace",
        "session",
        "id",
        "name",
        "tag",
        "status",
        "owner",
        "parent",
    ]
    assert schema["required"] == ["petId", "name"]
    assert schema["properties"]["dryRun"] == {"type": "boolean", "default": False}
    assert schema["properties"]["X-Trace"]["description"] == "A trace id"
    assert schema["properties"]["session"]["deprecated"] is True
    assert schema["properties"]["tag"] == {"type": ["string", "null"]}  # 3.0 nullable
    assert schema["properties"]["name"] == {"type": "string", "examples": ["Rex"]}
    assert schema["properties"]["status"] == {"type": "string", "enum": ["available", "sold"], "default": "available"}
    assert schema["properties"]["owner"] == {"$ref": "#/$defs/Owner"}
    assert set(schema["$defs"]) == {"Owner", "Pet"}  # Pet through `parent`: recursive, kept as a $ref
    assert schema["$defs"]["Owner"]["type"] == ["object", "null"]
    assert spec.output_schema is not None and spec.output_schema["type"] == "object"  # the root $ref inlined
    assert spec.description == "Update a pet\n\nReplaces the pet."
    assert spec.tags == ("pets", "idempotent") and spec.side_effects is True
    assert spec.version == "2.1.0"
    binding: Operation = spec.binding
    assert [(p.arg, p.location) for p in binding.params] == [
        ("petId", "path"),
        ("dryRun", "query"),
        ("X-Trace", "header"),
        ("session", "cookie"),
    ]
    assert binding.body is not None and binding.body.arg is None
    validator = SchemaValidator(schema)
    assert validator.errors({"petId": 1, "name": "Rex", "parent": {"name": "Mum"}}) == {}
    assert validator.errors({"petId": 1, "name": "Rex", "tag": None}) == {}
    assert "petId" in validator.errors({"name": "Rex"})


async def test_collisions_put_the_body_under_its_own_argument(tmp_path: Path) -> None:
    body = {"content": {"application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string"}}}}}}
    doc = document(
        {
            "/things/{id}": {
                "post": {
                    "operationId": "collides",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                        {"name": "id", "in": "query", "schema": {"type": "string"}},
                    ],
                    "requestBody": body,
                    "responses": {},
                }
            },
            "/list": {
                "post": {
                    "operationId": "array",
                    "parameters": [{"name": "body", "in": "query", "schema": {"type": "string"}}],
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "array"}}}},
                    "responses": {},
                }
            },
        }
    )
    tools, _ = await discover(tmp_path, doc)
    collides = tools["collides"]
    assert list(collides.input_schema["properties"]) == ["id", "query_id", "body"]
    assert collides.binding.body.arg == "body"
    assert (
        "The request body is the argument `body` (the body's id share names with parameters)." in collides.description
    )
    array = tools["array"]
    assert list(array.input_schema["properties"]) == ["body", "request_body"]
    assert array.input_schema["required"] == ["request_body"]
    assert array.binding.body.arg == "request_body"


async def test_openapi_31_schemas(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "maybe": {"type": ["string", "null"]},
            "choice": {"oneOf": [{"type": "integer"}, {"$ref": "#/components/schemas/Owner"}]},
            "all": {"allOf": [{"$ref": "#/components/schemas/Owner"}, {"required": ["name"]}]},
            "bounded": {"type": "number", "exclusiveMinimum": 0},
            "file": {"type": "string", "contentMediaType": "image/png"},
        },
    }
    doc = document(
        {
            "/x": {
                "post": {
                    "operationId": "x",
                    "requestBody": {"content": {"application/json": {"schema": schema}}},
                    "responses": {},
                }
            }
        },
        version="3.1.0",
    )
    doc["components"]["schemas"]["Owner"] = {"type": "object", "properties": {"name": {"type": "string"}}}
    tools, _ = await discover(tmp_path, doc)
    properties = tools["x"].input_schema["properties"]
    assert properties["maybe"] == {"type": ["string", "null"]}
    assert properties["choice"] == {"oneOf": [{"type": "integer"}, {"$ref": "#/$defs/Owner"}]}
    assert properties["all"]["allOf"][0] == {"$ref": "#/$defs/Owner"}
    assert properties["bounded"] == {"type": "number", "exclusiveMinimum": 0}


async def test_30_boolean_bounds_and_nullable_refs(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 1, "exclusiveMinimum": True, "maximum": 5, "exclusiveMaximum": False},
            "owner": {"allOf": [{"$ref": "#/components/schemas/Owner"}], "nullable": True},
            "colour": {"type": "string", "enum": ["red"], "nullable": True},
        },
    }
    doc = document(
        {
            "/x": {
                "post": {
                    "operationId": "x",
                    "requestBody": {"content": {"application/json": {"schema": schema}}},
                    "responses": {},
                }
            }
        }
    )
    tools, _ = await discover(tmp_path, doc)
    properties = tools["x"].input_schema["properties"]
    assert properties["n"] == {"type": "number", "exclusiveMinimum": 1, "maximum": 5}
    assert properties["owner"] == {"anyOf": [{"allOf": [{"$ref": "#/$defs/Owner"}]}, {"type": "null"}]}
    assert properties["colour"] == {"type": ["string", "null"], "enum": ["red", None]}


async def test_multipart_files_and_binary_bodies(tmp_path: Path) -> None:
    multipart = {
        "type": "object",
        "properties": {"file": {"type": "string", "format": "binary"}, "note": {"type": "string"}},
        "required": ["file"],
    }
    doc = document(
        {
            "/upload": {
                "post": {
                    "operationId": "upload",
                    "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": multipart}}},
                    "responses": {},
                }
            },
            "/raw": {
                "put": {
                    "operationId": "raw",
                    "requestBody": {"content": {"application/octet-stream": {}}},
                    "responses": {},
                }
            },
        }
    )
    tools, _ = await discover(tmp_path, doc)
    upload = tools["upload"]
    assert upload.binding.body.files == frozenset({"file"})
    assert upload.input_schema["required"] == ["file"]
    assert SchemaValidator(upload.input_schema).errors({"file": {"workspace_file": "a.png"}}) == {}
    assert SchemaValidator(upload.input_schema).errors({"file": "aGk="}) == {}
    raw = tools["raw"]
    assert raw.binding.body.arg == "body" and raw.binding.body.kind == "binary"


async def test_filters_by_operation_id_tag_and_method(tmp_path: Path) -> None:
    def op(operation_id: str, tag: str) -> dict[str, Any]:
        return {"operationId": operation_id, "tags": [tag], "responses": {}}

    doc = document(
        {
            "/pets": {"get": op("listPets", "pets"), "post": op("createPet", "pets")},
            "/users": {"get": op("users/list", "users"), "delete": op("users/delete", "admin")},
        }
    )
    tools, _ = await discover(tmp_path, doc, include=["tag:pets", "users/*"], exclude=["method:DELETE"])
    assert sorted(tools) == ["createPet", "listPets", "users_list"]
    tools, _ = await discover(tmp_path, doc, include=["method:get"], exclude=["path:/users"])
    assert sorted(tools) == ["listPets"]


async def test_deprecated_operations_say_so(tmp_path: Path) -> None:
    doc = document({"/old": {"get": {"operationId": "old", "summary": "Old", "deprecated": True, "responses": {}}}})
    tools, _ = await discover(tmp_path, doc)
    assert tools["old"].description.startswith("Deprecated.")
    assert "deprecated" in tools["old"].tags and tools["old"].side_effects is False


async def test_unusable_operations_are_named_and_skipped(tmp_path: Path) -> None:
    doc = document(
        {
            "/good": {"get": {"operationId": "good", "responses": {}}},
            "/missing": {
                "post": {
                    "operationId": "missingRef",
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Nope"}}}},
                    "responses": {},
                }
            },
            "/badstyle": {
                "get": {
                    "operationId": "badStyle",
                    "parameters": [{"name": "q", "in": "query", "style": "matrix", "schema": {"type": "string"}}],
                    "responses": {},
                }
            },
            "/x/{a}": {
                "get": {"operationId": "strayParam", "parameters": [{"name": "b", "in": "path", "required": True}]}
            },
        }
    )
    tools, backend = await discover(tmp_path, doc)
    assert sorted(tools) == ["good"]
    where = str(tmp_path / "doc.yaml")
    assert backend.warnings == (
        f"{where}#/paths/~1missing/post/requestBody/content/application~1json/schema: "
        "$ref '#/components/schemas/Nope': not found (no 'Nope')",
        f"{where}#/paths/~1badstyle/get/parameters/0: style 'matrix' is not defined for query parameters",
        f"{where}#/paths/~1x~1{{a}}/get/parameters/0: path parameter 'b' is not in the path '/x/{{a}}'",
    )
    health = await backend.health()
    assert health.warnings == backend.warnings


async def test_json_documents_and_yaml_dates(tmp_path: Path) -> None:
    doc = document(
        {
            "/d": {
                "get": {
                    "operationId": "d",
                    "parameters": [
                        {"name": "since", "in": "query", "schema": {"type": "string", "default": "2024-01-01"}}
                    ],
                    "responses": {},
                }
            }
        }
    )
    (tmp_path / "doc.json").write_text(json.dumps(doc))
    text = yaml.safe_dump(doc).replace("'2024-01-01'", "2024-01-01")
    (tmp_path / "doc.yaml").write_text(text)
    for name in ("doc.json", "doc.yaml"):
        backend = OpenApiBackend(
            OpenApiBackendSettings(name="t", kind="openapi", spec=str(tmp_path / name), url="http://127.0.0.1:9"),
            BackendContext(),
        )
        specs = await backend.discover()
        await backend.close()
        assert specs[0].input_schema["properties"]["since"]["default"] == "2024-01-01"  # a string, not a date


@pytest.mark.parametrize("server", ["https://api.example.com/v1", "https://{region}.example.com/{base}"])
async def test_the_documents_server_is_the_base_url(tmp_path: Path, server: str) -> None:
    doc = document(
        {"/d": {"get": {"operationId": "d", "responses": {}}}},
        servers=[{"url": server, "variables": {"region": {"default": "eu"}, "base": {"default": "v1"}}}],
    )
    path = tmp_path / "doc.yaml"
    path.write_text(yaml.safe_dump(doc))
    backend = OpenApiBackend(
        OpenApiBackendSettings(name="t", kind="openapi", spec=str(path), server_variables={"region": "us"}),
        BackendContext(),
    )
    await backend.discover()
    await backend.close()
    assert backend.base_url == server.replace("{region}", "us").replace("{base}", "v1")


async def test_security_plans_follow_operation_over_global_and_the_first_alternative_met(tmp_path: Path) -> None:
    doc = document(
        {
            "/a": {"get": {"operationId": "globalOne", "responses": {}}},
            "/b": {"get": {"operationId": "ownOne", "security": [{"oidc": ["read"]}, {"key": []}], "responses": {}}},
            "/c": {"get": {"operationId": "open", "security": [], "responses": {}}},
            "/d": {"get": {"operationId": "secretOne", "security": [{"basic": []}], "responses": {}}},
        },
        security=[{"missing": []}, {"key": []}],
    )
    doc["components"]["securitySchemes"] = {
        "key": {"type": "apiKey", "in": "query", "name": "k"},
        "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://id.example/.well-known/openid-configuration"},
        "basic": {"type": "http", "scheme": "basic"},
    }
    credentials = {"key": {"value": "v"}, "basic": {"username": "u", "secret": "pw"}}
    oauth = {"client_id": "c", "client_secret": "s", "authorization_server": "https://id.example"}
    tools, backend = await discover(tmp_path, doc, credentials=credentials, oauth=oauth)
    assert [s.name for s in tools["globalOne"].binding.plan.schemes] == ["key"]  # `missing` is not declared
    assert tools["ownOne"].binding.plan.oauth and tools["ownOne"].binding.plan.scopes == ("read",)
    assert tools["open"].binding.plan.schemes == () and not tools["open"].binding.plan.oauth
    assert tools["secretOne"].requirements.secrets == ("pw",)  # handed in by the pipeline from `secrets:`
    assert backend.warnings == (
        f"{tmp_path / 'doc.yaml'}: security names undeclared scheme(s) missing: those requirements cannot be met",
    )
    with pytest.raises(Exception, match="no such security scheme"):
        await discover(tmp_path, doc, credentials={"nope": {"value": "v"}})
