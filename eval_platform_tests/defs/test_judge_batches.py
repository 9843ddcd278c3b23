"""Batch mode through Dagster: `judge_scores` on a real instance, the local judge's batch API over HTTP.

A first materialization stops waiting before the batch is done (its traces FAILED batch_timeout, the WARN
check fails, the batch id kept in the state folder); the second resumes that batch, submits nothing new,
and writes the completed partition.
"""

from __future__ import annotations

import json

import dagster as dg
import httpx

from eval_platform.definitions import build_definitions
from eval_platform.settings import state_dir
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.defs.test_pipeline import key, materialize, query, write_day
from tools.local_judge_wires import WiredJudgeServer

DAY = "2026-11-09"


def test_judge_scores_in_batch_mode_resumes_its_batch_across_runs(data_root, tmp_path):
    write_day(data_root, DAY, bad=False)
    (tmp_path / "home").mkdir()
    with (
        WiredJudgeServer(batch_delay_s=2.0) as server,
        dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance,
    ):
        common = dict(
            mode="score",
            score_scale={"min": 0, "max": 1},
            prompt="{{input}} -> {{output}}",
            model="openai/mock",
            api_base=server.base_url,
        )
        write_evaluator(
            data_root, "batched", name="batched", batch={"poll_interval_s": 0.05, "timeout_s": 0.1}, **common
        )
        defs = build_definitions(data_root)
        assert materialize(defs, "traces", DAY, instance).success

        first = materialize(defs, "judge_scores", key(DAY, "batched"), instance)
        assert first.success
        assert query(data_root, "SELECT status, reason, count(*) FROM judge_scores GROUP BY ALL") == [
            ("FAILED", "batch_timeout", 6)
        ]
        checks = {c.check_name: c.passed for c in first.get_asset_check_evaluations()}
        assert checks == {
            "every_trace_has_one_status": True,
            "failed_rate_below_threshold": False,
            "verdicts_exist": False,  # every selected trace FAILED batch_timeout: no score
            "score_scale_fits_replies": True,
        }
        (batch,) = first.asset_materializations_for_node("judge_scores")[0].metadata["batches"].value
        saved = json.loads((state_dir(data_root) / "judge_batches" / "batched" / f"{DAY}.json").read_text())
        assert [(b["batch_id"], b["state"]) for b in saved["batches"]] == [(batch["batch_id"], "open")]

        # Waiting longer now: the same batch is collected, not submitted again.
        write_evaluator(
            data_root, "batched", name="batched", batch={"poll_interval_s": 0.05, "timeout_s": 120}, **common
        )
        defs = build_definitions(data_root)
        second = materialize(defs, "judge_scores", key(DAY, "batched"), instance)
        assert second.success
        metadata = second.asset_materializations_for_node("judge_scores")[0].metadata
        assert [(b["batch_id"], b["resumed"], b["status"]) for b in metadata["batches"].value] == [
            (batch["batch_id"], True, "completed")
        ]
        assert metadata["completed"].value == 6 and metadata["failed"].value == 0
        assert query(data_root, "SELECT status, count(*), count(score) FROM judge_scores GROUP BY ALL") == [
            ("COMPLETED", 6, 6)
        ]
        stats = httpx.get(f"{server.base_url}/stats/batches", trust_env=False).json()
        assert stats["batches"] == 1 and stats["batch_lines"] == 6
        assert httpx.get(f"{server.base_url}/stats", trust_env=False).json()["requests"] == 0
