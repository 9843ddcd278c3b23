"""One metric of an experiment: its values per variant, each variant's statistics, each treatment's comparison
with the control (frequentist, Bayesian or sequential), the multiple-comparison correction across the
experiment's comparisons, guardrails and the recommendation in words. The columns the rows fill are described
in `eval_platform.experiments.analysis`."""

from __future__ import annotations

import numpy as np
import polars as pl

from eval_platform.experiments.config import ExperimentConfig, Guardrail, Metric
from eval_platform.experiments.planning import planning_columns
from eval_platform.experiments.sequential import sequential_columns
from eval_platform.schemas import FINAL_COMPLETED
from eval_platform.stats.distributions import t_ppf
from eval_platform.stats.experiments import (
    INSUFFICIENT,
    UNDEFINED,
    bayesian_mean_comparison,
    beta_binomial_comparison,
    cohens_d,
    welch_t_test,
)
from eval_platform.stats.multiplicity import adjust_p_values
from eval_platform.stats.proportions import wilson_interval

BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no significant difference"
CORRECTION_NAMES = {"holm": "Holm", "benjamini_hochberg": "Benjamini-Hochberg"}


def in_window(config: ExperimentConfig) -> pl.Expr:
    condition = pl.lit(True)
    if config.start_date:
        condition &= pl.col("date") >= str(config.start_date)
    if config.end_date:
        condition &= pl.col("date") <= str(config.end_date)
    return condition


def metric_values(config: ExperimentConfig, metric: Metric, scores: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """(date, variant, value, trace_id) of one metric: final completed verdicts of the experiment's traces and
    variants (trace_id: for the human-calibrated figures, `experiments.calibrated`). `scores` may be lazy
    (`experiment_inputs` out of core): only this metric's rows are then read, streaming."""
    frame = scores.lazy().filter(FINAL_COMPLETED & (pl.col("evaluator") == metric.evaluator) & in_window(config))
    if config.experiment_id is not None:
        frame = frame.filter(pl.col("experiment_id") == config.experiment_id)
    return (
        frame.filter(pl.col("variant").is_in(config.variants))
        .select("date", "variant", pl.col(metric.field).cast(pl.Float64).alias("value"), "trace_id")
        .drop_nulls("value")
        .collect(engine="streaming" if isinstance(scores, pl.LazyFrame) else "auto")
    )


def variant_rows(config: ExperimentConfig, metric: Metric, role: str, values: pl.DataFrame) -> list[dict]:
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


def comparison_row(
    config: ExperimentConfig,
    metric: Metric,
    role: str,
    treatment: str,
    control: np.ndarray,
    treated: np.ndarray,
    values: pl.DataFrame | None = None,
) -> dict:
    """One treatment against the control on one metric, decided as if it were the experiment's only comparison;
    `decide_with_correction` then decides all of an experiment's comparisons together. `values` (date, variant,
    value) is needed by `method: sequential`, which reads the days in order."""
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
    if config.method == "sequential":
        if values is None:
            raise ValueError("method: sequential needs the metric's values with their dates")
        row |= sequential_columns(config, values, treatment)
        if not row["insufficient_sample"] and row.get("always_valid_p_value") is None:
            notes.append("no variance: the sequential test cannot be computed")
    effect = cohens_d(control, treated, min_n=min_n)
    row["cohens_d"] = effect.value
    row["effect_interpretation"] = effect.interpretation if effect.value is not None else None
    planning = planning_columns(config, metric, control, treated)
    notes.append(planning.pop("note", None))
    row |= planning
    row["note"] = "; ".join(dict.fromkeys(n for n in notes if n)) or None
    if isinstance(metric, Guardrail):
        row["guardrail_rule"] = metric.rule
    decide_with_correction(config, [(metric, row)])
    return row


def _decision_p_value(config: ExperimentConfig, row: dict) -> float | None:
    """The p-value the decision rests on: Welch's (frequentist, both), the always-valid one (sequential), none
    (bayesian: the posterior probability decides)."""
    if config.method in ("frequentist", "both"):
        return row.get("p_value")
    if config.method == "sequential":
        return row.get("always_valid_p_value")
    return None


def _test_name(config: ExperimentConfig) -> str:
    return "always-valid p (mixture sequential t-test)" if config.method == "sequential" else "Welch p"


def decide_with_correction(config: ExperimentConfig, comparisons: list[tuple[Metric, dict]]) -> None:
    """Decide every comparison of one experiment together (in place): the p-values of all treatments × metrics
    that could be tested form one family, adjusted by the experiment's `multiple_comparisons` rule; `outcome`,
    `significant`, `guardrail_passed` follow the adjusted p-value, and `significance_rule` says which rule it was.
    With `method: bayesian` there are no p-values: the posterior rule decides each comparison, unadjusted."""
    family = [
        row for _, row in comparisons if not row["insufficient_sample"] and _decision_p_value(config, row) is not None
    ]
    rule = config.multiple_comparisons
    adjusted = adjust_p_values([_decision_p_value(config, row) for row in family], rule)
    for row, p_adjusted in zip(family, adjusted, strict=True):
        row["p_value_adjusted"] = float(p_adjusted)
    if config.method == "bayesian":
        text = f"posterior P(better) >= {1 - config.alpha:g} or <= {config.alpha:g} (not adjusted)"
    elif rule == "none" or len(family) <= 1:
        text = f"{_test_name(config)} < {config.alpha:g}" + (
            f" (not adjusted, {len(family)} tests)" if len(family) > 1 else " (one test)"
        )
    else:
        text = f"{CORRECTION_NAMES[rule]}-adjusted {_test_name(config)} < {config.alpha:g} ({len(family)} tests)"
    for metric, row in comparisons:
        row["significance_rule"] = text
        better_sign = 1.0 if metric.direction == "increase" else -1.0
        row["outcome"] = _outcome(config, row, better_sign)
        decided = row["outcome"] not in (INSUFFICIENT, UNDEFINED)
        row["significant"] = row["outcome"] in (BETTER, WORSE) if decided else None
        if isinstance(metric, Guardrail):
            row["guardrail_passed"] = _guardrail_passed(config, metric, row)


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
    if config.method != "bayesian":
        if row.get("p_value_adjusted") is None:
            return UNDEFINED
        if row["p_value_adjusted"] >= config.alpha:
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
        interval = {"sequential": ("cs_low", "cs_high"), "bayesian": ("credible_low", "credible_high")}
        low_name, high_name = interval.get(config.method, ("diff_ci_low", "diff_ci_high"))
        bound = row.get(low_name) if guardrail.direction == "increase" else row.get(high_name)
        if bound is None:  # an unbounded confidence sequence rules out no degradation yet
            return False
        worst_degradation = -bound if guardrail.direction == "increase" else bound
        passed &= worst_degradation <= guardrail.max_degradation
    if guardrail.must_not_be_significantly_worse:
        passed &= row["outcome"] != WORSE
    return passed


def _p_text(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _evidence(config: ExperimentConfig, row: dict) -> str:
    parts = []
    difference = row["difference"] if row["difference"] is not None else row["expected_lift"]
    if difference is not None:
        parts.append(f"{difference:+.3f}")
    decision_p = _decision_p_value(config, row)
    if decision_p is not None:
        text = _p_text(decision_p)
        adjusted = row.get("p_value_adjusted")
        if config.method == "sequential":
            text = f"always-valid {text}"
        if adjusted is not None and _p_text(adjusted) != _p_text(decision_p):
            text += f", {CORRECTION_NAMES.get(config.multiple_comparisons, 'adjusted')}-adjusted {_p_text(adjusted)}"
        parts.append(text)
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
