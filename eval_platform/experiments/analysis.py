"""`experiment_results`: one long table per run, over every experiment, metric and variant.

Only final, completed verdicts count (`is_final AND status = 'COMPLETED'`), inside the experiment's window of
trace days. A per-trace metric takes each trace's `experiment_id` and `variant` from its `judge_scores` row; a
pairwise verdict takes both sides' from `traces` (A is `trace_id`, B is `trace_id_b`).

Conventions: every difference is treatment − control in the metric's own units; "better" follows the metric's
`direction`. Intervals are at 1 − alpha: Student t for a mean score, Wilson for a pass rate or a win rate,
Welch–Satterthwaite for a difference of means, equal-tailed posterior quantiles for a credible interval.
Frequentist p-values are two-sided. With `method: both`, `significant`, `outcome`, guardrails and the
recommendation follow the frequentist test and the Bayesian columns are reported beside it.

Columns of `experiment_results` (null where they do not apply to the row's kind):

- `experiment`: the experiment's name (its file stem); `experiment_id`: the traces it covers (null: all).
- `kind`: `variant` (one variant on one metric), `comparison` (a treatment against the control on one metric),
  `win_rate` (a variant's pairwise record), `bradley_terry` (a variant's Bradley–Terry strength and rank).
- `metric`: `<evaluator>.score`, `<evaluator>.passed`, or `<evaluator>.winner` for pairwise rows;
  `evaluator`; `metric_role`: `primary`, `guardrail` or `pairwise`; `direction`: `increase` or `decrease`.
- `variant`: the variant the row describes (for a comparison, the treatment); `control_variant`: the control;
  `opponent`: for `win_rate` rows, null for the record against every other variant, else the variant of a
  head-to-head record (the control).
- `method` (`frequentist`, `bayesian`, `both`), `alpha`: the experiment's settings.
- `n`: observations of the variant (comparison: of the treatment; win_rate and bradley_terry: comparisons);
  `n_control`: the control's observations.
- `mean`, `std`: the variant's (comparison: the treatment's) mean and sample standard deviation;
  `ci_low`, `ci_high`: the interval of `mean` (variant rows) or of `win_rate` (win_rate rows).
- `mean_control`; `difference` = mean − mean_control; `relative_difference` = difference / |mean_control|.
- Frequentist: `diff_ci_low`, `diff_ci_high` (interval of the difference), `t_statistic`, `df`
  (Welch–Satterthwaite), `p_value` (two-sided Welch's t-test).
- Bayesian: `prob_improvement` (posterior probability that the treatment is better, in the metric's direction),
  `expected_lift` (posterior mean of treatment − control), `credible_low`, `credible_high` (its interval),
  `expected_loss` (posterior expected shortfall in the metric's direction if the treatment ships). Scores use the
  Student-t posterior of each mean (non-informative prior); pass rates a Beta(1, 1)–binomial model.
- `cohens_d` (difference over the pooled standard deviation), `effect_interpretation` (negligible < 0.2 ≤ small
  < 0.5 ≤ medium < 0.8 ≤ large, on |d|).
- `significant`: comparison rows: p < alpha (Bayesian: P(better) ≥ 1 − alpha or ≤ alpha); win_rate rows: the
  interval of the win rate excludes 0.5. `outcome`: `better`, `worse`, `no significant difference`,
  `insufficient sample` or `undefined` (no variance). `insufficient_sample`: a group below
  `minimum_sample_size` (statistics are then null).
- `guardrail_rule`, `guardrail_passed` (guardrail comparison rows): with `max_degradation` m the guardrail
  passes only when the interval of the difference rules out a degradation larger than m (non-inferiority);
  with `must_not_be_significantly_worse` it fails when the outcome is `worse`. Null when it cannot be judged.
- `recommendation` (primary comparison rows): the decision for that treatment, in words.
- `wins`, `losses`, `ties`, `win_rate` = (wins + ties / 2) / comparisons (win_rate rows).
- `strength` (Bradley–Terry strengths sum to 1 across the variants), `rank` (1 = best).
- `note`: why a statistic is missing, or a caveat of the estimate.
- `start_date`, `end_date`: the configured window, or the first and last trace day with data.
- `stale`: false for rows computed by this run; true for the last rows of an experiment whose file, or an
  evaluator file it names, no longer loads: they are kept as they were (figures and `computed_at` included)
  rather than replaced by nothing, until the file is fixed. `stale_reason`: the load error (file and field).
- `computed_at`: when the row was computed (UTC).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import numpy as np
import polars as pl

from eval_platform.experiments.config import ExperimentConfig, Guardrail, Metric
from eval_platform.schemas import (
    EXPERIMENT_RESULT_SCHEMA,
    FINAL_COMPLETED,
    UTC_TS,
    conform,
)
from eval_platform.stats.distributions import t_ppf
from eval_platform.stats.experiments import (
    INSUFFICIENT,
    UNDEFINED,
    bayesian_mean_comparison,
    beta_binomial_comparison,
    cohens_d,
    welch_t_test,
)
from eval_platform.stats.ranking import bradley_terry, wilson_interval, win_rates

BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no significant difference"


def experiment_results(
    experiments: Iterable[ExperimentConfig],
    scores: pl.DataFrame,
    traces: pl.DataFrame,
    computed_at: datetime | None = None,
) -> pl.DataFrame:
    """The `experiment_results` table for every experiment (see the module docstring for its columns).

    `scores` has `judge_scores` columns (at least evaluator, date, trace_id, trace_id_b, is_final, status, score,
    passed, winner, experiment_id, variant); `traces` has trace_id, experiment_id and variant.
    """
    final = scores.filter(FINAL_COMPLETED)
    frames = [analyze_experiment(config, final, traces) for config in experiments]
    if not frames:
        return conform(pl.DataFrame(), EXPERIMENT_RESULT_SCHEMA)
    stamp = pl.lit(computed_at or datetime.now(UTC), dtype=UTC_TS).alias("computed_at")
    return pl.concat(frames).with_columns(stamp)


def keep_stale_rows(fresh: pl.DataFrame, previous: pl.DataFrame | None, unavailable: dict[str, str]) -> pl.DataFrame:
    """The table to write: `fresh` (this run's rows) plus, for each experiment in `unavailable` (name -> why its
    file or an evaluator it names did not load), its rows in `previous` (the table as last written), unchanged but
    flagged `stale` with that reason. A broken file never turns an experiment's results into nothing."""
    if previous is None or not unavailable:
        return fresh
    reasons = pl.DataFrame(
        {"experiment": list(unavailable), "reason": list(unavailable.values())},
        schema={"experiment": pl.String(), "reason": pl.String()},
    )
    kept = (
        conform(previous, EXPERIMENT_RESULT_SCHEMA)
        .filter(~pl.col("experiment").is_in(fresh["experiment"].unique().implode()))
        .join(reasons, on="experiment", how="inner")
        .with_columns(pl.lit(True).alias("stale"), pl.col("reason").alias("stale_reason"))
    )
    return pl.concat([fresh, conform(kept, EXPERIMENT_RESULT_SCHEMA)])


