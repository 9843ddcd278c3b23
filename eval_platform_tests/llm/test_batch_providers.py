"""Batch mode on Azure OpenAI (through litellm's batch helpers) and Anthropic's Message Batches, over real
HTTP to the local judge, which serves both providers' interactive and batch endpoints at their own paths.

For each provider: a day judged in batch gives the interactive rows and cache entries, a run killed after
submitting (or while creating) is resumed without a second batch, an expired batch leaves what it did not
answer FAILED batch_expired, rows are priced at the batch discount of litellm's price map, and a budget that
cannot cover the batch refuses it before anything is submitted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.pricing import model_cost
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.judging.test_runner import DAY, make_traces
from eval_platform_tests.llm.test_batch import (
    CRASHING_RUN,
    FAST,
    batch_stats,
    cache_entries,
    chat_requests,
    make_runtime,
    one_request_worst_usd,
    sorted_rows,
    submitted_batches,
)
from eval_platform_tests.llm.test_lean_path import CASES, VARYING
from tools.local_judge_wires import WiredJudgeServer

PROVIDERS = ["azure", "anthropic"]
# A model litellm's price map knows, served by the local judge's mock (as a gateway on localhost would).
PRICED = {"azure": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}
ALIASES = {model: "mock" for model in PRICED.values()}
SAME_ROWS = [
    "score",
    "binary",
    "categorical",
    "pairwise_both_orders",
    "consensus_samples",
    "unparseable",
    "truncated",
    "prose",
]
PROMPTS = {
    "pairwise": "Question: {{input}}\nFirst: {{output_a}}\nSecond: {{output_b}}",
    "n_wise": "Question: {{input}}\n{{candidates}}",
}


@pytest.fixture
def server():
    with WiredJudgeServer(aliases=ALIASES) as judge_server:
        yield judge_server


def root(server) -> str:
    """The provider's api_base: Azure's and Anthropic's paths start at the root, not at /v1."""
    return server.base_url.removesuffix("/v1")


def provider_config(server, provider: str, name: str, **extra) -> EvaluatorConfig:
    fields = {**CASES[name], **extra}
    mode = fields.pop("mode")
    model = fields.pop("model", "mock")
    if "models" not in fields:
        fields["model"] = f"{provider}/{model}"
    return EvaluatorConfig.model_validate(
        {
            "name": "providers",
            "mode": mode,
            "prompt": PROMPTS.get(mode, "Question: {{input}}\nAnswer: {{output}}"),
            "api_base": root(server),
            "max_retries": 0,
            "timeout_s": 5,
            **fields,
        }
    )


def evaluator_file(data_root: Path, server, provider: str, **extra) -> Path:
    return write_evaluator(
        data_root,
        "crashy",
        name="crashy",
        mode="score",
        score_scale={"min": 1, "max": 5},
        model=f"{provider}/mock",
        api_base=root(server),
        prompt="Question: {{input}}\nAnswer: {{output}}",
        batch=FAST,
        **extra,
    )


