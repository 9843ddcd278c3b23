"""What the UI shows of a real materialization tells the truth (issue 30): a partition's preview shows the rows a
user needs (FAILED, then the lowest scores, with the judge's reasoning) with full ids and no Python `None`; the
local judge's placeholder verdicts are marked; every check result names its partition."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl

from eval_platform.definitions import build_definitions
from eval_platform.schemas import PLACEHOLDER_MARK
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition
from eval_platform_tests.conftest import write_evaluator

DAY = "2026-11-09"
LONG = "support-bot-conversation-2026-11-09-session-"  # ids longer than the 40 characters the old preview kept


def write_support_day(root, day: str = DAY) -> dict[str, str]:
    """Twenty traces whose output scripts the judge's reply (`echo/output`): the first ones score high, the last
    ones low or unparseable (FAILED), so a preview of the first rows by trace id shows none of what matters."""
    folder = root / "traces" / day
    folder.mkdir(parents=True, exist_ok=True)
    replies = {}
    for i in range(20):
        trace_id = f"{LONG}{i:03d}-{'a' * 12}"
        if i >= 17:
            replies[trace_id] = "I cannot grade this."  # no JSON: FAILED unparseable
        else:
            score = 5 if i < 12 else 1 + (i - 12) % 3
            replies[trace_id] = json.dumps({"score": score, "reasoning": f"trace {i}: the answer rates {score}"})
    lines = [
        json.dumps({"trace_id": t, "timestamp": f"{day}T10:{i:02d}:00Z", "input": "Where is my order?", "output": r})
        for i, (t, r) in enumerate(replies.items())
    ]
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")
    return replies


def materialize(defs, selection, key, instance):
    return dg.materialize(
        list(defs.assets),
        selection=[selection],
        partition_key=key,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )


def preview_rows(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in markdown.splitlines()[2:]]


def test_the_preview_shows_failures_and_lowest_scores_first_with_reasoning_and_full_ids(data_root, local_judge):
    replies = write_support_day(data_root)
    write_evaluator(
        data_root,
        "support",
        mode="score",
        model="openai/echo/output",
        api_base=local_judge.base_url,
        prompt="Question: {{input}}\nAnswer: {{output}}",
        score_scale={"min": 1, "max": 5},
        max_retries=0,
    )
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assert materialize(defs, "traces", DAY, instance).success
        key = dg.MultiPartitionKey({"date": DAY, "evaluator": "support"})
        result = materialize(defs, "judge_scores", key, instance)
        metadata = result.asset_materializations_for_node("judge_scores")[0].metadata
    text = metadata["preview"].value
    rows = read_partition(DataRoot.from_env(data_root), "judge_scores", {"evaluator": "support", "date": DAY})
    failed = rows.filter(pl.col("status") == "FAILED")["trace_id"].sort().to_list()
    assert len(failed) == 3
    lowest = rows.filter(pl.col("status") == "COMPLETED").sort("score", "trace_id")["trace_id"].to_list()

    shown = preview_rows(text)
    header = [c.strip() for c in text.splitlines()[0].strip("|").split(" | ")]
    assert header == ["trace_id", "status", "reason", "score", "label", "model", "reasoning"]
    ids = [row[0] for row in shown]
    # the FAILED traces first, then the lowest scores, each id whole
    assert ids == failed + lowest[: len(ids) - len(failed)]
    assert all(i in replies for i in ids)
    by_id = {row[0]: row for row in shown}
    for trace_id in failed:
        assert by_id[trace_id][1] == "FAILED" and by_id[trace_id][2] == "unparseable"
        assert by_id[trace_id][6] not in ("", "–")  # why it failed, in words
    assert by_id[lowest[0]][6] == json.loads(replies[lowest[0]])["reasoning"]
    assert "None" not in text
    assert PLACEHOLDER_MARK not in text and "placeholder_verdicts" not in metadata


def test_placeholder_verdicts_are_marked_in_the_preview_and_the_metadata(data_root, local_judge):
    write_support_day(data_root)
    write_evaluator(  # answered by the local judge's placeholder (`mock`): its scores are no quality judgment
        data_root,
        "stand_in",
        mode="score",
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt="Question: {{input}}\nAnswer: {{output}}",
        score_scale={"min": 1, "max": 5},
    )
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assert materialize(defs, "traces", DAY, instance).success
        key = dg.MultiPartitionKey({"date": DAY, "evaluator": "stand_in"})
        result = materialize(defs, "judge_scores", key, instance)
        metadata = result.asset_materializations_for_node("judge_scores")[0].metadata
    assert metadata["placeholder_verdicts"].value == f"20 of 20 verdicts: {PLACEHOLDER_MARK}"
    models = {row[5] for row in preview_rows(metadata["preview"].value)}
    assert models == {f"openai/mock ({PLACEHOLDER_MARK})"}


def test_annotation_progress_tables_show_no_python_none(data_root, tmp_path):
    """A task whose items were never exported (labels came as files) has no item total and no time spent: its
    progress tables in the UI show a dash there, never Python's `None`."""
    import yaml

    (data_root / "datasets" / "sums").mkdir(parents=True)
    (data_root / "datasets" / "sums" / "v1.jsonl").write_text(
        "".join(
            json.dumps({"case_id": f"c{i}", "input": f"{i} + {i}?", "expected_output": str(2 * i)}) + "\n"
            for i in range(4)
        )
    )
    (data_root / "annotation_tasks").mkdir()
    task = {
        "description": "Are the answers right?",
        "source": {"dataset": {"name": "sums", "version": 1}},
        "instructions": "Is the answer right?",
        "criteria": {"correct": {"schema": "classification", "labels": {"yes": 1, "no": 0}}},
        "annotations_per_item": 2,
        "size": 4,
    }
    (data_root / "annotation_tasks" / "sums_review.yaml").write_text(yaml.safe_dump(task))
    (data_root / "annotations").mkdir(exist_ok=True)
    (data_root / "annotations" / "labels.csv").write_text(
        "task,item_id,annotator,criterion,label\n"
        + "".join(f"sums_review,c{i},{who},correct,{'yes' if i % 2 else 'no'}\n" for i in range(3) for who in "ab")
    )
    defs = build_definitions(data_root)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        for asset in ("human_annotations", "annotation_progress"):
            assert dg.materialize(
                list(defs.assets), selection=[asset], instance=instance, resources=defs.resources
            ).success
        event = instance.get_latest_materialization_event(dg.AssetKey("annotation_progress"))
    shown = event.asset_materialization.metadata
    tables = [shown[name].value for name in ("progress", "agreement_so_far", "annotators")]
    assert "sums_review" in tables[0] and "| a |" in tables[2]
    for table in tables:
        assert "None" not in table
    assert "| – |" in tables[0]  # no item total: the task's items were never exported


