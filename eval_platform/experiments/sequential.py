"""`method: sequential`: the comparison of a treatment with the control read after every trace day.

The experiment is looked at once per day with data, on everything up to and including that day (cumulative
sufficient statistics per variant), and each look's mixture t-test (`eval_platform.stats.sequential`) is
combined with the earlier ones: the always-valid p-value is the smallest p-value of any look so far and the
confidence sequence the intersection of every look's interval. Both stay valid however many days are read, and
a day's figures do not change when later days arrive. A look counts once both variants have at least
`minimum_sample_size` observations; a backfilled earlier day changes the looks from that day on, as it changes
the data.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from eval_platform.experiments.config import ExperimentConfig
from eval_platform.stats.sequential import mixture_t_test, phi_from_effect_size, running


def daily_cumulative(values: pl.DataFrame, control: str, treatment: str) -> dict[str, np.ndarray]:
    """Per trace day with data (ascending `days`), each variant's n, Σ(x − centre) and Σ(x − centre)² up to and
    including that day. The centre (the pooled mean) keeps the sums of squares precise; the test is unchanged."""
    pair = values.filter(pl.col("variant").is_in([control, treatment]))
    centre = pair["value"].mean() if pair.height else 0.0
    per_day = (
        pair.with_columns((pl.col("value") - centre).alias("x"))
        .group_by("date", "variant")
        .agg(pl.len().alias("n"), pl.col("x").sum().alias("sum"), (pl.col("x") ** 2).sum().alias("sumsq"))
    )
    days = np.sort(per_day["date"].unique().to_numpy())
    totals: dict[str, np.ndarray] = {"days": days}
    for role, variant in (("c", control), ("t", treatment)):
        group = per_day.filter(pl.col("variant") == variant)
        where = np.searchsorted(days, group["date"].to_numpy())
        for column in ("n", "sum", "sumsq"):
            daily = np.zeros(days.size)
            daily[where] = group[column].to_numpy()
            totals[f"{column}_{role}"] = np.cumsum(daily)
    return totals


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def sequential_columns(config: ExperimentConfig, values: pl.DataFrame, treatment: str) -> dict:
    """`always_valid_p_value`, `cs_low`, `cs_high` (the confidence sequence of treatment − control at 1 − alpha;
    null while unbounded) and `sequential_looks` (days read), after the last day with data."""
    totals = daily_cumulative(values, config.control, treatment)
    test = mixture_t_test(
        totals["n_c"],
        totals["sum_c"],
        totals["sumsq_c"],
        totals["n_t"],
        totals["sum_t"],
        totals["sumsq_t"],
        alpha=config.alpha,
        phi=phi_from_effect_size(config.sequential_prior_effect_size),
        variance=config.sequential_variance,
    )
    enough = np.minimum(totals["n_c"], totals["n_t"]) >= max(config.minimum_sample_size, 2)
    looks = int((enough & ~np.isnan(test.p_value)).sum())
    if looks == 0:
        return {"sequential_looks": 0}
    masked = type(test)(**{name: np.where(enough, value, np.nan) for name, value in vars(test).items()})
    p_value, low, high = running(masked)
    # The difference is the plain estimate; an empty running intersection (possible only when the model is
    # wrong for the data) shows as cs_low > cs_high rather than being hidden.
    return {
        "always_valid_p_value": float(p_value[-1]),
        "cs_low": _finite(low[-1]),
        "cs_high": _finite(high[-1]),
        "sequential_looks": looks,
    }
