"""Never a fake score (issue 30): a real provider's evaluator whose key variable is misspelt is never answered by the
local judge, even with EVAL_PLATFORM_LOCAL_JUDGE_URL set (as the README tells UI users to): its rows are SKIPPED
no_credentials naming the variable, the run log warns, and the partition's `verdicts_exist` check fails (ERROR). A
declared score_scale the judge's replies never use is a WARN check naming the scale and the observed range.
Real Dagster instance, real warehouse, real HTTP to the local judge on 127.0.0.1."""

from __future__ import annotations

import json
import logging

import dagster as dg

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import judge_requests, write_evaluator
from eval_platform_tests.defs.test_pipeline import key, query, write_day

DAY = "2026-11-09"
KEY_VALUE = "sk-proj-fakescore-0123456789abcdef"  # set in the correctly spelt variable: must never show up


def materialize(defs, selection, partition, instance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        list(defs.assets),
        selection=[selection],
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )


def test_a_misspelt_key_with_the_local_judge_url_set_is_skipped_and_fails_the_error_check(
    data_root, local_judge, monkeypatch
):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.delenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY_VALUE)
    write_evaluator(
        data_root,
        "support_bot",
        mode="score",
        model="openai/gpt-4o-mini",
        api_key_env="OPENAI_APIKEY",  # misspelt
        local_judge="mock",  # as the shipped evaluators say: still never a stand-in for a real provider
        prompt="Rate {{output}}",
        score_scale={"min": 1, "max": 5},
    )
    write_day(data_root, DAY, n=6, bad=False)
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assert materialize(defs, "traces", DAY, instance).success
        before = judge_requests(local_judge)
        result = materialize(defs, "judge_scores", key(DAY, "support_bot"), instance)
        assert result.success  # the rows are written: the check, not the run, says there is no score
        assert judge_requests(local_judge) == before  # not one request reached the local judge

        rows = query(data_root, "SELECT status, reason, model, reason_detail, score FROM judge_scores")
        assert len(rows) == 6
        assert {(status, reason, model) for status, reason, model, _, _ in rows} == {
            ("SKIPPED", "no_credentials", "openai/gpt-4o-mini")
        }
        assert all("OPENAI_APIKEY" in detail and score is None for *_, detail, score in rows)

        checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
        verdicts = checks["verdicts_exist"]
        assert not verdicts.passed and verdicts.severity == dg.AssetCheckSeverity.ERROR
        assert "OPENAI_APIKEY" in verdicts.description and "no_credentials 6" in verdicts.description
        assert verdicts.metadata["selected"].value == 6 and verdicts.metadata["verdicts"].value == 0

        metadata = result.asset_materializations_for_node("judge_scores")[0].metadata
        assert metadata["model"].value == "(no call made)"
        assert "OPENAI_APIKEY" in metadata["unreachable_models"].value["openai/gpt-4o-mini"]

        logs = instance.all_logs(result.run_id)
        warnings = [e.user_message for e in logs if e.level == logging.WARNING and "OPENAI_APIKEY" in e.user_message]
        assert warnings, "the run log warns, naming the variable"
        shown = json.dumps([e.user_message for e in logs]) + verdicts.description + json.dumps(rows)
        assert KEY_VALUE not in shown and KEY_VALUE[:12] not in shown


def test_a_partition_with_verdicts_passes_and_one_with_nothing_selected_passes(data_root, local_judge, monkeypatch):
    """Green means verdicts exist; a day whose traces none is selected (trigger manual, none named) has nothing to
    score, and passes."""
    common = dict(
        mode="score", prompt="Rate {{output}}", score_scale={"min": 0, "max": 1}, api_base=local_judge.base_url
    )
    write_evaluator(data_root, "judged", model="openai/mock", **common)
    write_evaluator(data_root, "unselected", model="openai/mock", trigger="manual", **common)
    write_day(data_root, DAY, n=4, bad=False)
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assert materialize(defs, "traces", DAY, instance).success
        for name in ("judged", "unselected"):
            result = materialize(defs, "judge_scores", key(DAY, name), instance)
            checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
            assert checks["verdicts_exist"].passed, name
            assert checks["score_scale_fits_replies"].passed, name


