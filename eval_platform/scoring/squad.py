"""Exact match and token F1 with the normalization of the official SQuAD v1.1 evaluation script.

Against several references (SQuAD's `answers`), a case scores its best reference, as the script's
`metric_max_over_ground_truths` does.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Mapping
from typing import Any

from eval_platform.scoring.base import Scorer, ScorerOptions, reference_field

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation, articles and extra whitespace (SQuAD v1.1 `normalize_answer`)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, reference: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(reference))


def token_f1(prediction: str, reference: str) -> float:
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(reference).split()
    common = Counter(predicted) & Counter(expected)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(predicted)
    recall = same / len(expected)
    return 2 * precision * recall / (precision + recall)


def references(case: Mapping[str, Any], field: str) -> list[str]:
    """The case's reference answers, as text: a list holds several (any of them is right); an object, a number or a
    boolean (a dataset's JSON `expected_output`) is its JSON text, never a Python repr such as `{'name': 'Ana'}`."""
    value = case[field]
    return [_text(item) for item in value] if isinstance(value, list | tuple) else [_text(value)]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class SquadOptions(ScorerOptions):
    reference_field: str = "expected_output"


def _best(metric):
    def value(output: str, case: Mapping[str, Any], options: SquadOptions) -> float:
        return max(metric(output, reference) for reference in references(case, options.reference_field))

    return value


SCORERS = [
    Scorer("exact_match", SquadOptions, _best(exact_match), reference_field),
    Scorer("token_f1", SquadOptions, _best(token_f1), reference_field),
]
