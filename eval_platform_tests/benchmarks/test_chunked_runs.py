"""A benchmark task works through its dataset a chunk of cases at a time and its bootstrap a chunk of draws at a time:
memory bounded by the chunk, and every table (cases, task / group / suite results, leaderboard) exactly what one pass
over all the cases gives."""

from __future__ import annotations

import json
import shutil
import tracemalloc

import dagster as dg
import numpy as np
import polars as pl
import pytest
import yaml

from eval_platform.benchmarks import leaderboard as board_module
from eval_platform.benchmarks.config import Suite, load_models, load_suite
from eval_platform.benchmarks.results import TaskCases, summarize
from eval_platform.benchmarks.runner import CHUNK_CASES_ENV, CHUNK_ROWS, TaskRun, chunk_cases, run_task_chunks
from eval_platform.definitions import build_definitions
from eval_platform.defs.resources import JudgeResource
from eval_platform.ingest import datasets
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_parquet, table_glob
from eval_platform_tests.conftest import REPO_DATA

# A call per case and sample (numeric_match per case, corpus BLEU over the task), the same outputs judged by an
# evaluator (a judge call per row), and a pairwise judge task shown in both orders (a task-level kappa).
SUITE = """
name: mix
tasks:
  answer:
    dataset: gsm8k
    prompt: "{{input}}"
    samples: 2
    scorers: [{name: numeric_match}, {name: bleu}]
  judged:
    dataset: gsm8k
    outputs_of: answer
    scorers: [{name: judge, options: {evaluator: helpfulness}}]
  pairs:
    dataset: llmbar_natural
    as_judge:
      pair: [metadata.output_1, metadata.output_2]
      evaluator: {mode: pairwise, prompt: "{{input}} (a) {{output_a}} (b) {{output_b}}"}
    scorers: [{name: pair_accuracy}, {name: llmbar_kappa}]
groups:
  all: {tasks: [answer, judged, pairs], aggregate: micro}
"""
MODELS = {"a-18": {"model": "local/fixed/The answer is 18."}, "longest": {"model": "local/longest"}}
# When a row was computed, and how long its call took: the only columns two runs may differ in.
TIMES = ["run_at", "computed_at", "latency_ms"]


def _project(root) -> None:
    for name in ("gsm8k", "llmbar_natural"):
        shutil.copytree(REPO_DATA / "datasets" / name, root / "datasets" / name)
    (root / "evaluators").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_DATA / "evaluators" / "helpfulness.yaml", root / "evaluators")
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "mix.yaml").write_text(SUITE)
    (root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump({"models": MODELS}))


def _tables(root, home) -> dict[str, pl.DataFrame]:
    defs = build_definitions(root)
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        instance.add_dynamic_partitions("benchmark_models", sorted(MODELS))
        for model in sorted(MODELS):
            result = dg.materialize(
                assets=list(defs.assets),
                selection=dg.AssetSelection.groups("benchmark_mix"),
                partition_key=model,
                instance=instance,
                resources=defs.resources,
            )
            assert result.success
        assert dg.materialize(
            assets=list(defs.assets), selection=["leaderboard"], instance=instance, resources=defs.resources
        ).success
    keys = {"benchmark_cases": ["task", "model", "case_id", "sample", "presentation"]}
    out = {}
    for table in ("benchmark_cases", "benchmark_results", "leaderboard"):
        frame = read_parquet(DataRoot.from_env(root), table_glob(DataRoot.from_env(root), table))
        frame = frame.drop([c for c in TIMES if c in frame.columns])
        out[table] = frame.sort(keys.get(table, [c for c in frame.columns if frame[c].dtype == pl.String]))
    return out