def analyze_experiment(config: ExperimentConfig, scores: pl.DataFrame, traces: pl.DataFrame) -> pl.DataFrame:
    """All rows of one experiment: variant and comparison rows per metric, then the pairwise rows."""
    rows: list[dict] = []
    days: list[str | None] = []
    comparisons: dict[str, list[dict]] = {t: [] for t in config.treatments}
    for role, metric in config.metrics:
        values = metric_values(config, metric, scores)
        days += [values["date"].min(), values["date"].max()]
        rows += _variant_rows(config, metric, role, values)
        by_variant = {v: values.filter(pl.col("variant") == v)["value"].to_numpy() for v in config.variants}
        for treatment in config.treatments:
            row = _comparison_row(config, metric, role, treatment, by_variant[config.control], by_variant[treatment])
            comparisons[treatment].append(row)
    for treatment, (primary, *guardrails) in comparisons.items():
        primary["recommendation"] = recommendation(config, treatment, primary, guardrails)
        rows += [primary, *guardrails]
    if config.pairwise_evaluator:
        pairs = pairwise_verdicts(config, scores, traces)
        days += [pairs["date"].min(), pairs["date"].max()]
        rows += _pairwise_rows(config, pairs)
    days = [d for d in days if d is not None]
    start = str(config.start_date) if config.start_date else min(days, default=None)
    end = str(config.end_date) if config.end_date else max(days, default=None)
    base = {
        "experiment": config.name,
        "experiment_id": config.experiment_id,
        "control_variant": config.control,
        "method": config.method,
        "alpha": config.alpha,
        "start_date": start,
        "end_date": end,
        "stale": False,
    }
    return conform(pl.DataFrame([{**base, **row} for row in rows], infer_schema_length=None), EXPERIMENT_RESULT_SCHEMA)


