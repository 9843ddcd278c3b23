"""`dataset_versions` in a real instance, and a `reference` evaluator taking its gold answers from it."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import write_evaluator

DAY = "2026-11-10"


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def run(defs, instance, asset: str, partition=None, ok: bool = True) -> dg.ExecuteInProcessResult:
    result = dg.materialize(
        assets=list(defs.assets),
        selection=[asset],
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )
    assert result.success is ok
    return result


def write_jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")


@pytest.fixture
def project(data_root, local_judge, tmp_path):
    write_jsonl(
        data_root / "datasets" / "faq" / "v1.jsonl",
        [
            {"case_id": "c1", "input": "2 + 2?", "expected_output": "4"},
            {"case_id": "c2", "input": "Capital of France?", "expected_output": "2"},
            {"case_id": "c1", "input": "duplicate id", "expected_output": "1"},
            {"case_id": "c3", "expected_output": "no input"},
            "{broken",
        ],
    )
    write_jsonl(
        data_root / "traces" / DAY / "export.jsonl",
        [
            {
                "trace_id": f"t{i}",
                "timestamp": f"{DAY}T10:00:0{i}Z",
                "input": "q",
                "output": "a",
                "metadata": {"case_id": case},
            }
            for i, case in enumerate(["c1", "c2", "unknown"])
        ],
    )
    # echo/expected replies with the gold answer itself, so each score shows which answer the judge saw.
    write_evaluator(
        data_root,
        "gold",
        mode="reference",
        model="openai/echo/expected",
        api_base=local_judge.base_url,
        reference={"source": "dataset", "dataset": "faq"},
        prompt="{{output}} vs {{expected}}",
    )
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, build_definitions(data_root), instance


def test_reference_answers_come_from_the_dataset(project):
    root, defs, instance = project
    run(defs, instance, "traces", DAY)
    key = dg.MultiPartitionKey({"date": DAY, "evaluator": "gold"})
    failed = run(defs, instance, "judge_scores", key, ok=False)  # the dataset is not materialized yet
    [failure] = failed.get_step_failure_events()
    assert "reference dataset faq@v? is not materialized" in failure.event_specific_data.error.message

    instance.add_dynamic_partitions("dataset_versions", ["faq@v1"])
    run(defs, instance, "dataset_versions", "faq@v1")
    assert query(root, "SELECT case_id, expected_output FROM test_cases ORDER BY 1") == [("c1", "4"), ("c2", "2")]
    rejected = query(root, "SELECT line, reason FROM quarantine WHERE source = 'dataset_versions' ORDER BY line")
    assert rejected == [(3, "duplicate_case_id"), (4, "missing_field:input"), (5, "invalid_json")]

    run(defs, instance, "judge_scores", key)
    rows = query(root, "SELECT trace_id, status, raw_score, reason FROM judge_scores ORDER BY trace_id")
    assert [r[:3] for r in rows] == [("t0", "COMPLETED", 4.0), ("t1", "COMPLETED", 2.0), ("t2", "SKIPPED", None)]
    assert rows[2][3].startswith("no_reference")
