"""A backfill over several models runs the suite's assets once per range of models (the backfill policy's run),
not once per model: each model's rows, results and materialization are its own, exactly as separate runs give."""

from __future__ import annotations

import shutil

import dagster as dg
import yaml

from eval_platform.defs.benchmarks import MODELS_PER_RUN, task_key
from eval_platform_tests.benchmarks.test_generation_suite import materialize, query
from eval_platform_tests.conftest import REPO_DATA

MODELS = {
    "a-18": "local/fixed/The answer is 18.",
    "b-7": "local/fixed/The answer is 7.",
    "c-18": "local/fixed/The answer is 18.",
}


def setup(root, instance, models: dict[str, str], partitions: list[str]) -> None:
    shutil.copytree(REPO_DATA / "datasets" / "gsm8k", root / "datasets" / "gsm8k", dirs_exist_ok=True)
    shutil.copy(REPO_DATA / "evaluators" / "helpfulness.yaml", root / "evaluators")
    (root / "benchmarks").mkdir(exist_ok=True)
    shutil.copy(REPO_DATA / "benchmarks" / "gsm8k.yaml", root / "benchmarks")
    (root / "benchmarks" / "models.yaml").write_text(
        yaml.safe_dump({"models": {k: {"model": v} for k, v in models.items()}})
    )
    instance.add_dynamic_partitions("benchmark_models", partitions)


def range_run(root, instance, start: str, end: str) -> dg.ExecuteInProcessResult:
    """One run over the models from `start` to `end`, tagged as the backfill daemon tags a policy's run."""
    from eval_platform.definitions import build_definitions

    defs = build_definitions(root)
    return dg.materialize(
        assets=list(defs.assets),
        selection=dg.AssetSelection.groups("benchmark_gsm8k"),
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
        tags={"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end},
    )


def snapshot(root) -> tuple[list, list]:
    cases = query(
        root,
        "SELECT suite, task, model, case_id, sample, status, reason, output, primary_value "
        "FROM benchmark_cases ORDER BY ALL",
    )
    results = query(
        root,
        "SELECT suite, level, name, model, metric, aggregate, value, ci_low, ci_high, n, n_failed, n_skipped "
        "FROM benchmark_results ORDER BY ALL",
    )
    return cases, results


def test_one_run_scores_a_range_of_models_as_separate_runs_would(data_root, local_judge, tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", "1")  # the demo's mode: keyless judges answered
    assert MODELS_PER_RUN >= len(MODELS)
    # the same suite and models, once model by model and once as one range run, in two data roots
    separate, together = data_root / "separate", data_root / "together"
    for root in (separate, together):
        (root / "evaluators").mkdir(parents=True)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "one")) as instance:
        setup(separate, instance, MODELS, list(MODELS))
        for model in MODELS:
            materialize(separate, instance, model, dg.AssetSelection.groups("benchmark_gsm8k"))
    with dg.instance_for_test(temp_dir=str(tmp_path / "two")) as instance:
        setup(together, instance, MODELS, list(MODELS))
        result = range_run(together, instance, "a-18", "c-18")
        assert result.success
        assert len(instance.get_runs()) == 1
        answer = task_key("gsm8k", "answer")
        for model, model_id in MODELS.items():
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=answer, asset_partitions=[model]), limit=10
            ).records
            assert len(records) == 1, model  # each model materialized once, in the one run
            metadata = records[0].asset_materialization.metadata
            assert metadata["model_id"].value == model_id and metadata["completed"].value == 50
        assert instance.get_latest_materialization_event(dg.AssetKey(["benchmark_scores", "gsm8k"])) is not None
    assert snapshot(together) == snapshot(separate)
    # the models' own numbers differ: nothing of one model leaked into another's rows
    values = dict(
        query(together, "SELECT model, value FROM benchmark_results WHERE name = 'answer' AND metric = 'numeric_match'")
    )
    assert values["a-18"] == values["c-18"] != values["b-7"]


def test_a_model_that_fails_does_not_stop_the_others_in_its_run(data_root, local_judge, tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", "1")  # the demo's mode: keyless judges answered
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        # `gone` is a partition but no longer in models.yaml: its run must fail, by name, after the others
        setup(data_root, instance, {"a-18": MODELS["a-18"], "b-7": MODELS["b-7"]}, ["a-18", "gone", "b-7"])
        result = range_run(data_root, instance, "a-18", "b-7")
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        message = failure.step_failure_data.error.message
        assert "gone" in message and "not in" in message and "a-18" not in message.split("materialized")[0]
        answer = task_key("gsm8k", "answer")
        for model in ("a-18", "b-7"):
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=answer, asset_partitions=[model]), limit=10
            ).records
            assert len(records) == 1, model
        assert not instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=answer, asset_partitions=["gone"]), limit=10
        ).records
    models = {m for (m,) in query(data_root, "SELECT DISTINCT model FROM benchmark_cases WHERE task = 'answer'")}
    assert models == {"a-18", "b-7"}