def _in_window(config: ExperimentConfig) -> pl.Expr:
    condition = pl.lit(True)
    if config.start_date:
        condition &= pl.col("date") >= str(config.start_date)
    if config.end_date:
        condition &= pl.col("date") <= str(config.end_date)
    return condition


def metric_values(config: ExperimentConfig, metric: Metric, scores: pl.DataFrame) -> pl.DataFrame:
    """(date, variant, value) of one metric: final completed verdicts of the experiment's traces and variants."""
    frame = scores.filter(FINAL_COMPLETED & (pl.col("evaluator") == metric.evaluator) & _in_window(config))
    if config.experiment_id is not None:
        frame = frame.filter(pl.col("experiment_id") == config.experiment_id)
    return (
        frame.filter(pl.col("variant").is_in(config.variants))
        .select("date", "variant", pl.col(metric.field).cast(pl.Float64).alias("value"))
        .drop_nulls("value")
    )


def _variant_rows(config: ExperimentConfig, metric: Metric, role: str, values: pl.DataFrame) -> list[dict]:
    grouped = values.group_by("variant").agg(
        pl.len().alias("n"),
        pl.col("value").mean().alias("mean"),
        pl.col("value").std().alias("std"),
        pl.col("value").sum().alias("successes"),
    )
    found = {row["variant"]: row for row in grouped.iter_rows(named=True)}
    rows = []
    for variant in config.variants:
        group = found.get(variant, {"n": 0, "mean": None, "std": None, "successes": 0.0})
        low, high = _mean_interval(metric, group, config.alpha)
        rows.append(
            {
                **_metric_columns(metric, role),
                "kind": "variant",
                "variant": variant,
                "n": group["n"],
                "mean": group["mean"],
                "std": group["std"],
                "ci_low": low,
                "ci_high": high,
                "insufficient_sample": group["n"] < config.minimum_sample_size,
            }
        )
    return rows


def _mean_interval(metric: Metric, group: dict, alpha: float) -> tuple[float | None, float | None]:
    """Wilson for a pass rate, Student t for a mean score; None below two observations."""
    n = group["n"]
    if n < 2:
        return None, None
    if metric.field == "passed":
        low, high = wilson_interval(group["successes"], n, 1 - alpha)
        return float(low), float(high)
    half_width = t_ppf(1 - alpha / 2, n - 1) * group["std"] / np.sqrt(n)
    return group["mean"] - half_width, group["mean"] + half_width


def _metric_columns(metric: Metric, role: str) -> dict:
    return {"metric": metric.name, "evaluator": metric.evaluator, "metric_role": role, "direction": metric.direction}


