"""Batch mode over real HTTP to the local judge's Files and Batch APIs.

A batch run must give the rows an interactive run gives on the same traces (every column but the call's
latency and the judging time; the spend at the batch discount), write the same cache entries, resume a
batch submitted before a crash or a timeout instead of submitting again, leave what an expired batch did
not answer FAILED (never lost, never scored), and refuse before submitting what the budget cannot cover.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.loading import EvaluatorConfigError, load_evaluator
from eval_platform.judging.prompts import build_messages, trace_values
from eval_platform.judging.runner import judge_day
from eval_platform.llm.batch.state import BatchState
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.client import LiteLLMModelClient, RetryPolicy
from eval_platform.llm.pricing import model_cost, worst_case_prompt_tokens
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.llm.statedb import postgres_state
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.judging.test_modes import judge
from eval_platform_tests.judging.test_runner import DAY, make_traces
from eval_platform_tests.llm.test_lean_path import CASES, VARYING
from eval_platform_tests.shared_state_backends import cache_at, ledger_at
from tools.local_judge_wires import WiredJudgeServer

FAST = {"poll_interval_s": 0.02}
PRICES = {"input_cost_per_million": 2.0, "output_cost_per_million": 8.0}
SAME_ROWS = [
    "score",
    "binary",
    "assertion",
    "categorical",
    "reference",
    "pairwise_both_orders",
    "n_wise",
    "consensus_samples",
    "two_models",
    "unparseable",
    "truncated",
    "prose",
]
# Two judges (one endpoint each, so one batch each) combined by consensus.
TWO_MODELS = dict(
    mode="score",
    score_scale={"min": 1, "max": 5},
    consensus="median",
    models=[{"model": "openai/mock"}, {"model": 'openai/fixed/{"score": 4}'}],
)


@pytest.fixture
def server():
    """A local judge of its own per test: batch counts start at zero, delays and expiry are the test's."""
    with WiredJudgeServer() as judge_server:
        yield judge_server


def batch_stats(server) -> dict:
    return httpx.get(f"{server.base_url}/stats/batches", trust_env=False).json()


def chat_requests(server) -> int:
    return httpx.get(f"{server.base_url}/stats", trust_env=False).json()["requests"]


def make_runtime(state: Path, postgres_url: str | None = None) -> ModelRuntime:
    """A run's runtime: cache, ledger and batch state under `state`, or in the database at `postgres_url`."""
    return ModelRuntime(
        client=LiteLLMModelClient(max_concurrency=4, retry=RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)),
        cache=cache_at(state / "cache", postgres_url),
        ledger=ledger_at(state / "budget.sqlite", postgres_url),
        env={},
        batch_dir=postgres_state(postgres_url) if postgres_url else None,
    )


def config_for(server, name: str, **extra) -> EvaluatorConfig:
    fields = {**(TWO_MODELS if name == "two_models" else CASES[name]), **extra}
    return judge(server, fields.pop("mode"), **fields)


