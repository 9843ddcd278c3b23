"""Suite scores and the leaderboard's paired gaps, on suites small enough to check by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from eval_platform.benchmarks.config import Suite
from eval_platform.benchmarks.leaderboard import leaderboard, suite_results
from eval_platform.schemas import BENCHMARK_RESULT_SCHEMA

SUITE = Suite.model_validate({
    "name": "s",
    "tasks": {
        name: {"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "exact_match"}], "weight": weight}
        for name, weight in (("a", 1.0), ("b", 1.0), ("c", 2.0))
    },
    "groups": {"ab": {"tasks": ["a", "b"], "aggregate": "micro"}},
})


def values(a: list[float], b: list[float], c: list[float]) -> dict[str, dict[str, float]]:
    return {task: {f"{task}{i}": v for i, v in enumerate(vals)} for task, vals in (("a", a), ("b", b), ("c", c))}


def test_group_micro_and_suite_macro_are_the_declared_means():
    case_values = values([1, 0, 1, 1], [0, 0], [1, 0, 0, 0, 0])
    rows = {(r["level"], r["name"], r["aggregate"]): r for r in suite_results("s", SUITE, "m", case_values, pl.DataFrame(schema=BENCHMARK_RESULT_SCHEMA)).to_dicts()}
    group = rows[("group", "ab", "micro")]
    assert group["value"] == pytest.approx(3 / 6)  # pooled over a and b's six cases
    # top-level units: group ab (weight 1) and task c (weight 2)
    assert rows[("suite", "s", "macro")]["value"] == pytest.approx((3 / 6 + 2 * (1 / 5)) / 3)
    assert rows[("suite", "s", "micro")]["value"] == pytest.approx(4 / 11)
    for row in rows.values():
        assert row["ci_low"] <= row["value"] <= row["ci_high"]


def test_all_equal_values_get_a_wilson_interval_not_zero_width():
    rows = suite_results("s", SUITE, "m", values([1] * 5, [1] * 5, [1] * 5), pl.DataFrame(schema=BENCHMARK_RESULT_SCHEMA))
    for row in rows.to_dicts():
        assert row["value"] == 1.0 and row["ci_high"] == 1.0
        assert row["ci_low"] < 1.0 and row["stderr"] > 0


def test_paired_gap_is_significant_only_when_the_cases_say_so():
    rng = np.random.default_rng(1)
    base = [rng.integers(0, 2, 60).astype(float).tolist() for _ in range(3)]
    strong = values(*[[1.0] * 60] * 3)
    same = values(*base)
    board = leaderboard("s", SUITE, {"strong": strong, "same": same, "twin": values(*base)}, {})
    macro = {r["model"]: r for r in board.filter(pl.col("aggregate") == "macro").to_dicts()}
    assert macro["strong"]["rank"] == 1 and macro["strong"]["gap_to_leader"] is None
    assert macro["same"]["significant_vs_leader"] is True and macro["same"]["gap_ci_high"] < 0
    assert macro["same"]["gap_to_leader"] == pytest.approx(macro["same"]["score"] - 1.0)
    # two models with the same answers on every case: a gap of exactly 0 in every resample
    board = leaderboard("s", SUITE, {"same": same, "twin": values(*base)}, {})
    twin = board.filter((pl.col("aggregate") == "macro") & (pl.col("rank") == 2)).to_dicts()[0]
    assert twin["gap_to_leader"] == 0 and twin["significant_vs_leader"] is False and twin["paired_cases"] == 180
