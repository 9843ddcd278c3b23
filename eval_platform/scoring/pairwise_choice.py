"""A judge's pairwise choice against the gold label, and whether it survives swapping the two candidates.

For an `as_judge` task the suite runner shows each case's pair in both orders, parses each reply with the
pairwise mode's own parser and puts the verdict, in the case's own terms (A = the first `pair` field), in
the case as `verdict` (None when the reply names no winner), and the other order's verdict as
`verdict_other`. LLMBar's conventions (Zeng et al. 2024, `LLMEvaluator/evaluate.py`) follow:

- `pair_accuracy`: 1 when the verdict is the gold label. A reply that names no winner is an answer, and a
  wrong one (0), as upstream; a call that failed is a FAILED case and is never scored. Averaged over the
  case's two orders and then over cases it is the paper's `correct_average`.
- `position_agreement`: 1 when both orders give the same verdict (two replies that name no winner count
  as the same, as upstream's `equal`); averaged over cases it is the paper's positional agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from eval_platform.scoring.registry import MissingField, NotApplicable, Scorer, ScorerOptions

DEFAULT_LABELS = {"1": "A", "2": "B", "A": "A", "B": "B", "a": "A", "b": "B"}


class PairAccuracyOptions(ScorerOptions):
    reference_field: str = "expected_output"
    labels: dict[str, str] = DEFAULT_LABELS  # gold value -> the candidate it names (A: first `pair` field)
    # Only the replies to this presentation order (AB: the pair as listed; BA: swapped), e.g. for
    # LLMBar's correct_False / correct_True; other rows have no value for this metric.
    presentation: Literal["AB", "BA"] | None = None
    both_orders: bool = False  # 1 only when the verdicts of both orders are right (LLMBar's correct_both)


def _gold(case: Mapping[str, Any], options: PairAccuracyOptions) -> str:
    gold = str(case[options.reference_field]).strip()
    if gold not in options.labels:
        raise MissingField(f"gold label {gold!r} is not one of {sorted(options.labels)} (option 'labels')")
    return options.labels[gold]


def _pair_accuracy(_output: str, case: Mapping[str, Any], options: PairAccuracyOptions) -> float:
    gold = _gold(case, options)
    if options.presentation is not None and case.get("presentation") != options.presentation:
        raise NotApplicable(f"only replies to order {options.presentation} count")
    if options.both_orders:
        if "verdict_other" not in case:
            raise NotApplicable("the other presentation order has no reply")
        return float(case.get("verdict") == gold and case["verdict_other"] == gold)
    return float(case.get("verdict") == gold)


class PositionAgreementOptions(ScorerOptions):
    pass


def _position_agreement(_output: str, case: Mapping[str, Any], _options: PositionAgreementOptions) -> float:
    if "verdict_other" not in case:
        raise NotApplicable("the other presentation order has no reply (its call failed or was skipped)")
    return float(case.get("verdict") == case["verdict_other"])


SCORERS = [
    Scorer("pair_accuracy", PairAccuracyOptions, _pair_accuracy, lambda o: (o.reference_field,), judge_task=True),
    Scorer("position_agreement", PositionAgreementOptions, _position_agreement, judge_task=True),
]
