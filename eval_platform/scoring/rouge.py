"""ROUGE-1/2/L/Lsum F-measure from rouge-score.

ROUGE-Lsum needs sentences; rouge-score would split them with NLTK's punkt data, which cannot be fetched at
run time, so it splits on newlines (its `split_summaries=False` behaviour): put one sentence per line.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from eval_platform.scoring.registry import Scorer, ScorerOptions, reference_field
from eval_platform.scoring.squad import references


class RougeOptions(ScorerOptions):
    reference_field: str = "expected_output"
    use_stemmer: bool = False


@cache
def _scorer(rouge_type: str, use_stemmer: bool):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([rouge_type], use_stemmer=use_stemmer, split_summaries=False)


def _rouge(rouge_type: str):
    def value(output: str, case: Mapping[str, Any], options: RougeOptions) -> float:
        scorer = _scorer(rouge_type, options.use_stemmer)
        # Several references: the best one, as for SQuAD answers.
        return max(
            scorer.score(reference, output)[rouge_type].fmeasure
            for reference in references(case, options.reference_field)
        )

    return value


SCORERS = [
    Scorer(name, RougeOptions, _rouge(rouge_type), reference_field)
    for name, rouge_type in (("rouge1", "rouge1"), ("rouge2", "rouge2"), ("rougeL", "rougeL"), ("rougeLsum", "rougeLsum"))
]
