"""A judge's verdict on one response against the gold verdict, for `as_judge` tasks whose judge rates one
response (modes `score`, `binary`, `categorical`), as MT-Bench's single-answer grading is checked against
human grades.

The suite runner shows each case's response (the `as_judge.output` field) to the model under test, parses its
reply with the mode's own parser and puts the verdict in the case as `verdict`, as text: the raw score on the
evaluator's scale (`score`), `true` / `false` (`binary`), or the label (`categorical`); None when the reply
held no verdict (the row is COMPLETED with reason `no_verdict`, as for pairwise judges).

- `verdict_accuracy` (binary, categorical): 1 when the verdict is the gold label, compared case-insensitively;
  a binary gold may be written true/false, yes/no, pass/fail or 1/0. A reply without a verdict is an answer,
  and a wrong one (0), as LLMBar counts a pairwise reply that names no winner.
- `verdict_kappa` (binary, categorical): Cohen's kappa between the gold labels and the verdicts over the task's
  cases (no verdict counted as its own category), a task-level statistic without an interval; per case the
  value is the agreement.
- `verdict_abs_error` (score): |verdict − gold| on the evaluator's scale; averaged, the mean absolute error. A
  reply without a score cannot have an error: the case is FAILED `scorer_error`, never counted as right.
- `verdict_correlation` (score): Spearman's (default) or Pearson's correlation between gold and verdict scores
  over the task's cases, a task-level statistic without an interval; per case the value is the judge's score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from eval_platform.scoring.base import Scorer, ScorerOptions, reference_field
from eval_platform.stats.judge_agreement import score_agreement
from eval_platform.stats.kappa import cohen_kappa

_BINARY = {
    "true": "true",
    "yes": "true",
    "pass": "true",
    "passed": "true",
    "1": "true",
    "false": "false",
    "no": "false",
    "fail": "false",
    "failed": "false",
    "0": "false",
}
NO_VERDICT = "(no verdict)"


class LabelOptions(ScorerOptions):
    reference_field: str = "expected_output"
    labels: dict[str, str] | None = None  # gold value -> the judge's label it means, when they are spelled apart


def _label(value: Any) -> str:
    text = str(value).strip().lower()
    return _BINARY.get(text, text)


def _gold_label(case: Mapping[str, Any], options: LabelOptions) -> str:
    gold = str(case[options.reference_field]).strip()
    return _label(options.labels.get(gold, gold) if options.labels else gold)


def _verdict_label(case: Mapping[str, Any]) -> str | None:
    verdict = case.get("verdict")
    return None if verdict is None else _label(verdict)


def _accuracy(_output: str, case: Mapping[str, Any], options: LabelOptions) -> float:
    return float(_verdict_label(case) == _gold_label(case, options))


def _kappa(_values, _outputs, cases: Sequence[Mapping[str, Any]], options: LabelOptions) -> float | None:
    rows = [c for c in cases if c.get(options.reference_field) is not None]
    if not rows:
        return None
    return cohen_kappa([_gold_label(c, options) for c in rows], [_verdict_label(c) or NO_VERDICT for c in rows]).value


class ScoreOptions(ScorerOptions):
    reference_field: str = "expected_output"


class CorrelationOptions(ScoreOptions):
    method: Literal["spearman", "pearson"] = "spearman"


def _number(case: Mapping[str, Any], field: str, what: str) -> float:
    try:
        return float(str(case[field]).strip())
    except ValueError:
        raise ValueError(f"{what} {case[field]!r} is not a number") from None


def _judge_score(case: Mapping[str, Any]) -> float:
    if case.get("verdict") is None:
        raise ValueError("the reply held no score")
    return float(case["verdict"])


def _abs_error(_output: str, case: Mapping[str, Any], options: ScoreOptions) -> float:
    return abs(_judge_score(case) - _number(case, options.reference_field, "gold score"))


def _score_value(_output: str, case: Mapping[str, Any], options: CorrelationOptions) -> float:
    _number(case, options.reference_field, "gold score")  # a case without a usable gold fails here, by name
    return _judge_score(case)


def _correlation(_values, _outputs, cases: Sequence[Mapping[str, Any]], options: CorrelationOptions) -> float | None:
    pairs = []
    for case in cases:
        if case.get("verdict") is None or case.get(options.reference_field) is None:
            continue
        try:
            pairs.append((_number(case, options.reference_field, "gold score"), float(case["verdict"])))
        except ValueError:
            continue  # FAILED in its row (scorer_error); not part of the statistic
    if not pairs:
        return None
    result = score_agreement([g for g, _ in pairs], [j for _, j in pairs])
    return result.spearman if options.method == "spearman" else result.pearson


SCORERS = [
    Scorer("verdict_accuracy", LabelOptions, _accuracy, reference_field, judge_task=True, judge_gold="label"),
    Scorer(
        "verdict_kappa",
        LabelOptions,
        _accuracy,
        reference_field,
        _kappa,
        judge_task=True,
        judge_gold="label",
        aggregation="corpus",
        interval=False,
    ),
    Scorer("verdict_abs_error", ScoreOptions, _abs_error, reference_field, judge_task=True, judge_gold="rating"),
    Scorer(
        "verdict_correlation",
        CorrelationOptions,
        _score_value,
        reference_field,
        _correlation,
        judge_task=True,
        judge_gold="rating",
        aggregation="corpus",
        interval=False,
    ),
]