def sorted_rows(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.sort(["trace_id", "trace_id_b", "model", "sample", "role"], nulls_last=True)


def saved_batches(state: Path, evaluator: str, postgres_url: str | None = None) -> list[dict]:
    """The batches a partition's state records (its file under `state`, or its row in the database)."""
    where = postgres_state(postgres_url) if postgres_url else state / "judge_batches"
    return BatchState(where, evaluator, DAY).batches


def submitted_batches(saved: Path) -> list[dict]:
    """The batches a partition's state file records as created at the provider (waited for, or about to be)."""
    if not saved.exists():
        return []
    return [b for b in json.loads(saved.read_text())["batches"] if b["state"] == "open"]


def cache_entries(state: Path) -> dict[str, dict]:
    path = state / "cache" / "replies.sqlite"
    if not path.exists():
        return {}  # nothing parsed, nothing cached
    with sqlite3.connect(path) as conn:
        return {key: json.loads(entry) for key, entry in conn.execute("SELECT key, entry FROM replies")}


@pytest.mark.parametrize("name", SAME_ROWS)
def test_batch_rows_and_cache_entries_equal_the_interactive_ones(server, tmp_path, name):
    traces = make_traces(4, expected_output="It is 2.")
    interactive = sorted_rows(judge_day(config_for(server, name), DAY, traces, make_runtime(tmp_path / "i")).rows)
    sent_one_by_one = chat_requests(server)
    batched_config = config_for(server, name, batch=FAST)
    result = judge_day(batched_config, DAY, traces, make_runtime(tmp_path / "b"))
    batched = sorted_rows(result.rows)

    compared = [c for c in interactive.columns if c not in VARYING]
    assert batched.select(compared).to_dicts() == interactive.select(compared).to_dicts()
    assert set(batched["status"].to_list()) & {"COMPLETED", "FAILED"}  # something was judged, not all skipped
    # Every call went through one batch: none through /v1/chat/completions.
    assert chat_requests(server) == sent_one_by_one
    stats = batch_stats(server)
    endpoints = len(batched_config.judge_models())
    assert stats["batches"] == endpoints and stats["batch_lines"] == int(batched["calls"].sum()) > 0
    assert [b["status"] for b in result.summary["batches"]] == ["completed"] * endpoints
    assert batched_config.config_hash == config_for(server, name).config_hash
    assert cache_entries(tmp_path / "b") == cache_entries(tmp_path / "i")


def test_a_batch_verdict_is_served_from_the_cache_to_both_deliveries(server, tmp_path):
    traces = make_traces(4)
    state = tmp_path / "state"
    judge_day(config_for(server, "score", batch=FAST), DAY, traces, make_runtime(state))
    rows = judge_day(config_for(server, "score"), DAY, traces, make_runtime(state)).rows
    assert rows["cache_hit"].to_list() == [True] * 4 and rows["calls"].sum() == 0
    again = judge_day(config_for(server, "score", batch=FAST), DAY, traces, make_runtime(state))
    assert again.rows["cache_hit"].to_list() == [True] * 4 and again.summary["batches"] == []
    assert batch_stats(server)["batches"] == 1  # cached verdicts are never submitted again


def test_provider_errors_per_line_keep_their_reason_codes(server, tmp_path):
    config = config_for(server, "server_error", batch=FAST)
    rows = judge_day(config, DAY, make_traces(3), make_runtime(tmp_path)).rows
    assert rows["status"].to_list() == ["FAILED"] * 3
    assert rows["reason"].to_list() == ["provider_error:500"] * 3
    assert rows["score"].to_list() == [None] * 3
    assert all("internal error injected" in d and "batch_" in d for d in rows["reason_detail"].to_list())


def test_rows_are_priced_at_the_batch_discount(server, tmp_path):
    traces = make_traces(4)
    interactive = sorted_rows(
        judge_day(config_for(server, "score", **PRICES), DAY, traces, make_runtime(tmp_path / "i")).rows
    )
    config = config_for(server, "score", **PRICES, batch={**FAST, "discount": 0.5})
    batched = sorted_rows(judge_day(config, DAY, traces, make_runtime(tmp_path / "b")).rows)
    assert interactive["cost_usd"].sum() > 0
    assert batched["cost_usd"].to_list() == pytest.approx([0.5 * c for c in interactive["cost_usd"].to_list()])
    assert batched["prompt_tokens"].to_list() == interactive["prompt_tokens"].to_list()


def test_the_default_discount_is_the_batch_price_in_litellms_map():
    entry = model_cost()["gpt-4o-mini"]
    config = EvaluatorConfig.model_validate(
        {"name": "b", "mode": "binary", "prompt": "{{output}}", "model": "openai/gpt-4o-mini", "batch": {}}
    )
    assert entry["input_cost_per_token_batches"] == pytest.approx(config.batch.discount * entry["input_cost_per_token"])
    assert entry["output_cost_per_token_batches"] == pytest.approx(
        config.batch.discount * entry["output_cost_per_token"]
    )


def one_request_worst_usd(config: EvaluatorConfig, traces: pl.DataFrame) -> float:
    """The budget reservation one request of this day takes at the batch price (the runner's own rule)."""
    messages = build_messages(config, trace_values(traces.row(0, named=True), config.span))
    prices = config.judge_models()[0].prices().scaled(config.batch.discount)
    return prices.cost(worst_case_prompt_tokens(messages), config.max_tokens)


def test_a_budget_that_cannot_cover_the_batch_is_refused_before_submitting(server, tmp_path):
    traces = make_traces(4)
    probe = config_for(server, "score", **PRICES, batch=FAST)
    worst = one_request_worst_usd(probe, traces)
    # Less than one request's worst case: nothing is submitted at all.
    config = config_for(server, "score", **PRICES, batch=FAST, max_daily_cost_usd=worst * 0.9)
    state = tmp_path / "none"
    rows = judge_day(config, DAY, traces, make_runtime(state)).rows
    assert rows["status"].to_list() == ["SKIPPED"] * 4 and rows["reason"].to_list() == ["budget_exhausted"] * 4
    assert all("daily limit" in d for d in rows["reason_detail"].to_list())
    assert batch_stats(server) == {"batches": 0, "files": 0, "batch_lines": 0}
    assert BudgetLedger(state / "budget.sqlite").spent(config.name, day=time.strftime("%Y-%m-%d", time.gmtime())) == 0

    # Room for two requests' worst case (prompts differ by a byte or so): two go in the batch, two are SKIPPED.
    config = config_for(server, "score", **PRICES, batch=FAST, max_daily_cost_usd=worst * 2.5)
    state = tmp_path / "two"
    rows = judge_day(config, DAY, traces, make_runtime(state)).rows
    assert sorted(rows["status"].to_list()) == ["COMPLETED"] * 2 + ["SKIPPED"] * 2
    assert batch_stats(server)["batch_lines"] == 2
    spent = BudgetLedger(state / "budget.sqlite").spent(config.name, day=time.strftime("%Y-%m-%d", time.gmtime()))
    assert spent == pytest.approx(rows["cost_usd"].sum()) and 0 < spent <= config.max_daily_cost_usd


def test_an_expired_batch_leaves_its_unanswered_traces_failed(tmp_path):
    with WiredJudgeServer(batch_expire_after=2) as server:
        config = config_for(server, "score", batch=FAST)
        state = tmp_path / "state"
        result = judge_day(config, DAY, make_traces(5), make_runtime(state))
        rows = sorted_rows(result.rows)
        (batch,) = result.summary["batches"]
        assert batch["status"] == "expired"
        assert rows.height == 5  # nothing lost
        done = rows.filter(pl.col("status") == "COMPLETED")
        expired = rows.filter(pl.col("status") == "FAILED")
        assert done.height == 2 and done["score"].null_count() == 0
        assert expired.height == 3 and expired["reason"].to_list() == ["batch_expired"] * 3
        assert expired["score"].to_list() == [None] * 3
        assert all(batch["batch_id"] in detail for detail in expired["reason_detail"].to_list())

        # The next run submits only what the expired batch left unanswered; the rest comes from the cache.
        server.batches.expire_after = None
        rerun = judge_day(config, DAY, make_traces(5), make_runtime(state))
        assert rerun.rows["status"].to_list() == ["COMPLETED"] * 5
        assert rerun.rows["cache_hit"].sum() == 2
        assert batch_stats(server)["batches"] == 2 and batch_stats(server)["batch_lines"] == 2 + 3


def test_a_poll_timeout_keeps_the_batch_and_the_next_run_resumes_it(tmp_path):
    with WiredJudgeServer(batch_delay_s=2.0) as server:
        state = tmp_path / "state"
        impatient = config_for(server, "score", batch={**FAST, "timeout_s": 0.1})
        first = judge_day(impatient, DAY, make_traces(3), make_runtime(state))
        assert first.rows["status"].to_list() == ["FAILED"] * 3
        assert first.rows["reason"].to_list() == ["batch_timeout"] * 3
        (batch,) = first.summary["batches"]
        assert all(batch["batch_id"] in d for d in first.rows["reason_detail"].to_list())
        saved = json.loads((state / "judge_batches" / impatient.name / f"{DAY}.json").read_text())
        assert [(b["batch_id"], b["state"]) for b in saved["batches"]] == [(batch["batch_id"], "open")]

        patient = config_for(server, "score", batch={**FAST, "timeout_s": 60})
        second = judge_day(patient, DAY, make_traces(3), make_runtime(state))
        assert second.rows["status"].to_list() == ["COMPLETED"] * 3
        assert second.summary["batches"][0]["batch_id"] == batch["batch_id"]
        assert second.summary["batches"][0]["resumed"] is True
        assert batch_stats(server)["batches"] == 1


CRASHING_RUN = """
import sys
from pathlib import Path
from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.runner import judge_day
from eval_platform_tests.judging.test_runner import DAY, make_traces
from eval_platform_tests.llm.test_batch import make_runtime

state = Path(sys.argv[2])
runtime = make_runtime(state, (sys.argv[3] if len(sys.argv) > 3 else "") or None)
judge_day(load_evaluator(Path(sys.argv[1])), DAY, make_traces(4), runtime)
print("finished")
"""


def test_a_run_killed_after_submitting_is_resumed_without_paying_twice(tmp_path, data_root, state_backend):
    with WiredJudgeServer(batch_delay_s=3.0) as server:
        path = write_evaluator(
            data_root,
            "crashy",
            name="crashy",
            mode="score",
            score_scale={"min": 1, "max": 5},
            model="openai/mock",
            api_base=server.base_url,
            prompt="Question: {{input}}\nAnswer: {{output}}",
            max_daily_cost_usd=5.0,
            batch=FAST,
            **PRICES,
        )
        state, url = tmp_path / "state", state_backend.postgres_url
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        run = subprocess.Popen([sys.executable, "-c", CRASHING_RUN, str(path), str(state), state_backend.arg], env=env)
        try:
            while run.poll() is None and not [b for b in saved_batches(state, "crashy", url) if b["state"] == "open"]:
                time.sleep(0.05)
        finally:
            run.send_signal(signal.SIGKILL)
            run.wait()
        assert run.returncode == -signal.SIGKILL  # killed while waiting for the batch, not finished
        (submitted,) = saved_batches(state, "crashy", url)
        assert submitted["state"] == "open" and submitted["request_count"] == 4

        # (On PostgreSQL the killed run's partition lock went with its connection: this run does not wait.)
        result = judge_day(load_evaluator(path), DAY, make_traces(4), make_runtime(state, url))
        assert result.rows["status"].to_list() == ["COMPLETED"] * 4
        assert [(b["batch_id"], b["resumed"]) for b in result.summary["batches"]] == [(submitted["batch_id"], True)]
        assert batch_stats(server) == {"batches": 1, "files": 2, "batch_lines": 4}  # one input, one output: paid once
        (collected,) = saved_batches(state, "crashy", url)
        assert collected["state"] == "collected" and collected["status"] == "completed"
        # The killed run's reservation was settled once, with what the batch actually cost.
        ledger = state_backend.ledger(state / "budget.sqlite")
        assert ledger.spent("crashy", day=submitted["reservation"]["day"]) == pytest.approx(
            result.rows["cost_usd"].sum()
        )
        assert ledger.rows() == 1


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("vertex_ai/gemini-2.0-flash", "Vertex AI .*Google Cloud Storage"),
        ("bedrock/anthropic.claude-3-5-haiku-20241022-v1:0", "Bedrock .*S3"),
        ("gemini/gemini-2.0-flash", "does not speak the batch API of provider 'gemini'"),
        ("gpt-4o-mini", "spell it openai/<model>"),
    ],
)
def test_batch_mode_refuses_providers_whose_batch_api_it_does_not_speak(data_root, model, why):
    path = write_evaluator(
        data_root,
        "other",
        name="other",
        mode="binary",
        prompt="{{output}}",
        model=model,
        batch={"enabled": True},
    )
    supported = r"openai/<model>.*azure/<deployment>.*anthropic/<model>"
    with pytest.raises(EvaluatorConfigError, match=rf"batch: model '{re.escape(model)}': .*{why}.*{supported}"):
        load_evaluator(path)
    bad = write_evaluator(
        data_root, "bad", name="bad", mode="binary", prompt="{{output}}", model="openai/x", batch={"discount": 0}
    )
    with pytest.raises(EvaluatorConfigError, match="discount"):
        load_evaluator(bad)


