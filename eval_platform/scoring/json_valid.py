"""Whether an output is valid JSON (RFC 8259), and whether it satisfies a JSON Schema (jsonschema, Draft 2020-12)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import field_validator

from eval_platform.scoring.base import Scorer, ScorerOptions


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON (RFC 8259 has no NaN or Infinity)")


def _parsed(output: str) -> tuple[bool, Any]:
    """(True, value) when `output` is one RFC 8259 JSON text; Python's json module alone also accepts
    `NaN`, `Infinity` and `-Infinity`, which no other JSON parser reads."""
    try:
        return True, json.loads(output, parse_constant=_not_json)
    except ValueError:
        return False, None


class JsonOptions(ScorerOptions):
    pass


def _valid_json(output: str, _case: Mapping[str, Any], _options: JsonOptions) -> float:
    return float(_parsed(output)[0])


class JsonSchemaOptions(ScorerOptions):
    json_schema: dict[str, Any]

    @field_validator("json_schema")
    @classmethod
    def _is_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from exc
        return schema


def _matches_schema(output: str, _case: Mapping[str, Any], options: JsonSchemaOptions) -> float:
    import jsonschema

    ok, value = _parsed(output)
    return float(ok and jsonschema.Draft202012Validator(options.json_schema).is_valid(value))


SCORERS = [
    Scorer("valid_json", JsonOptions, _valid_json),
    Scorer("json_schema", JsonSchemaOptions, _matches_schema),
]
