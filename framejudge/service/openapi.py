"""The OpenAPI document as generated clients read it: one name per schema."""

from __future__ import annotations

import json
from typing import Any

# Two classes of the same name are told apart by pydantic with their modules' paths; the document
# gives them names of their own (a generator drops what it cannot name).
SCHEMA_NAMES = {
    "framejudge__calibration__bootstrap__Interval": "Interval",
    "framejudge__leaderboard__board__Interval": "BoardInterval",
    "framejudge__schema__TaskType": "TaskType",
    "framejudge__rubrics__model__TaskType": "RubricTaskType",
}
REF = "#/components/schemas/"


def unique_names(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its components renamed by SCHEMA_NAMES, and every reference to them."""
    components = schema.get("components", {}).get("schemas", {})
    renames = {old: new for old, new in SCHEMA_NAMES.items() if old in components}
    if not renames:
        return schema
    clash = sorted(new for old, new in renames.items() if new in components and new not in renames)
    if clash:
        raise RuntimeError(f"OpenAPI schema names {clash} are taken twice")
    text = json.dumps(schema)
    for old, new in renames.items():
        text = text.replace(json.dumps(REF + old), json.dumps(REF + new))
    renamed = json.loads(text)
    schemas = renamed["components"]["schemas"]
    for old, new in renames.items():
        schemas[old]["title"] = new  # what generators name a schema's class by
    renamed["components"]["schemas"] = {renames.get(name, name): body for name, body in schemas.items()}
    return renamed
