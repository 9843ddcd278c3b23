"""EVAL_PLATFORM_START_DATE is read where the definitions are built, not when the package is imported: a code
location reloaded after the variable changed has day partitions from the new first day."""

from __future__ import annotations

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
