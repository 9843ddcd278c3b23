"""JSON read and written on the judge's hot path (a provider's reply, a judge's verdict object, the cache's batches).

orjson parses and writes in about a quarter of the CPU of Python's json (measured on a chat completion's body and
a batch of cache entries: README, judge throughput), and a day makes these calls hundreds of times a second. Python's
json stays the reader of what orjson refuses (NaN and Infinity, a number past a double's range, a lone surrogate,
a byte-order mark, ...): `loads` gives what `json.loads` gives, or raises what it raises, except that an integer past
64 bits is read as a float. `dumps` writes what `json.dumps` can read back as the same values, except that NaN and
the infinities are written as null (JSON has no such numbers); what orjson cannot write (a lone surrogate, an integer
past 64 bits, a type of its own) is written by `json.dumps`.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: str | bytes) -> Any:
    """`json.loads(data)`, read by orjson when it can (see the module doc)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(value: Any) -> str:
    """`value` as compact JSON text (see the module doc for NaN and the infinities)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError: what it cannot write
        return json.dumps(value, separators=(",", ":"))
