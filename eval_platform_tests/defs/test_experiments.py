"""`experiment_results` and `alerts` end to end: a real Dagster instance in a temp DAGSTER_HOME, traces and
judge scores materialized through the local judge over HTTP, results read back from the DuckDB views with SQL."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform.defs.resources import JudgeResource
from eval_platform.experiments.config import ExperimentConfigError, load_experiments
from eval_platform.judging.loading import load_evaluators
from eval_platform.storage.location import DataRoot
from eval_platform_tests.conftest import REPO_DATA, copy_sample_days, write_evaluator

SAMPLE_DAYS = ["2026-11-09", "2026-11-10"]


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def materialize(
    defs: dg.Definitions, resources: dict, asset: str, instance, partition=None
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets=list(defs.assets), selection=[asset], partition_key=partition, instance=instance, resources=resources
    )


@pytest.fixture
def instance(tmp_path):
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield instance


def judge_everything(
    root: Path, defs: dg.Definitions, resources: dict, instance, days: list[str], evaluators: list[str]
):
    for day in days:
        assert materialize(defs, resources, "traces", instance, day).success
        for name in evaluators:
            key = dg.MultiPartitionKey({"date": day, "evaluator": name})
            assert materialize(defs, resources, "judge_scores", instance, key).success


def test_sample_experiment_over_two_sample_days(data_root, local_judge, instance, monkeypatch):
    """The shipped experiment on the sample data: placeholder helpfulness/toxicity scores, real GPT-3.5 verdicts."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    evaluators = ["helpfulness", "toxicity", "pairwise_preference"]
    for name in evaluators:
        shutil.copy(REPO_DATA / "evaluators" / f"{name}.yaml", data_root / "evaluators")
    (data_root / "experiments").mkdir()
    shutil.copy(REPO_DATA / "experiments" / "pandalm_models.yaml", data_root / "experiments")
    copy_sample_days(data_root, SAMPLE_DAYS)
    defs = build_definitions(data_root)
    resources = {
        **defs.resources,
        "judge": JudgeResource(local_judge_url=local_judge.base_url, local_judge_for_missing_keys=True),
    }
    judge_everything(data_root, defs, resources, instance, SAMPLE_DAYS, evaluators)

    result = materialize(defs, resources, "experiment_results", instance)
    assert result.success
    metadata = instance.get_latest_materialization_event(
        dg.AssetKey("experiment_results")
    ).asset_materialization.metadata
    assert metadata["experiments"].value == 1 and metadata["comparisons"].value == 8  # 4 treatments × 2 metrics

    kinds = dict(query(data_root, "SELECT kind, count(*) FROM experiment_results GROUP BY kind"))
    assert kinds == {"variant": 10, "comparison": 8, "win_rate": 9, "bradley_terry": 5}

    # Per-variant n and mean equal a plain SQL aggregate over the judge_scores view.
    expected = query(
        data_root,
        """
        SELECT evaluator || '.score', variant, count(*), avg(score) FROM judge_scores
        WHERE is_final AND status = 'COMPLETED' AND evaluator IN ('helpfulness', 'toxicity')
          AND experiment_id = 'pandalm-model-comparison' GROUP BY ALL ORDER BY ALL""",
    )
    actual = query(
        data_root, "SELECT metric, variant, n, mean FROM experiment_results WHERE kind = 'variant' ORDER BY ALL"
    )
    assert [r[:3] for r in actual] == [r[:3] for r in expected]
    assert [r[3] for r in actual] == pytest.approx([r[3] for r in expected])

    # Every comparison below the minimum sample says so; the others carry a p-value and a posterior probability.
    for n, n_control, p, prob, outcome, text in query(
        data_root,
        """
            SELECT n, n_control, p_value, prob_improvement, outcome, recommendation FROM experiment_results
            WHERE kind = 'comparison' AND metric_role = 'primary'""",
    ):
        if min(n, n_control) < 30:
            assert outcome == "insufficient sample" and text.startswith(
                f"insufficient sample: {min(n, n_control)} < 30"
            )
        else:
            assert p is not None and prob is not None and text

    # Win rates from the real recorded verdicts equal an independent SQL count over judge_scores ⋈ traces.
    counted = query(
        data_root,
        """
        WITH verdicts AS (
            SELECT ta.variant AS a, tb.variant AS b, s.winner FROM judge_scores s
            JOIN traces ta ON ta.trace_id = s.trace_id JOIN traces tb ON tb.trace_id = s.trace_id_b
            WHERE s.evaluator = 'pairwise_preference' AND s.is_final AND s.status = 'COMPLETED'),
        sides AS (
            SELECT a AS variant, winner = 'A' AS won, winner = 'B' AS lost, winner = 'tie' AS tied FROM verdicts
            UNION ALL SELECT b, winner = 'B', winner = 'A', winner = 'tie' FROM verdicts)
        SELECT variant, count(*), sum(won::INT), sum(lost::INT), sum(tied::INT) FROM sides GROUP BY ALL ORDER BY ALL""",
    )
    assert (
        query(
            data_root,
            """
        SELECT variant, n, wins, losses, ties FROM experiment_results
        WHERE kind = 'win_rate' AND opponent IS NULL ORDER BY ALL""",
        )
        == counted
    )
    assert sum(row[1] for row in counted) / 2 > 200  # two days of PandaLM pairs
    ranks = query(data_root, "SELECT rank, variant FROM experiment_results WHERE kind = 'bradley_terry' ORDER BY rank")
    assert [r[0] for r in ranks] == [1, 2, 3, 4, 5]
    assert query(data_root, "SELECT round(sum(strength), 9) FROM experiment_results WHERE kind = 'bradley_terry'") == [
        (1.0,)
    ]

    result = materialize(defs, resources, "alerts", instance)
    assert result.success
    [check] = result.get_asset_check_evaluations()
    [(on_latest_day,)] = query(data_root, f"SELECT count(*) FROM alerts WHERE day = '{SAMPLE_DAYS[-1]}'")
    assert check.check_name == "no_quality_regression" and check.passed is (on_latest_day == 0)
    materialization = instance.get_latest_materialization_event(dg.AssetKey("alerts")).asset_materialization
    assert materialization.metadata["evaluators_checked"].value == ["helpfulness", "toxicity"]  # not pairwise


