"""The demo's pairwise path over all seven sample days reproduces the recorded GPT-3.5-turbo verdict per item.

The real path: the repo's `pairwise_preference` evaluator (no API key, so its `local_judge` replay), the
sample traces as ingested, both presentation orders, litellm over HTTP to the local judge, our parser.
"""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from eval_platform.ingest.traces import read_trace_day
from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.conftest import REPO_DATA

RECORDED = REPO_DATA / "judgments" / "pandalm_gpt-3.5-turbo.jsonl"


@pytest.fixture(scope="module")
def pairwise_rows(local_judge, tmp_path_factory) -> pl.DataFrame:
    config = load_evaluator(REPO_DATA / "evaluators" / "pairwise_preference.yaml")
    state = tmp_path_factory.mktemp("replay_state")
    days = sorted(p.name for p in (REPO_DATA / "traces").iterdir() if p.is_dir())
    assert len(days) == 7
    frames = []
    for day in days:
        # One runtime per day, as each Dagster materialization builds its own.
        runtime = ModelRuntime(
            client=LiteLLMModelClient(max_concurrency=16),
            cache=ModelCache(state / "cache"),
            ledger=BudgetLedger(state / "budget.sqlite"),
            local_judge_url=local_judge.base_url,
            local_judge_for_missing_keys=True,  # the demo's mode
            env={},
        )
        frames.append(judge_day(config, day, read_trace_day(REPO_DATA, day).traces, runtime).rows)
    return pl.concat(frames)


def expected_outcome(judgment: dict) -> tuple[str, str | None]:
    """(status, winner trace id or 'tie') the recorded verdict should produce."""
    verdict = judgment["verdict"]
    if verdict == "garbage":
        return "FAILED", None
    if verdict == "Tie":
        return "COMPLETED", "tie"
    return "COMPLETED", judgment[f"response{verdict}_trace_id"]


def test_every_item_gets_exactly_its_recorded_verdict(pairwise_rows):
    recorded = {j["item_id"]: j for j in map(json.loads, RECORDED.read_text(encoding="utf-8").splitlines())}
    assert pairwise_rows.height == len(recorded) == 999
    assert pairwise_rows["model"].unique().to_list() == ["local/replay/gpt-3.5-turbo"]

    actual = {}
    for row in pairwise_rows.to_dicts():
        winner = "tie" if row["winner"] == "tie" else row["winner_trace_id"]
        actual[row["pair_key"]] = (row["status"], winner)
    expected = {item_id: expected_outcome(j) for item_id, j in recorded.items()}
    assert {k: v for k, v in actual.items() if v != expected[k]} == {}

    # Per-outcome counts equal the recording's: 460 "1", 476 "2", 38 "Tie", 25 "garbage".
    assert Counter(j["verdict"] for j in recorded.values()) == {"1": 460, "2": 476, "Tie": 38, "garbage": 25}
    assert pairwise_rows.filter(pl.col("winner") == "tie").height == 38
    assert pairwise_rows.filter(pl.col("status") == "FAILED").height == 25


def test_both_orders_agree_and_garbage_fails_as_unparseable(pairwise_rows):
    completed = pairwise_rows.filter(pl.col("status") == "COMPLETED")
    assert (completed["verdict_ab"] == completed["verdict_ba"]).all()
    assert completed["reason"].null_count() == completed.height  # no inconsistent_order tie
    failed = pairwise_rows.filter(pl.col("status") == "FAILED")
    assert failed["reason"].str.starts_with("unparseable").all()
    assert failed["score"].null_count() == failed.height
    assert failed["raw_response"].str.contains("recorded verdict unusable: garbage").all()
