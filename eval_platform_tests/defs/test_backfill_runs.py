"""A backfill run of judge_scores covering a range of partitions, as the backfill daemon launches it (the range
tags its backfill policy sets): each partition judged and materialized once with its own metadata, the catalog
refreshed, and a partition that cannot be judged failing alone, by name."""

from __future__ import annotations

from collections import Counter

import dagster as dg

from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.defs.test_pipeline import materialize, query, write_day

DAYS = ["2026-11-09", "2026-11-10", "2026-11-11"]
TRACES_PER_DAY = {"2026-11-09": 3, "2026-11-10": 5, "2026-11-11": 4}


def setup_project(root, local_judge):
    from eval_platform.definitions import build_definitions

    for day in DAYS:
        write_day(root, day, n=TRACES_PER_DAY[day], bad=False)
    write_evaluator(
        root,
        "helpfulness",
        mode="score",
        score_scale={"min": 0, "max": 1},
        prompt="{{input}} -> {{output}}",
        model="openai/mock",
        api_base=local_judge.base_url,
    )
    write_evaluator(
        root,
        "relevance",
        mode="score",
        score_scale={"min": 0, "max": 1},
        prompt="Is {{output}} relevant to {{input}}?",
        model="openai/mock",
        api_base=local_judge.base_url,
    )
    return build_definitions(root)


