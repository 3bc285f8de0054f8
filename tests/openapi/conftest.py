"""Module-scoped fixtures on the installed OpenAPI documents, Prism and the echo API (tests/openapi/fixtures.py).

They skip, saying why, only when the npm packages (or node) are missing: tests/openapi/install_openapi_fixtures.sh
installs them (make test does).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.openapi.fixtures import Documents, EchoApp, Prism, documents_dir, missing_reason


@pytest.fixture(scope="module")
def openapi_documents() -> Documents:
    """Where the installed documents are (oas-examples 2.0/3.0/3.1, GitHub's)."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    return documents_dir()


@pytest.fixture(scope="module")
def node_tools() -> Documents:
    """As openapi_documents, and node with Prism and swagger2openapi there too."""
    reason = missing_reason(node=True)
    if reason:
        pytest.skip(reason)
    return documents_dir()


@pytest.fixture(scope="module")
def petstore_prism(node_tools: Documents) -> Iterator[Prism]:
    """Prism mocking oas-examples' 3.0 petstore.json (its examples, no request errors), for the module."""
    with Prism(node_tools.openapi30 / "json" / "petstore.json") as prism:
        yield prism


@pytest.fixture(scope="module")
def echo_app() -> Iterator[EchoApp]:
    """The echo API (tests/openapi/echo_app.py) as a uvicorn process, for the module (needs no npm package)."""
    with EchoApp() as echo:
        yield echo
