"""The `judge_drift` asset over a real Dagster instance and the local judge: the sensor asks for a check when the
evaluator's config hash changes, a changed judge fails the WARN check `no_judge_drift` and the report shows it; a
reworded judge with the same verdicts passes."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.defs.test_pipeline import query
from eval_platform_tests.test_agreement_drift import write_anchors


def anchored_evaluator(root, local_judge, model: str, prompt: str = "Question: {{input}}\nAnswer: {{output}}"):
    write_evaluator(
        root,
        "helpfulness",
        mode="score",
        score_scale={"min": 1, "max": 5},
        model=f"openai/{model}",
        api_base=local_judge.base_url,
        prompt=prompt,
        anchors={"dataset": "judge_anchors", "version": 1, "output": "metadata.response", "schedule": "0 5 * * *"},
    )
    return build_definitions(root)


def sensor_requests(defs, instance):
    sensor = defs.resolve_sensor_def("judge_drift_sensor")
    context = dg.build_sensor_context(instance=instance, resources={"warehouse": defs.resources["warehouse"]})
    return sensor(context).run_requests


def check(defs, instance, run_config=None) -> dg.AssetCheckEvaluation:
    result = dg.materialize(
        list(defs.assets),
        selection=["judge_drift"],
        instance=instance,
        resources=defs.resources,
        run_config=run_config,
    )
    assert result.success
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


@pytest.mark.parametrize("drifts", [True, False])
def test_a_changed_judge_warns_and_a_reworded_one_does_not(data_root, local_judge, drifts):
    write_anchors(data_root)
    defs = anchored_evaluator(data_root, local_judge, "echo/output")
    assert defs.resolve_schedule_def("judge_drift_helpfulness").cron_schedule == "0 5 * * *"
    with dg.instance_for_test() as instance:
        (first,) = sensor_requests(defs, instance)  # never checked: a first check
        assert first.tags["judge_drift/reason"] == "first"
        assert check(defs, instance, first.run_config).passed
        assert sensor_requests(defs, instance) == []  # nothing changed since
        if drifts:
            defs = anchored_evaluator(data_root, local_judge, "echo/input")
        else:
            defs = anchored_evaluator(
                data_root, local_judge, "echo/output", prompt="Rate it.\nQ: {{input}}\nA: {{output}}"
            )
        (request,) = sensor_requests(defs, instance)
        assert request.tags["judge_drift/reason"] == "config_changed"
        evaluation = check(defs, instance, request.run_config)
        assert evaluation.passed is not drifts and evaluation.severity == dg.AssetCheckSeverity.WARN
        rows = query(data_root, "SELECT trigger, significant, n_paired FROM judge_drift ORDER BY checked_at")
        assert rows == [("first", None, None), ("config_changed", drifts, 30)]
        assert query(data_root, "SELECT count(DISTINCT check_id), count(*) FROM anchor_verdicts") == [(2, 60)]
        report = dg.materialize(list(defs.assets), selection=["report"], instance=instance, resources=defs.resources)
        assert report.success
    page = (data_root / "reports" / "report.html").read_text()
    assert "Judge drift (anchor checks against the previous check)" in page
    assert ("<td>DRIFT</td>" in page) is drifts


def test_without_anchors_there_is_no_drift_asset(data_root, local_judge):
    write_evaluator(
        data_root,
        "plain",
        mode="score",
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt="{{output}}",
        score_scale={"min": 1, "max": 5},
    )
    defs = build_definitions(data_root)
    assert dg.AssetKey("judge_drift") not in {key for a in defs.assets for key in a.keys}
