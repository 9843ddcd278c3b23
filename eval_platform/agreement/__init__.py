"""The `agreement` table: can this judge be trusted? Framework-free; the asset writes what `compute` returns.

One long table, one row per statistic:

- `inter_annotator`: per annotation task and criterion, Krippendorff's alpha (nominal for classification;
  nominal, ordinal, interval and ratio for ratings and ranks; missing ratings allowed), Fleiss' and
  Randolph's kappa, and per annotator pair Cohen's kappa (unweighted; also linear and quadratic for
  ratings and ranks). `annotator` rows: each annotator's agreement with the others' majority and quality
  score (kappa against that majority).
- `judge_vs_human`: an evaluator's final COMPLETED verdicts (or an imported judge's verdicts) against the
  human majority label (or mean rating) of the task its `human_agreement` names: accuracy, macro
  precision/recall/F1, Cohen's kappa and the confusion matrix for labels; Spearman, Pearson and MAE for
  scores; for pairwise judges, the MT-Bench S1 (ties kept) and S2 (ties left out) agreement.
- `judge_vs_judge`: the member models of a consensus evaluator against each other, evaluators of the same
  mode judging the same traces, and each evaluator against each imported judge of its task.
- `position_consistency`: for pairwise evaluators judged in both orders.
- `ranking`: when pairwise annotations and imported verdicts name their candidates (`candidate_a` /
  `candidate_b`), Bradley–Terry rankings of the candidates from human votes and from each judge, and the
  Pearson (LLMFAO's published method) and Spearman correlation of the ranks.

Periods (`period`): `all`, every `day` of judge_scores, and a `trailing` window of `trailing_days` days ending on
each day. A judge verdict the judge could not give (FAILED, or an unusable imported verdict) is left out
(`convention = failed_excluded`); pairwise agreement is also reported the way PandaLM counts it, with an
unusable verdict as a tie (`convention = unusable_as_tie

The package, one idea a module (the two tables' columns are in `eval_platform.schemas`): `rows` (a statistic as a
row), `periods` (windows and per-day count tables), `humans` (inter-annotator agreement, the human majority),
`judge_rows` (reading an evaluator's rows), `judge_vs_human`, `judge_vs_judge`, `position`, `ranking`, and
`assembly` (`compute`, which runs them all). What an evaluator's verdicts are compared as (scores, labels or
pairwise preferences) is declared by its judge mode (`JudgeMode.agreement`).
"""

from eval_platform.agreement.assembly import ANNOTATION_COLUMNS, compute
from eval_platform.schemas import AGREEMENT_SCHEMA, GROUND_TRUTH_SCHEMA

__all__ = ["AGREEMENT_SCHEMA", "ANNOTATION_COLUMNS", "GROUND_TRUTH_SCHEMA", "compute"]
