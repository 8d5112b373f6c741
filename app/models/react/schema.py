"""A bound tool as the ReAct protocol sees it (name, description, argument JSON schema), and the
check of parsed arguments against that schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool

_JSON_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class ReActTool:
    """What the protocol needs of a bound tool: name, description and argument JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    @classmethod
    def from_tool(cls, tool: Any) -> ReActTool:
        function = convert_to_openai_tool(tool)["function"]
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        return cls(function["name"], function.get("description", ""), schema)


def schema_errors(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Violations of the JSON-schema subset tools use (type, enum, required, properties, items)."""
    label = where or "arguments"
    if _matches_no_alternative(value, schema, where):
        return [f"{label}: {json.dumps(value)} does not match any allowed form"]
    errors = [e for sub in schema.get("allOf", []) for e in schema_errors(value, sub, where)]
    if "enum" in schema and value not in schema["enum"]:
        allowed = json.dumps(schema["enum"], ensure_ascii=False)
        return [*errors, f"{label}: must be one of {allowed}"]
    expected = schema.get("type")
    if expected and not _has_type(value, expected):
        return [*errors, f"{label}: expected {expected}, got {json_type(value)}"]
    if isinstance(value, dict):
        errors += _object_errors(value, schema, where)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{label}[{index}]")
    return errors


def _matches_no_alternative(value: Any, schema: dict[str, Any], where: str) -> bool:
    """The schema offers alternatives (anyOf, oneOf) and the value fits none of them."""
    return any(
        key in schema and all(schema_errors(value, s, where) for s in schema[key])
        for key in ("anyOf", "oneOf")
    )


def _object_errors(value: dict, schema: dict[str, Any], where: str) -> list[str]:
    """Missing required arguments, then each argument against its property (or the schema's
    additionalProperties)."""
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    missing = [n for n in schema.get("required", []) if n not in value]
    errors = [f"{_join(where, n)}: required argument is missing" for n in missing]
    for name, item in value.items():
        if name in properties:
            errors += schema_errors(item, properties[name], _join(where, name))
        elif extra is False:
            errors.append(f"{_join(where, name)}: unknown argument")
        elif isinstance(extra, dict):
            errors += schema_errors(item, extra, _join(where, name))
    return errors


def _has_type(value: Any, expected: str | list[str]) -> bool:
    for name in [expected] if isinstance(expected, str) else expected:
        if isinstance(value, bool) and name != "boolean":
            continue  # bool is an int subclass in Python, not in JSON
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, _JSON_TYPES.get(name, ())):
            return True
    return False


def json_type(value: Any) -> str:
    """The JSON type of `value` as error messages name it ("an integer", "null")."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if value is None:
        return "null"
    return names.get(type(value), "an array" if isinstance(value, list) else "an object")


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name