def scripted_day(root: Path, day: str, rng, shift: float, n: int = 40) -> None:
    """Traces whose output is the judge's reply (the `echo/output` local judge): each trace scripts its score.
    Variant b scores 0.15 higher than a; `shift` moves the whole day."""
    folder = root / "traces" / day
    folder.mkdir(parents=True)
    lines = []
    for i in range(n):
        variant = "b" if i % 2 else "a"
        score = float(np.clip(rng.normal(0.55 + (0.15 if variant == "b" else 0) + shift, 0.08), 0, 1))
        lines.append(
            json.dumps(
                {
                    "trace_id": f"{day}-{i}",
                    "timestamp": f"{day}T12:00:00Z",
                    "input": f"question {i}",
                    "output": json.dumps({"score": round(score, 4), "reasoning": "scripted by the trace"}),
                    "experiment_id": "prompt-v2",
                    "variant": variant,
                }
            )
        )
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")


def test_a_treatment_that_wins_ships_and_a_bad_day_raises_an_alert(data_root, local_judge, instance):
    rng = np.random.default_rng(0)
    days = ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"]
    for day in days:
        scripted_day(data_root, day, rng, shift=-0.35 if day == days[-1] else 0.0)
    write_evaluator(
        data_root,
        "quality",
        mode="score",
        score_scale={"min": 0, "max": 1},
        model="openai/echo/output",
        api_base=local_judge.base_url,
        prompt="{{input}} -> {{output}}",
    )
    (data_root / "experiments").mkdir()
    (data_root / "experiments" / "prompt_v2.yaml").write_text(
        yaml.safe_dump(
            {
                "experiment_id": "prompt-v2",
                "control": "a",
                "treatments": ["b"],
                "method": "both",
                "primary_metric": {"evaluator": "quality"},
                "minimum_sample_size": 20,
                "end_date": "2026-11-03",
            }
        )
    )
    defs = build_definitions(data_root)
    judge_everything(data_root, defs, defs.resources, instance, days, ["quality"])

    assert materialize(defs, defs.resources, "experiment_results", instance).success
    [(n, n_control, outcome, significant, text)] = query(
        data_root,
        """
        SELECT n, n_control, outcome, significant, recommendation FROM experiment_results
        WHERE experiment = 'prompt_v2' AND kind = 'comparison'""",
    )
    assert (n, n_control, outcome, significant) == (60, 60, "better", True)  # the window ends before the bad day
    assert text.startswith("ship b: quality.score improved significantly (+0.1") and text.endswith(
        "there are no guardrails"
    )

    result = materialize(defs, defs.resources, "alerts", instance)
    assert result.success  # a failed WARN check does not fail the run
    [check] = result.get_asset_check_evaluations()
    assert (check.check_name, check.passed, check.severity) == (
        "no_quality_regression",
        False,
        dg.AssetCheckSeverity.WARN,
    )
    assert check.metadata["regressions"].value == 1
    [(day, mean, baseline_n, severity, message)] = query(
        data_root, "SELECT day, mean, baseline_n, severity, message FROM alerts WHERE evaluator = 'quality'"
    )
    assert (day, baseline_n, severity) == (days[-1], 120, "high") and mean < 0.4
    assert message.startswith(f"quality dropped on {days[-1]}: mean ")
    materialization = instance.get_latest_materialization_event(dg.AssetKey("alerts")).asset_materialization
    assert materialization.metadata["alerts"].value == 1
    assert materialization.metadata["latest_days"].value == {"quality": days[-1]}