def test_a_cancelled_batch_leaves_its_traces_failed_batch_failed(tmp_path):
    with WiredJudgeServer(batch_delay_s=30) as server:
        state = tmp_path / "state"
        config = config_for(server, "score", batch=FAST)
        saved = state / "judge_batches" / config.name / f"{DAY}.json"
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(judge_day, config, DAY, make_traces(3), make_runtime(state))
            while not submitted_batches(saved):
                time.sleep(0.02)
            (batch,) = json.loads(saved.read_text())["batches"]
            httpx.post(f"{server.base_url}/batches/{batch['batch_id']}/cancel", trust_env=False)
            rows = running.result().rows
        assert rows["status"].to_list() == ["FAILED"] * 3 and rows["reason"].to_list() == ["batch_failed"] * 3
        assert all(f"batch {batch['batch_id']} ended cancelled" in d for d in rows["reason_detail"].to_list())
        (closed,) = json.loads(saved.read_text())["batches"]
        assert closed["state"] == "collected" and closed["status"] == "cancelled"  # not waited for again


def test_identical_traces_of_a_day_are_sent_once_in_a_batch_as_interactive_calls_are(server, tmp_path):
    twins = make_traces(2).with_columns(pl.lit("What is 1 + 1?").alias("input"), pl.lit("It is 2.").alias("output"))
    interactive = judge_day(config_for(server, "score"), DAY, twins, make_runtime(tmp_path / "i")).rows
    batched = judge_day(config_for(server, "score", batch=FAST), DAY, twins, make_runtime(tmp_path / "b")).rows
    # one paid, the twin answered with its reply (single flight: `llm.call`)
    assert interactive["calls"].to_list() == batched["calls"].to_list() == [1, 0]
    assert interactive["cache_hit"].to_list() == batched["cache_hit"].to_list() == [False, True]
    assert batched["score"].to_list()[0] == batched["score"].to_list()[1]
    assert batch_stats(server)["batch_lines"] == 1


