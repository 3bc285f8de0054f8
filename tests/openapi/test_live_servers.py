"""`kind: openapi` in front of live servers described by their own documents, called through every front:

- a FastAPI service (tests/openapi/fastapi_app.py), its generated /openapi.json read from the service itself;
- npm `@stoplight/prism-cli` mocking a published document (`@readme/oas-examples` 3.0 petstore), its API key
  header required, as the document says.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.front_clients import FRONTS
from tests.openapi.fixtures import Documents, Prism
from tests.support import ROOT, free_port, served_gateway, stop, wait_for_http

fastapi = pytest.importorskip("fastapi", reason="FastAPI is a test dependency (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def inventory() -> Iterator[str]:
    """The FastAPI service as a real uvicorn process on loopback."""
    import subprocess

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.openapi.fastapi_app", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/health", process)
        yield base
    finally:
        stop(process)


@pytest.fixture(scope="module")
def gateway(
    inventory: str, petstore_prism: Prism, tmp_path_factory: pytest.TempPathFactory, node_tools: Documents
) -> Iterator[str]:
    config = tmp_path_factory.mktemp("live") / "gateway.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            backends:
              - name: inventory
                kind: openapi
                spec: {inventory}/openapi.json
                url: {inventory}
                toolkit: Inventory
              - name: petstore
                kind: openapi
                spec: {node_tools.openapi30 / "json" / "petstore.json"}
                url: {petstore_prism.base}
                toolkit: Pets
                include: [getPetById, getInventory]  # findPetsByStatus asks for an OAuth2 implicit token
                credentials: {{api_key: {{value: "${{PET_KEY}}"}}}}
            """
        )
    )
    with served_gateway(config, env={"PET_KEY": "pet-key-1"}) as (base, _process):
        yield base


def names(base: str) -> set[str]:
    return {f["name"] for f in httpx.get(f"{base}/opentool/load", timeout=20).json()["functions"]}


def test_the_services_own_document_gives_one_tool_per_operation(gateway: str) -> None:
    listed = names(gateway)
    assert {"Inventory_get_item", "Inventory_create_item", "Pets_getPetById", "Pets_getInventory"} <= listed
    assert any(name.startswith("Inventory_health") for name in listed)  # FastAPI's derived operationId


@pytest.mark.parametrize("front", FRONTS)
def test_a_fastapi_service_receives_each_argument_where_its_document_says(gateway: str, front: str) -> None:
    with httpx.Client(base_url=gateway, timeout=20) as http:
        read = FRONTS[front](
            http, "Inventory_get_item", {"item_id": 7, "q": "blue", "tags": ["a", "b"], "x-tenant": "acme"}
        )
        assert read.ok, read
        assert read.value == {"item_id": 7, "q": "blue", "tags": ["a", "b"], "tenant": "acme"}
        made = FRONTS[front](http, "Inventory_create_item", {"name": "pen", "price": 1.5, "tags": ["office"]})
        assert made.ok and made.value == {"name": "pen", "price": 1.5, "tags": ["office"], "note": None}, made
        missing = FRONTS[front](http, "Inventory_get_item", {"item_id": 404})
        assert not missing.ok, missing


@pytest.mark.parametrize("front", FRONTS)
def test_prism_mocking_a_published_document_is_called_with_its_api_key(gateway: str, front: str) -> None:
    with httpx.Client(base_url=gateway, timeout=20) as http:
        pet = FRONTS[front](http, "Pets_getPetById", {"petId": 1})
        assert pet.ok, pet
        assert {"name", "photoUrls"} <= set(pet.value)  # Prism answers the document's example: it got the key
        inventory = FRONTS[front](http, "Pets_getInventory", {})
        assert inventory.ok and isinstance(inventory.value, dict), inventory
