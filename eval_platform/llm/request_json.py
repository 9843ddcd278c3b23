"""A request's chat messages written as JSON once, for both the cache key (`cache.cache_key`) and the POST body of
the lean path (`openai_compat`): the JSON text of what is sent is the JSON text the key is made of.

The text is `json.dumps(messages, sort_keys=True)` (ensure_ascii, the default separators), which is what the key was
always the hash of; the body sends the same messages with their keys in that order (JSON objects are unordered: a
provider reads the same request). An evaluator's system message is the same string in every request of its day: its
fragment is written once per distinct message (`_LEADING`), not once per request.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii
from typing import Any, NamedTuple

SORTED_JSON = json.JSONEncoder(sort_keys=True)  # json.dumps(..., sort_keys=True), without a new encoder per call
escape = encode_basestring_ascii  # how that encoder writes a string (ensure_ascii), in C
# The leading message of a request (an evaluator's system message: the same string in every request of its day),
# written as the key writes it, once per distinct message: its JSON fragment, and that fragment written again as
# a string, without its quotes. Bounded: emptied when it grows past _LEADING_MAX messages.
_LEADING: dict[tuple[str, str], tuple[str, str]] = {}
_LEADING_MAX = 256


class MessagesJSON(NamedTuple):
    text: str  # SORTED_JSON.encode(messages)
    lead: str  # the leading message's fragment of `text` ("[{...}"); "" when the messages are not the usual shape
    lead_escaped: str  # `lead` written again as a JSON string, without its quotes


def messages_json(messages: list[Any]) -> MessagesJSON:
    """`messages` as JSON with sorted keys, and the leading message's fragment of it (see `MessagesJSON`)."""
    for message in messages:  # the usual shape: {"content": str, "role": str} each
        if type(message) is not dict or len(message) != 2 or not _usual(message):
            return MessagesJSON(SORTED_JSON.encode(messages), "", "")
    if not messages:
        return MessagesJSON(SORTED_JSON.encode(messages), "", "")
    head = messages[0]
    known = _LEADING.get((head["role"], head["content"]))
    if known is None:
        fragment = '[{"content": ' + escape(head["content"]) + ', "role": ' + escape(head["role"]) + "}"
        if len(_LEADING) >= _LEADING_MAX:
            _LEADING.clear()
        known = _LEADING[(head["role"], head["content"])] = (fragment, escape(fragment)[1:-1])
    lead, lead_escaped = known
    rest = "".join(
        ', {"content": ' + escape(m["content"]) + ', "role": ' + escape(m["role"]) + "}" for m in messages[1:]
    )
    return MessagesJSON(lead + rest + "]", lead, lead_escaped)


def _usual(message: dict[str, Any]) -> bool:
    return type(message.get("content")) is str and type(message.get("role")) is str


def scalar(value: Any) -> str:
    """`value` as `SORTED_JSON` (and `json.dumps`) writes it."""
    kind = type(value)
    if kind is str:
        return escape(value)
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return SORTED_JSON.encode(value)
