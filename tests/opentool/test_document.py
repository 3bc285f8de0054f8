"""Seed 001 document parsing: required fields, `#/schemas/Name` references, errors with their place."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from adapters.opentool.document import DocumentError, parse_document

DOC: dict[str, Any] = {
    "opentool": "1.0.0",
    "info": {"title": "Files", "version": "1.0.0"},
    "functions": [
        {
            "name": "write-file",
            "description": "Write a file",
            "parameters": [
                {"name": "path", "schema": {"type": "string"}, "required": True},
                {"name": "meta", "schema": {"$ref": "#/schemas/Meta"}, "required": False},
                {"name": "lines", "schema": {"type": "array", "items": {"type": "string"}}, "required": False},
            ],
            "return": None,
        }
    ],
    "schemas": {
        "Meta": {"type": "object", "properties": {"owner": {"$ref": "#/schemas/Owner"}}},
        "Owner": {"type": "string"},
    },
}


def test_parses_and_resolves_nested_references() -> None:
    doc = parse_document(DOC)
    [fn] = doc.functions
    assert fn.name == "write-file" and fn.output_schema is None
    assert fn.input_schema == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "meta": {"type": "object", "properties": {"owner": {"type": "string"}}},
            "lines": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["path"],
    }


def mutated(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    change(doc)
    return doc


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d.pop("opentool"), "(document)"),
        (lambda d: d["info"].pop("title"), "info"),
        (lambda d: d["info"].pop("version"), "info"),
        (lambda d: d.pop("functions"), "(document)"),
        (lambda d: d["functions"][0].pop("description"), "functions[0]"),
        (lambda d: d["functions"][0].pop("parameters"), "functions[0]"),
        (lambda d: d["functions"][0].__setitem__("name", "bad name!"), "functions[0].name"),
        (lambda d: d["functions"][0]["parameters"][0].pop("required"), "functions[0].parameters[0]"),
        (lambda d: d["functions"][0]["parameters"][0].pop("schema"), "functions[0].parameters[0]"),
        (lambda d: d["functions"][0]["parameters"][0]["schema"].pop("type"), "functions[0].parameters[0].schema"),
        (lambda d: d["functions"][0]["parameters"][2]["schema"].pop("items"), "functions[0].parameters[2].schema"),
        (lambda d: d["functions"][0]["parameters"][1]["schema"].update({"$ref": "#/schemas/Nope"}), "parameters[1]"),
        (lambda d: d["functions"][0]["parameters"][1]["schema"].update({"$ref": "other.json#/X"}), "parameters[1]"),
        (lambda d: d["schemas"].update({"Owner": {"$ref": "#/schemas/Meta"}}), "schemas."),
        (lambda d: d["functions"][0].__setitem__("return", {"schema": {"type": "string"}}), "functions[0].return"),
        (lambda d: d.update({"server": {}}), "server"),
    ],
)
def test_every_required_field_is_checked(change: Any, where: str) -> None:
    with pytest.raises(DocumentError) as info:
        parse_document(mutated(change))
    assert where in str(info.value)


def test_not_an_object() -> None:
    with pytest.raises(DocumentError):
        parse_document([])
