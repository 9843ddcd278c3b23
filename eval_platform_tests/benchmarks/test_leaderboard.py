"""Suite scores and the leaderboard's paired gaps, on suites small enough to check by hand."""

from __future__ import annotations

import functools

import numpy as np
import polars as pl
import pytest
from sacrebleu.metrics import BLEU

from eval_platform.benchmarks.config import Suite
from eval_platform.benchmarks.leaderboard import RESAMPLES, leaderboard, suite_results
from eval_platform.benchmarks.task_results import task_cases, task_results
from eval_platform.schemas import BENCHMARK_CASE_SCHEMA, BENCHMARK_RESULT_SCHEMA
from eval_platform.scoring import registry

SUITE = Suite.model_validate(
    {
        "name": "s",
        "tasks": {
            name: {"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "exact_match"}], "weight": weight}
            for name, weight in (("a", 1.0), ("b", 1.0), ("c", 2.0))
        },
        "groups": {"ab": {"tasks": ["a", "b"], "aggregate": "micro"}},
    }
)


def values(a: list[float], b: list[float], c: list[float]) -> dict[str, dict[str, float]]:
    return {task: {f"{task}{i}": v for i, v in enumerate(vals)} for task, vals in (("a", a), ("b", b), ("c", c))}


def test_group_micro_and_suite_macro_are_the_declared_means():
    case_values = values([1, 0, 1, 1], [0, 0], [1, 0, 0, 0, 0])
    rows = {
        (r["level"], r["name"], r["aggregate"]): r
        for r in suite_results("s", SUITE, "m", case_values, pl.DataFrame(schema=BENCHMARK_RESULT_SCHEMA)).to_dicts()
    }
    group = rows[("group", "ab", "micro")]
    assert group["value"] == pytest.approx(3 / 6)  # pooled over a and b's six cases
    # top-level units: group ab (weight 1) and task c (weight 2)
    assert rows[("suite", "s", "macro")]["value"] == pytest.approx((3 / 6 + 2 * (1 / 5)) / 3)
    assert rows[("suite", "s", "micro")]["value"] == pytest.approx(4 / 11)
    for row in rows.values():
        assert row["ci_low"] <= row["value"] <= row["ci_high"]


def test_all_equal_values_get_a_wilson_interval_not_zero_width():
    rows = suite_results(
        "s", SUITE, "m", values([1] * 5, [1] * 5, [1] * 5), pl.DataFrame(schema=BENCHMARK_RESULT_SCHEMA)
    )
    for row in rows.to_dicts():
        assert row["value"] == 1.0 and row["ci_high"] == 1.0
        assert row["ci_low"] < 1.0 and row["stderr"] > 0


def test_a_bootstrap_without_width_gets_a_wilson_interval_around_the_value_it_describes():
    # every case of a right, every case of b wrong: every draw of the macro mean (a, b) is 0.5, while the pooled cases
    # are 20 of 21 right; the interval is the macro value's, not the pooled mean's
    suite = Suite.model_validate(
        {
            "name": "s",
            "tasks": {
                name: {"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "exact_match"}]}
                for name in ("a", "b")
            },
        }
    )
    case_values = {"a": {f"a{i}": 1.0 for i in range(20)}, "b": {"b0": 0.0}}
    rows = {
        r["aggregate"]: r
        for r in suite_results("s", suite, "m", case_values, pl.DataFrame(schema=BENCHMARK_RESULT_SCHEMA)).to_dicts()
    }
    macro = rows["macro"]
    assert macro["value"] == 0.5 and macro["ci_low"] < 0.5 < macro["ci_high"] and macro["stderr"] > 0
    assert rows["micro"]["ci_low"] <= 20 / 21 <= rows["micro"]["ci_high"]


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


# --- corpus metrics (BLEU): a group, suite or leaderboard uses the task's corpus score, not its mean sentence score


def long_right_short_wrong() -> tuple[list[str], list[str]]:
    """4 long outputs equal to their reference and 16 short wrong ones: sentence BLEU is 1 or 0 (mean 0.2), corpus
    BLEU (every n-gram pooled) about 0.70."""
    outputs = [" ".join(f"w{i}_{j}" for j in range(24)) for i in range(4)]
    references = list(outputs)
    outputs += [f"x{i} y{i} z{i} q{i}" for i in range(16)]
    references += [f"a{i} b{i} c{i} d{i}" for i in range(16)]
    return outputs, references


def long_wrong_short_right() -> list[str]:
    """Outputs for the same references: the long ones wrong, the short ones right (mean sentence BLEU 0.8, corpus
    BLEU about 0.28)."""
    _, references = long_right_short_wrong()
    return [" ".join(f"v{i}_{j}" for j in range(24)) for i in range(4)] + references[4:]


def bleu_cases(outputs: list[str], references: list[str], task: str = "t") -> pl.DataFrame:
    """`benchmark_cases` rows of a BLEU task as the runner writes them (sentence BLEU as each row's value)."""
    bleu = registry.get("bleu")
    rows = [
        {
            "task": task,
            "case_id": f"c{i:02d}",
            "sample": 0,
            "presentation": "",
            "status": "COMPLETED",
            "output": out,
            "expected_output": ref,
            "expected_output_json": False,
            "cost_usd": 0.0,
            "scores": [{"metric": "bleu", "value": bleu.score(out, {"expected_output": ref})}],
        }
        for i, (out, ref) in enumerate(zip(outputs, references, strict=True))
    ]
    return pl.DataFrame(rows, schema=BENCHMARK_CASE_SCHEMA)


def bleu_suite(aggregate: str, extra_tasks: dict | None = None) -> Suite:
    tasks = {"t": {"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "bleu"}]}, **(extra_tasks or {})}
    groups = {"g": {"tasks": list(tasks), "aggregate": aggregate}}
    return Suite.model_validate({"name": "s", "tasks": tasks, "groups": groups})


@functools.cache
def sacrebleu_draws(outputs: tuple[str, ...], references: tuple[str, ...]) -> np.ndarray:
    """sacrebleu's own corpus_score on each draw of cases a one-task suite resamples (seeded as the suite's
    bootstrap, seed 0: the same draws for every model, as the paired gap needs)."""
    n = len(outputs)
    index = np.random.default_rng(0).integers(0, n, (RESAMPLES, n))
    metric = BLEU(effective_order=True)
    return np.array(
        [metric.corpus_score([outputs[i] for i in d], [[references[i] for i in d]]).score / 100 for d in index]
    )


@pytest.mark.parametrize("aggregate", ["macro", "micro"])
def test_a_group_of_one_bleu_task_reports_the_tasks_own_corpus_score_and_interval(aggregate):
    outputs, references = long_right_short_wrong()
    suite, frame = bleu_suite(aggregate), bleu_cases(outputs, references)
    task_row = task_results(frame, "s", "t", suite.tasks["t"], "m")
    rows = {
        (r["level"], r["aggregate"]): r
        for r in suite_results("s", suite, "m", {"t": task_cases(frame, suite.tasks["t"])}, task_row).to_dicts()
    }
    (task,) = task_row.to_dicts()
    corpus = BLEU(effective_order=True).corpus_score(outputs, [references]).score / 100
    assert task["value"] == pytest.approx(corpus) and task["value"] > 0.6  # the mean sentence score is 0.2
    # the peer: sacrebleu's corpus_score on the very draws of cases the suite's bootstrap makes
    peer = sacrebleu_draws(tuple(outputs), tuple(references))
    for key in (("group", aggregate), ("suite", "macro"), ("suite", "micro")):
        row = rows[key]
        assert row["value"] == pytest.approx(task["value"], abs=1e-12), key
        assert row["ci_low"] <= row["value"] <= row["ci_high"], key
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(np.quantile(peer, [0.025, 0.975])), abs=1e-12)
        # the same resampling as the task's own row: the same interval
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((task["ci_low"], task["ci_high"]), abs=1e-12)


def test_a_group_with_a_bleu_task_and_a_mean_task_weighs_the_tasks_values():
    outputs, references = long_right_short_wrong()
    exact = {"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "exact_match"}], "weight": 3.0}
    frame = bleu_cases(outputs, references)
    right = {f"e{i}": float(i % 4 == 0) for i in range(30)}  # 8 of 30
    for aggregate in ("macro", "micro"):
        suite = bleu_suite(aggregate, {"e": exact})
        values = {"t": task_cases(frame, suite.tasks["t"]), "e": right}
        rows = {
            (r["level"], r["aggregate"]): r
            for r in suite_results("s", suite, "m", values, pl.DataFrame(schema=BENCHMARK_RESULT_SCHEMA)).to_dicts()
        }
        corpus = BLEU(effective_order=True).corpus_score(outputs, [references]).score / 100
        group = rows[("group", aggregate)]
        if aggregate == "macro":  # the tasks' values, weighted by the tasks' weights (1 and 3)
            assert group["value"] == pytest.approx((corpus + 3 * 8 / 30) / 4)
        else:  # lm-evaluation-harness's weight_by_size: each task's value weighted by its cases (20 and 30)
            assert group["value"] == pytest.approx((20 * corpus + 8) / 50)
        assert rows[("suite", "micro")]["value"] == pytest.approx((20 * corpus + 8) / 50)
        for row in rows.values():
            assert row["ci_low"] <= row["value"] <= row["ci_high"]


def test_the_leaderboard_ranks_by_corpus_bleu_and_its_paired_gap_recomputes_both_corpus_scores():
    outputs, references = long_right_short_wrong()
    other = long_wrong_short_right()
    suite = bleu_suite("macro")
    by_model = {
        "long-right": {"t": task_cases(bleu_cases(outputs, references), suite.tasks["t"])},
        "short-right": {"t": task_cases(bleu_cases(other, references), suite.tasks["t"])},
    }
    metric = BLEU(effective_order=True)
    corpus = {
        "long-right": metric.corpus_score(outputs, [references]).score / 100,
        "short-right": metric.corpus_score(other, [references]).score / 100,
    }
    # mean sentence BLEU (0.2 and 0.8) ranks them the other way
    assert corpus["long-right"] > 0.6 > 0.3 > corpus["short-right"]
    board = leaderboard("s", suite, by_model, {})
    leader_draws = sacrebleu_draws(tuple(outputs), tuple(references))
    other_draws = sacrebleu_draws(tuple(other), tuple(references))
    for row in board.to_dicts():
        assert row["leader"] == "long-right"
        assert row["score"] == pytest.approx(corpus[row["model"]], abs=1e-12)
        assert row["ci_low"] <= row["score"] <= row["ci_high"]
        if row["model"] == "short-right":
            assert row["rank"] == 2
            assert row["gap_to_leader"] == pytest.approx(corpus["short-right"] - corpus["long-right"], abs=1e-12)
            # paired: both models' corpus scores on the same drawn cases, as sacrebleu computes them
            expected = np.quantile(other_draws - leader_draws, [0.025, 0.975])
            assert (row["gap_ci_low"], row["gap_ci_high"]) == pytest.approx(tuple(expected), abs=1e-12)
            assert row["gap_ci_low"] <= row["gap_to_leader"] <= row["gap_ci_high"]
            assert row["significant_vs_leader"] is True and row["paired_cases"] == 20
