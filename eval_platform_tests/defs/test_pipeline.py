"""The Dagster project end to end: a real instance in a temp DAGSTER_HOME, Parquet + DuckDB in a temp data root,
and the local judge over HTTP."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.defs.traces import daily_ingest_schedule
from eval_platform.judging.loading import EvaluatorConfigError, load_evaluators
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_dir
from eval_platform_tests.conftest import docs_text, judge_requests, write_evaluator

DAYS = ["2026-11-09", "2026-11-10"]


def write_day(root: Path, day: str, n: int = 6, bad: bool = True) -> None:
    folder = root / "traces" / day
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {
                "trace_id": f"{day}-t{i}",
                "timestamp": f"{day}T10:00:{i:02d}Z",
                "input": f"Say {i} on {day}",
                "output": f"{i}",
                "variant": "a" if i % 2 else "b",
                "metadata": {"item_id": f"{day}-item{i // 2}"},
                "cost_usd": 0.001,
            }
        )
        for i in range(n)
    ]
    if bad:
        lines += ['{"timestamp": "2026-11-09T10:00:00Z", "input": "no id"}', "{not json"]
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def project(data_root, local_judge, tmp_path):
    for day in DAYS:
        write_day(data_root, day)
    common = {"model": "openai/mock", "api_base": local_judge.base_url, "temperature": 0.0}
    write_evaluator(
        data_root,
        "helpfulness",
        mode="score",
        score_scale={"min": 0, "max": 1},
        prompt="{{input}} -> {{output}}",
        **common,
    )
    write_evaluator(
        data_root, "preference", mode="pairwise", prompt="{{input}}: {{output_a}} vs {{output_b}}", **common
    )
    write_evaluator(data_root, "strict", mode="binary", enabled=False, prompt="{{output}}", **common)
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


def test_definitions_have_the_contracted_names(project):
    _, defs, _ = project
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"traces", "judge_scores", "quarantine", "dataset_versions", "judge_cost_daily"} <= keys
    judge = defs.resolve_assets_def("judge_scores")
    evaluators = judge.partitions_def.get_partitions_def_for_dimension("evaluator").get_partition_keys()
    # "strict" is disabled: not a partition, so neither automated nor offered in a backfill (issue 10)
    assert evaluators == ["helpfulness", "preference"]
    assert "strict" in judge.descriptions_by_key[dg.AssetKey("judge_scores")]
    assert defs.resolve_schedule_def("daily_ingest_schedule")
    assert defs.resolve_sensor_def("new_trace_files_sensor")


def test_daily_scoring_end_to_end(project, local_judge):
    root, defs, instance = project
    for day in DAYS:
        assert materialize(defs, "traces", day, instance).success
    for evaluator in ("helpfulness", "preference"):
        for day in DAYS:
            assert materialize(defs, "judge_scores", key(day, evaluator), instance).success
    assert materialize(defs, "judge_cost_daily", None, instance).success

    assert query(root, "SELECT count(*) FROM traces") == [(12,)]
    assert query(root, "SELECT count(*) FROM spans") == [(0,)]  # JSONL traces have no OTLP spans; the view is there
    # spans are stored once, in their trace's row: the view reads them there, no spans partition is written
    assert not any(
        (partition_dir(DataRoot.from_env(root), "spans", {"date": day}) / "part.parquet").exists() for day in DAYS
    )
    assert sorted(query(root, "SELECT reason, count(*) FROM quarantine GROUP BY reason")) == [
        ("invalid_json", 2),
        ("missing_field:trace_id", 2),
    ]
    by_status = dict(query(root, "SELECT evaluator || ':' || status, count(*) FROM judge_scores GROUP BY 1"))
    assert by_status == {"helpfulness:COMPLETED": 12, "preference:COMPLETED": 6}
    cols = {c[0] for c in query(root, "DESCRIBE judge_scores")}
    assert {
        "evaluator",
        "date",
        "trace_id",
        "model",
        "provider_model",
        "sample",
        "status",
        "reason",
        "score",
        "raw_score",
        "label",
        "passed",
        "reasoning",
        "raw_response",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "latency_ms",
        "cache_hit",
        "config_hash",
        "judged_at",
    } <= cols
    cost = query(root, "SELECT evaluator, sum(calls), sum(completed) FROM judge_cost_daily GROUP BY 1 ORDER BY 1")
    assert cost == [("helpfulness", 12, 12), ("preference", 12, 6)]

    # Monthly rollup: the same totals per month; the app's own spend is reported apart, never added.
    assert materialize(defs, "judge_cost_monthly", None, instance).success
    assert materialize(defs, "app_cost_daily", None, instance).success
    monthly = query(
        root,
        "SELECT month, evaluator, sum(calls), sum(completed), sum(days) FROM judge_cost_monthly "
        "GROUP BY ALL ORDER BY ALL",
    )
    # Spend is counted by the UTC day of judging: the months of the days the test judged on.
    from_daily = query(
        root,
        "SELECT substr(day, 1, 7), evaluator, sum(calls), sum(completed), count(DISTINCT day) "
        "FROM judge_cost_daily GROUP BY ALL ORDER BY ALL",
    )
    assert monthly == from_daily and [row[1:4] for row in monthly][:2] == [
        ("helpfulness", 12, 12),
        ("preference", 12, 6),
    ]
    app = query(root, "SELECT sum(traces), round(sum(app_cost_usd), 9) FROM app_cost_daily")
    traced = query(root, "SELECT count(*), round(sum(cost_usd), 9) FROM traces")
    assert app == traced == [(12, 0.012)]
    judge_cols = {c[0] for c in query(root, "DESCRIBE judge_cost_monthly")}
    assert "app_cost_usd" not in judge_cols and "budget_monthly_usd" in judge_cols

    # The materialization reports conserved counts.
    event = instance.get_latest_materialization_event(dg.AssetKey("judge_scores"))
    metadata = event.asset_materialization.metadata
    assert metadata["rows"].value == metadata["completed"].value + metadata["failed"].value + metadata["skipped"].value

    # Re-materializing a day whose files did not change: the same rows, kept as they were (judged_at too), no
    # duplicate, and no LLM call.
    judged = (
        "SELECT trace_id, judged_at, cache_hit, score FROM judge_scores "
        f"WHERE evaluator = 'helpfulness' AND date = '{DAYS[0]}' ORDER BY trace_id"
    )
    earlier = query(root, judged)
    before = judge_requests(local_judge)
    assert materialize(defs, "judge_scores", key(DAYS[0], "helpfulness"), instance).success
    assert judge_requests(local_judge) == before
    rows = query(
        root,
        f"SELECT count(*), count(DISTINCT trace_id) FROM judge_scores "
        f"WHERE evaluator = 'helpfulness' AND date = '{DAYS[0]}'",
    )
    assert rows == [(6, 6)]
    assert query(root, judged) == earlier
    folder = partition_dir(DataRoot.from_env(root), "judge_scores", {"evaluator": "helpfulness", "date": DAYS[0]})
    files = [f for f in folder.rglob("*") if f.is_file()]
    assert files and {f.name for f in files} == {"part.parquet"}  # no temp file left behind


def test_judge_scores_needs_its_traces(project):
    _, defs, instance = project
    result = dg.materialize(
        assets=list(defs.assets),
        selection=["judge_scores"],
        partition_key=key(DAYS[1], "helpfulness"),
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )
    assert not result.success


def test_new_evaluator_file_is_a_new_partition_value(project):
    root, _, _ = project
    write_evaluator(
        root, "concise", mode="binary", model="openai/mock", api_base="http://127.0.0.1:1/v1", prompt="{{output}}"
    )
    judge = build_definitions(root).resolve_assets_def("judge_scores")
    assert "concise" in judge.partitions_def.get_partitions_def_for_dimension("evaluator").get_partition_keys()
    write_evaluator(root, "broken", mode="binary", model="openai/mock", prompt="{{nope}}")
    # A broken file breaks only itself (issue 10): the others stay partitions, the error shows on the asset.
    judge = build_definitions(root).resolve_assets_def("judge_scores")
    assert "concise" in judge.partitions_def.get_partitions_def_for_dimension("evaluator").get_partition_keys()
    assert re.search("broken.yaml.*unknown variable", judge.descriptions_by_key[dg.AssetKey("judge_scores")])
    with pytest.raises(EvaluatorConfigError, match="broken.yaml.*unknown variable"):
        load_evaluators(root / "evaluators")


def test_sensor_requests_days_with_new_files(project):
    root, defs, instance = project

    def tick(cursor):
        context = dg.build_sensor_context(
            instance=instance, cursor=cursor, resources={"warehouse": defs.resources["warehouse"]}
        )
        return defs.resolve_sensor_def("new_trace_files_sensor")(context)

    # On by default, so its first tick takes past days as they are: nothing is judged (or paid for) unasked
    first = tick(None)
    assert first.run_requests == []
    assert tick(first.cursor).run_requests == []
    (root / "traces" / DAYS[1] / "late.jsonl").write_text(
        json.dumps({"trace_id": "late", "timestamp": f"{DAYS[1]}T23:00:00Z"}) + "\n"
    )
    second = tick(first.cursor)
    assert [r.partition_key for r in second.run_requests] == [DAYS[1]]
    # a change the day before re-ingests that day only: the next day's ingest reads it for the spans of traces
    # over midnight, and these are no spans (defs/test_arrivals.py has the case where they are)
    (root / "traces" / DAYS[0] / "late.jsonl").write_text(
        json.dumps({"trace_id": "late0", "timestamp": f"{DAYS[0]}T23:00:00Z"}) + "\n"
    )
    assert [r.partition_key for r in tick(second.cursor).run_requests] == [DAYS[0]]


def test_an_otlp_day_writes_traces_and_their_spans(project):
    """A recorded OpenInference export (gzip, spans of a trace on several lines) through the traces asset."""
    root, defs, instance = project
    day = "2026-11-12"
    (root / "traces" / day).mkdir(parents=True)
    fixture = Path(__file__).parents[1] / "fixtures" / "otel" / "openinference" / "traces.jsonl.gz"
    (root / "traces" / day / "otel.jsonl.gz").write_bytes(fixture.read_bytes())
    result = materialize(defs, "traces", day, instance)
    assert result.success
    metadata = result.asset_materializations_for_node("traces")[0].metadata
    assert metadata["traces"].value == 12 and metadata["spans"].value == 30
    where = f"WHERE date = '{day}'"
    assert query(root, f"SELECT count(*), sum(span_count) FROM traces {where}") == [(12, 30)]
    assert query(root, f"SELECT count(*) FROM spans {where} AND operation = 'execute_tool'") == [(3,)]
    joined = query(
        root, f"SELECT count(*) FROM spans JOIN traces USING (trace_id) {where.replace('date', 'spans.date')}"
    )
    assert joined == [(30,)]


def test_schedule_ingests_yesterday():
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 11, 16, 1, 0, tzinfo=UTC))
    request = daily_ingest_schedule(context)
    assert request.partition_key == "2026-11-15"


def test_the_schedule_ships_stopped_and_the_readme_command_turns_it_on(tmp_path):
    """The schedule ships stopped and the README never said to turn it on: the command it now gives does."""
    assert daily_ingest_schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    repo = Path(__file__).resolve().parents[2]
    readme = docs_text()
    start = re.search(r"`DAGSTER_HOME=\$PWD/data/dagster_home \.venv/bin/(dagster schedule start [^`]+)`", readme)
    assert start is not None and "daily_ingest_schedule" in start.group(1)
    assert "start" in daily_ingest_schedule.description  # the UI says it too, beside the toggle
    env = {
        "PATH": str(Path(sys.executable).parent),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DAGSTER_HOME": str(tmp_path),  # a fresh instance: the shipped default, stopped
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), *start.group(1).split()[1:]],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        states = {state.name: state.status.value for state in instance.all_instigator_state()}
    assert states["daily_ingest_schedule"] == "RUNNING"


def test_definitions_validate_cli(project):
    root, _, _ = project
    repo = Path(__file__).resolve().parents[2]
    env = {
        "EVAL_PLATFORM_DATA_DIR": str(root),
        "PATH": str(Path(sys.executable).parent),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DAGSTER_HOME": str(root.parent / "dagster_home"),
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
