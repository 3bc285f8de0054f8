"""Loading documents: files and URLs, JSON and YAML, `$ref`s into other files (bounded), remote refs only when
allowed, Swagger 2.0 converted, unreadable documents as discovery errors, and GitHub's 1,000+ operations."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
import yaml

from adapters.openapi.backend import OpenApiBackend
from adapters.openapi.document import DocumentError, Documents, NeedDocument, parse
from adapters.openapi.settings import OpenApiBackendSettings
from gateway.backends import BackendContext
from gateway.catalog import Catalog
from gateway.errors import ErrorKind, GatewayError
from gateway.retrieval import retrieve
from gateway.routing import apply_routing
from tests.openapi.fixtures import Documents as Installed


def backend_for(spec: str, **settings: object) -> OpenApiBackend:
    return OpenApiBackend(
        OpenApiBackendSettings(name="t", kind="openapi", spec=spec, **settings),  # type: ignore[arg-type]
        BackendContext(),
    )


async def test_refs_into_other_files_of_the_document(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "pet.yaml").write_text(
        yaml.safe_dump({"Pet": {"type": "object", "properties": {"owner": {"$ref": "owner.json#/Owner"}}}})
    )
    (tmp_path / "schemas" / "owner.json").write_text(
        '{"Owner": {"type": "object", "properties": {"n": {"type": "string"}}}}'
    )
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({"limit": {"name": "limit", "in": "query", "schema": {"type": "integer"}}})
    )
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/pets": {
                "post": {
                    "operationId": "addPet",
                    "parameters": [{"$ref": "params.yaml#/limit"}],
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "schemas/pet.yaml#/Pet"}}}},
                    "responses": {},
                }
            }
        },
    }
    (tmp_path / "main.yaml").write_text(yaml.safe_dump(doc))
    backend = backend_for(str(tmp_path / "main.yaml"), url="http://127.0.0.1:9")
    [spec] = await backend.discover()
    await backend.close()
    assert spec.input_schema["properties"]["limit"] == {"type": "integer"}
    assert spec.input_schema["properties"]["owner"] == {"$ref": "#/$defs/Owner"}
    assert spec.input_schema["$defs"]["Owner"]["properties"] == {"n": {"type": "string"}}
    assert backend.warnings == ()


def test_refs_stay_within_the_document_unless_allowed(tmp_path: Path) -> None:
    main = str(tmp_path / "api" / "main.yaml")
    documents = Documents(main, {"a": 1})
    with pytest.raises(DocumentError, match="leaves the document's directory"):
        documents.target("../secret.yaml#/x", main, "/paths/x")
    with pytest.raises(DocumentError, match="is remote"):
        documents.target("https://elsewhere.example/s.json#/x", main, "/paths/x")
    with pytest.raises(NeedDocument):
        Documents(main, {}, remote_refs=True).target("https://elsewhere.example/s.json#/x", main, "/p")
    remote = Documents("https://api.example/openapi.json", {})
    with pytest.raises(NeedDocument) as need:
        remote.target("schemas.json#/Pet", remote.main, "/p")  # same origin: fetched
    assert need.value.url == "https://api.example/schemas.json"
    with pytest.raises(DocumentError, match="another host"):
        remote.target("https://evil.example/s.json#/x", remote.main, "/p")
    with pytest.raises(DocumentError, match="URLs only"):
        remote.target("file:///etc/passwd#/x", remote.main, "/p")
    remote.add("https://api.example/schemas.json", b'{"Pet": {"type": "object"}}')
    assert remote.target("schemas.json#/Pet", remote.main, "/p") == (
        "https://api.example/schemas.json#/Pet",
        {"type": "object"},
    )


def test_parse_names_the_place_of_a_syntax_error() -> None:
    with pytest.raises(DocumentError) as caught:
        parse(b"openapi: 3.0.0\npaths: [unclosed", "doc.yaml")
    assert str(caught.value).startswith("doc.yaml#: neither JSON nor YAML (line 3")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read it"),
        ("swagger: '1.2'\n", "not an OpenAPI 3 document"),
        ("[1, 2]", "the document is not an object"),
        ("openapi: 3.0.0\npaths: {x: [", "neither JSON nor YAML"),
    ],
)
async def test_an_unreadable_document_is_a_discovery_error(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "doc.yaml"
    if content is not None:
        path.write_text(content)
    backend = backend_for(str(path), url="http://127.0.0.1:9")
    with pytest.raises(GatewayError) as caught:
        await backend.discover()
    await backend.close()
    assert caught.value.failure.kind is ErrorKind.UPSTREAM_UNAVAILABLE
    assert caught.value.failure.can_retry
    assert str(path) in caught.value.failure.message and problem in caught.value.failure.message


@pytest.mark.skipif(importlib.util.find_spec("adapters.openapi.swagger2") is None, reason="no Swagger 2.0 converter")
async def test_swagger_2_is_converted_on_load(openapi_documents: Installed) -> None:
    backend = backend_for(str(openapi_documents.swagger20 / "json" / "petstore.json"))
    specs = await backend.discover()
    await backend.close()
    names = {spec.name for spec in specs}
    assert {"addPet", "getPetById", "uploadFile"} <= names
    assert backend.base_url in ("http://petstore.swagger.io/v2", "https://petstore.swagger.io/v2")  # its first scheme


async def test_every_example_document_loads(openapi_documents: Installed) -> None:
    """@readme/oas-examples' 3.0 and 3.1 documents: every operation usable (their security noted, never skipped)."""
    for version in ("3.0", "3.1"):
        for path in openapi_documents.examples(version):
            backend = backend_for(str(path), url="http://127.0.0.1:9")
            specs = await backend.discover()
            await backend.close()
            Catalog(apply_routing(specs, backend.settings))  # valid names, no duplicates
            skipped = [w for w in backend.warnings if "#/" in w]
            assert skipped == [], path


async def test_githubs_document_loads_whole_and_is_searchable(openapi_documents: Installed) -> None:
    """GitHub's REST API (1,000+ operations): none unusable; the search finds an operation by what it does.
    Times are printed, never asserted (`make bench` measures)."""
    backend = backend_for(str(openapi_documents.github), toolkit="GitHub")
    started = time.perf_counter()
    specs = await backend.discover()
    loaded = time.perf_counter() - started
    await backend.close()
    assert len(specs) > 1000
    assert backend.warnings == ()
    assert backend.base_url == "https://api.github.com"
    started = time.perf_counter()
    catalog = Catalog(apply_routing(specs, backend.settings))
    listed = catalog.listing(None) if hasattr(catalog, "listing") else list(catalog.all_versions())
    built = time.perf_counter() - started
    print(f"\nGitHub: {len(specs)} operations loaded in {loaded:.3f} s; catalog of {len(listed)} in {built:.3f} s")
    found = [spec.name for spec in await retrieve(catalog, "create an issue in a repository", 5, None)]
    assert "issues_create" in found
    found = [spec.name for spec in await retrieve(catalog, "list the releases of a repository", 5, None)]
    assert "repos_list_releases" in found