def _comparison_row(
    config: ExperimentConfig, metric: Metric, role: str, treatment: str, control: np.ndarray, treated: np.ndarray
) -> dict:
    alpha, min_n = config.alpha, config.minimum_sample_size
    better_sign = 1.0 if metric.direction == "increase" else -1.0
    row = {
        **_metric_columns(metric, role),
        "kind": "comparison",
        "variant": treatment,
        "n": treated.size,
        "n_control": control.size,
        "mean": treated.mean() if treated.size else None,
        "std": treated.std(ddof=1) if treated.size > 1 else None,
        "mean_control": control.mean() if control.size else None,
        "insufficient_sample": min(control.size, treated.size) < min_n,
    }
    if control.size and treated.size:
        row["difference"] = row["mean"] - row["mean_control"]
        row["relative_difference"] = row["difference"] / abs(row["mean_control"]) if row["mean_control"] else None
    notes = []
    if config.method in ("frequentist", "both"):
        test = welch_t_test(control, treated, alpha=alpha, min_n=min_n)
        row |= {
            "diff_ci_low": test.ci_low,
            "diff_ci_high": test.ci_high,
            "t_statistic": test.t,
            "df": test.df,
            "p_value": test.p_value,
        }
        notes.append(test.note)
    if config.method in ("bayesian", "both"):
        posterior = _bayesian(metric, control, treated, alpha, min_n)
        better = posterior.prob_treatment_better
        loss = posterior.expected_loss_treatment if better_sign > 0 else posterior.expected_loss_control
        row |= {
            "prob_improvement": None if better is None else (better if better_sign > 0 else 1 - better),
            "expected_lift": posterior.expected_lift,
            "credible_low": posterior.ci_low,
            "credible_high": posterior.ci_high,
            "expected_loss": loss,
        }
        notes.append(posterior.note)
    effect = cohens_d(control, treated, min_n=min_n)
    row["cohens_d"] = effect.value
    row["effect_interpretation"] = effect.interpretation if effect.value is not None else None
    row["outcome"] = _outcome(config, row, better_sign)
    row["significant"] = row["outcome"] in (BETTER, WORSE) if row["outcome"] not in (INSUFFICIENT, UNDEFINED) else None
    row["note"] = "; ".join(dict.fromkeys(n for n in notes if n)) or None
    if isinstance(metric, Guardrail):
        row["guardrail_rule"] = metric.rule
        row["guardrail_passed"] = _guardrail_passed(config, metric, row)
    return row


def _bayesian(metric: Metric, control: np.ndarray, treated: np.ndarray, alpha: float, min_n: int):
    if metric.field == "passed":
        return beta_binomial_comparison(
            int(control.sum()),
            control.size,
            int(treated.sum()),
            treated.size,
            credible=1 - alpha,
            decision_threshold=1 - alpha,
            min_n=min_n,
        )
    return bayesian_mean_comparison(control, treated, credible=1 - alpha, decision_threshold=1 - alpha, min_n=min_n)


def _outcome(config: ExperimentConfig, row: dict, better_sign: float) -> str:
    if row["insufficient_sample"]:
        return INSUFFICIENT
    if config.method in ("frequentist", "both"):
        if row["p_value"] is None:
            return UNDEFINED
        if row["p_value"] >= config.alpha:
            return NO_DIFFERENCE
        return BETTER if better_sign * row["difference"] > 0 else WORSE
    probability = row["prob_improvement"]
    if probability is None:
        return UNDEFINED
    return BETTER if probability >= 1 - config.alpha else WORSE if probability <= config.alpha else NO_DIFFERENCE


def _guardrail_passed(config: ExperimentConfig, guardrail: Guardrail, row: dict) -> bool | None:
    if row["outcome"] in (INSUFFICIENT, UNDEFINED):
        return None
    passed = True
    if guardrail.max_degradation is not None:
        frequentist = config.method in ("frequentist", "both")
        low = row["diff_ci_low"] if frequentist else row["credible_low"]
        high = row["diff_ci_high"] if frequentist else row["credible_high"]
        worst_degradation = -low if guardrail.direction == "increase" else high
        passed &= worst_degradation <= guardrail.max_degradation
    if guardrail.must_not_be_significantly_worse:
        passed &= row["outcome"] != WORSE
    return passed


def _evidence(config: ExperimentConfig, row: dict) -> str:
    parts = []
    difference = row["difference"] if row["difference"] is not None else row["expected_lift"]
    if difference is not None:
        parts.append(f"{difference:+.3f}")
    if row.get("p_value") is not None:
        parts.append("p<0.001" if row["p_value"] < 0.001 else f"p={row['p_value']:.3f}")
    if row.get("prob_improvement") is not None:
        parts.append(f"P(better)={row['prob_improvement']:.3f}")
    return ", ".join(parts)


