"""Pairwise judging: pairing by key, both orders, flips become ties, replayed PandaLM verdicts over HTTP."""

from __future__ import annotations

import json

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform_tests.conftest import REPO_DATA, judge_requests
from eval_platform_tests.judging.test_runner import DAY, make_traces

PROMPT = "Instruction: {{input}}\nA: {{output_a}}\nB: {{output_b}}"


def pairwise(local_judge, model: str, **fields) -> EvaluatorConfig:
    return EvaluatorConfig.model_validate(
        {
            "name": "pw",
            "mode": "pairwise",
            "model": f"openai/{model}",
            "api_base": local_judge.base_url,
            "prompt": PROMPT,
            **fields,
        }
    )


def pandalm_traces(indices: list[int]) -> pl.DataFrame:
    items = json.loads((REPO_DATA / "sources/pandalm/testset-v1.json").read_text())
    rows = []
    for idx in indices:
        item = items[idx]
        first, second = item["cmp_key"].split("_")
        text = item["instruction"] + ("\n\n" + item["input"] if item["input"] else "")
        for model, response in ((first, item["response1"]), (second, item["response2"])):
            rows.append(
                {
                    "trace_id": f"pandalm-{idx:04d}-{model}",
                    "timestamp": "2026-11-10T00:00:00Z",
                    "date": DAY,
                    "input": text,
                    "output": response,
                    "variant": model,
                    "metadata": json.dumps({"item_id": f"pandalm-{idx:04d}"}),
                }
            )
    frame = pl.DataFrame(rows).with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC"))
    return conform(frame, TRACE_SCHEMA)


def test_replay_reproduces_recorded_verdicts_in_both_orders(local_judge, runtime):
    recorded = json.loads((REPO_DATA / "sources/pandalm/gpt-3.5-turbo-testset-v1.json").read_text())
    indices = list(range(40))
    rows = judge_day(pairwise(local_judge, "replay/gpt-3.5-turbo"), DAY, pandalm_traces(indices), runtime).rows
    assert rows.height == 40
    by_item = {r["pair_key"]: r for r in rows.to_dicts()}
    for idx in indices:
        row, verdict = by_item[f"pandalm-{idx:04d}"], recorded[idx]["gpt_result"]
        if verdict == "garbage":
            assert row["status"] == "FAILED" and row["score"] is None
            continue
        expected = {"1": "A", "2": "B", "Tie": "tie"}[verdict]
        # The replay maps the recording to each presentation order, so both orders agree.
        assert (row["status"], row["winner"], row["verdict_ab"], row["verdict_ba"]) == (
            "COMPLETED",
            expected,
            expected,
            expected,
        )
        assert row["provider_model"] == "gpt-3.5-turbo (PandaLM recording)"
        if expected != "tie":
            assert row["winner_variant"] == row["winner_trace_id"].split("-", 2)[2]


def test_flipped_verdict_is_a_tie(local_judge, runtime):
    # A mock judge answers from a hash of the prompt, so some pairs flip between orders.
    rows = judge_day(pairwise(local_judge, "mock"), DAY, make_traces(40), runtime).rows
    completed = rows.filter(pl.col("status") == "COMPLETED")
    flipped = completed.filter(pl.col("verdict_ab") != pl.col("verdict_ba"))
    assert flipped.height > 0
    assert set(flipped["winner"]) == {"tie"} and set(flipped["score"]) == {0.5}
    assert flipped["reason"].str.starts_with("inconsistent_order").all()
    agreed = completed.filter(pl.col("verdict_ab") == pl.col("verdict_ba"))
    assert (agreed["winner"] == agreed["verdict_ab"]).all()


def test_random_order_makes_one_call_per_pair(local_judge, runtime):
    rows = judge_day(
        pairwise(local_judge, "mock", pairwise={"orders": "random", "seed": 7}), DAY, make_traces(8), runtime
    ).rows
    assert rows["calls"].to_list() == [1] * 4
    assert (rows["verdict_ab"].is_null() ^ rows["verdict_ba"].is_null()).all()


def test_unpaired_trace_is_skipped(local_judge, runtime):
    rows = judge_day(pairwise(local_judge, "mock"), DAY, make_traces(3), runtime).rows
    lone = rows.filter(pl.col("trace_id") == "t2")
    assert lone["status"][0] == "SKIPPED" and lone["reason"][0].startswith("no_pair")
    assert rows.filter(pl.col("status") == "COMPLETED").height == 1


def test_a_pair_with_a_candidate_that_cannot_be_judged_is_skipped_unpaid(local_judge, runtime):
    """Never paid for nothing: a pair whose candidate has no text (content not captured) or whose model call failed
    is SKIPPED with that candidate's reason, and nothing is sent for it; the other pairs are judged."""
    traces = pandalm_traces([0, 1, 2]).to_dicts()
    traces[0]["output"] = None  # pair 0: one candidate with no text at all
    traces[0]["input"] = None
    traces[2]["error"] = True  # pair 1: one candidate whose model call failed
    traces[2]["error_type"] = "openai.InternalServerError"
    frame = conform(pl.DataFrame(traces, schema=TRACE_SCHEMA), TRACE_SCHEMA)
    before = judge_requests(local_judge)
    rows = judge_day(pairwise(local_judge, "replay/gpt-3.5-turbo"), DAY, frame, runtime).rows
    by_key = {row["pair_key"]: row for row in rows.to_dicts()}
    assert (by_key["pandalm-0000"]["status"], by_key["pandalm-0000"]["reason"]) == ("SKIPPED", "empty_text")
    assert (by_key["pandalm-0001"]["status"], by_key["pandalm-0001"]["reason"]) == ("SKIPPED", "app_error")
    assert by_key["pandalm-0002"]["status"] == "COMPLETED"
    assert by_key["pandalm-0000"]["calls"] == by_key["pandalm-0001"]["calls"] == 0
    assert judge_requests(local_judge) - before == by_key["pandalm-0002"]["calls"] == 2  # both orders, one pair