def test_definitions_name_the_new_assets_and_show_a_broken_experiment(data_root):
    write_evaluator(data_root, "quality", mode="score", model="openai/mock", prompt="{{output}}")
    defs = build_definitions(data_root)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"experiment_results", "alerts"} <= keys
    checks = {k.to_user_string() for k in defs.resolve_asset_graph().asset_check_keys}
    assert "alerts:no_quality_regression" in checks

    (data_root / "experiments").mkdir()
    broken = data_root / "experiments" / "typo.yaml"
    broken.write_text(yaml.safe_dump({"control": "a", "treatments": ["b"], "primary_metric": {"evaluator": "qualty"}}))
    # A broken experiment breaks only itself (issue 10): it is named, with its field and message, on the asset.
    defs = build_definitions(data_root)
    description = defs.resolve_assets_def("experiment_results").descriptions_by_key[dg.AssetKey("experiment_results")]
    assert re.search(
        r"typo\.yaml: .*typo\.yaml: field 'primary_metric\.evaluator': no evaluator named 'qualty'", description
    )
    with pytest.raises(
        ExperimentConfigError, match=r"typo\.yaml: field 'primary_metric\.evaluator': no evaluator named 'qualty'"
    ):
        load_experiments(data_root / "experiments", load_evaluators(data_root / "evaluators"))


def experiment_rows(root: Path) -> dict[str, list[tuple]]:
    rows = query(
        root,
        "SELECT experiment, kind, metric, variant, n, mean, stale, stale_reason, computed_at "
        "FROM experiment_results ORDER BY ALL",
    )
    by_experiment: dict[str, list[tuple]] = {}
    for row in rows:
        by_experiment.setdefault(row[0], []).append(row)
    return by_experiment


def test_a_broken_evaluator_or_experiment_file_keeps_its_last_rows_flagged_stale(
    data_root, local_judge, instance, caplog
):
    rng = np.random.default_rng(1)
    days = ["2026-11-01", "2026-11-02"]
    for day in days:
        scripted_day(data_root, day, rng, shift=0.0, n=20)
    evaluator = write_evaluator(
        data_root,
        "quality",
        mode="score",
        score_scale={"min": 0, "max": 1},
        model="openai/echo/output",
        api_base=local_judge.base_url,
        prompt="{{input}} -> {{output}}",
    )
    good_evaluator = evaluator.read_text()
    (data_root / "experiments").mkdir()
    experiment = {
        "experiment_id": "prompt-v2",
        "control": "a",
        "treatments": ["b"],
        "primary_metric": {"evaluator": "quality"},
        "minimum_sample_size": 5,
    }
    for name in ("prompt_v2", "prompt_v2_again"):
        (data_root / "experiments" / f"{name}.yaml").write_text(yaml.safe_dump(experiment))
    defs = build_definitions(data_root)
    judge_everything(data_root, defs, defs.resources, instance, days, ["quality"])
    assert materialize(defs, defs.resources, "experiment_results", instance).success
    fresh = experiment_rows(data_root)
    assert set(fresh) == {"prompt_v2", "prompt_v2_again"}
    assert all(row[6] is False and row[7] is None for rows in fresh.values() for row in rows)

    # A typo in the evaluator: both experiments that name it are broken, logged, and keep their last rows.
    evaluator.write_text(good_evaluator + "temprature: 0.2\n")
    with caplog.at_level(logging.ERROR):
        defs = build_definitions(data_root)
    assert "prompt_v2.yaml" in caplog.text and "prompt_v2_again.yaml" in caplog.text  # the experiments' errors too
    result = materialize(defs, defs.resources, "experiment_results", instance)
    assert result.success
    stale = experiment_rows(data_root)
    for name in ("prompt_v2", "prompt_v2_again"):
        assert [row[:6] for row in stale[name]] == [row[:6] for row in fresh[name]]  # same rows and figures
        assert [row[8] for row in stale[name]] == [row[8] for row in fresh[name]]  # computed when they were
        for row in stale[name]:
            assert row[6] is True
            assert f"{name}.yaml" in row[7] and "quality.yaml" in row[7] and "temprature" in row[7]
    metadata = result.asset_materializations_for_node("experiment_results")[0].metadata
    assert set(metadata["stale_experiments"].value) == {"prompt_v2", "prompt_v2_again"}

    # The evaluator fixed, one experiment file broken: only that one stays stale, the other is fresh again.
    evaluator.write_text(good_evaluator)
    (data_root / "experiments" / "prompt_v2.yaml").write_text(yaml.safe_dump({**experiment, "treatment": ["b"]}))
    defs = build_definitions(data_root)
    assert materialize(defs, defs.resources, "experiment_results", instance).success
    now = experiment_rows(data_root)
    assert [row[:6] for row in now["prompt_v2"]] == [row[:6] for row in fresh["prompt_v2"]]
    assert all(row[6] is True and "field 'treatment'" in row[7] for row in now["prompt_v2"])
    assert [row[:6] for row in now["prompt_v2_again"]] == [row[:6] for row in fresh["prompt_v2_again"]]
    assert all(row[6] is False and row[7] is None for row in now["prompt_v2_again"])
    assert all(row[8] > fresh["prompt_v2_again"][0][8] for row in now["prompt_v2_again"])  # recomputed


