"""The two tables this package writes: `agreement` (one row per statistic) and `ground_truth`."""

from __future__ import annotations

import polars as pl

AGREEMENT_SCHEMA: dict[str, pl.DataType] = {
    "section": pl.String(),  # inter_annotator | annotator | judge_vs_human | judge_vs_judge | position_consistency | ranking
    "task": pl.String(),  # the annotation task (null for judge_vs_judge between evaluators without one)
    "criterion": pl.String(),
    "subject": pl.String(),  # the evaluator, imported judge (source), annotator or annotator pair judged
    "reference": pl.String(),  # what it is compared with: human_majority, an annotator, another judge
    "period": pl.String(),  # all | day | trailing
    "period_start": pl.String(),  # YYYY-MM-DD, null for `all`
    "period_end": pl.String(),
    "convention": pl.String(),  # failed_excluded | unusable_as_tie (judge rows); null otherwise
    "statistic": pl.String(),
    "value": pl.Float64(),  # null when undefined: see `note`
    "n": pl.Int64(),  # items (units, pairs) the value is computed over
    "interpretation": pl.String(),  # Landis & Koch bands for kappas, Krippendorff's for alpha
    "note": pl.String(),
    "floor": pl.Float64(),  # the evaluator's configured minimum kappa with humans
    "below_floor": pl.Boolean(),
    "details": pl.String(),  # JSON: confusion matrix and its labels, label counts, ...
    "computed_at": pl.Datetime("us", "UTC"),
}

GROUND_TRUTH_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "criterion": pl.String(),
    "item_id": pl.String(),
    "label": pl.String(),  # the majority label
    "votes": pl.Int64(),
    "top_votes": pl.Int64(),
    "consensus": pl.Float64(),  # top_votes / votes
}
