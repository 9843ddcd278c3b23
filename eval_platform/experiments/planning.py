"""Planning columns of a comparison: the minimum detectable effect at the current sample and the sample per
variant needed for the metric's declared `target_effect`, both at the experiment's alpha (two-sided) and `power`.

Scores are planned for the two-sample t-test on the pooled standard deviation of the data so far; pass rates
with the normal approximation on Cohen's h around the control's current rate (`eval_platform.stats.power`).
Both are fixed-horizon figures: a sequential test (`method: sequential`) pays for looking every day with a
larger sample, and a multiple-comparison correction with a smaller per-test alpha.
"""

from __future__ import annotations

import math

import numpy as np

from eval_platform.experiments.config import ExperimentConfig, Metric
from eval_platform.stats.power import (
    cohens_h,
    minimum_detectable_effect,
    proportion_for_h,
    required_sample_size,
)


def _pooled_sd(control: np.ndarray, treated: np.ndarray) -> float | None:
    if min(control.size, treated.size) < 2:
        return None
    pooled = (control.var(ddof=1) * (control.size - 1) + treated.var(ddof=1) * (treated.size - 1)) / (
        control.size + treated.size - 2
    )
    return float(np.sqrt(pooled)) if pooled > 0 else None


def _count(n: float) -> int | None:
    return math.ceil(n - 1e-9) if np.isfinite(n) else None


def planning_columns(config: ExperimentConfig, metric: Metric, control: np.ndarray, treated: np.ndarray) -> dict:
    """`mde` (in the metric's units, in its better direction), `target_effect`, `required_n` (per variant,
    equal allocation), `power` (the target); null where the data cannot say (fewer than 2 observations per
    variant, no variance), and a `note` when the target cannot be reached from the control's rate."""
    columns: dict = {"target_effect": metric.target_effect, "power": config.power}
    alpha, power = config.alpha, config.power
    if min(control.size, treated.size) < 2:
        return columns  # the comparison's own note says the sample is too small
    ratio = treated.size / control.size
    if metric.field == "passed":
        rate = float(control.mean())
        sign = 1.0 if metric.direction == "increase" else -1.0
        h = minimum_detectable_effect(control.size, alpha, power, ratio, test="normal")
        columns["mde"] = abs(proportion_for_h(rate, sign * h) - rate) if np.isfinite(h) else None
        if metric.target_effect is not None:
            target_rate = rate + sign * metric.target_effect
            if not 0 <= target_rate <= 1:
                return columns | {"note": f"the control's rate {rate:.3f} cannot move by the target effect"}
            n = required_sample_size(cohens_h(rate, target_rate), alpha, power, test="normal")
            columns["required_n"] = _count(n)
        return columns
    sd = _pooled_sd(control, treated)
    if sd is None:
        return columns  # the comparison's own note says there is no variance
    d = minimum_detectable_effect(control.size, alpha, power, ratio, test="t")
    columns["mde"] = d * sd if np.isfinite(d) else None
    if metric.target_effect is not None:
        columns["required_n"] = _count(required_sample_size(metric.target_effect / sd, alpha, power, test="t"))
    return columns
