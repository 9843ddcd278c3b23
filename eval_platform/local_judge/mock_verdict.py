"""Deterministic placeholder verdicts that satisfy the reply schema a judge prompt asks for.

Dry runs need replies that parse and validate like real ones without calling a model. The verdict is a
pure function of the prompt, so reruns, caches and tests see identical values, and its string fields say
plainly that it is a placeholder rather than a quality judgment.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from eval_platform.judging.fencing import FENCE_RE, REPLY_SCHEMA_MARKER

MOCK_REASONING = "mock verdict: deterministic placeholder, not a quality judgment"

# Range used for a numeric field whose schema leaves one or both bounds open.
_DEFAULT_SPAN = 10


def find_reply_schema(prompt: str) -> dict[str, Any] | None:
    """The JSON Schema stated on the line after `REPLY_SCHEMA_MARKER`, or None if there is none."""
    # Fenced blocks carry evaluated content, which could itself contain the marker line; only the
    # template's own text may declare the schema.
    lines = FENCE_RE.sub("", prompt).splitlines()
    for position, line in enumerate(lines[:-1]):
        if line.strip() != REPLY_SCHEMA_MARKER:
            continue
        try:
            schema = json.loads(lines[position + 1])
        except json.JSONDecodeError:
            return None
        return schema if isinstance(schema, dict) else None
    return None


# A fence tag's secret is drawn per request; the mock's verdict must depend on the content only.
_FENCE_TAG_RE = re.compile(r"<<<(end )?([a-z0-9_]+) [0-9a-f]{12,32}>>>")


def mock_verdict(prompt: str) -> dict[str, Any]:
    """A JSON object satisfying the prompt's reply schema, derived from the sha256 of the prompt (fence
    secrets left out, so the same content always gets the same verdict)."""
    schema = find_reply_schema(prompt)
    if schema is None:
        return {"reasoning": MOCK_REASONING}
    seed = hashlib.sha256(_FENCE_TAG_RE.sub(r"<<<\1\2>>>", prompt).encode()).digest()
    verdict = _instance(schema, seed, "")
    return verdict if isinstance(verdict, dict) else {"reasoning": MOCK_REASONING}


def _draw(seed: bytes, path: str) -> int:
    """A 64-bit number for one field; keyed by the field's path so fields vary independently."""
    return int.from_bytes(hashlib.sha256(seed + path.encode()).digest()[:8], "big")


def _schema_type(schema: dict[str, Any]) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        # A nullable field ("type": ["string", "null"]) gets a real value; null only if nothing else fits.
        concrete = [kind for kind in declared if kind != "null"]
        return concrete[0] if concrete else "null"
    if isinstance(declared, str):
        return declared
    if "properties" in schema:
        return "object"
    if any(bound in schema for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return "number"
    return "string"


def _instance(schema: dict[str, Any], seed: bytes, path: str) -> Any:
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        options = schema["enum"]
        return options[_draw(seed, path) % len(options)]
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if "type" not in schema and alternatives:
        return _instance(alternatives[0], seed, path)

    kind = _schema_type(schema)
    if kind == "object":
        properties: dict[str, Any] = schema.get("properties", {})
        obj = {name: _instance(sub, seed, f"{path}/{name}") for name, sub in properties.items()}
        for name in schema.get("required", []):
            obj.setdefault(name, MOCK_REASONING)
        return obj
    if kind == "array":
        items = schema.get("items")
        item_schema: dict[str, Any] = items if isinstance(items, dict) else {}
        count = schema.get("minItems", 0)
        if schema.get("uniqueItems") and item_schema.get("enum"):
            # e.g. a ranking: distinct options in a seeded order
            options = list(item_schema["enum"])
            ordered = sorted(options, key=lambda option: _draw(seed, f"{path}/{option}"))
            return ordered[:count]
        return [_instance(item_schema, seed, f"{path}/{i}") for i in range(count)]
    if kind == "integer":
        return _integer_in_range(schema, _draw(seed, path))
    if kind == "number":
        return _number_in_range(schema, _draw(seed, path))
    if kind == "boolean":
        return _draw(seed, path) % 2 == 1
    if kind == "null":
        return None
    return _placeholder_string(schema)


def _bound(schema: dict[str, Any], inclusive_key: str, exclusive_key: str) -> tuple[float | None, bool]:
    """A bound and whether it is exclusive; draft-4 boolean `exclusiveMinimum` flags are ignored."""
    for key, exclusive in ((inclusive_key, False), (exclusive_key, True)):
        value = schema.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value, exclusive
    return None, False


def _close_open_bounds(low: float | None, high: float | None) -> tuple[float, float]:
    if low is None:
        return (0, _DEFAULT_SPAN) if high is None else (high - _DEFAULT_SPAN, high)
    if high is None:
        return low, low + _DEFAULT_SPAN
    return low, high


def _integer_in_range(schema: dict[str, Any], draw: int) -> int:
    low, low_exclusive = _bound(schema, "minimum", "exclusiveMinimum")
    high, high_exclusive = _bound(schema, "maximum", "exclusiveMaximum")
    if low is not None:
        low = math.floor(low) + 1 if low_exclusive else math.ceil(low)
    if high is not None:
        high = math.ceil(high) - 1 if high_exclusive else math.floor(high)
    low, high = _close_open_bounds(low, high)
    if high < low:  # contradictory bounds: nothing can satisfy them, so stay at the lower one
        return int(low)
    return int(low) + draw % (int(high) - int(low) + 1)


def _number_in_range(schema: dict[str, Any], draw: int) -> float:
    low, _ = _bound(schema, "minimum", "exclusiveMinimum")
    high, _ = _bound(schema, "maximum", "exclusiveMaximum")
    low, high = _close_open_bounds(low, high)
    # A fraction strictly inside (0, 1) keeps the value valid under exclusive bounds too.
    fraction = (draw % 999 + 1) / 1000
    return round(low + (high - low) * fraction, 6)


def _placeholder_string(schema: dict[str, Any]) -> str:
    text = MOCK_REASONING
    if "maxLength" in schema:
        text = text[: schema["maxLength"]]
    if len(text) < schema.get("minLength", 0):
        text = text.ljust(schema["minLength"], ".")
    return text