def recommendation(config: ExperimentConfig, treatment: str, primary: dict, guardrails: list[dict]) -> str:
    """The decision for one treatment, in words, from its primary comparison and its guardrail comparisons."""
    metric = primary["metric"]
    if primary["outcome"] == INSUFFICIENT:
        return (
            f"insufficient sample: {min(primary['n'], primary['n_control'])} < {config.minimum_sample_size} "
            f"per variant ({treatment}: {primary['n']}, {config.control}: {primary['n_control']})"
        )
    if primary["outcome"] == UNDEFINED:
        return f"no decision: {metric} cannot be tested ({primary['note'] or 'no variance'})"
    failed = [g for g in guardrails if g["guardrail_passed"] is False]
    unknown = [g for g in guardrails if g["guardrail_passed"] is None]
    failed_text = ", ".join(f"{g['metric']} ({_evidence(config, g)}; rule: {g['guardrail_rule']})" for g in failed)
    evidence = _evidence(config, primary)
    if primary["outcome"] == BETTER:
        if failed:
            return (
                f"do not ship {treatment}: {metric} improved significantly ({evidence}) "
                f"but guardrails failed: {failed_text}"
            )
        if unknown:
            names = ", ".join(f"{g['metric']} ({g['outcome']})" for g in unknown)
            return (
                f"hold {treatment}: {metric} improved significantly ({evidence}) "
                f"but guardrails could not be judged: {names}"
            )
        suffix = "all guardrails passed" if guardrails else "there are no guardrails"
        return f"ship {treatment}: {metric} improved significantly ({evidence}) and {suffix}"
    if primary["outcome"] == WORSE:
        text = f"keep {config.control}: {metric} is significantly worse with {treatment} ({evidence})"
    else:
        text = f"no significant difference in {metric} ({evidence}): keep {config.control}"
    return f"{text}; guardrails failed: {failed_text}" if failed else text


def pairwise_verdicts(config: ExperimentConfig, scores: pl.DataFrame, traces: pl.DataFrame) -> pl.DataFrame:
    """(date, left, right, winner) per final completed verdict of the pairwise evaluator between two different
    variants of the experiment; left is side A, right side B, winner left | right | tie. Each side's variant
    and experiment are those of the first row of its trace in `traces`; a verdict with a side not there is left
    out."""
    sides = traces.select("trace_id", "variant", "experiment_id")
    frame = scores.filter(
        FINAL_COMPLETED & (pl.col("evaluator") == config.pairwise_evaluator) & _in_window(config)
    ).select("date", "trace_id", "trace_id_b", "winner")
    lookup = _TraceLookup.of(sides)
    if lookup is None:  # trace ids repeat (or their hashes do): joins on the ids
        sides = sides.unique("trace_id", keep="first", maintain_order=True)
        frame = frame.join(sides.rename({"variant": "left", "experiment_id": "experiment_a"}), on="trace_id").join(
            sides.rename({"trace_id": "trace_id_b", "variant": "right", "experiment_id": "experiment_b"}),
            on="trace_id_b",
        )
    else:
        frame = lookup.attach(
            lookup.attach(frame, "trace_id", "left", "experiment_a"), "trace_id_b", "right", "experiment_b"
        )
    if config.experiment_id is not None:
        frame = frame.filter(
            (pl.col("experiment_a") == config.experiment_id) & (pl.col("experiment_b") == config.experiment_id)
        )
    return frame.filter(
        pl.col("left").is_in(config.variants)
        & pl.col("right").is_in(config.variants)
        & (pl.col("left") != pl.col("right"))
        & pl.col("winner").is_in(["A", "B", "tie"])
    ).select("date", "left", "right", pl.col("winner").replace_strict({"A": "left", "B": "right", "tie": "tie"}))


