"""Re-judging a partition under a new evaluator configuration keeps the old configuration's verdicts in
`judge_scores_history` (bounded to the last N config hashes per evaluator and day); the current verdicts are the
new ones, untouched by the history."""

from __future__ import annotations

import polars as pl
import pytest

from eval_platform.defs.catalog import refresh
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.evaluator_day import judge_partition
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import open_catalog, read_partition, write_partition

DAY = "2026-11-10"
KEYS = {"evaluator": "quality", "date": DAY}
HISTORY_HASHES_ENV = "EVAL_PLATFORM_JUDGE_HISTORY_HASHES"  # settings.JUDGE_HISTORY_HASHES_ENV, as a user writes it
VERDICT = ["trace_id", "status", "score", "reasoning", "config_hash", "judged_at"]


def judge(local_judge, prompt: str) -> EvaluatorConfig:
    return EvaluatorConfig.model_validate(
        {
            "name": "quality",
            "mode": "score",
            "score_scale": {"min": 0, "max": 1},
            "model": "openai/mock",
            "api_base": local_judge.base_url,
            "prompt": prompt + "\nQuestion: {{input}}\nAnswer: {{output}}",
            "max_retries": 0,
        }
    )


@pytest.fixture
def day(data_root):
    rows = [{"date": DAY, "trace_id": f"t{i}", "input": f"q{i}", "output": f"a{i}"} for i in range(4)]
    write_partition(DataRoot.from_env(data_root), "traces", {"date": DAY}, conform(pl.DataFrame(rows), TRACE_SCHEMA))
    return data_root


def history(root) -> pl.DataFrame | None:
    return read_partition(DataRoot.from_env(root), "judge_scores_history", KEYS)


def test_a_new_config_hash_keeps_the_old_verdicts_and_the_current_ones_are_the_new(day, local_judge, runtime):
    where = DataRoot.from_env(day)
    v1, v2 = judge(local_judge, "Rate it."), judge(local_judge, "Rate it strictly.")
    assert v1.config_hash != v2.config_hash
    first = judge_partition(where, v1, DAY, runtime, set()).result.rows.select(VERDICT).sort("trace_id")
    assert history(day) is None  # nothing was superseded yet
    second = judge_partition(where, v2, DAY, runtime, set()).result.rows.select(VERDICT).sort("trace_id")
    kept = history(day)
    assert kept is not None
    # the old configuration's verdicts, exactly as they were, marked with what replaced them
    assert kept.select(VERDICT).sort("trace_id").equals(first)
    assert set(kept["superseded_by"]) == {v2.config_hash} and kept["superseded_at"].null_count() == 0
    # the current partition holds the new configuration's verdicts only
    current = read_partition(where, "judge_scores", KEYS)
    assert current is not None and set(current["config_hash"]) == {v2.config_hash}
    assert current.select(VERDICT).sort("trace_id").equals(second)
    # re-judging under the same configuration supersedes nothing: the history stays as it was
    judge_partition(where, v2, DAY, runtime, set())
    again = history(day)
    assert again is not None and again.sort("trace_id").equals(kept.sort("trace_id"))
    # the catalog has a view of it
    refresh(where)
    with open_catalog(where) as conn:
        rows = conn.execute(
            "SELECT DISTINCT config_hash FROM judge_scores_history WHERE evaluator = 'quality'"
        ).fetchall()
    assert rows == [(v1.config_hash,)]


def test_the_history_keeps_the_last_n_config_hashes(day, local_judge, runtime, monkeypatch):
    monkeypatch.setenv(HISTORY_HASHES_ENV, "2")
    configs = [judge(local_judge, f"Version {n}.") for n in range(4)]
    for config in configs:
        judge_partition(DataRoot.from_env(day), config, DAY, runtime, set())
    kept = history(day)
    assert kept is not None
    # v0 was pushed out by v1 and v2; v3 is current
    assert set(kept["config_hash"]) == {configs[1].config_hash, configs[2].config_hash}
    assert kept.filter(pl.col("config_hash") == configs[1].config_hash)["superseded_by"].unique().to_list() == [
        configs[2].config_hash
    ]
    monkeypatch.setenv(HISTORY_HASHES_ENV, "0")
    judge_partition(DataRoot.from_env(day), configs[0], DAY, runtime, set())
    emptied = history(day)
    assert emptied is not None and emptied.height == 0
