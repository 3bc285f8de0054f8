"""The published JSON Schema of the configuration, generated from the settings models.

`toolplex schema` prints it and `config/schema.json` is that output, so the
schema editors and CI check against can never drift from what the gateway
accepts. The models stay the authority: cross-field rules (`model_validator`s)
are checked by the loader even where JSON Schema cannot express them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from gateway.config.models import root_model

SCHEMA_ID = "https://toolplex.dev/schema/gateway.json"
SCHEMA_TITLE = "Toolplex gateway configuration"


class Generator(GenerateJsonSchema):
    """Pydantic's generator, with two changes that make the schema say exactly what the models accept.

    Field titles derived from key names are left out (they repeat the key), and a
    mapping whose keys must match a pattern says so with `propertyNames`: pydantic's
    `patternProperties` would let a key that does not match through unchecked.
    """

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def dict_schema(self, schema: Any) -> dict[str, Any]:
        generated = super().dict_schema(schema)
        patterns = generated.pop("patternProperties", None)
        if patterns:
            [(pattern, values)] = patterns.items()
            generated["propertyNames"] = {"pattern": pattern}
            generated["additionalProperties"] = values
        return generated


def json_schema() -> dict[str, Any]:
    """The configuration's JSON Schema (Draft 2020-12) for the adapters installed here."""
    generated = root_model().model_json_schema(schema_generator=Generator)
    generated.pop("title", None)
    return {"$schema": Generator.schema_dialect, "$id": SCHEMA_ID, "title": SCHEMA_TITLE, **generated}


def schema_text() -> str:
    """`json_schema()` as `config/schema.json` holds it."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
