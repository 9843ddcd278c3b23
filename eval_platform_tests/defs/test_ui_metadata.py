"""What the UI shows at a glance tells the truth: the model that answered, FAILED rate, schema, location,
preview; a WARN check on a high FAILED rate; an empty day flagged."""

from __future__ import annotations

import glob
import re

import dagster as dg

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import REPO_DATA, copy_sample_days, write_evaluator

DAY = "2026-11-09"


def materialize(defs, selection, key, instance):
    return dg.materialize(
        list(defs.assets),
        selection=[selection],
        partition_key=key,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )


def test_metadata_and_checks_tell_the_truth(data_root, local_judge, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", "1")  # the demo's mode: keyless judges answered
    write_evaluator(
        data_root,
        "keyless",
        mode="score",
        model="openai/gpt-4o-mini",
        api_key_env="NO_SUCH_KEY_SET",
        prompt="Rate {{output}}",
        score_scale={"min": 0, "max": 1},
        trigger="sampled",
        sample_rate=0.05,
    )
    write_evaluator(
        data_root,
        "flaky",
        mode="score",
        model="openai/fault/malformed",
        api_base=local_judge.base_url,
        prompt="Rate {{output}}",
        score_scale={"min": 0, "max": 1},
        trigger="sampled",
        sample_rate=0.02,
        max_failed_rate=0.1,
    )
    copy_sample_days(data_root, [DAY])
    (data_root / "traces" / "2026-11-20").mkdir(parents=True)  # a day folder with no file
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assert materialize(defs, "traces", DAY, instance).success
        empty = materialize(defs, "traces", "2026-11-20", instance)
        assert empty.success
        (check,) = empty.get_asset_check_evaluations()
        assert check.check_name == "day_has_traces" and not check.passed
        assert check.severity == dg.AssetCheckSeverity.WARN

        result = materialize(
            defs, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": "keyless"}), instance
        )
        metadata = result.asset_materializations_for_node("judge_scores")[0].metadata
        assert metadata["model"].value == "local/mock"  # the model that answered, not the configured one
        assert metadata["configured_model"].value == "openai/gpt-4o-mini"
        assert metadata["failed_rate"].value == 0.0
        assert {c.name for c in metadata["dagster/column_schema"].schema.columns} >= {
            "status",
            "reason",
            "reason_detail",
        }
        assert glob.glob(metadata["parquet"].value, recursive=True)  # its file, or its parts' pattern
        assert "| trace_id | status |" in metadata["preview"].value
        checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
        assert checks["failed_rate_below_threshold"].passed
        assert checks["verdicts_exist"].passed and checks["score_scale_fits_replies"].passed

        flaky = materialize(defs, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": "flaky"}), instance)
        checks = {c.check_name: c for c in flaky.get_asset_check_evaluations()}
        failed = checks["failed_rate_below_threshold"]
        assert not failed.passed and failed.severity == dg.AssetCheckSeverity.WARN
        nothing = checks["verdicts_exist"]  # every selected trace FAILED: no score at all, an error
        assert not nothing.passed and nothing.severity == dg.AssetCheckSeverity.ERROR
        metadata = flaky.asset_materializations_for_node("judge_scores")[0].metadata
        assert metadata["failed_rate"].value == 1.0


def test_rollups_are_requested_after_judging(data_root, local_judge, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    write_evaluator(
        data_root,
        "keyless",
        mode="score",
        model="openai/gpt-4o-mini",
        api_key_env="NO_SUCH_KEY_SET",
        prompt="Rate {{output}}",
        score_scale={"min": 0, "max": 1},
        trigger="sampled",
        sample_rate=0.05,
    )
    copy_sample_days(data_root, [DAY])
    defs = build_definitions(data_root)
    rollups = {"judge_cost_daily", "judge_cost_monthly", "agreement", "experiment_results", "alerts", "report"}
    with dg.instance_for_test() as instance:
        first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        assert materialize(defs, "traces", DAY, instance).success
        assert materialize(
            defs, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": "keyless"}), instance
        ).success
        after = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
        requested = (
            {key.to_user_string() for key in after.get_requested_asset_keys()}
            if hasattr(after, "get_requested_asset_keys")
            else {r.key.to_user_string() for r in after.results if r.true_subset.size}
        )
        assert {"judge_cost_daily", "agreement", "experiment_results", "alerts"} <= requested
        assert rollups >= requested - {"judge_scores", "traces", "app_cost_daily", "quarantine"}


def test_every_asset_check_says_what_it_checks():
    """The UI lists each check with its description: none may be blank (the shipped project: every evaluator,
    suite and asset, so every kind of check)."""
    graph = build_definitions(REPO_DATA).resolve_asset_graph()
    assert len(graph.asset_check_keys) >= 5
    blank = sorted(
        key.to_user_string()
        for key in graph.asset_check_keys
        if not (graph.get_check_spec(key).description or "").strip()
    )
    assert blank == []


def test_benchmark_metadata_is_labelled_and_rounded(data_root, local_judge, monkeypatch):
    """The leaderboard's preview says which aggregate each score is and shows rounded numbers (a third is
    0.3333, not 0.33333333333333331); so do the task's and the suite's materializations."""
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    (data_root / "datasets" / "qa").mkdir(parents=True)
    (data_root / "datasets" / "qa" / "v1.jsonl").write_text(
        "".join(f'{{"input": "q{i}", "expected_output": "{answer}"}}\n' for i, answer in enumerate([4, 5, 6]))
    )
    (data_root / "benchmarks").mkdir()
    (data_root / "benchmarks" / "qa.yaml").write_text(
        "tasks:\n  t:\n    dataset: qa\n    prompt: '{{input}}'\n    scorers: [{name: numeric_match}]\n"
    )
    (data_root / "benchmarks" / "models.yaml").write_text(
        "models:\n  says-4: {model: 'local/fixed/It is 4.'}\n  says-9: {model: 'local/fixed/It is 9.'}\n"
    )
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("benchmark_models", ["says-4", "says-9"])
        task_metadata, suite_metadata = {}, {}
        for model in ("says-4", "says-9"):
            result = dg.materialize(
                list(defs.assets),
                selection=dg.AssetSelection.groups("benchmark_qa"),
                partition_key=model,
                instance=instance,
                resources=defs.resources,
            )
            assert result.success
            task_metadata[model] = result.asset_materializations_for_node("benchmark__qa__t")[0].metadata
            suite_metadata[model] = result.asset_materializations_for_node("benchmark_scores__qa")[0].metadata
        result = materialize(defs, "leaderboard", None, instance)
        assert result.success
        preview = result.asset_materializations_for_node("leaderboard")[0].metadata["preview"].value
    assert task_metadata["says-4"]["numeric_match"].value == 0.3333
    assert suite_metadata["says-4"]["score_macro"].value == 0.3333
    lines = preview.splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == [
        "suite",
        "rank (macro)",
        "model",
        "score (macro) [95% CI]",
        "score (micro) [95% CI]",
        "gap to leader (macro) [95% CI]",
        "gap significant",
        "cost (USD)",
        "stale",
    ]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert [row[:3] for row in rows] == [["qa", "1", "says-4"], ["qa", "2", "says-9"]]
    assert rows[0][3].startswith("0.333 [") and rows[0][4].startswith("0.333 [")
    assert not re.search(r"\d\.\d{5,}", preview)  # no raw floats
