"""The one call path (`llm.call`), as judges and benchmark tasks both take it: what a user would notice."""

from __future__ import annotations

import json
import sqlite3

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.redaction import REDACTED
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.judging.test_runner import DAY, make_traces
from eval_platform_tests.llm.test_redaction import holds_a_piece

CANARY = "sk-oldcache-4e8b2a7c9d1f3e5a"


def _runtime(tmp_path) -> ModelRuntime:
    return ModelRuntime(
        client=LiteLLMModelClient(),
        cache=ModelCache(tmp_path / "cache"),
        ledger=BudgetLedger(tmp_path / "budget.sqlite"),
        env={"CANARY_API_KEY": CANARY},
    )


def test_a_key_in_a_cached_judge_reply_never_reaches_a_row(local_judge, tmp_path):
    """A cache entry written before replies were redacted (or by an older version) may hold the key a provider
    echoed: a judge's cache hit is redacted on the way out, as a benchmark's always was."""
    config = EvaluatorConfig.model_validate(
        {
            "name": "cached",
            "mode": "score",
            "model": "openai/mock",
            "api_base": local_judge.base_url,
            "api_key_env": "CANARY_API_KEY",
            "prompt": "Q: {{input}} A: {{output}}",
            "score_scale": {"min": 1, "max": 5},
        }
    )
    first = judge_day(config, DAY, make_traces(3), _runtime(tmp_path)).rows
    assert first["status"].to_list() == ["COMPLETED"] * 3
    # The entries as an older version may have left them: the echoed key in the reply and the reported model.
    with sqlite3.connect(tmp_path / "cache" / "replies.sqlite") as db:
        entries = db.execute("SELECT key, entry FROM replies").fetchall()
        assert len(entries) == 3
        for key, text in entries:
            entry = json.loads(text)
            reply = json.loads(entry["content"])
            reply["reasoning"] = f"the header was Bearer {CANARY}"
            entry.update(content=json.dumps(reply), provider_model=f"mock for Bearer {CANARY}")
            db.execute("UPDATE replies SET entry = ? WHERE key = ?", (json.dumps(entry), key))
    again = judge_day(config, DAY, make_traces(3), _runtime(tmp_path)).rows
    assert again["cache_hit"].all() and again["status"].to_list() == ["COMPLETED"] * 3
    assert all(REDACTED in text for text in again["raw_response"].to_list())  # the entries were read
    text_columns = [c for c, t in again.schema.items() if t == pl.String]
    assert not any(holds_a_piece(value, CANARY) for c in text_columns for value in again[c].to_list())
