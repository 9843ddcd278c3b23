"""The judge call path over real HTTP to the local judge: statuses, reasons, faults, retries, cache, sampling."""

from __future__ import annotations

import json
import logging

import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import unit_hash
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform_tests.conftest import judge_requests

DAY = "2026-11-10"


def make_traces(n: int = 4, **extra) -> pl.DataFrame:
    rows = [
        {
            "trace_id": f"t{i}",
            "timestamp": "2026-11-10T12:00:00Z",
            "date": DAY,
            "input": f"What is {i} + {i}?",
            "output": f"It is {2 * i}.",
            "metadata": json.dumps({"item_id": f"item{i // 2}"}),
            "variant": "model-a" if i % 2 == 0 else "model-b",
            **extra,
        }
        for i in range(n)
    ]
    frame = pl.DataFrame(rows).with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC"))
    return conform(frame, TRACE_SCHEMA)


def evaluator(local_judge, model="mock", **fields) -> EvaluatorConfig:
    base = {
        "name": "test_eval",
        "mode": "score",
        "score_scale": {"min": 1, "max": 5},
        "model": f"openai/{model}",
        "api_base": local_judge.base_url,
        "prompt": "Question: {{input}}\nAnswer: {{output}}",
        "max_retries": 2,
        "timeout_s": 5,
    }
    return EvaluatorConfig.model_validate({**base, **fields})


def test_mock_scores_are_normalized_and_complete(local_judge, runtime):
    result = judge_day(evaluator(local_judge), DAY, make_traces(), runtime)
    rows = result.rows
    assert rows["status"].to_list() == ["COMPLETED"] * 4
    assert rows["score"].is_between(0, 1).all()
    assert ((rows["raw_score"] - 1) / 4 - rows["score"]).abs().max() < 1e-9
    assert set(rows["provider_model"]) == {"local/mock"}
    assert result.summary["completed"] == 4 and result.summary["calls"] == 4


@pytest.mark.parametrize(
    ("mode", "fields", "column"),
    [
        ("binary", {}, "passed"),
        ("categorical", {"labels": {"good": 1.0, "meh": 0.5, "bad": 0.0}}, "label"),
    ],
)
def test_binary_and_categorical(local_judge, runtime, mode, fields, column):
    config = evaluator(local_judge, mode=mode, score_scale=None, **fields)
    rows = judge_day(config, DAY, make_traces(), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED"] * 4
    assert rows[column].null_count() == 0
    if mode == "categorical":
        assert rows.select(pl.col("label").replace_strict(fields["labels"]) == pl.col("score")).to_series().all()
    else:
        assert (rows["passed"].cast(pl.Float64) == rows["score"]).all()


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("malformed", "unparseable"),
        ("truncated", "truncated"),
        ("empty", "empty_reply"),
        ("server_error", "provider_error:500"),
        ("rate_limit", "rate_limited"),
    ],
)
def test_faults_fail_with_reason_and_no_score(local_judge, runtime, fault, reason):
    rows = judge_day(evaluator(local_judge, f"fault/{fault}"), DAY, make_traces(2), runtime).rows
    assert rows["status"].to_list() == ["FAILED", "FAILED"]
    assert rows["reason"].to_list() == [reason, reason]  # a stable code; the message is in reason_detail
    assert rows["reason_detail"].null_count() == 0
    assert rows["score"].null_count() == 2  # a failure is never a score
    assert rows["raw_response"].null_count() == 0  # the raw reply (or error) is kept