def range_run(defs, instance, start: str, end: str) -> dg.ExecuteInProcessResult:
    """One run over the partitions from `start` to `end`, tagged as the backfill daemon tags a policy's run."""
    return dg.materialize(
        assets=list(defs.assets),
        selection=["judge_scores"],
        instance=instance,
        resources=defs.resources,
        tags={"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end},
        raise_on_error=False,
    )


def test_the_policy_groups_partitions_into_runs():
    from eval_platform.defs.judging import BACKFILL_POLICY

    assert BACKFILL_POLICY.max_partitions_per_run and BACKFILL_POLICY.max_partitions_per_run > 1


def test_one_run_judges_a_range_of_days_each_partition_with_its_own_metadata(data_root, local_judge, tmp_path):
    defs = setup_project(data_root, local_judge)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        for day in DAYS:
            assert materialize(defs, "traces", day, instance).success
        result = range_run(defs, instance, f"{DAYS[0]}|relevance", f"{DAYS[-1]}|relevance")
        assert result.success

        events = result.get_asset_materialization_events()
        # exactly the three partitions of the range, once each; the other evaluator untouched
        assert Counter(e.partition for e in events) == Counter(f"{day}|relevance" for day in DAYS)
        for event in events:
            day = event.partition.split("|")[0]
            metadata = event.materialization.metadata
            # each partition's own counts, not the run's totals
            assert metadata["traces_in_partition"].value == TRACES_PER_DAY[day]
            assert metadata["rows"].value == metadata["completed"].value == TRACES_PER_DAY[day]
            assert metadata["evaluator"].value == "relevance"
            assert f"date={day}" in metadata["parquet"].value
            assert metadata["checks"].value == {
                "every_trace_has_one_status": "PASSED",
                "failed_rate_below_threshold": "PASSED",
                "verdicts_exist": "PASSED",
                "score_scale_fits_replies": "PASSED",
            }
        # each partition's own check results, each naming its partition
        checks = sorted((e.check_name, e.partition, e.passed) for e in result.get_asset_check_evaluations())
        assert checks == [
            (name, f"{day}|relevance", True)
            for name in (
                "every_trace_has_one_status",
                "failed_rate_below_threshold",
                "score_scale_fits_replies",
                "verdicts_exist",
            )
            for day in DAYS
        ]

    # the catalog, refreshed by the run: every trace of each day judged once, nothing else judged
    judged = query(
        data_root,
        "SELECT evaluator, CAST(date AS VARCHAR), count(*), count(DISTINCT trace_id) "
        "FROM judge_scores GROUP BY ALL ORDER BY ALL",
    )
    assert judged == [("relevance", day, TRACES_PER_DAY[day], TRACES_PER_DAY[day]) for day in DAYS]


def test_a_partition_that_cannot_be_judged_fails_alone_and_by_name(data_root, local_judge, tmp_path):
    """traces of the middle day never ingested: the run judges and materializes the two others, then fails naming
    the missing one, so the backfill shows exactly that partition failed."""
    defs = setup_project(data_root, local_judge)
    missing = DAYS[1]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        for day in DAYS:
            if day != missing:
                assert materialize(defs, "traces", day, instance).success
        result = range_run(defs, instance, f"{DAYS[0]}|helpfulness", f"{DAYS[-1]}|helpfulness")
        assert not result.success
        failure = result.failure_data_for_node("judge_scores").error.message
        assert f"{missing}|helpfulness" in failure and "traces for" in failure
        assert all(f"{day}|helpfulness" not in failure for day in DAYS if day != missing)

        materialized = [e.partition for e in result.get_asset_materialization_events()]
        assert sorted(materialized) == [f"{day}|helpfulness" for day in DAYS if day != missing]
        for event in result.get_asset_materialization_events():
            day = event.partition.split("|")[0]
            assert event.materialization.metadata["traces_in_partition"].value == TRACES_PER_DAY[day]
        assert instance.get_materialized_partitions(dg.AssetKey("judge_scores")) == set(materialized)

    judged = query(data_root, "SELECT CAST(date AS VARCHAR), count(*) FROM judge_scores GROUP BY ALL ORDER BY ALL")
    assert judged == [(day, TRACES_PER_DAY[day]) for day in DAYS if day != missing]


def test_a_run_of_several_partitions_warns_naming_the_partition_whose_failed_rate_is_too_high(
    data_root, local_judge, tmp_path
):
    """One day's evaluators in one run (the range the automation or a one-day backfill gets): the judge of "flaky"
    answers nothing parseable, so its partition is all FAILED: that partition's own WARN check result fails, the
    other's passes, and each partition's outcome is also on its materialization."""
    from eval_platform.definitions import build_definitions

    day = DAYS[0]
    write_day(data_root, day, n=TRACES_PER_DAY[day], bad=False)
    write_evaluator(
        data_root,
        "flaky",
        mode="score",
        score_scale={"min": 0, "max": 1},
        prompt="Rate {{output}}",
        model="openai/fault/malformed",
        api_base=local_judge.base_url,
        max_failed_rate=0.1,
    )
    write_evaluator(
        data_root,
        "helpfulness",
        mode="score",
        score_scale={"min": 0, "max": 1},
        prompt="{{input}} -> {{output}}",
        model="openai/mock",
        api_base=local_judge.base_url,
    )
    defs = build_definitions(data_root)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert materialize(defs, "traces", day, instance).success
        result = range_run(defs, instance, f"{day}|flaky", f"{day}|helpfulness")
        assert result.success  # FAILED rows are verdicts the run reports, not a crash

        metadata = {e.partition: e.materialization.metadata for e in result.get_asset_materialization_events()}
        assert set(metadata) == {f"{day}|flaky", f"{day}|helpfulness"}
        assert metadata[f"{day}|flaky"]["failed_rate"].value == 1.0
        assert metadata[f"{day}|flaky"]["checks"].value["failed_rate_below_threshold"] == "WARN"
        assert metadata[f"{day}|helpfulness"]["failed_rate"].value == 0.0
        assert metadata[f"{day}|helpfulness"]["checks"].value["failed_rate_below_threshold"] == "PASSED"

        checks = {(c.check_name, c.partition): c for c in result.get_asset_check_evaluations()}
        warned = checks[("failed_rate_below_threshold", f"{day}|flaky")]
        assert not warned.passed and warned.severity == dg.AssetCheckSeverity.WARN
        assert warned.metadata["failed_rate"].value == 1.0
        assert checks[("failed_rate_below_threshold", f"{day}|helpfulness")].passed
        assert all(checks[("every_trace_has_one_status", f"{day}|{name}")].passed for name in ("flaky", "helpfulness"))
        # every selected trace of flaky FAILED: its ERROR check fails, and only its
        assert metadata[f"{day}|flaky"]["checks"].value["verdicts_exist"] == "FAILED"
        assert metadata[f"{day}|helpfulness"]["checks"].value["verdicts_exist"] == "PASSED"
        nothing = checks[("verdicts_exist", f"{day}|flaky")]
        assert not nothing.passed and nothing.severity == dg.AssetCheckSeverity.ERROR
        assert checks[("verdicts_exist", f"{day}|helpfulness")].passed


def traces_range_run(defs, instance, start: str, end: str) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets=list(defs.assets),
        selection=["traces"],
        instance=instance,
        resources=defs.resources,
        tags={"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end},
        raise_on_error=False,
    )


def test_one_run_ingests_a_range_of_days_each_with_its_own_metadata(data_root, local_judge, tmp_path):
    """A backfill of `traces` ingests up to TRACE_DAYS_PER_RUN days per run (issue 10): each day materialized once
    with its own counts and quarantine, and its own check result: a WARN for the day that had no valid trace."""
    from eval_platform.defs.traces import BACKFILL_POLICY

    assert BACKFILL_POLICY.max_partitions_per_run and BACKFILL_POLICY.max_partitions_per_run >= 4
    defs = setup_project(data_root, local_judge)  # DAYS with clean exports
    write_day(data_root, DAYS[1], n=TRACES_PER_DAY[DAYS[1]], bad=True)  # two of its rows quarantined
    empty = "2026-11-12"
    (data_root / "traces" / empty).mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = traces_range_run(defs, instance, DAYS[0], empty)
        assert result.success  # an empty day is a WARN, not a failure

        metadata = {e.partition: e.materialization.metadata for e in result.get_asset_materialization_events()}
        assert sorted(metadata) == [*DAYS, empty]  # each day once
        for day in DAYS:
            assert metadata[day]["traces"].value == TRACES_PER_DAY[day]
            assert metadata[day]["quarantined"].value == (2 if day == DAYS[1] else 0)
        assert metadata[empty]["traces"].value == 0 and metadata[empty]["empty_day"].value is True
        assert instance.get_materialized_partitions(dg.AssetKey("traces")) == {*DAYS, empty}

        checks = {c.partition: c for c in result.get_asset_check_evaluations()}
        assert sorted(checks) == [*DAYS, empty] and {c.check_name for c in checks.values()} == {"day_has_traces"}
        assert [day for day, c in checks.items() if not c.passed] == [empty]  # its own WARN, naming its day
        assert checks[empty].severity == dg.AssetCheckSeverity.WARN

        # the judges can take it from there: a day judged after the range run sees that day's traces
        result = range_run(defs, instance, f"{DAYS[1]}|relevance", f"{DAYS[1]}|relevance")
        assert result.success

    ingested = query(data_root, "SELECT CAST(date AS VARCHAR), count(*) FROM traces GROUP BY ALL ORDER BY ALL")
    assert ingested == [(day, TRACES_PER_DAY[day]) for day in DAYS]
    quarantined = query(data_root, "SELECT count(*) FROM quarantine WHERE source = 'traces'")
    assert quarantined == [(2,)]
    assert query(data_root, "SELECT count(*) FROM judge_scores") == [(TRACES_PER_DAY[DAYS[1]],)]