def test_a_batch_no_longer_needed_is_settled_and_closed_once_it_ends(tmp_path):
    with WiredJudgeServer(batch_delay_s=0.5) as server:
        state = tmp_path / "state"
        budget = {**PRICES, "max_daily_cost_usd": 5.0}
        first = judge_day(
            config_for(server, "score", **budget, batch={**FAST, "timeout_s": 0.01}),
            DAY,
            make_traces(2),
            make_runtime(state),
        )
        assert first.rows["reason"].to_list() == ["batch_timeout"] * 2
        (old,) = first.summary["batches"]
        while (
            httpx.get(f"{server.base_url}/batches/{old['batch_id']}", trust_env=False).json()["status"] != "completed"
        ):
            time.sleep(0.05)
        # The prompt changed: the old batch's answers are for other requests; a new batch is submitted.
        changed = config_for(server, "score", **budget, batch=FAST, prompt="Q: {{input}}\nA: {{output}}")
        second = judge_day(changed, DAY, make_traces(2), make_runtime(state))
        assert second.rows["status"].to_list() == ["COMPLETED"] * 2
        by_id = {b["batch_id"]: b for b in second.summary["batches"]}
        assert by_id.pop(old["batch_id"])["requests"] == 0
        assert [b["requests"] for b in by_id.values()] == [2]
        saved = json.loads((state / "judge_batches" / changed.name / f"{DAY}.json").read_text())["batches"]
        assert [b["state"] for b in saved] == ["collected", "collected"]
        # Both batches were paid for, and both are in the ledger: no reservation is left behind.
        ledger = BudgetLedger(state / "budget.sqlite")
        assert ledger.rows() == 1
        spent = ledger.spent(changed.name, day=saved[0]["reservation"]["day"])
        assert spent == pytest.approx(sum(b["spend_usd"] for b in saved)) and saved[0]["spend_usd"] > 0