def test_prose_around_json_is_parsed(local_judge, runtime):
    rows = judge_day(evaluator(local_judge, "fault/prose"), DAY, make_traces(2), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED", "COMPLETED"]
    assert rows["raw_response"].str.starts_with("Sure!").all()


def test_timeout_is_failed_after_retries(local_judge, runtime):
    config = evaluator(local_judge, "fault/slow", timeout_s=0.5, max_retries=1)
    rows = judge_day(config, DAY, make_traces(1), runtime).rows
    assert rows["status"][0] == "FAILED"
    assert rows["reason"][0] == "timeout"
    assert rows["reason_detail"][0].startswith("after 2 attempt(s)")


def test_retry_honours_retry_after(local_judge, runtime):
    config = evaluator(local_judge, "fault/rate_limit_once", max_retries=3)
    outcome_rows = judge_day(config, DAY, make_traces(2), runtime).rows
    assert outcome_rows["status"].to_list() == ["COMPLETED", "COMPLETED"]
    assert outcome_rows["calls"].to_list() == [2, 2]  # one 429, then success
    # The server asked for Retry-After: 1s; our own backoff alone would have waited ~0.05s.
    assert outcome_rows["latency_ms"].min() >= 1000


def test_server_error_once_is_retried(local_judge, runtime):
    rows = judge_day(evaluator(local_judge, "fault/server_error_once"), DAY, make_traces(2), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED", "COMPLETED"]
    assert rows["calls"].to_list() == [2, 2]


def test_cache_second_run_makes_no_call(local_judge, runtime):
    config = evaluator(local_judge, prompt="Cache test. Q: {{input}} A: {{output}}")
    first = judge_day(config, DAY, make_traces(), runtime).rows
    before = judge_requests(local_judge)
    second = judge_day(config, DAY, make_traces(), runtime).rows
    assert judge_requests(local_judge) == before
    assert second["cache_hit"].all() and not first["cache_hit"].any()
    assert second["score"].to_list() == first["score"].to_list()
    assert second["cost_usd"].sum() == 0


def test_no_credentials_is_skipped(local_judge, runtime):
    config = evaluator(local_judge, api_key_env="SOME_PROVIDER_KEY")
    rows = judge_day(config, DAY, make_traces(), runtime).rows
    assert set(zip(rows["status"], rows["reason"], strict=True)) == {("SKIPPED", "no_credentials")}


def test_a_misspelt_key_is_never_answered_by_the_local_judge(local_judge, runtime, caplog):
    """With a local judge URL set (as for the UI), a real provider's model whose key variable is misspelt is SKIPPED
    no_credentials naming the variable, with a WARNING; the local judge is not asked, the key's value shown nowhere."""
    value = "sk-proj-misspelt-0123456789abcdef"
    config = evaluator(local_judge, model="gpt-4o-mini", api_base=None, api_key_env="OPENAI_APIKEY")
    runtime.local_judge_url = local_judge.base_url
    runtime.env = {"OPENAI_API_KEY": value}  # the key is there, under the name the file does not say
    before = judge_requests(local_judge)
    with caplog.at_level(logging.WARNING, logger="eval_platform.judging.runner"):
        result = judge_day(config, DAY, make_traces(2), runtime)
    rows = result.rows
    assert judge_requests(local_judge) == before
    assert rows["status"].to_list() == ["SKIPPED", "SKIPPED"] and set(rows["reason"]) == {"no_credentials"}
    assert rows["model"].to_list() == ["openai/gpt-4o-mini"] * 2 and rows["score"].is_null().all()
    assert all("OPENAI_APIKEY" in detail for detail in rows["reason_detail"])
    assert "OPENAI_APIKEY" in result.summary["unreachable_models"]["openai/gpt-4o-mini"]
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "OPENAI_APIKEY" in r.getMessage()]
    assert warned
    assert value not in caplog.text and value not in json.dumps(rows.to_dicts(), default=str)


def test_the_demo_mode_routes_a_missing_key_to_the_local_judge(local_judge, runtime):
    config = evaluator(local_judge, model="gpt-4o-mini", api_base=None, api_key_env="SOME_PROVIDER_KEY")
    runtime.local_judge_url = local_judge.base_url
    runtime.local_judge_for_missing_keys = True
    rows = judge_day(config, DAY, make_traces(2), runtime).rows
    assert rows["model"].to_list() == ["local/mock", "local/mock"]
    assert rows["status"].to_list() == ["COMPLETED", "COMPLETED"]


def test_a_model_that_names_the_local_judge_is_answered_by_it(local_judge, runtime):
    config = EvaluatorConfig.model_validate(
        {
            "name": "local",
            "mode": "score",
            "score_scale": {"min": 1, "max": 5},
            "model": "local/mock",
            "prompt": "{{output}}",
        }
    )
    skipped = judge_day(config, DAY, make_traces(2), runtime).rows  # no local judge URL: not called, and said so
    assert set(zip(skipped["status"], skipped["reason"], strict=True)) == {("SKIPPED", "no_local_judge")}
    assert "EVAL_PLATFORM_LOCAL_JUDGE_URL" in skipped["reason_detail"][0]
    runtime.local_judge_url = local_judge.base_url
    rows = judge_day(config, DAY, make_traces(2), runtime).rows
    assert rows["model"].to_list() == ["local/mock", "local/mock"]
    assert rows["status"].to_list() == ["COMPLETED", "COMPLETED"]


def test_disabled_evaluator_skips_everything(local_judge, runtime):
    before = judge_requests(local_judge)
    rows = judge_day(evaluator(local_judge, enabled=False), DAY, make_traces(), runtime).rows
    assert set(rows["reason"]) == {"disabled"} and rows.height == 4
    assert judge_requests(local_judge) == before


def test_sampling_is_deterministic_per_evaluator_and_trace(local_judge, runtime):
    traces = make_traces(40)
    config = evaluator(local_judge, trigger="sampled", sample_rate=0.3)
    first = judge_day(config, DAY, traces, runtime).rows
    second = judge_day(config, DAY, traces, runtime).rows
    picked = set(first.filter(pl.col("status") == "COMPLETED")["trace_id"])
    assert picked == set(second.filter(pl.col("status") == "COMPLETED")["trace_id"])
    assert picked == {t for t in traces["trace_id"] if unit_hash("test_eval", t) < 0.3}
    assert 0 < len(picked) < 40
    assert set(first.filter(pl.col("status") == "SKIPPED")["reason"]) == {"not_sampled"}
    other = evaluator(local_judge, name="other_eval", trigger="sampled", sample_rate=0.3)
    other_picked = set(judge_day(other, DAY, traces, runtime).rows.filter(pl.col("status") == "COMPLETED")["trace_id"])
    assert other_picked != picked  # another evaluator samples independently


def test_a_trace_not_sampled_says_not_sampled_whatever_its_text(local_judge, runtime):
    """Sampling decides first: a trace the evaluator does not select is `not_sampled` even when it has no final
    answer; only selected traces without one are `no_final_answer` (and count as selected for the checks)."""
    traces = make_traces(40).with_columns(pl.lit(None, dtype=pl.String).alias("output"))
    config = evaluator(local_judge, trigger="sampled", sample_rate=0.3)
    rows = judge_day(config, DAY, traces, runtime).rows
    picked = {t for t in traces["trace_id"] if unit_hash("test_eval", t) < 0.3}
    reasons = dict(zip(rows["trace_id"].to_list(), rows["reason"].to_list(), strict=True))
    assert {t for t, r in reasons.items() if r == "no_final_answer"} == picked
    assert {t for t, r in reasons.items() if r == "not_sampled"} == set(traces["trace_id"]) - picked


def test_manual_trigger_judges_only_named_traces(local_judge, runtime):
    config = evaluator(local_judge, trigger="manual")
    rows = judge_day(config, DAY, make_traces(), runtime, manual_trace_ids={"t1", "t3"}).rows
    assert set(rows.filter(pl.col("status") == "COMPLETED")["trace_id"]) == {"t1", "t3"}
    assert set(rows.filter(pl.col("status") == "SKIPPED")["reason"]) == {"not_selected"}


def test_samples_make_one_row_each_plus_a_consensus_row(local_judge, runtime):
    rows = judge_day(evaluator(local_judge, samples=3, temperature=0.7), DAY, make_traces(2), runtime).rows
    members = rows.filter(pl.col("role") == "member")
    assert members.height == 6 and not members["is_final"].any()
    assert sorted(members.filter(pl.col("trace_id") == "t0")["sample"].to_list()) == [0, 1, 2]
    final = rows.filter(pl.col("is_final"))
    assert final["role"].to_list() == ["consensus", "consensus"] and final["votes"].to_list() == [3, 3]


def test_named_span_missing_is_skipped_with_reason(local_judge, runtime):
    rows = judge_day(evaluator(local_judge, span="retrieve"), DAY, make_traces(1), runtime).rows
    assert rows["status"][0] == "SKIPPED" and rows["reason"][0].startswith("span_not_found")


def test_counts_are_conserved(local_judge, runtime):
    summary = judge_day(
        evaluator(local_judge, trigger="sampled", sample_rate=0.5), DAY, make_traces(10), runtime
    ).summary
    assert summary["rows"] == summary["completed"] + summary["failed"] + summary["skipped"] == 10


def test_one_runtime_serves_several_days(local_judge, runtime):
    """Each judge_day runs its own event loop; the client's concurrency limits must follow it."""
    config = evaluator(local_judge, max_retries=0)
    for day in range(3):
        rows = judge_day(config, DAY, make_traces(20, input=f"day {day}"), runtime).rows  # no cache hits
        assert set(rows["status"]) == {"COMPLETED"} and rows["calls"].sum() == 20


def test_local_judge_cache_survives_a_new_port(local_judge, tmp_path):
    """The demo starts the local judge on a free port each run; its replies stay cached across runs."""
    from eval_platform_tests.conftest import REPO_DATA
    from tools.local_judge_wires import WiredJudgeServer

    config = evaluator(local_judge, api_base=None, api_key_env="EVAL_PLATFORM_TEST_NO_KEY")

    def run(url: str) -> pl.DataFrame:
        runtime = ModelRuntime(
            LiteLLMModelClient(max_concurrency=4),
            ModelCache(tmp_path / "cache"),
            BudgetLedger(tmp_path / "budget.sqlite"),
            local_judge_url=url,
            local_judge_for_missing_keys=True,  # the demo's mode
            env={},
        )
        return judge_day(config, DAY, make_traces(3), runtime).rows

    first = run(local_judge.base_url)
    assert first["model"].to_list() == ["local/mock"] * 3 and not first["cache_hit"].any()
    with WiredJudgeServer(data_root=REPO_DATA) as other:
        assert other.base_url != local_judge.base_url
        second = run(other.base_url)
        assert second["cache_hit"].all() and judge_requests(other) == 0


def test_an_oversized_output_is_skipped_not_sent(local_judge, runtime):
    from eval_platform_tests.conftest import judge_requests

    traces = make_traces(2).with_columns(
        pl.when(pl.col("trace_id") == "t1").then(pl.lit("x" * 5_000_000)).otherwise(pl.col("output")).alias("output")
    )
    before = judge_requests(local_judge)
    rows = judge_day(evaluator(local_judge, "mock"), DAY, traces, runtime).rows.sort("trace_id")
    assert rows["status"].to_list() == ["COMPLETED", "SKIPPED"]
    assert rows["reason"][1] == "prompt_too_large" and "max_prompt_chars" in rows["reason_detail"][1]
    assert judge_requests(local_judge) - before == 1  # the 5 MB output never reached the provider