def test_small_chunks_give_the_same_tables_as_one_pass(tmp_path, local_judge, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", "1")  # the demo's mode: keyless judges answered
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    runs = {}
    for name, chunk in (("one_pass", "1000000"), ("chunks_of_3", "3")):
        root = tmp_path / name / "data"
        _project(root)
        monkeypatch.setenv("EVAL_PLATFORM_DATA_DIR", str(root))
        monkeypatch.setenv(CHUNK_CASES_ENV, chunk)
        (tmp_path / name / "home").mkdir()
        runs[name] = _tables(root, tmp_path / name / "home")
    one, chunked = runs["one_pass"], runs["chunks_of_3"]
    cases = one["benchmark_cases"]
    # the run exercised what chunking could break: both orders of a pair, samples, judged rows, FAILED rows
    assert set(cases["task"]) == {"answer", "judged", "pairs"} and set(cases["presentation"]) == {"", "AB", "BA"}
    assert set(cases["status"]) >= {"COMPLETED", "FAILED"} and cases["sample"].max() == 1
    assert one["leaderboard"].height == 4 and one["benchmark_results"].filter(pl.col("level") == "group").height == 2
    for table, frame in one.items():
        assert frame.height and frame.equals(chunked[table]), table


def test_a_task_holds_one_chunk_of_rows_at_a_time(tmp_path, local_judge, monkeypatch):
    """The Python rows, calls and scores of a task (and its dataset's validation) are in memory a chunk at a time:
    peak allocations with chunks of 100 cases are a fraction of one pass over 2,000 cases."""
    monkeypatch.setattr(datasets, "CASES_PER_FRAME", 100)  # the dataset validated 100 cases at a time too
    root = tmp_path / "data"
    (root / "datasets" / "many").mkdir(parents=True)
    rows = [{"case_id": f"c{i:05d}", "input": f"question {i} " * 100, "expected_output": "18"} for i in range(2000)]
    (root / "datasets" / "many" / "v1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "benchmarks").mkdir()
    suite_file = root / "benchmarks" / "many.yaml"
    suite_file.write_text(
        yaml.safe_dump(
            {"tasks": {"answer": {"dataset": "many", "prompt": "{{input}}", "scorers": [{"name": "numeric_match"}]}}}
        )
    )
    (root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump({"models": {"a-18": MODELS["a-18"]}}))
    suite, models = load_suite(suite_file, root), load_models(root / "benchmarks" / "models.yaml")

    def peak(chunk: int) -> tuple[int, pl.DataFrame]:
        runtime = JudgeResource(local_judge_url=local_judge.base_url).runtime(root)
        run = TaskRun(root, "many", suite, "answer", "a-18", models["a-18"], runtime)
        chunks = run_task_chunks(run, chunk)
        tracemalloc.start()
        try:
            heights = [frame.height for frame in chunks]  # each chunk dropped once counted, as the writer does
            _, top = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return top, heights

    one_pass, one_heights = peak(2000)
    chunked, heights = peak(100)
    assert one_heights == [2000] and heights == [100] * 20
    assert chunked < one_pass / 4, (chunked, one_pass)


@pytest.mark.parametrize("n", [5_000, 1_201])
def test_bootstrap_draws_are_the_one_shot_draws_in_bounded_memory(n):
    """The intervals' draws are taken a chunk at a time: the same numbers as drawing RESAMPLES x n positions at once
    (here computed as before), without ever holding them (2,000 x 5,000 positions are 80 MB)."""
    rng = np.random.default_rng(7)
    values = rng.random(n)
    tracemalloc.start()
    try:
        summary = summarize(values, seed=3)
        _, top = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    draws = np.random.default_rng(3).integers(0, n, size=(2000, n))
    means = values[draws].mean(axis=1)
    assert (summary.ci_low, summary.ci_high) == tuple(float(q) for q in np.quantile(means, [0.025, 0.975]))
    assert top < 40e6, top

    task = {"dataset": "d", "prompt": "{{input}}", "scorers": [{"name": "exact_match"}]}
    suite = Suite.model_validate({"name": "s", "tasks": {"t1": task, "t2": task}})
    halves = {"t1": values, "t2": values[: n // 2]}
    sides = [{t: TaskCases(tuple(str(i) for i in range(len(v))), v) for t, v in halves.items()}]
    tracemalloc.start()
    try:
        (stat,) = board_module._resampled(suite, sides, seed=5)
        _, top = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rng = np.random.default_rng(5)
    for task in ("t1", "t2"):
        data = sides[0][task].data
        index = rng.integers(0, len(data), (board_module.RESAMPLES, len(data)))
        assert np.array_equal(stat[task][0], data[index].sum(axis=1)), task
    assert top < 40e6, top


def test_a_chunk_is_a_number_of_rows_whatever_the_samples_and_orders(monkeypatch):
    monkeypatch.delenv(CHUNK_CASES_ENV, raising=False)
    suite = load_suite_from_yaml(SUITE)
    answer, pairs = suite.tasks["answer"], suite.tasks["pairs"]  # 2 samples; 2 presentation orders
    assert chunk_cases(answer) == CHUNK_ROWS // 2 and chunk_cases(pairs) == CHUNK_ROWS // 2
    monkeypatch.setenv(CHUNK_CASES_ENV, "300")
    assert chunk_cases(answer) == 300
    monkeypatch.setenv(CHUNK_CASES_ENV, "lots")
    with pytest.raises(ValueError, match=CHUNK_CASES_ENV):
        chunk_cases(answer)


def load_suite_from_yaml(text: str) -> Suite:
    data = yaml.safe_load(text)
    data["tasks"]["judged"]["scorers"] = [{"name": "exact_match"}]  # no evaluator files here
    return Suite.model_validate(data)
