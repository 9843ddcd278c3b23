"""Task metric summaries: Wilson intervals equal statsmodels', edges never claim a stderr of 0, bootstrap is seeded."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sacrebleu.metrics import BLEU

from eval_platform.benchmarks.config import Task
from eval_platform.benchmarks.results import (
    summarize,
    summarize_corpus,
)
from eval_platform.benchmarks.task_results import task_results
from eval_platform.schemas import BENCHMARK_CASE_SCHEMA
from eval_platform.scoring import registry


def test_all_right_or_all_wrong_has_an_honest_interval():
    for values in (np.ones(12), np.zeros(12)):
        summary = summarize(values)
        assert summary.stderr > 0 and summary.ci_high - summary.ci_low > 0.1
        assert summary.ci_low <= summary.value <= summary.ci_high


def test_continuous_values_bootstrap_is_seeded_and_covers_the_mean():
    values = np.random.default_rng(1).uniform(size=200)
    first, again = summarize(values, seed=3), summarize(values, seed=3)
    assert first == again
    assert first.ci_low < first.value < first.ci_high
    assert first.stderr == pytest.approx(values.std(ddof=1) / np.sqrt(200))


def test_nothing_answered_is_no_value_not_zero():
    assert summarize(np.array([])).value is None


def corpus_task() -> tuple[list[str], list[str]]:
    """10 long outputs equal to their reference and 40 short wrong ones: sentence BLEU is 1 or 0 (mean 0.2), while
    corpus BLEU, pooling every n-gram, is about 0.95."""
    outputs = [" ".join(f"w{i}_{j}" for j in range(60)) for i in range(10)]
    references = list(outputs)
    outputs += [f"x{i} y{i} z{i} q{i}" for i in range(40)]
    references += [f"a{i} b{i} c{i} d{i}" for i in range(40)]
    return outputs, references


def test_a_corpus_bleu_task_reports_an_interval_around_its_corpus_score():
    outputs, references = corpus_task()
    bleu = registry.get("bleu")
    rows = [
        {
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
    frame = pl.DataFrame(rows, schema=BENCHMARK_CASE_SCHEMA)
    task = Task.model_validate({"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "bleu"}]})
    (row,) = task_results(frame, "s", "t", task, "m").to_dicts()
    corpus = BLEU(effective_order=True).corpus_score(outputs, [references]).score / 100
    assert row["value"] == pytest.approx(corpus) and row["value"] > 0.9 and row["aggregate"] == "corpus"
    # Before, the interval was the mean sentence score's (about 0.10-0.32), entirely below the value it described.
    assert row["ci_low"] <= row["value"] <= row["ci_high"] and row["ci_low"] > 0.8
    assert 0 < row["stderr"] < 0.05


def test_the_corpus_bootstrap_equals_resampling_cases_through_sacrebleu_itself():
    outputs, references = corpus_task()
    bleu, resamples = registry.get("bleu"), 200
    options = bleu.options()
    cases = [{"expected_output": ref} for ref in references]
    value = bleu.aggregate([], outputs, cases, options)
    summary = summarize_corpus(
        value,
        bleu.statistics(outputs, cases, options),
        lambda summed: bleu.from_statistics(summed, options),
        seed=5,
        resamples=resamples,
    )
    # the peer: the same draws of cases, each scored by sacrebleu's public corpus_score
    draws = np.random.default_rng(5).integers(0, len(outputs), size=(resamples, len(outputs)))
    metric = BLEU(effective_order=True)
    peer = [metric.corpus_score([outputs[i] for i in d], [[references[i] for i in d]]).score / 100 for d in draws]
    assert (summary.ci_low, summary.ci_high) == pytest.approx(tuple(np.quantile(peer, [0.025, 0.975])))
    assert summary.stderr == pytest.approx(np.std(peer, ddof=1))
    assert summary.value == value


def test_a_corpus_score_over_one_case_has_an_honest_interval():
    bleu = registry.get("bleu")
    options = bleu.options()
    cases = [{"expected_output": "the cat sat on the mat"}]
    stats = bleu.statistics(["the cat sat on a mat"], cases, options)
    value = bleu.from_statistics(stats.sum(0), options)
    summary = summarize_corpus(value, stats, lambda summed: bleu.from_statistics(summed, options))
    assert summary.stderr > 0 and summary.ci_low <= value <= summary.ci_high and summary.ci_high - summary.ci_low > 0.1


def test_a_corpus_bleu_task_of_one_case_reports_its_row():
    """Every bootstrap draw of one case is equal: the interval is Wilson's, as plain numbers in the task's row
    (before, numpy 0-d arrays, which the results table refused: the task's results failed)."""
    bleu = registry.get("bleu")
    output, reference = "the cat sat on a mat", "the cat sat on the mat"
    row = {
        "case_id": "c0",
        "sample": 0,
        "presentation": "",
        "status": "COMPLETED",
        "output": output,
        "expected_output": reference,
        "expected_output_json": False,
        "cost_usd": 0.0,
        "scores": [{"metric": "bleu", "value": bleu.score(output, {"expected_output": reference})}],
    }
    task = Task.model_validate({"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "bleu"}]})
    (result,) = task_results(pl.DataFrame([row], schema=BENCHMARK_CASE_SCHEMA), "s", "t", task, "m").to_dicts()
    assert result["n"] == 1 and result["ci_low"] <= result["value"] <= result["ci_high"]
    assert result["ci_high"] - result["ci_low"] > 0.1 and result["stderr"] > 0


def test_repeated_samples_report_pass_at_k_and_pass_hat_k_with_intervals():
    """Four samples per case: a case always right, one right once, one never, one with a FAILED sample (left out
    of the k-sample rows); the rows have metric names of their own, so a query on the metric finds its mean."""
    from eval_platform.stats.repeated import pass_at_k, pass_hat_k

    right = {"always": [1, 1, 1, 1], "once": [0, 1, 0, 0], "never": [0, 0, 0, 0], "broken": [1, 1, 1, None]}
    right |= {f"flaky{i}": [1, 0, 1, i % 2] for i in range(20)}
    rows = [
        {
            "case_id": case,
            "sample": sample,
            "presentation": "",
            "status": "FAILED" if value is None else "COMPLETED",
            "output": "x",
            "cost_usd": 0.0,
            "scores": [] if value is None else [{"metric": "exact_match", "value": float(value)}],
        }
        for case, values in right.items()
        for sample, value in enumerate(values)
    ]
    frame = pl.DataFrame(rows, schema=BENCHMARK_CASE_SCHEMA)
    task = Task.model_validate(
        {"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "exact_match"}], "samples": 4}
    )
    results = task_results(frame, "s", "t", task, "m")
    assert results["metric"].to_list() == ["exact_match", "exact_match.pass@4", "exact_match.pass^4"]
    complete = sorted(c for c in right if c != "broken")
    n = np.full(len(complete), 4)
    c = np.array([sum(right[case]) for case in complete])
    for metric, estimator in (("exact_match.pass@4", pass_at_k), ("exact_match.pass^4", pass_hat_k)):
        row = results.filter(pl.col("metric") == metric).row(0, named=True)
        per_case = estimator(n, c, 4)
        assert row["k"] == 4 and row["n"] == len(complete) and row["n_failed"] == 1
        assert row["value"] == pytest.approx(per_case.mean())
        assert row["ci_low"] < row["value"] < row["ci_high"]
    at_k = results.filter(pl.col("metric") == "exact_match.pass@4")["value"][0]
    hat_k = results.filter(pl.col("metric") == "exact_match.pass^4")["value"][0]
    assert at_k == pytest.approx((1 + 1 + 20) / 23) and hat_k == pytest.approx(1 / 23)  # flaky: right, not reliably
    assert results.filter(pl.col("metric") == "exact_match")["k"][0] is None


def test_pass_at_asks_for_any_k_up_to_the_samples():
    """`pass_at: [1, 2, 5]` over 5 samples: the unbiased estimator (Chen et al. 2021) per case, by hand. A case
    right on 2 of 5 samples has pass@1 = 2/5, pass@2 = 1 - C(3,2)/C(5,2) = 0.7, pass^2 = C(2,2)/C(5,2) = 0.1; a
    case with 3 scored samples (1 right) counts for k <= 3 (pass@1 = 1/3, pass@2 = 2/3) and not for k = 5."""
    right = {"a": [0, 1, 0, 1, 0], "b": [1] * 5, "c": [0] * 5, "d": [1, 0, 0, None, None]}
    rows = [
        {
            "case_id": case,
            "sample": sample,
            "presentation": "",
            "status": "FAILED" if value is None else "COMPLETED",
            "output": "x",
            "cost_usd": 0.0,
            "scores": [] if value is None else [{"metric": "exact_match", "value": float(value)}],
        }
        for case, values in right.items()
        for sample, value in enumerate(values)
    ]
    task = Task.model_validate(
        {
            "dataset": "d",
            "prompt": "{{input}}",
            "scorers": [{"name": "exact_match"}],
            "samples": 5,
            "pass_at": [5, 1, 2],
        }
    )
    results = task_results(pl.DataFrame(rows, schema=BENCHMARK_CASE_SCHEMA), "s", "t", task, "m")
    got = {row["metric"]: (row["k"], row["n"], row["n_failed"], row["value"]) for row in results.iter_rows(named=True)}
    expected = {
        "exact_match.pass@1": (1, 4, 0, (0.4 + 1 + 0 + 1 / 3) / 4),
        "exact_match.pass^1": (1, 4, 0, (0.4 + 1 + 0 + 1 / 3) / 4),
        "exact_match.pass@2": (2, 4, 0, (0.7 + 1 + 0 + 2 / 3) / 4),
        "exact_match.pass^2": (2, 4, 0, (0.1 + 1 + 0 + 0) / 4),
        "exact_match.pass@5": (5, 3, 1, 2 / 3),
        "exact_match.pass^5": (5, 3, 1, 1 / 3),
    }
    assert results["metric"].to_list() == ["exact_match", *expected]
    for metric, (k, n, n_failed, value) in expected.items():
        assert got[metric][:3] == (k, n, n_failed) and got[metric][3] == pytest.approx(value, abs=1e-12), metric


def test_one_sample_adds_no_rows():
    frame = pl.DataFrame(
        [
            {
                "case_id": "a",
                "sample": 0,
                "presentation": "",
                "status": "COMPLETED",
                "output": "x",
                "cost_usd": 0.0,
                "scores": [{"metric": "exact_match", "value": 1.0}],
            }
        ],
        schema=BENCHMARK_CASE_SCHEMA,
    )
    task = Task.model_validate({"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "exact_match"}]})
    assert task_results(frame, "s", "t", task, "m")["metric"].to_list() == ["exact_match"]