def test_experiment_results_and_alerts_carry_the_human_calibrated_figures(data_root, instance):
    """A lenient pass/fail judge, 40 human labels per variant: through the real assets (the labels read from
    `human_annotations`), each variant's pass rate gets its prediction-powered estimate beside the judge's, the
    comparison its calibrated difference, and the dropped day's alert its calibrated mean."""
    import polars as pl

    from eval_platform.defs.catalog import refresh
    from eval_platform.schemas import HUMAN_ANNOTATION_SCHEMA, JUDGE_SCORE_SCHEMA, conform
    from eval_platform.storage.warehouse import write_partition

    write_evaluator(
        data_root,
        "correct",
        mode="binary",
        model="openai/mock",
        prompt="Is it right? {{output}}",
        human_agreement={"task": "review", "criterion": "correct"},
    )
    (data_root / "experiments").mkdir()
    (data_root / "experiments" / "prompts.yaml").write_text(
        yaml.safe_dump(
            {
                "experiment_id": "prompts",
                "control": "a",
                "treatments": ["b"],
                "primary_metric": {"evaluator": "correct", "field": "passed"},
                "minimum_sample_size": 10,
            }
        )
    )
    rng = np.random.default_rng(12)
    labels = []
    days = [f"2026-11-{d:02d}" for d in range(1, 10)]
    for i, day in enumerate(days):
        rate = 0.3 if i == len(days) - 1 else 0.7  # the last day drops
        truth = rng.random(200) < rate
        passed = truth | (rng.random(200) < 0.3)
        ids = [f"{day}-{j}" for j in range(200)]
        rows = pl.DataFrame(
            {
                "evaluator": "correct",
                "date": day,
                "trace_id": ids,
                "is_final": True,
                "status": "COMPLETED",
                "score": passed.astype(float),
                "passed": passed,
                "experiment_id": "prompts",
                "variant": ["a" if j % 2 else "b" for j in range(200)],
            }
        )
        write_partition(
            DataRoot.from_env(data_root),
            "judge_scores",
            {"evaluator": "correct", "date": day},
            conform(rows, JUDGE_SCORE_SCHEMA),
        )
        labels += [
            {
                "task": "review",
                "criterion": "correct",
                "item_id": t,
                "trace_id": t,
                "annotator": "ann",
                "schema": "classification",
                "label": str(bool(h)).lower(),
            }
            for t, h in zip(ids[:20], truth[:20], strict=True)
        ]
    write_partition(
        DataRoot.from_env(data_root), "human_annotations", {}, conform(pl.DataFrame(labels), HUMAN_ANNOTATION_SCHEMA)
    )
    refresh(DataRoot.from_env(data_root))
    defs = build_definitions(data_root)
    assert materialize(defs, defs.resources, "experiment_results", instance).success
    assert materialize(defs, defs.resources, "alerts", instance).success

    variants = query(
        data_root,
        "SELECT variant, human_n, mean, ppi_mean, ppi_ci_low, ppi_ci_high FROM experiment_results "
        "WHERE kind = 'variant' ORDER BY variant",
    )
    assert [(v, n) for v, n, *_ in variants] == [("a", 90), ("b", 90)]  # 10 labelled traces per variant and day
    for _, _, judge_mean, ppi, low, high in variants:
        assert low < ppi < high < judge_mean  # the lenient judge's pass rate is above the calibrated interval
    ((difference, low, high),) = query(
        data_root,
        "SELECT ppi_difference, ppi_diff_ci_low, ppi_diff_ci_high FROM experiment_results WHERE kind = 'comparison'",
    )
    assert low < difference < high
    ((day, mean, human_n, ppi),) = query(data_root, "SELECT day, mean, human_n, ppi_mean FROM alerts")
    assert day == days[-1] and human_n == 20 and ppi < mean
