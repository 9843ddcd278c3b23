"""ROUGE-1/2/L/Lsum F-measure from rouge-score.

ROUGE-Lsum needs sentences; rouge-score would split them with NLTK's punkt data, which cannot be fetched at
run time, so it splits on newlines (its `split_summaries=False` behaviour): put one sentence per line.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from functools import cache
from typing import Any

from eval_platform.scoring.base import Scorer, ScorerOptions, reference_field
from eval_platform.scoring.squad import references


class RougeOptions(ScorerOptions):
    reference_field: str = "expected_output"
    use_stemmer: bool = False


@cache
def _scorer(rouge_type: str, use_stemmer: bool):
    from absl import logging as absl_logging
    from rouge_score import rouge_scorer, tokenizers

    # rouge-score imports absl, whose log handler keeps the sys.stderr of its import moment and closes that stream
    # when logging is shut down or reconfigured (Dagster's log manager calls logging.config.dictConfig for each
    # run) unless it is the sys.stderr of that later moment. Imported while stderr is redirected (a run's captured
    # compute logs, a test's capture), it would close the redirect's stream under its owner: point it at the
    # process's own stderr, which it never closes.
    if sys.__stderr__ is not None:
        absl_logging.get_absl_handler().python_handler.setStream(sys.__stderr__)
    # The tokenizer rouge-score would pick, given explicitly: without one it logs "Using default tokenizer." through
    # absl, whose first message installs a stream handler on the root logger bound to the stderr of that moment.
    tokenizer = tokenizers.DefaultTokenizer(use_stemmer=use_stemmer)
    return rouge_scorer.RougeScorer([rouge_type], use_stemmer=use_stemmer, split_summaries=False, tokenizer=tokenizer)


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
    for name, rouge_type in (
        ("rouge1", "rouge1"),
        ("rouge2", "rouge2"),
        ("rougeL", "rougeL"),
        ("rougeLsum", "rougeLsum"),
    )
]
