"""A provider that echoes the Authorization header never puts the key into judge_scores."""

from __future__ import annotations

import polars as pl
import pytest

from eval_platform.judging.budget import BudgetLedger
from eval_platform.judging.cache import JudgeCache
from eval_platform.judging.client import LiteLLMJudgeClient, RetryPolicy
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import JudgeRuntime, judge_day
from eval_platform.storage.warehouse import write_partition
from eval_platform_tests.judging.test_runner import make_traces

CANARY = "sk-canary-7f3a9b1c2d4e5f60"


@pytest.mark.parametrize("model", ["fault/echo_key", "fault/echo_key_reply"])
def test_an_echoed_key_is_redacted_everywhere(local_judge, tmp_path, model):
    config = EvaluatorConfig.model_validate(
        {"name": "leaky", "mode": "score", "model": f"openai/{model}", "api_base": local_judge.base_url,
         "api_key_env": "CANARY_API_KEY", "prompt": "Q: {{input}} A: {{output}}", "max_retries": 0}
    )
    runtime = JudgeRuntime(
        client=LiteLLMJudgeClient(retry=RetryPolicy(base_delay_s=0.01)),
        cache=JudgeCache(tmp_path / "cache"),
        ledger=BudgetLedger(tmp_path / "budget.sqlite"),
        env={"CANARY_API_KEY": CANARY},
    )
    rows = judge_day(config, "2026-11-10", make_traces(2), runtime).rows
    echoed = rows["raw_response"].to_list()
    assert all("[REDACTED]" in text for text in echoed)  # the provider did echo it: the test can fail
    text_columns = [c for c, t in rows.schema.items() if t == pl.String]
    assert not any(CANARY in (value or "") for c in text_columns for value in rows[c].to_list())
    path = write_partition(tmp_path, "judge_scores", {"evaluator": "leaky", "date": "2026-11-10"}, rows)
    assert CANARY.encode() not in path.read_bytes()
    cached = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
    if model == "fault/echo_key_reply":
        assert cached  # the parsed reply was cached: the check below reads something
    assert CANARY.encode() not in cached
