"""A/B experiments over judge scores and quality-regression alerts: framework-free, polars and DuckDB.

- `config`: experiment YAML files (variants, primary metric, guardrails, method, significance level).
- `analysis`: the long `experiment_results` table (its columns), one experiment's rows put together from
  `comparisons` (per-metric variant statistics, treatment-vs-control comparisons, guardrails, recommendation) and
  `pairwise` (pairwise verdicts, win rates and a Bradley–Terry ranking).
- (`eval_platform.stale_rows` keeps an experiment's last rows, flagged stale, while its file does not load.)
- `regressions`: each evaluator's daily mean against its trailing baseline: the `alerts` table.
"""
