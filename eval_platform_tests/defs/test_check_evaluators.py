"""Check evaluators through Dagster: a real instance in a temp DAGSTER_HOME, Parquet + DuckDB in a temp data root,
a binary judge on the local judge beside them. Check rows land in judge_scores like the judge's, with no request
to the judge, and the agreement and cost views take them in (cost 0)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition
from eval_platform_tests.conftest import judge_requests, write_evaluator

ANSWERS_DAY, AGENT_DAY = "2026-11-09", "2026-11-10"

# (trace_id, output, latency_ms, the binary judge's scripted verdict). valid_json: t1 yes, t2 no (cut off), t3 no,
# t4 yes, t5 has no answer at all. latency <= 1000: t1, t3, t5 pass; t2 fails; t4 has no latency.
ANSWERS = [
    ("t1", '{"a": 1}', 100, "yes"),
    ("t2", '{"a": ', 3000, "no"),
    ("t3", "plain text", 500, "yes"),
    ("t4", "[1, 2]", None, "yes"),
    ("t5", None, 50, "no"),
]


def write_answers_day(root: Path) -> None:
    folder = root / "traces" / ANSWERS_DAY
    folder.mkdir(parents=True)
    lines = [
        json.dumps(
            {
                "trace_id": trace_id,
                "timestamp": f"{ANSWERS_DAY}T10:00:0{i}Z",
                "input": "answer in JSON",
                **({"output": output} if output is not None else {}),
                **({"latency_ms": latency} if latency is not None else {}),
                "expected_output": verdict,
                "cost_usd": 0.01,
            }
        )
        for i, (trace_id, output, latency, verdict) in enumerate(ANSWERS)
    ]
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")


def tool_calls(*names: str) -> str:
    return json.dumps(
        [
            {"span_id": f"s{i}", "name": n, "arguments": "{}", "result": "ok", "status": "ok"}
            for i, n in enumerate(names)
        ]
    )


def write_agent_day(root: Path) -> None:
    """A day of agent traces as the traces asset writes them (TRACE_SCHEMA Parquet): the trajectory columns."""
    rows = [
        {"trace_id": "a1", "tool_calls": tool_calls("search", "fetch"), "output": "done"},
        {"trace_id": "a2", "tool_calls": tool_calls("fetch"), "output": "half"},
        {"trace_id": "a3", "tool_calls": None, "output": "no tools recorded"},
    ]
    frame = pl.DataFrame([{**row, "date": AGENT_DAY, "timestamp": f"{AGENT_DAY}T09:00:00Z"} for row in rows])
    frame = frame.with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC"))
    write_partition(DataRoot.from_env(root), "traces", {"date": AGENT_DAY}, conform(frame, TRACE_SCHEMA))


@pytest.fixture
def project(data_root, local_judge, tmp_path):
    write_answers_day(data_root)
    write_agent_day(data_root)
    write_evaluator(
        data_root, "answer_is_json", description="the answer parses as JSON", check={"scorer": "valid_json"}
    )
    write_evaluator(data_root, "fast", check={"scorer": "latency", "max_ms": 1000})
    write_evaluator(data_root, "tools", check={"scorer": "tool_call_accuracy", "expected_tools": ["search", "fetch"]})
    # echo/expected: the judge replies with the trace's expected_output, so each trace scripts its verdict
    write_evaluator(
        data_root,
        "judged_json",
        mode="binary",
        model="openai/echo/expected",
        api_base=local_judge.base_url,
        prompt="Is this JSON? {{output}} {{#if expected}}{{expected}}{{/if}}",
    )
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, build_definitions(data_root), instance


def materialize(defs, asset: str, partition, instance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets=list(defs.assets),
        selection=[asset],
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
    )


def key(day: str, evaluator: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"date": day, "evaluator": evaluator})


def query(root: Path, sql: str):
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_checks_land_in_judge_scores_without_a_call_and_feed_agreement_and_costs(project, local_judge):
    root, defs, instance = project
    assert materialize(defs, "traces", ANSWERS_DAY, instance).success
    before = judge_requests(local_judge)
    for evaluator, day in (("answer_is_json", ANSWERS_DAY), ("fast", ANSWERS_DAY), ("tools", AGENT_DAY)):
        assert materialize(defs, "judge_scores", key(day, evaluator), instance).success
    assert judge_requests(local_judge) == before  # three check partitions, not one request
    assert materialize(defs, "judge_scores", key(ANSWERS_DAY, "judged_json"), instance).success
    # the judge beside them does call, for the four answers: t5 has none and its prompt shows {{output}}, so it is
    # SKIPPED no_final_answer, never paid for
    assert judge_requests(local_judge) == before + 4

    rows = query(
        root,
        "SELECT evaluator, trace_id, status, reason, score, raw_score, passed, model, cost_usd, calls, is_final "
        "FROM judge_scores WHERE evaluator <> 'judged_json' ORDER BY evaluator, trace_id",
    )
    checks = {(r[0], r[1]): r[2:7] for r in rows}
    assert checks == {
        ("answer_is_json", "t1"): ("COMPLETED", None, 1.0, 1.0, True),
        ("answer_is_json", "t2"): ("COMPLETED", None, 0.0, 0.0, False),
        ("answer_is_json", "t3"): ("COMPLETED", None, 0.0, 0.0, False),
        ("answer_is_json", "t4"): ("COMPLETED", None, 1.0, 1.0, True),
        ("answer_is_json", "t5"): ("SKIPPED", "missing_field", None, None, None),
        ("fast", "t1"): ("COMPLETED", None, 1.0, 100.0, True),
        ("fast", "t2"): ("COMPLETED", None, 0.0, 3000.0, False),
        ("fast", "t3"): ("COMPLETED", None, 1.0, 500.0, True),
        ("fast", "t4"): ("SKIPPED", "missing_field", None, None, None),
        ("fast", "t5"): ("COMPLETED", None, 1.0, 50.0, True),
        ("tools", "a1"): ("COMPLETED", None, 1.0, 1.0, True),  # recall 2/2
        ("tools", "a2"): ("COMPLETED", None, 0.5, 0.5, False),  # recall 1/2
        ("tools", "a3"): ("SKIPPED", "missing_field", None, None, None),  # no trajectory: not a 0
    }
    assert {(r[7], r[8], r[9], r[10]) for r in rows} == {
        ("check:valid_json", 0.0, 0, True),
        ("check:latency", 0.0, 0, True),
        ("check:tool_call_accuracy", 0.0, 0, True),
    }
    event = instance.get_latest_materialization_event(dg.AssetKey("judge_scores"))
    assert event.asset_materialization.metadata["calls"].value == 4  # the judge's partition, the last one

    # Costs: the check rows are counted with no spend and no call, beside the judge's calls.
    assert materialize(defs, "judge_cost_daily", None, instance).success
    cost = query(
        root,
        "SELECT evaluator, model, sum(rows), sum(completed), sum(skipped), sum(calls), sum(spend_usd) "
        "FROM judge_cost_daily GROUP BY ALL ORDER BY evaluator",
    )
    assert cost == [
        ("answer_is_json", "check:valid_json", 5, 4, 1, 0, 0.0),
        ("fast", "check:latency", 5, 4, 1, 0, 0.0),
        ("judged_json", "openai/echo/expected", 5, 4, 1, 4, 0.0),
        ("tools", "check:tool_call_accuracy", 3, 2, 1, 0, 0.0),
    ]

    # Agreement: the check and the binary judge on the traces both completed (t1..t4), hand-computed Cohen's kappa.
    # judge passed [T, F, T, T], check [T, F, F, T]: p_o = 3/4, p_e = 3/4*2/4 + 1/4*2/4 = 1/2, kappa = 1/2.
    assert materialize(defs, "agreement", None, instance).success
    kappa = query(
        root,
        "SELECT value, n FROM agreement WHERE section = 'judge_vs_judge' AND statistic = 'cohen_kappa' "
        "AND subject = 'answer_is_json' AND reference = 'judged_json'",
    )
    assert kappa == [(pytest.approx(0.5), 4)]
