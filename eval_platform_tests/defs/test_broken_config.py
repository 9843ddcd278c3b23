"""A broken evaluator or experiment file breaks only itself: every other asset loads and runs, and the UI
shows the broken file with its field and message."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.defs.benchmarks import benchmark_models_sensor
from eval_platform.settings import DataRootError
from eval_platform_tests.conftest import copy_sample_days, write_evaluator


def test_a_broken_evaluator_file_leaves_the_rest_working(data_root, local_judge, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    write_evaluator(
        data_root,
        "good",
        mode="score",
        model="openai/gpt-4o-mini",
        api_key_env="NO_SUCH_KEY_SET",
        prompt="Rate {{output}}",
        score_scale={"min": 0, "max": 1},
    )
    write_evaluator(data_root, "typo", mode="score", model="openai/gpt-4o-mini", temprature=0.2, prompt="{{output}}")
    (data_root / "experiments").mkdir()
    (data_root / "experiments" / "bad_exp.yaml").write_text("variants: not-a-list\n")
    copy_sample_days(data_root, ["2026-11-09"])

    defs = build_definitions(data_root)  # loads: the code location is not taken down
    judge_scores = defs.resolve_assets_def("judge_scores")
    description = judge_scores.descriptions_by_key[dg.AssetKey("judge_scores")]
    assert "typo.yaml" in description and "temprature" in description
    partitions = judge_scores.partitions_def.get_partition_keys()
    assert all(key.keys_by_dimension["evaluator"] == "good" for key in partitions)
    experiments = defs.resolve_assets_def("experiment_results")
    assert "bad_exp.yaml" in experiments.descriptions_by_key[dg.AssetKey("experiment_results")]

    with dg.instance_for_test() as instance:
        for selection, key in (
            ("traces", "2026-11-09"),
            ("judge_scores", dg.MultiPartitionKey({"date": "2026-11-09", "evaluator": "good"})),
        ):
            result = dg.materialize(
                list(defs.assets), selection=[selection], partition_key=key, instance=instance, resources=defs.resources
            )
            assert result.success


def test_a_broken_suite_or_models_file_leaves_the_other_suites_and_judging_loaded(data_root, caplog):
    (data_root / "datasets" / "qa").mkdir(parents=True)
    (data_root / "datasets" / "qa" / "v1.jsonl").write_text('{"input": "2+2?", "expected_output": "4"}\n')
    (data_root / "benchmarks").mkdir()
    (data_root / "benchmarks" / "good.yaml").write_text(
        "tasks:\n  t:\n    dataset: qa\n    prompt: '{{input}}'\n    scorers: [{name: numeric_match}]\n"
    )
    (data_root / "benchmarks" / "bad.yaml").write_text(
        "tasks:\n  a:\n    dataset: qa\n    prompt: '{{input}}'\n"
        "    depends_on: [a]\n    scorers: [{name: numeric_match}]\n"
    )
    (data_root / "benchmarks" / "models.yaml").write_text("models:\n  x/y: {model: openai/gpt-4o-mini}\n")
    write_evaluator(
        data_root,
        "good",
        mode="score",
        model="openai/gpt-4o-mini",
        prompt="Rate {{output}}",
        score_scale={"min": 0, "max": 1},
    )

    with caplog.at_level(logging.ERROR):
        defs = build_definitions(data_root)
    assert "bad.yaml" in caplog.text and "depends_on cycle a -> a" in caplog.text  # in the code location's log
    assert "field 'models.x/y'" in caplog.text
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"benchmark/good/t", "benchmark_scores/good", "leaderboard", "judge_scores"} <= keys
    assert not any(key.startswith("benchmark/bad") for key in keys)
    description = defs.resolve_assets_def("leaderboard").descriptions_by_key[dg.AssetKey("leaderboard")]
    assert "bad.yaml" in description and "depends_on cycle a -> a" in description
    assert "models.yaml" in description and "field 'models.x/y'" in description


def test_a_bad_model_entry_breaks_only_that_models_runs(data_root, local_judge, monkeypatch, caplog):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    (data_root / "datasets" / "qa").mkdir(parents=True)
    (data_root / "datasets" / "qa" / "v1.jsonl").write_text('{"input": "2+2?", "expected_output": "4"}\n')
    (data_root / "benchmarks").mkdir()
    (data_root / "benchmarks" / "good.yaml").write_text(
        "tasks:\n  t:\n    dataset: qa\n    prompt: '{{input}}'\n    scorers: [{name: numeric_match}]\n"
    )
    (data_root / "benchmarks" / "models.yaml").write_text(
        "models:\n  fine: {model: 'local/fixed/It is 4.'}\n  typo: {model: 'local/fixed/It is 4.', onyl: [good]}\n"
    )
    with caplog.at_level(logging.ERROR):
        defs = build_definitions(data_root)
    # the broken entry is shown (file and field) and logged; the code location loads
    description = defs.resolve_assets_def("leaderboard").descriptions_by_key[dg.AssetKey("leaderboard")]
    assert "models.yaml" in description and "models.typo.onyl" in description
    assert "models.typo.onyl" in caplog.text

    with dg.instance_for_test() as instance:
        # the sensor still adds the models that load, never the broken one
        context = dg.build_sensor_context(instance=instance, resources=defs.resources)
        result = benchmark_models_sensor(context)
        (request,) = result.dynamic_partitions_requests
        assert list(request.partition_keys) == ["fine"]
        instance.add_dynamic_partitions("benchmark_models", ["fine", "typo"])
        task = dg.AssetKey(["benchmark", "good", "t"])
        runs = {
            model: dg.materialize(
                list(defs.assets),
                selection=[task],
                partition_key=model,
                instance=instance,
                resources=defs.resources,
                raise_on_error=False,
            )
            for model in ("fine", "typo")
        }
    assert runs["fine"].success
    assert not runs["typo"].success
    [failure] = runs["typo"].get_step_failure_events()
    message = failure.event_specific_data.error.message
    assert "models.yaml" in message and "field 'models.typo.onyl'" in message


def test_a_reference_evaluator_naming_a_missing_dataset_version_is_a_broken_file(data_root):
    (data_root / "datasets" / "faq").mkdir(parents=True)
    (data_root / "datasets" / "faq" / "v1.jsonl").write_text('{"input": "q", "expected_output": "a"}\n')
    write_evaluator(
        data_root,
        "gold",
        mode="reference",
        model="openai/gpt-4o-mini",
        prompt="{{output}} vs {{expected}}",
        reference={"source": "dataset", "dataset": "faq", "version": 2},
    )
    write_evaluator(data_root, "good", mode="score", model="openai/gpt-4o-mini", prompt="Rate {{output}}")
    defs = build_definitions(data_root)
    judge_scores = defs.resolve_assets_def("judge_scores")
    description = judge_scores.descriptions_by_key[dg.AssetKey("judge_scores")]
    assert "gold.yaml" in description and "field 'reference.version': dataset 'faq' has no version 2" in description
    assert {key.keys_by_dimension["evaluator"] for key in judge_scores.partitions_def.get_partition_keys()} == {"good"}


def test_a_missing_data_root_or_evaluators_folder_fails_the_load_naming_the_path_and_the_variable(tmp_path):
    """A mistyped EVAL_PLATFORM_DATA_DIR used to load a code location with no evaluator, in silence."""
    missing = tmp_path / "no" / "such"
    with pytest.raises(DataRootError, match=f"{missing} does not exist"):
        build_definitions(missing)
    missing.mkdir(parents=True)
    with pytest.raises(DataRootError, match=f"{missing / 'evaluators'} does not exist"):
        build_definitions(missing)

    # what a user sees: `dagster definitions validate` (as `dagster dev` loads it) fails and says why
    repo = Path(__file__).resolve().parents[2]
    bin_dir = Path(sys.executable).parent
    env = {
        "EVAL_PLATFORM_DATA_DIR": str(tmp_path / "typo"),
        "PATH": str(bin_dir),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DAGSTER_HOME": str(tmp_path),
    }
    done = subprocess.run(
        [str(bin_dir / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"the data root {tmp_path / 'typo'} does not exist (EVAL_PLATFORM_DATA_DIR={tmp_path / 'typo'})" in said
