"""An evaluator from `data/evaluators/` as a benchmark scorer: its judge scores each case's output.

The suite runner sends the case (input, output, expected_output, metadata) through `judge_day`, the same
code `judge_scores` uses, with the evaluator's own judge model, prompt, parser, cache and budget. The
case's value is the judge's score (for binary and assertion modes 1/0). A judge call that FAILED or was
SKIPPED makes the case FAILED with the judge's reason: it is never scored 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_platform.scoring.base import Scorer, ScorerOptions


class JudgeOptions(ScorerOptions):
    evaluator: str  # an evaluator's name (its file in data/evaluators/)


def _not_direct(_output: str, _case: Mapping[str, Any], options: JudgeOptions) -> float:
    raise RuntimeError(f"the 'judge' scorer ({options.evaluator}) is computed by the suite runner, not per case")


SCORERS = [Scorer("judge", JudgeOptions, _not_direct, calls_evaluator=True)]
