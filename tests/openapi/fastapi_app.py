"""A FastAPI service as people write them, serving its own generated /openapi.json (3.1, `anyOf` with null, a
pydantic body, a list query parameter, a header, a path parameter): each operation answers what it parsed, so
a test can tell what the service received through Toolplex.

    python -m tests.openapi.fastapi_app PORT
"""

from __future__ import annotations

import sys
from typing import Annotated

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Query
from pydantic import BaseModel

app = FastAPI(title="Inventory", version="1.2.0")


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []
    note: str | None = None


@app.get("/items/{item_id}", operation_id="get_item", summary="Read one item", tags=["items"])
def get_item(
    item_id: int,
    q: str | None = None,
    tags: Annotated[list[str] | None, Query()] = None,
    x_tenant: Annotated[str | None, Header()] = None,
) -> dict[str, object]:
    if item_id == 404:
        raise HTTPException(status_code=404, detail="No item 404")
    return {"item_id": item_id, "q": q, "tags": tags, "tenant": x_tenant}


@app.post("/items", operation_id="create_item", summary="Create an item", tags=["items"], status_code=201)
def create_item(item: Item) -> Item:
    return item


@app.get("/health")  # no operationId of its own making: FastAPI derives one
def health() -> dict[str, str]:
    return {"status": "ok"}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
