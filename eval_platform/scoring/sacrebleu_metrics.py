"""BLEU and chrF from sacrebleu: per case the sentence score, per task the corpus score (as sacrebleu reports it).

The corpus score's interval resamples cases and recomputes the corpus score from their summed sufficient
statistics (sacrebleu's bootstrap method), so it describes the corpus score, not the mean sentence score.

Scores are on sacrebleu's 0-100 scale divided by 100, so every scorer in a table is 0-1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Literal

import numpy as np

from eval_platform.scoring.base import Scorer, ScorerOptions, reference_field
from eval_platform.scoring.squad import references


class BleuOptions(ScorerOptions):
    reference_field: str = "expected_output"
    tokenize: Literal["13a", "intl", "char", "zh", "none"] = "13a"
    lowercase: bool = False


class ChrfOptions(ScorerOptions):
    reference_field: str = "expected_output"
    char_order: int = 6
    word_order: int = 0
    beta: int = 2


@cache  # one metric object per options (frozen, hashable): building it per case costs more than scoring
def _bleu(options: BleuOptions):
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize=options.tokenize, lowercase=options.lowercase, effective_order=True)


@cache
def _chrf(options: ChrfOptions):
    from sacrebleu.metrics import CHRF

    return CHRF(char_order=options.char_order, word_order=options.word_order, beta=options.beta)


def _reference_streams(cases: Sequence[Mapping[str, Any]], field: str) -> list[list[str | None]]:
    """sacrebleu's layout: one list per reference position, aligned with the outputs; a case with fewer
    references than the most has None in the remaining streams (sacrebleu's variable number of references)."""
    per_case = [references(case, field) for case in cases]
    width = max(len(refs) for refs in per_case)
    return [[refs[i] if i < len(refs) else None for refs in per_case] for i in range(width)]


def _sentence(metric):
    def value(output: str, case: Mapping[str, Any], options) -> float:
        return metric(options).sentence_score(output, references(case, options.reference_field)).score / 100

    return value


def _statistics(metric):
    def statistics(outputs: Sequence[str], cases: Sequence[Mapping[str, Any]], options) -> np.ndarray:
        # sacrebleu's per-segment sufficient statistics (n-gram matches and totals, lengths): what its corpus_score
        # sums, and what its own bootstrap resamples.
        streams = _reference_streams(cases, options.reference_field)
        return np.asarray(metric(options)._extract_corpus_statistics(list(outputs), streams), dtype=float)

    return statistics


def _from_statistics(metric):
    def score(summed: np.ndarray, options) -> float:
        return metric(options)._compute_score_from_stats(summed).score / 100

    return score


def _corpus(metric):
    def aggregate(_values, outputs: Sequence[str], cases: Sequence[Mapping[str, Any]], options) -> float | None:
        if not outputs:
            return None
        streams = _reference_streams(cases, options.reference_field)
        return metric(options).corpus_score(list(outputs), streams).score / 100

    return aggregate


SCORERS = [
    Scorer(
        "bleu",
        BleuOptions,
        _sentence(_bleu),
        reference_field,
        _corpus(_bleu),
        aggregation="corpus",
        statistics=_statistics(_bleu),
        from_statistics=_from_statistics(_bleu),
    ),
    Scorer(
        "chrf",
        ChrfOptions,
        _sentence(_chrf),
        reference_field,
        _corpus(_chrf),
        aggregation="corpus",
        statistics=_statistics(_chrf),
        from_statistics=_from_statistics(_chrf),
    ),
]
