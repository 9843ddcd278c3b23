"""The analysis assets out of core (DuckDB under a memory limit, spilling to disk; what they use beyond 20M
judge_scores rows) give the same `agreement`, `ground_truth` and `experiment_results` as in memory: on a seeded
synthetic warehouse of 200k judge rows and 40k annotations, with DuckDB held to a few MB so that its joins and
aggregations must spill."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from eval_platform.agreement import compute
from eval_platform.agreement.out_of_core import open_scores
from eval_platform.defs.agreement import declared_categories, read_annotations, scan_scores
from eval_platform.experiments.analysis import experiment_results
from eval_platform.experiments.config import load_experiments
from eval_platform.experiments.inputs import experiment_inputs
from eval_platform.judging.loading import load_evaluators
from eval_platform.out_of_core import OUT_OF_CORE_ROWS_ENV, reads_out_of_core
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition
from tools.perf.analytics_outputs import _compare_table
from tools.perf.synthetic_warehouse import generate

TINY = "64MB"  # DuckDB's buffers: far below the 1 GB it would take by default (80% of RAM)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("analytics") / "data"
    generate(root, 200_000, 40_000, seed=3)
    return root


def _agreement(root: Path, scores, annotations) -> tuple[pl.DataFrame, pl.DataFrame]:
    return compute(
        load_evaluators(root / "evaluators"),
        scores,
        annotations,
        read_partition(DataRoot.from_env(root), "imported_judgments", {}),
        categories=declared_categories(root),
    )


def test_agreement_out_of_core_equals_in_memory(warehouse, tmp_path):
    where = DataRoot.from_env(warehouse)
    rows, truth = _agreement(warehouse, scan_scores(where), read_annotations(where))
    with open_scores(where, memory_limit=TINY, temp_directory=tmp_path) as scores:
        spilled_rows, spilled_truth = _agreement(warehouse, scores, read_annotations(where, lazy=True))
    sections = set(rows["section"])
    assert {"inter_annotator", "judge_vs_human", "judge_vs_judge", "position_consistency", "calibrated"} <= sections
    assert rows.filter(pl.col("section") == "judge_vs_judge")["n"].min() > 0  # pairs were really joined
    assert _compare_table("agreement", rows, spilled_rows) == []
    assert _compare_table("ground_truth", truth, spilled_truth) == []
    assert list(tmp_path.iterdir()) == []  # the spill folder is removed afterwards


def test_experiment_results_out_of_core_equal_in_memory(warehouse):
    configs = load_experiments(warehouse / "experiments", load_evaluators(warehouse / "evaluators"))
    needed = sorted(
        {m.evaluator for e in configs.values() for _, m in e.metrics}
        | {e.pairwise_evaluator for e in configs.values() if e.pairwise_evaluator}
    )
    pairwise = sorted({e.pairwise_evaluator for e in configs.values() if e.pairwise_evaluator})
    results = {}
    for out_of_core in (False, True):
        with experiment_inputs(DataRoot.from_env(warehouse), needed, pairwise, out_of_core, memory_limit=TINY) as (
            scores,
            traces,
        ):
            assert isinstance(scores, pl.LazyFrame) == out_of_core
            results[out_of_core] = experiment_results(configs.values(), scores, traces)
    assert set(results[False]["kind"]) == {"variant", "comparison", "win_rate", "bradley_terry"}
    assert results[False].filter(pl.col("kind") == "win_rate")["n"].min() > 0  # pairwise sides were resolved
    assert _compare_table("experiment_results", results[False], results[True]) == []


def test_the_assets_go_out_of_core_above_the_configured_number_of_judge_rows(warehouse, monkeypatch):
    assert not reads_out_of_core(DataRoot.from_env(warehouse))  # 200k rows: in memory by default
    monkeypatch.setenv(OUT_OF_CORE_ROWS_ENV, "100000")
    assert reads_out_of_core(DataRoot.from_env(warehouse))
    assert not reads_out_of_core(DataRoot.from_env(warehouse), out_of_core=False)
    assert not reads_out_of_core(DataRoot.from_env(warehouse.parent / "empty"))  # no judge_scores at all