def test_a_batch_whose_creation_went_unheard_is_found_not_created_twice(tmp_path):
    # The server creates the batch but answers after the client's timeout: the client looks it up by the
    # submission id in its metadata instead of creating another.
    with WiredJudgeServer(batch_create_delay_s=2.0) as server:
        config = config_for(server, "score", timeout_s=0.5, max_retries=2, batch=FAST)
        result = judge_day(config, DAY, make_traces(3), make_runtime(tmp_path))
        assert result.rows["status"].to_list() == ["COMPLETED"] * 3
        assert batch_stats(server)["batches"] == 1 and batch_stats(server)["batch_lines"] == 3


def test_a_run_killed_while_creating_its_batch_is_resumed_by_the_submission_id(tmp_path, data_root):
    with WiredJudgeServer(batch_create_delay_s=5.0) as server:
        path = write_evaluator(
            data_root,
            "creating",
            name="creating",
            mode="score",
            score_scale={"min": 1, "max": 5},
            model="openai/mock",
            api_base=server.base_url,
            prompt="Question: {{input}}\nAnswer: {{output}}",
            timeout_s=30,
            batch=FAST,
        )
        state = tmp_path / "state"
        saved = state / "judge_batches" / "creating" / f"{DAY}.json"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        run = subprocess.Popen([sys.executable, "-c", CRASHING_RUN, str(path), str(state)], env=env)
        try:
            while run.poll() is None and batch_stats(server)["batches"] == 0:
                time.sleep(0.05)
        finally:
            run.send_signal(signal.SIGKILL)
            run.wait()
        assert run.returncode == -signal.SIGKILL
        (pending,) = json.loads(saved.read_text())["batches"]
        assert pending["state"] == "submitting" and pending["batch_id"] is None  # the id never reached the run

        result = judge_day(load_evaluator(path), DAY, make_traces(4), make_runtime(state))
        assert result.rows["status"].to_list() == ["COMPLETED"] * 4
        assert [b["resumed"] for b in result.summary["batches"]] == [True]
        assert batch_stats(server)["batches"] == 1
        (collected,) = json.loads(saved.read_text())["batches"]
        assert collected["state"] == "collected" and collected["batch_id"] == result.summary["batches"][0]["batch_id"]


