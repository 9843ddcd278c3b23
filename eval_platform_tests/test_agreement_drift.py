"""Judge drift over real HTTP to the local judge: anchors judged under one configuration, then another; a judge
that changed its verdicts is a significant shift, one that only changed its wording is not."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from eval_platform.agreement.drift import check_anchors, needs_check
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import JUDGE_DRIFT_SCHEMA, empty_frame
from eval_platform.stats.paired import paired_shift
from eval_platform_tests.conftest import judge_requests


def write_anchors(root, n: int = 30) -> list[tuple[int, int]]:
    """Anchors whose response scripts a score k (`echo/output`) and whose input a score one higher but capped
    (`echo/input`): the expected verdict is k."""
    rng = np.random.default_rng(8)
    scores = []
    lines = []
    for i in range(n):
        k = int(rng.integers(1, 6))
        shifted = min(5, k + 1)
        scores.append((k, shifted))
        lines.append(
            {
                "case_id": f"anchor-{i:02d}",
                "input": json.dumps({"score": shifted}),
                "expected_output": str(k),
                "metadata": {"response": json.dumps({"score": k})},
            }
        )
    folder = root / "datasets" / "judge_anchors"
    folder.mkdir(parents=True)
    (folder / "v1.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return scores


def evaluator(local_judge, model: str, prompt: str = "Question: {{input}}\nAnswer: {{output}}") -> EvaluatorConfig:
    return EvaluatorConfig.model_validate(
        {
            "name": "helpfulness",
            "mode": "score",
            "score_scale": {"min": 1, "max": 5},
            "model": f"openai/{model}",
            "api_base": local_judge.base_url,
            "prompt": prompt,
            "max_retries": 1,
            "timeout_s": 5,
            "anchors": {"dataset": "judge_anchors", "version": 1, "output": "metadata.response"},
        }
    )


@pytest.fixture
def anchored(data_root, local_judge, runtime):
    scores = write_anchors(data_root)
    history, verdicts = empty_frame(JUDGE_DRIFT_SCHEMA), None

    def check(config: EvaluatorConfig):
        nonlocal history, verdicts
        row, new_verdicts = check_anchors(data_root, config, runtime, history, verdicts)
        history, verdicts = pl.concat([history, row]), new_verdicts
        return row.row(0, named=True), new_verdicts

    return scores, check


def test_a_judge_that_changed_its_verdicts_is_a_significant_shift(anchored, local_judge):
    scores, check = anchored
    baseline = evaluator(local_judge, "echo/output")
    first, first_verdicts = check(baseline)
    assert first["trigger"] == "first" and first["n_completed"] == 30 and first["mean_shift"] is None
    assert first["expected_agreement"] == 1.0  # the judge gives each anchor its expected verdict
    assert first["provider_model"] == "local/echo/output"
    asked = judge_requests(local_judge)
    drifted, verdicts = check(evaluator(local_judge, "echo/input"))
    # every anchor asked again, through the judge path; identical anchors (the same scripted scores) share a call
    assert judge_requests(local_judge) - asked == len(set(scores)) < 30
    assert drifted["trigger"] == "config_changed" and drifted["previous_config_hash"] == first["config_hash"]
    current = np.array([(s - 1) / 4 for _, s in scores])
    previous = np.array([(k - 1) / 4 for k, _ in scores])
    expected = paired_shift(current, previous, 0.05)
    assert drifted["mean_shift"] == pytest.approx(expected.shift) and drifted["mean_shift"] > 0
    assert (drifted["shift_ci_low"], drifted["shift_ci_high"]) == pytest.approx((expected.ci_low, expected.ci_high))
    assert drifted["significant"] and drifted["shift_ci_low"] > 0
    assert drifted["agreement"] == pytest.approx(np.mean([k == s for k, s in scores]))
    assert drifted["expected_agreement"] < 1.0
    assert set(verdicts["check_id"]) == {drifted["check_id"]} and verdicts["status"].unique().to_list() == ["COMPLETED"]


def test_a_new_wording_with_the_same_verdicts_is_no_drift(anchored, local_judge):
    _, check = anchored
    check(evaluator(local_judge, "echo/output"))
    reworded = evaluator(local_judge, "echo/output", prompt="Rate this answer.\nQ: {{input}}\nA: {{output}}")
    row, _ = check(reworded)
    assert row["trigger"] == "config_changed"
    assert row["mean_shift"] == 0 and row["agreement"] == 1.0 and row["significant"] is False
    assert row["note"] == "no anchor moved"


def test_what_calls_for_a_check(local_judge):
    config = evaluator(local_judge, "echo/output")
    history = pl.DataFrame(
        [{"evaluator": "helpfulness", "checked_at": None, "config_hash": config.config_hash, "provider_model": "m1"}]
    )
    assert needs_check(config, empty_frame(JUDGE_DRIFT_SCHEMA), None) == "first"
    assert needs_check(config, history, "m1") is None
    assert needs_check(config, history, "m2") == "model_changed"  # the provider moved the model under the name
    assert needs_check(evaluator(local_judge, "echo/input"), history, "m1") == "config_changed"


def test_anchors_on_a_relative_or_model_free_evaluator_are_refused():
    with pytest.raises(ValueError, match="anchors: judge drift compares one verdict"):
        EvaluatorConfig.model_validate(
            {
                "name": "prefer",
                "mode": "pairwise",
                "model": "openai/x",
                "prompt": "{{output_a}} {{output_b}}",
                "anchors": {"dataset": "d", "version": 1},
            }
        )
