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
- `llmbar_kappa`: the paper's `kappa_*` figures, with the authors' own mapping, so that their published
  numbers can be checked: before sklearn's `cohen_kappa_score`, upstream maps a judge's winner to
  `int(w) if w in ("0", "1") else 0` (the first output -> 1, the second or no answer -> 0) and keeps the
  gold label as 1 or 2. Against the gold label that is NOT a judge-vs-gold kappa (the second output can
  never agree); it is reported under its upstream name for reproduction only. Per order (`kappa_False` /
  `kappa_True`), their mean (`kappa_average`), or between the two orders (`kappa_agreement`). It is a
  task-level statistic: the per-case value is only the mapped agreement, and the row has no interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from eval_platform.scoring.base import (
    MissingField,
    NotApplicable,
    Scorer,
    ScorerOptions,
)
from eval_platform.stats.kappa import cohen_kappa

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


class LlmbarKappaOptions(ScorerOptions):
    # The gold label is the case's expected_output (the statistic is computed from benchmark_cases' columns).
    labels: dict[str, str] = DEFAULT_LABELS
    # AB: the pair as listed (kappa_False), BA: swapped (kappa_True), None: the mean of both (kappa_average)
    presentation: Literal["AB", "BA"] | None = None
    against: Literal["gold", "other_order"] = "gold"  # other_order: kappa_agreement


def _mapped_winner(verdict: str | None) -> int:
    return 1 if verdict == "A" else 0  # upstream: int(w) if w in ("0", "1") else 0


def _gold_number(case: Mapping[str, Any], options: LlmbarKappaOptions) -> int:
    gold = str(case["expected_output"]).strip()
    if gold not in options.labels:
        raise MissingField(f"gold label {gold!r} is not one of {sorted(options.labels)} (option 'labels')")
    return 1 if options.labels[gold] == "A" else 2


def _llmbar_kappa_case(_output: str, case: Mapping[str, Any], options: LlmbarKappaOptions) -> float:
    if options.against == "other_order":
        if "verdict_other" not in case:
            raise NotApplicable("the other presentation order has no reply")
        return float(_mapped_winner(case.get("verdict")) == _mapped_winner(case["verdict_other"]))
    if options.presentation is not None and case.get("presentation") != options.presentation:
        raise NotApplicable(f"only replies to order {options.presentation} count")
    return float(_mapped_winner(case.get("verdict")) == _gold_number(case, options))


def _llmbar_kappa(_values, _outputs, cases: Sequence[Mapping[str, Any]], options: LlmbarKappaOptions) -> float | None:
    def kappa(a: list[int], b: list[int]) -> float | None:
        return cohen_kappa(a, b).value if a else None

    if options.against == "other_order":
        by_case: dict[tuple, dict[str, int]] = {}
        for case in cases:
            winner = _mapped_winner(case.get("verdict"))
            by_case.setdefault((case["case_id"], case["sample"]), {})[case["presentation"]] = winner
        pairs = [(both["AB"], both["BA"]) for both in by_case.values() if len(both) == 2]
        return kappa([a for a, _ in pairs], [b for _, b in pairs])

    def per_order(order: str) -> float | None:
        rows = [case for case in cases if case["presentation"] == order]
        return kappa([_gold_number(c, options) for c in rows], [_mapped_winner(c.get("verdict")) for c in rows])

    if options.presentation is not None:
        return per_order(options.presentation)
    listed, swapped = per_order("AB"), per_order("BA")
    return None if listed is None or swapped is None else (listed + swapped) / 2


SCORERS = [
    Scorer(
        "pair_accuracy",
        PairAccuracyOptions,
        _pair_accuracy,
        lambda o: (o.reference_field,),
        judge_task=True,
        judge_gold="preference",
    ),
    Scorer(
        "position_agreement", PositionAgreementOptions, _position_agreement, judge_task=True, judge_gold="preference"
    ),
    Scorer(
        "llmbar_kappa",
        LlmbarKappaOptions,
        _llmbar_kappa_case,
        lambda _o: ("expected_output",),
        _llmbar_kappa,
        judge_task=True,
        judge_gold="preference",
        aggregation="corpus",
        interval=False,
    ),
]