def write_suites(root) -> None:
    (root / "datasets" / "qa").mkdir(parents=True)
    (root / "datasets" / "qa" / "v1.jsonl").write_text(
        "".join(f'{{"input": "q{i}", "expected_output": "{answer}"}}\n' for i, answer in enumerate([4, 4, 6]))
    )
    (root / "benchmarks").mkdir()
    for suite in ("arith", "qa"):
        (root / "benchmarks" / f"{suite}.yaml").write_text(
            "tasks:\n  t:\n    dataset: qa\n    prompt: '{{input}}'\n    scorers: [{name: numeric_match}]\n"
        )
    (root / "benchmarks" / "models.yaml").write_text("models:\n  says-4: {model: 'local/fixed/It is 4.'}\n")


def test_a_suite_whose_file_broke_is_served_stale_in_the_ui_the_view_and_the_report(
    data_root, local_judge, monkeypatch
):
    """Two suites ranked; then `arith.yaml` breaks. Its last leaderboard rows stay, flagged stale with the load
    error, alike in the latest materialization's preview, the `leaderboard` view and the report, and so do its
    `benchmark_cases` and `benchmark_results` rows in their views."""
    import duckdb

    from eval_platform.report import build_report

    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    write_suites(data_root)
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("benchmark_models", ["says-4"])
        for suite in ("arith", "qa"):
            assert dg.materialize(
                list(defs.assets),
                selection=dg.AssetSelection.groups(f"benchmark_{suite}"),
                partition_key="says-4",
                instance=instance,
                resources=defs.resources,
            ).success
        assert materialize(defs, "leaderboard", None, instance).success
        (data_root / "benchmarks" / "arith.yaml").write_text("tasks:\n  t:\n    dataset: qa\n    prompt: 3\n")
        defs = build_definitions(data_root)  # what a reload of the code location does
        result = materialize(defs, "leaderboard", None, instance)
        assert result.success
        metadata = result.asset_materializations_for_node("leaderboard")[0].metadata
    assert list(metadata["stale_suites"].value) == ["arith"]
    reason = metadata["stale_suites"].value["arith"]
    assert "arith" in reason
    preview = {row[0]: row for row in preview_rows(metadata["preview"].value)}
    assert preview["arith"][-1].startswith("STALE: ") and preview["qa"][-1] == ""

    with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
        view = conn.execute("SELECT suite, bool_and(stale), any_value(stale_reason) FROM leaderboard GROUP BY ALL")
        assert sorted(view.fetchall()) == [("arith", True, reason), ("qa", False, None)]
        for table in ("benchmark_cases", "benchmark_results"):  # the suite's other tables say the same
            view = conn.execute(f"SELECT suite, bool_and(stale), any_value(stale_reason) FROM {table} GROUP BY ALL")
            assert sorted(view.fetchall()) == [("arith", True, reason), ("qa", False, None)], table

    build_report(data_root)
    page = (data_root / "reports" / "report.html").read_text()
    section = page.split("<h2>Benchmarks")[1].split("<h2>")[0]
    assert "<th>stale</th>" in section and "<th>stale_reason</th>" in section
    assert "<td>arith</td><td>STALE</td>" in section and "<td>qa</td><td></td>" in section


