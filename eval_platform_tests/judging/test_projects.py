"""`projects`: an evaluator judges only the traces of the projects it names; the others get no row, cost nothing,
and do not count against its partition's checks."""

from __future__ import annotations

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.evaluator_day import judge_partition
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition
from eval_platform_tests.conftest import judge_requests

DAY = "2026-11-10"


def day_traces() -> pl.DataFrame:
    rows = [
        {"trace_id": f"{project}-{i}", "project_id": project, "input": f"q{i}", "output": f"a{i}", "session_id": s}
        for project, count in (("shop", 3), ("pandalm-demo", 5))
        for i in range(count)
        for s in [f"{project}-session" if i < 2 else None]
    ]
    rows.append({"trace_id": "no-project", "project_id": None, "input": "q", "output": "a", "session_id": None})
    return conform(pl.DataFrame([{"date": DAY, **row} for row in rows]), TRACE_SCHEMA)


def judge(local_judge, **fields) -> EvaluatorConfig:
    base = {
        "name": "shop_quality",
        "mode": "score",
        "score_scale": {"min": 0, "max": 1},
        "model": "openai/mock",
        "api_base": local_judge.base_url,
        "prompt": "Question: {{input}}\nAnswer: {{output}}",
        "max_retries": 0,
    }
    return EvaluatorConfig.model_validate({**base, **fields})


def test_an_evaluator_judges_only_its_projects(data_root, local_judge, runtime):
    write_partition(DataRoot.from_env(data_root), "traces", {"date": DAY}, day_traces())
    evaluators = {
        "trace": judge(local_judge, projects=["shop"]),
        "session": judge(local_judge, name="shop_sessions", projects=["shop"], target="session"),
        "check": EvaluatorConfig.model_validate(
            {"name": "shop_json", "projects": ["shop"], "check": {"scorer": "valid_json"}}
        ),
    }
    expected_rows = {"trace": {"shop-0", "shop-1", "shop-2"}, "session": {"shop-1", "shop-2"}, "check": None}
    expected_rows["check"] = expected_rows["trace"]
    # the session partition: one session (shop-0, shop-1) judged once on its last trace; shop-2 has none (no_session)
    expected_calls = {"trace": 3, "session": 1, "check": 0}
    for kind, config in evaluators.items():
        before = judge_requests(local_judge)
        judged = judge_partition(DataRoot.from_env(data_root), config, DAY, runtime, set())
        assert set(judged.result.rows["trace_id"]) == expected_rows[kind], kind
        assert set(judged.result.rows["project_id"]) == {"shop"}, kind
        # the other projects' traces are not this evaluator's: no row, and not missing one
        assert judged.every_trace_has_one_status and judged.traces_without_a_row == 0, kind
        assert judge_requests(local_judge) - before == expected_calls[kind], kind


def test_without_projects_every_trace_is_judged_and_projects_leave_the_config_hash(data_root, local_judge, runtime):
    write_partition(DataRoot.from_env(data_root), "traces", {"date": DAY}, day_traces())
    everyone = judge(local_judge)
    judged = judge_partition(DataRoot.from_env(data_root), everyone, DAY, runtime, set())
    assert judged.result.rows.height == 9 and judged.every_trace_has_one_status
    # which traces an evaluator judges, not what verdict it gives: the cache and earlier rows stay comparable
    assert judge(local_judge, projects=["shop", "other"]).config_hash == everyone.config_hash
