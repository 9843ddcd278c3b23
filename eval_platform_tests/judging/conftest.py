"""A judge runtime over the session's local judge, with its own cache and budget ledger per test."""

from __future__ import annotations

import pytest

from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import JudgeCache
from eval_platform.llm.client import LiteLLMJudgeClient, RetryPolicy
from eval_platform.llm.runtime import JudgeRuntime


@pytest.fixture
def runtime(tmp_path):
    return JudgeRuntime(
        client=LiteLLMJudgeClient(max_concurrency=8, retry=RetryPolicy(base_delay_s=0.05, max_delay_s=0.2)),
        cache=JudgeCache(tmp_path / "cache"),
        ledger=BudgetLedger(tmp_path / "budget.sqlite"),
        env={},
    )
