"""Read a verdict out of a judge's reply, or say precisely why it cannot be read.

A reply that cannot be read is a failure with the raw reply kept, never a default score.
Accepted shapes: a bare JSON object, JSON inside a ``` fence, a JSON object with prose around it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from eval_platform.judging.config import EvaluatorConfig

_FENCED_JSON_RE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Verdict:
    score: float | None  # normalized 0..1
    raw_score: float | None
    label: str | None
    passed: bool | None
    winner: str | None  # pairwise: A | B | tie
    reasoning: str | None


class ParseFailure(ValueError):
    """`reason` is a short code (empty_reply, unparseable, schema_violation, out_of_range)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def extract_json_object(text: str) -> dict[str, Any]:
    stripped = text.strip()
    if not stripped:
        raise ParseFailure("empty_reply", "the judge returned no content")
    candidates = [stripped, *(m.group(1).strip() for m in _FENCED_JSON_RE.finditer(stripped))]
    candidates.extend(_balanced_objects(stripped))
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise ParseFailure("unparseable", "no complete JSON object found in the reply")


def _balanced_objects(text: str) -> list[str]:
    """Top-level {...} substrings, string-literal aware, in order of appearance."""
    found, depth, start, in_string, escaped = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"' and depth > 0:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    return found


def _reasoning(obj: dict[str, Any]) -> str | None:
    value = obj.get("reasoning", obj.get("explanation", obj.get("reason")))
    return None if value is None else str(value)


def parse_reply(config: EvaluatorConfig, text: str) -> Verdict:
    """Parse one reply for the evaluator's mode; raise ParseFailure when it cannot be trusted."""
    obj = extract_json_object(text)
    reasoning = _reasoning(obj)
    if config.mode == "score":
        raw = obj.get("score")
        if isinstance(raw, str):
            try:
                raw = float(raw.strip())
            except ValueError:
                raise ParseFailure("schema_violation", f"'score' is not a number: {raw!r}") from None
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ParseFailure("schema_violation", f"'score' must be a number, got {raw!r}")
        scale = config.score_scale
        if not scale.min <= raw <= scale.max:
            raise ParseFailure("out_of_range", f"score {raw} is outside the scale {scale.min}..{scale.max}")
        score = (raw - scale.min) / (scale.max - scale.min)
        return Verdict(score, float(raw), None, None, None, reasoning)
    if config.mode == "binary":
        passed = obj.get("passed")
        if isinstance(passed, str) and passed.strip().lower() in {"true", "false", "yes", "no", "pass", "fail"}:
            passed = passed.strip().lower() in {"true", "yes", "pass"}
        if not isinstance(passed, bool):
            raise ParseFailure("schema_violation", f"'passed' must be true or false, got {passed!r}")
        return Verdict(1.0 if passed else 0.0, 1.0 if passed else 0.0, None, passed, None, reasoning)
    if config.mode == "categorical":
        label = obj.get("label")
        labels = {k.lower(): k for k in config.labels}
        if not isinstance(label, str) or label.strip().lower() not in labels:
            raise ParseFailure("schema_violation", f"'label' must be one of {list(config.labels)}, got {label!r}")
        canonical = labels[label.strip().lower()]
        return Verdict(config.labels[canonical], None, canonical, None, None, reasoning)
    winner = obj.get("winner")
    normalized = {"a": "A", "b": "B", "tie": "tie"}.get(str(winner).strip().lower()) if winner is not None else None
    if normalized is None:
        raise ParseFailure("schema_violation", f"'winner' must be A, B or tie, got {winner!r}")
    return Verdict(None, None, None, None, normalized, reasoning)
