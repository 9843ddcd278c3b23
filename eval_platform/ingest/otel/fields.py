"""What the conventions read from one span: the base every convention module fills.

Each convention module (genai, openllmetry, openinference, langfuse) has `NAME`, `matches(span)` and
`read(span, fields)`; `read` only fills what is still empty (`SpanFields.put`), so when a span carries several
conventions (OpenLLMetry writes `gen_ai.*` too; Langfuse spans may wrap OpenInference attributes) the first
convention in `conventions.CONVENTIONS` that knows a field wins and the others fill the gaps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eval_platform.schemas import HIDDEN_CONTENT

INFERENCE = {"chat", "text_completion"}  # model calls whose output is an answer
USAGE = {"chat", "text_completion", "embeddings"}  # model calls whose tokens are summed over a trace


@dataclass
class SpanFields:
    convention: str = "none"
    operation: str | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    input_messages: list[dict[str, Any]] | None = None  # conversation messages (transcript.py)
    output_messages: list[dict[str, Any]] | None = None
    input_raw: Any = None  # the messages as the span held them (kept in traces.input_messages)
    output_raw: Any = None
    input_value: str | None = None  # a non-message input: a chain's or agent's input, a retrieval query
    output_value: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_arguments: str | None = None
    tool_result: str | None = None
    documents: list[str] | None = None
    session_id: str | None = None
    user_id: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    trace_name: str | None = None
    trace_input: Any = None  # a trace-level input/output set on this span (langfuse.trace.input/output)
    trace_output: Any = None

    def put(self, name: str, value: Any) -> None:
        """Set a field that is still empty to a value that is not empty (hidden content, `__REDACTED__`, is
        empty: an instrumentation told to hide it wrote the marker instead)."""
        if getattr(self, name) is None and value is not None and value not in ("", [], HIDDEN_CONTENT):
            setattr(self, name, value)

    def put_all(self, values: Mapping[str, Any]) -> None:
        """`put` each of `values` (field name -> value), in their order."""
        for name, value in values.items():
            self.put(name, value)

    def fill(self, attrs: Mapping[str, Any], spec: Iterable[Reading]) -> None:
        """Read several fields from a span's attributes at once: for each (field, convert, keys) of `spec`, `put`
        `convert(attrs[key])` of each key in order (the first non-empty one wins)."""
        for name, convert, keys in spec:
            for key in keys:
                self.put(name, convert(attrs.get(key)))


def integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def label(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value)
    return text or None


# One field read from a span's attributes (`SpanFields.fill`): its name, how a value becomes it, the keys tried
# in order.
Reading = tuple[str, Callable[[Any], Any], tuple[str, ...]]