def test_a_day_with_no_final_answer_or_no_input_has_nothing_to_judge_and_passes(data_root, local_judge):
    """Traces skipped for the text their prompt shows (no_final_answer, missing_field:input) are nothing to judge, as
    empty_text is: no verdict is missing, the check stays green."""
    write_evaluator(
        data_root,
        "answers",
        mode="score",
        prompt="{{input}} -> {{output}}",
        score_scale={"min": 0, "max": 1},
        model="openai/mock",
        api_base=local_judge.base_url,
    )
    folder = data_root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"trace_id": "no-answer", "input": "question"}, {"trace_id": "no-question", "output": "an answer"}]
    lines = [json.dumps({**row, "timestamp": f"{DAY}T10:00:0{i}Z"}) for i, row in enumerate(rows)]
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assert materialize(defs, "traces", DAY, instance).success
        result = materialize(defs, "judge_scores", key(DAY, "answers"), instance)
        [event] = result.get_asset_materialization_events()
        assert event.materialization.metadata["reasons"].value == {"missing_field:input": 1, "no_final_answer": 1}
        checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
        assert checks["verdicts_exist"].passed


def write_scored_day(root, scores: list[int]) -> None:
    """A day whose outputs script the judge's reply (`echo/output`): a judge answering these raw scores."""
    folder = root / "traces" / DAY
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {
                "trace_id": f"t{i}",
                "timestamp": f"{DAY}T10:00:{i:02d}Z",
                "input": f"question {i}",
                "output": json.dumps({"score": score}),
            }
        )
        for i, score in enumerate(scores)
    ]
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")


def test_a_declared_scale_the_replies_never_use_is_a_warning_naming_scale_and_range(data_root, local_judge):
    """A judge answering 1..5: on a declared 0..100 every raw value is in the bottom tenth (mean 0.03, every other
    check green); on a declared 1..3 the replies above the top FAIL out_of_range; on 1..5 it fits."""
    write_scored_day(data_root, [1, 2, 3, 4, 5, 3, 2, 4])
    common = dict(mode="score", prompt="Rate {{output}}", model="openai/echo/output", api_base=local_judge.base_url)
    write_evaluator(data_root, "hundred", score_scale={"min": 0, "max": 100}, **common)
    write_evaluator(data_root, "three", score_scale={"min": 1, "max": 3}, **common)
    write_evaluator(data_root, "five", score_scale={"min": 1, "max": 5}, **common)
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assert materialize(defs, "traces", DAY, instance).success
        checks = {}
        for name in ("hundred", "three", "five"):
            result = materialize(defs, "judge_scores", key(DAY, name), instance)
            assert result.success
            checks[name] = {c.check_name: c for c in result.get_asset_check_evaluations()}

    hundred = checks["hundred"]["score_scale_fits_replies"]
    assert not hundred.passed and hundred.severity == dg.AssetCheckSeverity.WARN
    assert "score_scale 0..100" in hundred.description and "1..5" in hundred.description
    assert hundred.metadata["score_scale"].value == "0..100"
    assert hundred.metadata["observed_raw_range"].value == "1..5"
    assert checks["hundred"]["verdicts_exist"].passed  # scores exist: they are on the wrong scale

    three = checks["three"]["score_scale_fits_replies"]
    assert not three.passed and three.severity == dg.AssetCheckSeverity.WARN
    assert "3 replies outside score_scale 1..3" in three.description and "score 4" in three.description
    assert three.metadata["observed_raw_range"].value == "1..3"

    assert checks["five"]["score_scale_fits_replies"].passed
    means = dict(
        query(data_root, "SELECT evaluator, avg(score) FROM judge_scores WHERE status = 'COMPLETED' GROUP BY 1")
    )
    assert means["hundred"] < 0.04 and means["five"] > 0.4  # what the warning is about


def test_every_selected_trace_failed_is_an_error(data_root, local_judge):
    """A judge whose every reply is outside the scale leaves no verdict: the partition is red, not just WARN."""
    write_scored_day(data_root, [7, 8, 9])
    write_evaluator(
        data_root,
        "five",
        mode="score",
        prompt="Rate {{output}}",
        model="openai/echo/output",
        api_base=local_judge.base_url,
        score_scale={"min": 1, "max": 5},
    )
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assert materialize(defs, "traces", DAY, instance).success
        result = materialize(defs, "judge_scores", key(DAY, "five"), instance)
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert not checks["verdicts_exist"].passed and "out_of_range 3" in checks["verdicts_exist"].description
    assert not checks["score_scale_fits_replies"].passed