def test_every_check_result_names_its_partition_in_one_partition_and_range_runs(data_root, local_judge, tmp_path):
    """The checks tab lists each result with its partition: a one-partition run's results and each partition's
    result of a range run (a backfill's), as the instance records them."""
    for day in ("2026-11-09", "2026-11-10"):
        write_support_day(data_root, day)
    write_evaluator(
        data_root,
        "support",
        mode="score",
        model="openai/echo/output",
        api_base=local_judge.base_url,
        prompt="Question: {{input}}\nAnswer: {{output}}",
        score_scale={"min": 1, "max": 5},
        max_retries=0,
        max_failed_rate=0.1,
    )
    defs = build_definitions(data_root)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        single = materialize(defs, "traces", DAY, instance)
        assert [(c.check_name, c.partition) for c in single.get_asset_check_evaluations()] == [("day_has_traces", DAY)]
        ranged = dg.materialize(
            list(defs.assets),
            selection=["traces"],
            instance=instance,
            resources=defs.resources,
            tags={
                "dagster/asset_partition_range_start": "2026-11-10",
                "dagster/asset_partition_range_end": "2026-11-11",
            },
        )
        assert sorted(c.partition for c in ranged.get_asset_check_evaluations()) == ["2026-11-10", "2026-11-11"]
        empty = {c.partition: c.passed for c in ranged.get_asset_check_evaluations()}
        assert empty == {"2026-11-10": True, "2026-11-11": False}  # no folder for the 11th: its own WARN

        key = dg.MultiPartitionKey({"date": DAY, "evaluator": "support"})
        judged = materialize(defs, "judge_scores", key, instance)
        results = {c.check_name: c for c in judged.get_asset_check_evaluations()}
        assert {name: c.partition for name, c in results.items()} == {
            "every_trace_has_one_status": str(key),
            "failed_rate_below_threshold": str(key),
            "score_scale_fits_replies": str(key),
            "verdicts_exist": str(key),
        }
        assert not results["failed_rate_below_threshold"].passed  # 3 of 20 FAILED, above 0.1

        ranged = dg.materialize(
            list(defs.assets),
            selection=["judge_scores"],
            instance=instance,
            resources=defs.resources,
            tags={
                "dagster/asset_partition_range_start": "2026-11-09|support",
                "dagster/asset_partition_range_end": "2026-11-10|support",
            },
        )
        found = sorted((c.check_name, c.partition) for c in ranged.get_asset_check_evaluations())
        assert found == [
            (name, f"{day}|support")
            for name in (
                "every_trace_has_one_status",
                "failed_rate_below_threshold",
                "score_scale_fits_replies",
                "verdicts_exist",
            )
            for day in ("2026-11-09", "2026-11-10")
        ]
        history = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("judge_scores"), "failed_rate_below_threshold"), limit=10
        )
        assert sorted(record.partition for record in history) == ["2026-11-09|support"] * 2 + ["2026-11-10|support"]