class _TraceLookup:
    """Finding trace ids among the rows of a traces frame whose ids are distinct: by binary search on the ids'
    64-bit hashes, each candidate checked against the id itself. The inner join on the ids, in a third of the
    time of a hash join on text (the verdicts of a day's pairs against every trace)."""

    def __init__(self, sides: pl.DataFrame, order: np.ndarray, keys: np.ndarray):
        self.sides, self.order, self.keys = sides, order, keys

    @classmethod
    def of(cls, sides: pl.DataFrame) -> _TraceLookup | None:
        """None when ids are missing or two rows' hashes are equal (repeated ids, or a collision)."""
        if sides.is_empty() or sides["trace_id"].null_count():
            return None
        hashes = sides["trace_id"].hash().to_numpy()
        order = np.argsort(hashes)  # distinct keys (else None below): no ties to keep in order
        keys = hashes[order]
        return None if (keys[1:] == keys[:-1]).any() else cls(sides.rechunk(), order, keys)  # one chunk: faster gathers

    def attach(self, frame: pl.DataFrame, id_column: str, variant: str, experiment: str) -> pl.DataFrame:
        """`frame`'s rows whose `id_column` is a trace id of the lookup, with that trace's variant and experiment."""
        wanted = frame[id_column].hash().to_numpy()
        at = np.minimum(np.searchsorted(self.keys, wanted), self.keys.size - 1)
        row = pl.Series(self.order[at]).cast(pl.UInt32 if self.keys.size <= np.iinfo(np.uint32).max else pl.UInt64)
        found = self.sides[row]
        same = pl.Series(self.keys[at] == wanted) & (found["trace_id"] == frame[id_column]).fill_null(False)
        return frame.with_columns(found["variant"].alias(variant), found["experiment_id"].alias(experiment)).filter(
            same
        )


def _pairwise_rows(config: ExperimentConfig, pairs: pl.DataFrame) -> list[dict]:
    metric = {
        "metric": f"{config.pairwise_evaluator}.winner",
        "evaluator": config.pairwise_evaluator,
        "metric_role": "pairwise",
    }
    rows = [
        _win_rate_row(config, metric, record, opponent=None)
        for record in win_rates(pairs["left"], pairs["right"], pairs["winner"], 1 - config.alpha).iter_rows(named=True)
    ]
    for treatment in config.treatments:
        duel = pairs.filter(
            pl.col("left").is_in([treatment, config.control]) & pl.col("right").is_in([treatment, config.control])
        )
        table = win_rates(duel["left"], duel["right"], duel["winner"], 1 - config.alpha).filter(
            pl.col("model") == treatment
        )
        rows += [
            _win_rate_row(config, metric, record, opponent=config.control) for record in table.iter_rows(named=True)
        ]
    ranking = bradley_terry(pairs["left"], pairs["right"], pairs["winner"])
    # The MM iteration stops within a 1e-10 relative tolerance, so strengths that are equal in theory differ in
    # their last digits and stats.ranking gives them different ranks; equal to 9 digits shares the best rank.
    table = ranking.table.with_columns(
        (pl.col("score") / pl.col("score").max()).round(9).rank("min", descending=True).alias("rank")
    ).sort("rank", "model")
    for record in table.iter_rows(named=True):
        rows.append(
            {
                **metric,
                "kind": "bradley_terry",
                "variant": record["model"],
                "n": record["comparisons"],
                "strength": record["score"],
                "rank": record["rank"],
                "note": ranking.note,
                "insufficient_sample": record["comparisons"] < config.minimum_sample_size,
            }
        )
    return rows


def _win_rate_row(config: ExperimentConfig, metric: dict, record: dict, opponent: str | None) -> dict:
    return {
        **metric,
        "kind": "win_rate",
        "variant": record["model"],
        "opponent": opponent,
        "n": record["comparisons"],
        "wins": record["wins"],
        "losses": record["losses"],
        "ties": record["ties"],
        "win_rate": record["win_rate"],
        "ci_low": record["ci_low"],
        "ci_high": record["ci_high"],
        "significant": bool(record["ci_low"] > 0.5 or record["ci_high"] < 0.5),
        "insufficient_sample": record["comparisons"] < config.minimum_sample_size,
    }
