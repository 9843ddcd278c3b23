"""OTLP/JSON attribute values (`AnyValue`) <-> plain Python values.

An attribute list is `[{"key": k, "value": AnyValue}]`; an AnyValue is exactly one of `stringValue`,
`boolValue`, `intValue` (an int64, usually written as a decimal string), `doubleValue`, `bytesValue`
(base64, kept as text), `arrayValue: {values: [AnyValue]}` or `kvlistValue: {values: [{key, value}]}`.
"""

from __future__ import annotations

from typing import Any

from eval_platform.ingest.common import RowError, preview


def decode_value(value: Any, where: str) -> Any:
    """An OTLP/JSON AnyValue -> a plain Python value."""
    bad = RowError("invalid_otlp:attributes", f"{where} is not a valid OTLP AnyValue: {preview(value)}")
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise bad
    if "stringValue" in value:
        if not isinstance(value["stringValue"], str):
            raise bad
        return value["stringValue"]
    if "boolValue" in value:
        if not isinstance(value["boolValue"], bool):
            raise bad
        return value["boolValue"]
    if "intValue" in value:
        raw = value["intValue"]
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise bad
        try:
            return int(raw)
        except ValueError:
            raise bad from None
    if "doubleValue" in value:
        raw = value["doubleValue"]
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise bad
        try:
            return float(raw)
        except ValueError:
            raise bad from None
    if "bytesValue" in value:
        return value["bytesValue"]
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values") or []
        if not isinstance(items, list):
            raise bad
        return [decode_value(item, where) for item in items]
    if "kvlistValue" in value:
        return decode_attributes((value["kvlistValue"] or {}).get("values") or [], where)
    raise bad


def encode_value(value: Any) -> dict[str, Any]:
    """A plain Python value -> an OTLP/JSON AnyValue (the inverse of `decode_value`; ints as strings)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [encode_value(item) for item in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": encode_attributes(value)}}
    return {"stringValue": str(value)}


def encode_attributes(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    """`{key: value}` -> an OTLP attribute list, skipping None values."""
    return [{"key": key, "value": encode_value(value)} for key, value in attributes.items() if value is not None]


def decode_attributes(attributes: Any, where: str) -> dict[str, Any]:
    """An OTLP attribute list `[{key, value}]` -> dict."""
    if attributes is None:
        return {}
    if not isinstance(attributes, list):
        raise RowError("invalid_otlp:attributes", f"{where} attributes are not a list")
    decoded: dict[str, Any] = {}
    for item in attributes:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise RowError("invalid_otlp:attributes", f"{where} has an attribute without a string key: {preview(item)}")
        decoded[item["key"]] = decode_value(item.get("value"), f"{where} attribute '{item['key']}'")
    return decoded