def test_a_submission_that_never_reached_the_provider_is_abandoned_and_its_reservation_freed(server, tmp_path):
    # A run killed after writing its `submitting` record but before its create reached the provider.
    config = config_for(server, "score", **PRICES, batch=FAST, max_daily_cost_usd=5.0)
    state = tmp_path / "state"
    ledger = BudgetLedger(state / "budget.sqlite")
    held = ledger.reserve(config.name, 5.0, 5.0, None, ttl_s=86_400, outlives_process=True)
    record = {
        "batch_id": None,
        "submission": "never-created",
        "endpoint": f"openai/mock@{server.base_url}",
        "model": "openai/mock",
        "input_file_id": None,
        "submitted_at": "2026-11-10T00:00:00+00:00",
        "submitted_epoch": time.time() - 5,
        "state": "submitting",
        "status": None,
        "requests": {},
        "reservation": {
            "id": held.id,
            "evaluator": held.evaluator,
            "day": held.day,
            "month": held.month,
            "amount_usd": held.amount_usd,
        },
    }
    saved = state / "judge_batches" / config.name / f"{DAY}.json"
    saved.parent.mkdir(parents=True)
    saved.write_text(json.dumps({"batches": [record]}))
    # The whole daily budget is held for the dead run's submission: the new batch fits only once it is freed.
    result = judge_day(config, DAY, make_traces(3), make_runtime(state))
    assert result.rows["status"].to_list() == ["COMPLETED"] * 3
    states = [b["state"] for b in json.loads(saved.read_text())["batches"]]
    assert states == ["abandoned", "collected"]
    assert ledger.spent(config.name, day=held.day) == pytest.approx(result.rows["cost_usd"].sum())


def test_output_lines_that_are_damaged_or_not_completions_never_become_verdicts():
    from eval_platform.llm.batch.api import read_results, unanswered

    batch = {"id": "batch_x", "status": "completed", "created_at": 100, "completed_at": 102}
    good = {
        "choices": [{"message": {"content": '{"score": 3}'}, "finish_reason": "stop"}],
        "model": "m",
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}},
    }
    output = "\n".join(
        [
            json.dumps({"custom_id": "ok", "response": {"status_code": 200, "body": good}}),
            "{damaged",
            json.dumps({"custom_id": "odd", "response": {"status_code": 200, "body": {"object": "nothing"}}}),
        ]
    )
    errors = json.dumps({"custom_id": "limited", "response": {"status_code": 429, "body": {"error": {}}}})
    results = read_results(batch, output, errors)
    assert set(results) == {"ok", "odd", "limited"}
    ok = results["ok"]
    assert (ok.content, ok.prompt_tokens, ok.completion_tokens, ok.cached_prompt_tokens) == ('{"score": 3}', 7, 2, 4)
    assert ok.latency_ms == 2000 and ok.attempts == 1
    assert results["odd"].error_reason == "provider_error:200" and "batch_x" in results["odd"].error_detail
    assert results["limited"].error_reason == "rate_limited"
    assert unanswered(batch).error_reason == "batch_failed"  # completed, yet this line is missing
