"""A batch left open by a killed run is settled from the provider's record on the next run, even when the
judge-call cache answers every request of that run (real processes, real HTTP to the local judge)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import polars as pl
import pytest

from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.judging.test_runner import DAY, make_traces
from eval_platform_tests.llm.test_batch import (
    FAST,
    PRICES,
    batch_stats,
    make_runtime,
    one_request_worst_usd,
)
from tools.local_judge_wires import WiredJudgeServer

# The run dies at the moment it would settle its batch: the batch has ended and its replies are in the cache
# (flushed at the end of the answering pass), but the reservation is not settled and the batch not marked
# collected. A ledger whose settle kills its own process puts the kill exactly there.
DIES_BEFORE_SETTLING = """
import os
import signal
import sys
from pathlib import Path
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.runner import judge_day
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.judging.test_runner import DAY, make_traces


class KilledBeforeSettling(BudgetLedger):
    def settle(self, reservation, actual_usd):
        os.kill(os.getpid(), signal.SIGKILL)


state = Path(sys.argv[2])
runtime = ModelRuntime(LiteLLMModelClient(), ModelCache(state / "cache"),
                       KilledBeforeSettling(state / "budget.sqlite"), env={})
judge_day(load_evaluator(Path(sys.argv[1])), DAY, make_traces(4), runtime)
print("finished")
"""


def cached_costs(state: Path) -> list[float]:
    with closing(sqlite3.connect(state / "cache" / "replies.sqlite")) as conn:
        return [json.loads(entry)["cost_usd"] for (entry,) in conn.execute("SELECT entry FROM replies")]


def test_an_open_batch_is_settled_on_rerun_when_the_cache_answers_everything(tmp_path, data_root):
    with WiredJudgeServer() as server:
        fields = dict(
            name="settled",
            mode="score",
            score_scale={"min": 1, "max": 5},
            model="openai/mock",
            api_base=server.base_url,
            prompt="Question: {{input}}\nAnswer: {{output}}",
            batch=FAST,
            **PRICES,
        )
        worst = one_request_worst_usd(load_evaluator(write_evaluator(data_root, "settled", **fields)), make_traces(4))
        # Room for the worst case of six requests: the killed run's batch reserved four of them.
        path = write_evaluator(data_root, "settled", **fields, max_daily_cost_usd=6.5 * worst)
        state = tmp_path / "state"
        saved = state / "judge_batches" / "settled" / f"{DAY}.json"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        run = subprocess.run([sys.executable, "-c", DIES_BEFORE_SETTLING, str(path), str(state)], env=env, check=False)
        assert run.returncode == -signal.SIGKILL
        (left,) = json.loads(saved.read_text())["batches"]
        assert left["state"] == "open" and len(cached_costs(state)) == 4  # paid, cached, never settled

        # The re-run finds every verdict in the cache, and still settles the batch from the provider's record.
        config = load_evaluator(path)
        result = judge_day(config, DAY, make_traces(4), make_runtime(state))
        assert result.rows["cache_hit"].to_list() == [True] * 4 and result.rows["calls"].sum() == 0
        assert [(b["batch_id"], b["requests"]) for b in result.summary["batches"]] == [(left["batch_id"], 0)]
        (collected,) = json.loads(saved.read_text())["batches"]
        assert collected["state"] == "collected" and collected["spend_usd"] == pytest.approx(sum(cached_costs(state)))
        ledger = BudgetLedger(state / "budget.sqlite")
        assert ledger.rows() == 1  # no reservation left behind: the day's total only
        assert ledger.spent("settled", day=left["reservation"]["day"]) == pytest.approx(sum(cached_costs(state)))

        # The next partition's batch fits in what the settled batch left: nothing is SKIPPED for budget.
        others = make_traces(4).with_columns(pl.col("trace_id") + "-next", pl.col("input") + " (next)")
        rows = judge_day(config, "2026-11-11", others, make_runtime(state)).rows
        assert rows["status"].to_list() == ["COMPLETED"] * 4
        assert batch_stats(server)["batches"] == 2