def run_killed_when(path: Path, state: Path, condition) -> None:
    """Judge the day in a process of its own, killed with SIGKILL as soon as `condition()` holds."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.Popen([sys.executable, "-c", CRASHING_RUN, str(path), str(state)], env=env)
    try:
        while not condition() and run.poll() is None:
            time.sleep(0.05)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert run.returncode == -signal.SIGKILL  # killed, not finished


@pytest.mark.parametrize("name", SAME_ROWS)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_rows_and_cache_entries_equal_the_interactive_ones(server, tmp_path, provider, name):
    traces = make_traces(4, expected_output="It is 2.")
    interactive = judge_day(provider_config(server, provider, name), DAY, traces, make_runtime(tmp_path / "i"))
    sent_one_by_one = chat_requests(server)
    assert sent_one_by_one > 0  # the interactive run went to the provider's own chat endpoint
    batched_config = provider_config(server, provider, name, batch=FAST)
    result = judge_day(batched_config, DAY, traces, make_runtime(tmp_path / "b"))

    interactive_rows, batched = sorted_rows(interactive.rows), sorted_rows(result.rows)
    compared = [c for c in interactive_rows.columns if c not in VARYING]
    assert batched.select(compared).to_dicts() == interactive_rows.select(compared).to_dicts()
    assert batched["calls"].sum() > 0  # something was asked, not all skipped
    assert chat_requests(server) == sent_one_by_one  # every call went through the batch
    assert batch_stats(server)["batches"] == 1 and batch_stats(server)["batch_lines"] == int(batched["calls"].sum())
    (batch,) = result.summary["batches"]
    assert batch["status"] == "completed" and batch["model"] == f"{provider}/{CASES[name].get('model', 'mock')}"
    assert batch["batch_id"].startswith("msgbatch_" if provider == "anthropic" else "batch_")
    if provider == "azure":  # its output file downloaded once: litellm's logging does not fetch it again
        assert server.batches.downloads == 1
    assert cache_entries(tmp_path / "b") == cache_entries(tmp_path / "i")


def test_one_consensus_of_three_providers_is_three_batches(server, tmp_path):
    members = [{"model": f"{p}/mock", "api_base": root(server)} for p in PROVIDERS]
    members.append({"model": 'openai/fixed/{"score": 4}', "api_base": server.base_url})
    config = provider_config(server, "azure", "score", models=members, consensus="median")
    traces = make_traces(3)
    interactive = sorted_rows(judge_day(config, DAY, traces, make_runtime(tmp_path / "i")).rows)
    batched_config = provider_config(server, "azure", "score", models=members, consensus="median", batch=FAST)
    result = judge_day(batched_config, DAY, traces, make_runtime(tmp_path / "b"))
    compared = [c for c in interactive.columns if c not in VARYING]
    assert sorted_rows(result.rows).select(compared).to_dicts() == interactive.select(compared).to_dicts()
    assert sorted(b["model"] for b in result.summary["batches"]) == sorted(m["model"] for m in members)
    assert batch_stats(server)["batches"] == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_provider_errors_per_line_keep_their_interactive_reason_codes(server, tmp_path, provider):
    interactive = judge_day(
        provider_config(server, provider, "server_error", max_retries=0),
        DAY,
        make_traces(2),
        make_runtime(tmp_path / "i"),
    ).rows
    rows = judge_day(
        provider_config(server, provider, "server_error", batch=FAST), DAY, make_traces(2), make_runtime(tmp_path / "b")
    ).rows
    assert rows["status"].to_list() == ["FAILED"] * 2 and rows["score"].to_list() == [None] * 2
    assert rows["reason"].to_list() == interactive["reason"].to_list() == ["provider_error:500"] * 2
    assert all("batch" in d and "internal error injected" in d for d in rows["reason_detail"].to_list())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rows_are_priced_at_the_batch_discount_of_litellms_price_map(server, tmp_path, provider):
    traces = make_traces(4)
    model = PRICED[provider]
    interactive = sorted_rows(
        judge_day(
            provider_config(server, provider, "score", model=model), DAY, traces, make_runtime(tmp_path / "i")
        ).rows
    )
    config = provider_config(server, provider, "score", model=model, batch=FAST)
    result = judge_day(config, DAY, traces, make_runtime(tmp_path / "b"))
    batched = sorted_rows(result.rows)
    assert interactive["cost_usd"].sum() > 0  # priced from litellm's map, not free
    assert batched["cost_usd"].to_list() == pytest.approx([0.5 * c for c in interactive["cost_usd"].to_list()])
    assert batched["prompt_tokens"].to_list() == interactive["prompt_tokens"].to_list()
    assert result.summary["batches"][0]["cost_usd"] == pytest.approx(batched["cost_usd"].sum(), abs=1e-8)


@pytest.mark.parametrize("entry", ["claude-haiku-4-5", "claude-sonnet-4-5", "azure/eu/gpt-4o", "azure/eu/gpt-5.1"])
def test_the_default_discount_is_anthropics_and_azures_batch_price_in_litellms_map(entry):
    prices = model_cost()[entry]
    model = entry if entry.startswith("azure/") else f"anthropic/{entry}"
    config = EvaluatorConfig.model_validate(
        {"name": "b", "mode": "binary", "prompt": "{{output}}", "model": model, "batch": {}}
    )
    assert prices["input_cost_per_token_batches"] == pytest.approx(
        config.batch.discount * prices["input_cost_per_token"]
    )
    assert prices["output_cost_per_token_batches"] == pytest.approx(
        config.batch.discount * prices["output_cost_per_token"]
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_budget_that_cannot_cover_the_batch_is_refused_before_submitting(server, tmp_path, provider):
    traces = make_traces(4)
    model = PRICED[provider]
    worst = one_request_worst_usd(provider_config(server, provider, "score", model=model, batch=FAST), traces)
    config = provider_config(server, provider, "score", model=model, batch=FAST, max_daily_cost_usd=worst * 2.5)
    state = tmp_path / "state"
    rows = judge_day(config, DAY, traces, make_runtime(state)).rows
    assert sorted(rows["status"].to_list()) == ["COMPLETED"] * 2 + ["SKIPPED"] * 2
    assert batch_stats(server)["batches"] == 1 and batch_stats(server)["batch_lines"] == 2
    spent = BudgetLedger(state / "budget.sqlite").spent(config.name, day=time.strftime("%Y-%m-%d", time.gmtime()))
    assert spent == pytest.approx(rows["cost_usd"].sum()) and 0 < spent <= config.max_daily_cost_usd


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_expired_batch_leaves_its_unanswered_traces_failed(tmp_path, provider):
    with WiredJudgeServer(batch_expire_after=2) as server:
        config = provider_config(server, provider, "score", batch=FAST)
        state = tmp_path / "state"
        result = judge_day(config, DAY, make_traces(5), make_runtime(state))
        rows = sorted_rows(result.rows)
        (batch,) = result.summary["batches"]
        assert batch["status"] == "expired"
        assert rows.height == 5  # nothing lost
        done = rows.filter(pl.col("status") == "COMPLETED")
        expired = rows.filter(pl.col("status") == "FAILED")
        assert done.height == 2 and done["score"].null_count() == 0
        assert expired["reason"].to_list() == ["batch_expired"] * 3 and expired["score"].to_list() == [None] * 3
        assert all(batch["batch_id"] in detail for detail in expired["reason_detail"].to_list())

        server.batches.expire_after = None  # the next run submits only what the batch left unanswered
        rerun = judge_day(config, DAY, make_traces(5), make_runtime(state))
        assert rerun.rows["status"].to_list() == ["COMPLETED"] * 5 and rerun.rows["cache_hit"].sum() == 2
        assert batch_stats(server)["batches"] == 2 and batch_stats(server)["batch_lines"] == 2 + 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_poll_timeout_keeps_the_batch_and_the_next_run_resumes_it(tmp_path, provider):
    with WiredJudgeServer(batch_delay_s=2.0) as server:
        state = tmp_path / "state"
        first = judge_day(
            provider_config(server, provider, "score", batch={**FAST, "timeout_s": 0.1}),
            DAY,
            make_traces(3),
            make_runtime(state),
        )
        assert first.rows["reason"].to_list() == ["batch_timeout"] * 3
        (batch,) = first.summary["batches"]
        second = judge_day(
            provider_config(server, provider, "score", batch={**FAST, "timeout_s": 60}),
            DAY,
            make_traces(3),
            make_runtime(state),
        )
        assert second.rows["status"].to_list() == ["COMPLETED"] * 3
        assert [(b["batch_id"], b["resumed"]) for b in second.summary["batches"]] == [(batch["batch_id"], True)]
        assert batch_stats(server)["batches"] == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_run_killed_after_submitting_is_resumed_without_paying_twice(tmp_path, data_root, provider):
    with WiredJudgeServer(batch_delay_s=3.0, aliases=ALIASES) as server:
        path = evaluator_file(data_root, server, provider)
        state = tmp_path / "state"
        saved = state / "judge_batches" / "crashy" / f"{DAY}.json"
        run_killed_when(path, state, lambda: submitted_batches(saved))
        (submitted,) = json.loads(saved.read_text())["batches"]
        assert submitted["state"] == "open" and submitted["request_count"] == 4

        result = judge_day(load_evaluator(path), DAY, make_traces(4), make_runtime(state))
        assert result.rows["status"].to_list() == ["COMPLETED"] * 4
        assert [(b["batch_id"], b["resumed"]) for b in result.summary["batches"]] == [(submitted["batch_id"], True)]
        assert batch_stats(server)["batches"] == 1 and batch_stats(server)["batch_lines"] == 4  # paid once
        (collected,) = json.loads(saved.read_text())["batches"]
        assert collected["state"] == "collected" and collected["status"] == "completed"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_run_killed_while_creating_its_batch_is_resumed_by_the_submission_id(tmp_path, data_root, provider):
    # Azure keeps the submission id in the batch's metadata; Anthropic keeps none, so it rides in the custom_ids.
    with WiredJudgeServer(batch_create_delay_s=5.0) as server:
        path = evaluator_file(data_root, server, provider, timeout_s=30)
        state = tmp_path / "state"
        saved = state / "judge_batches" / "crashy" / f"{DAY}.json"
        run_killed_when(path, state, lambda: batch_stats(server)["batches"] > 0)
        (pending,) = json.loads(saved.read_text())["batches"]
        assert pending["state"] == "submitting" and pending["batch_id"] is None  # the id never reached the run

        result = judge_day(load_evaluator(path), DAY, make_traces(4), make_runtime(state))
        assert result.rows["status"].to_list() == ["COMPLETED"] * 4
        assert [b["resumed"] for b in result.summary["batches"]] == [True]
        assert batch_stats(server)["batches"] == 1
        (collected,) = json.loads(saved.read_text())["batches"]
        assert collected["state"] == "collected" and collected["batch_id"] == result.summary["batches"][0]["batch_id"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_whose_creation_went_unheard_is_found_not_created_twice(tmp_path, provider):
    with WiredJudgeServer(batch_create_delay_s=2.0) as server:
        config = provider_config(server, provider, "score", timeout_s=0.5, max_retries=2, batch=FAST)
        result = judge_day(config, DAY, make_traces(3), make_runtime(tmp_path))
        assert result.rows["status"].to_list() == ["COMPLETED"] * 3
        assert batch_stats(server)["batches"] == 1 and batch_stats(server)["batch_lines"] == 3


def test_an_unheard_anthropic_batch_still_running_is_not_created_again_until_it_can_be_recognised(tmp_path):
    # Anthropic batches carry no metadata: a batch still running cannot be told apart from another of the same
    # size, so nothing is created again; once it has ended, its custom_ids show it is ours, and it is resumed.
    with WiredJudgeServer(batch_create_delay_s=2.0, batch_delay_s=3.0) as server:
        config = provider_config(server, "anthropic", "score", timeout_s=0.5, max_retries=2, batch=FAST)
        state = tmp_path / "state"
        first = judge_day(config, DAY, make_traces(3), make_runtime(state))
        assert first.rows["status"].to_list() == ["FAILED"] * 3
        # Why: the create's answer was lost (timeout), and the lookup could not yet tell.
        assert first.rows["reason"].to_list() == ["timeout"] * 3
        assert all(
            "the batch may exist" in d and "may be submission" in d for d in first.rows["reason_detail"].to_list()
        )
        saved = json.loads((state / "judge_batches" / config.name / f"{DAY}.json").read_text())["batches"]
        assert [b["state"] for b in saved] == ["submitting"]
        assert batch_stats(server)["batches"] == 1

        while httpx.get(f"{server.base_url}/stats/batches", trust_env=False).json()["batch_lines"] < 3:
            time.sleep(0.05)
        second = judge_day(
            provider_config(server, "anthropic", "score", timeout_s=5, batch=FAST),
            DAY,
            make_traces(3),
            make_runtime(state),
        )
        assert second.rows["status"].to_list() == ["COMPLETED"] * 3
        assert [b["resumed"] for b in second.summary["batches"]] == [True]
        assert batch_stats(server)["batches"] == 1


def test_a_cancelled_anthropic_batch_leaves_its_traces_failed_batch_failed(tmp_path):
    with WiredJudgeServer(batch_delay_s=30) as server:
        state = tmp_path / "state"
        config = provider_config(server, "anthropic", "score", batch=FAST)
        saved = state / "judge_batches" / config.name / f"{DAY}.json"
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(judge_day, config, DAY, make_traces(3), make_runtime(state))
            while not submitted_batches(saved):
                time.sleep(0.02)
            (batch,) = json.loads(saved.read_text())["batches"]
            headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
            httpx.post(
                f"{root(server)}/v1/messages/batches/{batch['batch_id']}/cancel", headers=headers, trust_env=False
            )
            rows = running.result().rows
        assert rows["status"].to_list() == ["FAILED"] * 3 and rows["reason"].to_list() == ["batch_failed"] * 3
        assert all(batch["batch_id"] in d and "canceled" in d for d in rows["reason_detail"].to_list())
        (closed,) = json.loads(saved.read_text())["batches"]
        assert closed["state"] == "collected" and closed["status"] == "cancelled"


def test_the_local_judge_refuses_azure_and_anthropic_calls_without_their_credentials_and_version(server):
    azure = f"{root(server)}/openai/deployments/mock/chat/completions"
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(azure, json=body, headers={"api-key": "k"}, trust_env=False).status_code == 404
    assert httpx.post(f"{azure}?api-version=2024-10-21", json=body, trust_env=False).status_code == 401
    ok = httpx.post(f"{azure}?api-version=2024-10-21", json=body, headers={"api-key": "k"}, trust_env=False)
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"]
    messages = f"{root(server)}/v1/messages"
    params = {"model": "mock", "max_tokens": 10, **body}
    assert httpx.post(messages, json=params, headers={"x-api-key": "k"}, trust_env=False).status_code == 400
    reply = httpx.post(
        messages, json=params, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}, trust_env=False
    ).json()
    assert reply["type"] == "message" and reply["content"][0]["type"] == "text" and reply["stop_reason"] == "end_turn"


def test_an_azure_batch_beyond_the_first_page_of_litellms_list_is_never_created_again(server, tmp_path):
    # litellm's Azure batch list returns the first page only. A run that died while creating its batch, with
    # more batches created since than that page holds: its batch cannot be found, so none is created again.
    config = provider_config(server, "azure", "score", batch=FAST)
    azure = {"params": {"api-version": "2024-10-21"}, "headers": {"api-key": "k"}, "trust_env": False}
    line = {
        "custom_id": "x",
        "method": "POST",
        "url": "/chat/completions",
        "body": {"model": "mock", "messages": [{"role": "user", "content": "hi"}]},
    }
    upload = httpx.post(
        f"{root(server)}/openai/files",
        data={"purpose": "batch"},
        files={"file": ("in.jsonl", json.dumps(line).encode())},
        **azure,
    ).json()
    for number in range(21):  # the lost one first, then 20 newer ones
        body = {
            "input_file_id": upload["id"],
            "endpoint": "/chat/completions",
            "completion_window": "24h",
            "metadata": {"submission": "lost-submission" if number == 0 else f"other-{number}"},
        }
        httpx.post(f"{root(server)}/openai/batches", json=body, **azure).raise_for_status()
    record = {
        "batch_id": None,
        "submission": "lost-submission",
        "endpoint": f"azure/mock@{root(server)}",
        "model": "azure/mock",
        "input_file_id": upload["id"],
        "submitted_at": "2026-11-10T00:00:00+00:00",
        "submitted_epoch": time.time() - 5,
        "state": "submitting",
        "status": None,
        "requests": {},
        "reservation": None,
    }
    state = tmp_path / "state"
    saved = state / "judge_batches" / config.name / f"{DAY}.json"
    saved.parent.mkdir(parents=True)
    saved.write_text(json.dumps({"batches": [record]}))

    rows = judge_day(config, DAY, make_traces(2), make_runtime(state)).rows
    assert rows["status"].to_list() == ["FAILED"] * 2 and rows["reason"].to_list() == ["batch_unconfirmed"] * 2
    assert all("no further page" in d for d in rows["reason_detail"].to_list())
    assert batch_stats(server)["batches"] == 21  # nothing created
    assert [b["state"] for b in json.loads(saved.read_text())["batches"]] == ["submitting"]
