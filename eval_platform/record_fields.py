"""One reader for a record's field named in a config or a prompt: a column, or `metadata.<key>`.

`metadata` is a JSON object held as text (TRACE_SCHEMA, TEST_CASE_SCHEMA). Pairwise `group_by`, n-wise
grouping, a `reference` evaluator's `match_on`, the `{{metadata.key}}` prompt variable and the benchmark
runner's case fields all read a field through `field_text`, so they agree on what a value's text is:
- a string is itself; any other value is its JSON text (`true`, `3`, `1.5`, `["a", "b"]`, `{"k": 1}` with sorted
  keys, any script as itself: `{"city": "Zürich"}`, never `\\u00fc`), never Python's repr (`True`, `['a', 'b']`);
- a missing key, a JSON null, metadata that is absent or not a JSON object: None (no value, never an error:
  ingest already quarantined unreadable metadata, and a trace without the key is one without a group).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

METADATA_PREFIX = "metadata."


def as_text(value: Any) -> str | None:
    """A field value as text: None stays None, a string is itself, anything else its JSON text."""
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except TypeError:  # not a JSON value (a datetime column): its usual text
        return str(value)


def metadata_text(metadata: str | None, key: str) -> str | None:
    """One key of a metadata JSON object (as text, see the module doc); None when there is no such value."""
    try:
        parsed = json.loads(metadata or "{}")
    except ValueError:
        return None
    return as_text(parsed.get(key)) if isinstance(parsed, dict) else None


def field_text(record: Mapping[str, Any], name: str) -> str | None:
    """`record[name]` as text, or, for `metadata.<key>`, that key of the record's metadata object."""
    if name.startswith(METADATA_PREFIX):
        return metadata_text(record.get("metadata"), name.removeprefix(METADATA_PREFIX))
    return as_text(record.get(name))
