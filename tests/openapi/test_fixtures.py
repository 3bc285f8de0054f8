"""The OpenAPI test fixtures start and answer: Prism mocks a real document, the echo API echoes."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from tests.openapi.echo_app import decode_echo_header
from tests.openapi.fixtures import Documents, EchoApp, Prism, operation_count, unresolved_refs, validate_spec


def test_documents_are_installed(openapi_documents: Documents) -> None:
    assert len(openapi_documents.examples("2.0")) == 7
    assert len(openapi_documents.examples("3.0")) >= 40
    assert len(openapi_documents.examples("3.1", "yaml")) >= 10
    github = json.loads(openapi_documents.github.read_text())
    assert github["openapi"].startswith("3.")
    assert operation_count(github) > 1000


def test_prism_mocks_an_example_document(petstore_prism: Prism) -> None:
    headers = {"api_key": "k", "accept": "application/json"}
    pet = httpx.get(f"{petstore_prism.base}/pet/1", headers=headers, timeout=10)
    assert pet.status_code == 200
    assert pet.headers["content-type"].startswith("application/json")
    assert {"name", "photoUrls"} <= set(pet.json())
    missing_key = httpx.get(f"{petstore_prism.base}/pet/1", timeout=10)  # the document asks for a key
    assert missing_key.status_code == 401
    assert httpx.get(f"{petstore_prism.base}/nowhere", timeout=10).status_code == 404


def test_prism_starts_and_leaves_nothing(node_tools: Documents) -> None:
    with Prism(node_tools.openapi31 / "json" / "petstore.json", dynamic=True, seed="1") as prism:
        process = prism.process
        assert process is not None
        answer = httpx.get(f"{prism.base}/store/inventory", headers={"api_key": "k"}, timeout=10)
        assert answer.status_code == 200
    assert process.poll() is not None
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{prism.base}/store/inventory", timeout=2)


def test_echo_app_serves_a_valid_document(echo_app: EchoApp) -> None:
    response = httpx.get(echo_app.document_url, timeout=10)
    assert response.status_code == 200
    document = response.json()
    if validate_spec is not None:  # openapi-spec-validator, where installed (a test dependency)
        validate_spec(document)
    assert document["openapi"] == "3.0.3"
    assert unresolved_refs(document) == []
    assert document["servers"] == [{"url": echo_app.api}]
    assert operation_count(document) == 16
    styles = {
        (p["in"], p.get("style"), p.get("explode"))
        for item in document["paths"].values()
        for op in item.values()
        for p in op.get("parameters", [])
    }
    assert {("path", "simple", False), ("path", "label", True), ("path", "matrix", True)} <= styles
    assert {("query", "form", False), ("query", "spaceDelimited", False), ("query", "deepObject", True)} <= styles
    assert {("header", None, None), ("cookie", None, None)} <= styles


def test_echo_app_echoes_the_request_as_received(echo_app: EchoApp) -> None:
    url = f"{echo_app.api}/path/label/.a%2Fb/.x.y/.r=1.g=2?arr_flat=1,2&x=%20"
    response = httpx.get(url, headers={"X-Tags": "a,b"}, cookies={"session": "s1"}, timeout=10)
    assert response.status_code == 200
    echo = response.json()
    assert echo["operation"] == "pathLabel"
    assert echo["method"] == "GET"
    assert echo["path"] == "/api/path/label/.a%2Fb/.x.y/.r=1.g=2"
    assert echo["query"] == "arr_flat=1,2&x=%20"
    assert ["x-tags", "a,b"] in echo["headers"]
    assert echo["cookies"] == {"session": "s1"}
    assert decode_echo_header(response.headers["x-echo"])["path"] == echo["path"]

    files = {"file": ("a.bin", b"\x00\xff", "application/octet-stream")}
    upload = httpx.post(f"{echo_app.api}/body/multipart", files=files, data={"note": "hi"}, timeout=10).json()
    assert upload["operation"] == "bodyMultipart"
    assert upload["content_type"].startswith("multipart/form-data; boundary=")
    assert b"\x00\xff" in base64.b64decode(upload["body"])


def test_echo_app_answers_text_binary_empty_and_problems(echo_app: EchoApp) -> None:
    text = httpx.post(f"{echo_app.api}/text", content="héllo", headers={"content-type": "text/plain"}, timeout=10)
    assert (text.status_code, text.text, text.headers["content-type"]) == (200, "héllo", "text/plain; charset=utf-8")
    download = httpx.get(f"{echo_app.api}/files/x.bin?size=300", timeout=10)
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.content == bytes(i % 256 for i in range(300))
    deleted = httpx.delete(f"{echo_app.api}/items/7", timeout=10)
    assert deleted.status_code == 204
    assert decode_echo_header(deleted.headers["x-echo"])["operation"] == "deleteItem"
    problem = httpx.get(f"{echo_app.api}/problem?status=409", timeout=10)
    assert problem.status_code == 409
    assert problem.headers["content-type"] == "application/problem+json"
    assert problem.json()["echo"]["query"] == "status=409"
    assert httpx.get(f"{echo_app.api}/nowhere", timeout=10).status_code == 404
    assert httpx.post(f"{echo_app.api}/query/form", timeout=10).status_code == 405
