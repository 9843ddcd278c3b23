"""EVAL_PLATFORM_START_DATE is read where the definitions are built, not when the package is imported: a code
location reloaded after the variable changed has day partitions from the new first day."""

from __future__ import annotations

import json
import shutil

import dagster as dg

from eval_platform.definitions import build_definitions
from eval_platform.settings import START_DATE_ENV
from eval_platform_tests.conftest import write_evaluator


def first_days(defs) -> dict[str, str | None]:
    traces = defs.resolve_assets_def("traces").partitions_def
    judge = defs.resolve_assets_def("judge_scores").partitions_def.get_partitions_def_for_dimension("date")
    finetune = defs.resolve_assets_def("finetune_exports").partitions_def
    return {
        "traces": traces.get_first_partition_key(),
        "judge_scores": judge.get_first_partition_key(),
        "finetune_exports": finetune.get_first_partition_key(),
    }


def test_definitions_built_after_the_start_date_changes_have_its_day_partitions(data_root, monkeypatch):
    write_evaluator(data_root, "helpful", mode="score", model="openai/gpt-4o-mini", prompt="Rate {{output}}")
    monkeypatch.setenv(START_DATE_ENV, "2026-10-03")
    before = first_days(build_definitions(data_root))
    monkeypatch.setenv(START_DATE_ENV, "2026-11-05")  # the package is imported already: a reload builds anew
    after = first_days(build_definitions(data_root))
    assert before == dict.fromkeys(before, "2026-10-03")
    assert after == dict.fromkeys(after, "2026-11-05")


def test_the_new_files_sensor_takes_the_start_date_its_definitions_were_built_with(data_root, monkeypatch):
    """The sensor used to read EVAL_PLATFORM_START_DATE as it ticked: a variable changed after the definitions were
    built changed which day folders it requested, while the partitions still said otherwise."""
    write_evaluator(data_root, "helpful", mode="score", model="openai/gpt-4o-mini", prompt="Rate {{output}}")
    monkeypatch.setenv(START_DATE_ENV, "2026-10-03")
    early = build_definitions(data_root)
    monkeypatch.setenv(START_DATE_ENV, "2026-11-05")
    late = build_definitions(data_root)

    def requested(defs, instance, cursor) -> tuple[list[str], str | None]:
        context = dg.build_sensor_context(
            instance=instance, cursor=cursor, resources={"warehouse": defs.resources["warehouse"]}
        )
        result = defs.resolve_sensor_def("new_trace_files_sensor")(context)
        return sorted(r.partition_key for r in result.run_requests), result.cursor

    for defs, changed_to, expected in ((early, "2026-11-05", ["2026-10-20"]), (late, "2026-10-03", [])):
        folder = data_root / "traces" / "2026-10-20"
        if folder.exists():
            shutil.rmtree(folder)
        with dg.instance_for_test() as instance:
            _, cursor = requested(defs, instance, None)  # the first tick takes past days as they are
            folder.mkdir(parents=True)
            (folder / "export.jsonl").write_text(
                json.dumps({"trace_id": "t", "timestamp": "2026-10-20T10:00:00Z", "input": "q", "output": "a"}) + "\n"
            )
            monkeypatch.setenv(START_DATE_ENV, changed_to)  # after the definitions were built
            days, _ = requested(defs, instance, cursor)
        assert days == expected, (first_days(defs), changed_to)
