"""A/B experiments over judge scores and quality-regression alerts: framework-free, polars and DuckDB.

- `config`: experiment YAML files (variants, primary metric, guardrails, method, significance level).
- `analysis`: the long `experiment_results` table: per-variant statistics, treatment-vs-control comparisons,
  pairwise win rates and a Bradley–Terry ranking.
- `regressions`: each evaluator's daily mean against its trailing baseline: the `alerts` table.
"""
