"""Which items an annotation task picks: seeded random, stratified allocation, and the items judges disagree on,
from verdicts the real judge path got from the local judge over HTTP."""

from __future__ import annotations

import json

import polars as pl
import pytest

from eval_platform.annotation.config import AnnotationTaskConfig
from eval_platform.annotation.sampling import allocate, candidate_count_note, select_items
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.schemas import ANNOTATION_TASK_ITEM_SCHEMA, TEST_CASE_SCHEMA, TRACE_SCHEMA, conform

DAY, PAST = "2026-11-10", "2026-11-09"


def traces(rows: list[dict], day: str = DAY) -> pl.DataFrame:
    full = [{"timestamp": f"{day}T12:00:00Z", "date": day, "metadata": "{}", **row} for row in rows]
    frame = pl.DataFrame(full).with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC"))
    return conform(frame, TRACE_SCHEMA)


def task(**fields) -> AnnotationTaskConfig:
    base = {
        "name": "review",
        "source": {"traces": {"days": [DAY]}},
        "instructions": "Is the answer helpful?",
        "criteria": {"helpful": {"schema": "classification", "labels": {"yes": 1, "no": 0}}},
        "size": 10,
    }
    return AnnotationTaskConfig.model_validate({**base, **fields})


def many_traces(n: int, route=lambda i: ["faq", "billing", "other"][i % 3]) -> pl.DataFrame:
    return traces(
        [
            {"trace_id": f"t{i:03d}", "input": f"q{i}", "output": f"a{i}", "metadata": json.dumps({"route": route(i)})}
            for i in range(n)
        ]
    )


# ---- random ------------------------------------------------------------------------------------------------


def test_random_is_the_same_for_a_seed_whatever_the_row_order_and_grows_by_adding():
    frame = many_traces(200)
    config = task(size=20, sampling={"method": "random", "seed": 3})
    first = select_items(config, frame)
    again = select_items(config, frame.sample(fraction=1.0, shuffle=True, seed=1))
    assert first["item_id"].to_list() == again["item_id"].to_list()
    assert first["position"].to_list() == list(range(1, 21))
    assert first["item_id"].n_unique() == 20
    other_seed = select_items(task(size=20, sampling={"method": "random", "seed": 4}), frame)
    assert set(other_seed["item_id"]) != set(first["item_id"])
    bigger = select_items(task(size=30, sampling={"method": "random", "seed": 3}), frame)
    assert set(first["item_id"]) <= set(bigger["item_id"])  # raising the size keeps the items already chosen
    # what an annotator reads, and where the item comes from; nothing of a judge
    row = first.row(0, named=True)
    assert (row["input"], row["output"]) == (f"q{int(row['item_id'][1:])}", f"a{int(row['item_id'][1:])}")
    assert (row["source"], row["source_day"], row["trace_id"], row["task"]) == ("traces", DAY, row["item_id"], "review")
    assert list(first.columns) == list(ANNOTATION_TASK_ITEM_SCHEMA)
    assert not {"score", "passed", "label", "reasoning", "winner"} & set(first.columns)


def test_random_is_roughly_uniform_over_seeds():
    frame = many_traces(10)
    counts = {f"t{i:03d}": 0 for i in range(10)}
    for seed in range(400):
        for item in select_items(task(size=3, sampling={"method": "random", "seed": seed}), frame)["item_id"]:
            counts[item] += 1
    # each item is picked with probability 0.3: 120 of 400 expected, sd about 9
    assert all(80 < c < 160 for c in counts.values()), counts


def test_a_size_larger_than_the_source_takes_everything_and_says_so():
    frame = many_traces(5)
    items = select_items(task(size=50), frame)
    assert items.height == 5
    assert candidate_count_note(task(size=50), 5, items.height) == "5 of 50 items: the source has 5 candidates"


def test_a_trace_exported_on_two_days_is_one_item():
    frame = pl.concat([many_traces(3), many_traces(3).with_columns(pl.lit("2026-11-11").alias("date"))])
    config = task(source={"traces": {"days": [DAY, "2026-11-11"]}})
    items = select_items(config, frame)
    assert items["item_id"].sort().to_list() == ["t000", "t001", "t002"]
    assert set(items["source_day"]) == {DAY}


# ---- stratified ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "size", "expected"),
    [
        ({"a": 60, "b": 30, "c": 10}, 10, {"a": 6, "b": 3, "c": 1}),  # exactly proportional
        ({"a": 50, "b": 30, "c": 20}, 7, {"a": 4, "b": 2, "c": 1}),  # quotas 3.5, 2.1, 1.4: largest remainder
        ({"a": 90, "b": 9, "c": 1}, 10, {"a": 8, "b": 1, "c": 1}),  # quotas 9, 0.9, 0.1: c still gets one
        ({"a": 90, "b": 9, "c": 1}, 2, {"a": 2, "b": 0, "c": 0}),  # fewer items than strata: proportional only
        ({"a": 3, "b": 2}, 50, {"a": 3, "b": 2}),  # never more than a stratum holds
        # quotas 11 2/3, 6 2/3, 1 2/3: equal remainders, so the two extra items go to the larger strata (in floats
        # 20 * 20 / 60 - 6 is a hair above 20 * 35 / 60 - 11, and b and c took them)
        ({"a": 35, "b": 20, "c": 5}, 20, {"a": 12, "b": 7, "c": 1}),
        ({"b": 20, "a": 35, "c": 5}, 20, {"a": 12, "b": 7, "c": 1}),
    ],
)
def test_stratified_allocation_is_proportional_by_largest_remainder(counts, size, expected):
    assert allocate(counts, size) == expected


def test_stratified_items_follow_the_allocation_and_a_missing_value_is_its_own_stratum():
    def route(i):
        return "faq" if i < 60 else "billing" if i < 90 else None

    frame = many_traces(100, route)
    config = task(size=10, sampling={"method": "stratified", "field": "metadata.route", "seed": 1})
    items = select_items(config, frame)
    assert dict(items.group_by("stratum").len().iter_rows()) == {"faq": 6, "billing": 3, "(missing)": 1}
    # within a stratum the choice is seeded too: the same items again, in the same order
    assert select_items(config, frame.reverse())["item_id"].to_list() == items["item_id"].to_list()


def test_stratified_by_a_column_over_a_dataset_version():
    cases = conform(
        pl.DataFrame(
            {
                "dataset": ["qa"] * 8,
                "version": [2] * 8,
                "case_id": [f"c{i}" for i in range(8)],
                "input": [f"question {i}" for i in range(8)],
                "expected_output": [f"answer {i}" for i in range(8)],
                "metadata": [json.dumps({"level": "easy" if i < 6 else "hard"}) for i in range(8)],
            }
        ),
        TEST_CASE_SCHEMA,
    )
    config = task(
        source={"dataset": {"name": "qa", "version": "latest"}},
        size=4,
        sampling={"method": "stratified", "field": "metadata.level"},
    )
    items = select_items(config, cases, dataset_version=(2, "ab" * 32))
    assert dict(items.group_by("stratum").len().iter_rows()) == {"easy": 3, "hard": 1}
    row = items.row(0, named=True)
    source = (row["source"], row["dataset"], row["dataset_version"], row["dataset_sha256"])
    assert source == ("dataset", "qa", 2, "ab" * 32)
    assert row["reference"] == "answer " + row["item_id"][1:] and row["trace_id"] is None


# ---- disagreement, from real judge verdicts ------------------------------------------------------------------


def verdict(passed: bool | str) -> str:
    return json.dumps({"passed": passed, "reasoning": "scripted"}) if isinstance(passed, bool) else passed


PASS, FAIL, GARBLED = verdict(True), verdict(False), "no verdict here"
# trace: (what the `expected` member says, what the `output` member says); the third judge always passes
TODAY = {
    "t1": (PASS, PASS),  # votes 1, 1, 1: agreement
    "t2": (FAIL, PASS),  # 0, 1, 1: split, 2/3
    "t3": (FAIL, FAIL),  # 0, 0, 1: split, 2/3
    "t4": (GARBLED, PASS),  # FAILED, 1, 1: agreement (a FAILED row is no verdict; as a 0 it would split 2/3)
    "t5": (PASS, PASS),
    "t6": (PASS, FAIL),  # 1, 0, 1: split, 2/3
    "t8": (FAIL, GARBLED),  # 0, FAILED, 1: split, 1.0 (as a 0 it would be 2/3)
}


def evaluators(local_judge) -> list[EvaluatorConfig]:
    common = {
        "mode": "binary",
        "api_base": local_judge.base_url,
        "prompt": "{{input}} {{output}} {{expected}}",
        "temperature": 0.0,
        "max_retries": 0,
        "timeout_s": 5,
    }
    panel = EvaluatorConfig.model_validate(
        {**common, "name": "panel", "models": [{"model": "openai/echo/expected"}, {"model": "openai/echo/output"}]}
    )
    lenient = EvaluatorConfig.model_validate(
        {**common, "name": "lenient", "model": 'openai/fixed/{"passed": true, "reasoning": "always"}'}
    )
    return [panel, lenient]


def judged(local_judge, runtime, day_traces: dict[str, tuple[str, str]], day: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    frame = traces(
        [
            {"trace_id": t, "input": f"question {t}", "output": out, "expected_output": exp}
            for t, (exp, out) in day_traces.items()
        ],
        day,
    )
    rows = pl.concat([judge_day(config, day, frame, runtime).rows for config in evaluators(local_judge)])
    return frame, rows


def test_disagreement_picks_the_split_traces_and_never_counts_a_failed_row(local_judge, runtime):
    frame, rows = judged(local_judge, runtime, TODAY, DAY)
    # the verdicts really are what the scenario says: FAILED rows where the reply held no verdict
    failed = rows.filter(pl.col("status") == "FAILED", pl.col("role") == "member")
    assert sorted(failed["trace_id"]) == ["t4", "t8"]
    config = task(
        size=10,
        source={"traces": {"days": [DAY], "evaluators": ["panel", "lenient"]}},
        sampling={"method": "disagreement", "seed": 5},
    )
    items = select_items(config, frame, rows)
    assert items["item_id"].to_list()[0] == "t8"  # the widest split first
    assert set(items["item_id"]) == {"t8", "t2", "t3", "t6"}  # never t4, nor the agreed ones
    priority = dict(zip(items["item_id"], items["priority"], strict=True))
    assert priority["t8"] == pytest.approx(1.0) and priority["t2"] == pytest.approx(2 / 3)
    assert items.filter(pl.col("item_id") == "t2")["why"][0] == (
        "judges split: mean verdict difference 0.667 over 3 verdicts"
    )
    assert candidate_count_note(config, 7, items.height).startswith("4 of 10 items: only 4 of 7 candidates")
    # ties (t2, t3, t6 at 2/3) are broken by the seeded key: the same seed, the same two
    three = config.model_copy(update={"size": 3})
    two = select_items(three, frame, rows)
    assert two["item_id"].to_list() == select_items(three, frame.reverse(), rows.reverse())["item_id"].to_list()
    assert two["item_id"][0] == "t8" and set(two["item_id"][1:]) < {"t2", "t3", "t6"}
    # the annotator's text is the trace's, and nothing else: no judge verdict column
    assert not {"score", "passed", "label", "reasoning"} & set(items.columns)


def test_disagreement_also_picks_where_judge_and_humans_differed_before(local_judge, runtime):
    # a past day: the panel passes six traces, and people said no to each
    past = {f"h{i}": (PASS, PASS) for i in range(6)}
    _, past_rows = judged(local_judge, runtime, past, PAST)
    frame, rows = judged(local_judge, runtime, TODAY, DAY)
    humans = pl.DataFrame(
        [
            {
                "task": "review",
                "item_id": t,
                "trace_id": t,
                "annotator": a,
                "criterion": "helpful",
                "schema": "classification",
                "label": "no",
                "value": 0.0,
            }
            for t in past
            for a in ("ann1", "ann2")
        ]
    )
    config = task(
        size=10,
        source={"traces": {"days": [DAY], "evaluators": ["panel"]}},
        sampling={"method": "disagreement", "seed": 5},
    )
    history = pl.concat([past_rows, rows])
    without = select_items(config, frame, history)
    assert set(without["item_id"]) == {"t2", "t6"}  # only the panel's own split (t8's other vote FAILED)
    with_humans = select_items(config, frame, history, humans)
    # t1, t5 and t4 (its one completed member): the panel passes them, and its passes were wrong for people every
    # time before; t3 and t8 it fails, a bin with no history
    assert set(with_humans["item_id"]) == {"t1", "t2", "t4", "t5", "t6"}
    why = dict(zip(with_humans["item_id"], with_humans["why"], strict=True))
    assert why["t1"] == (
        "judge and humans differed: panel's score bin [0.8, 1.0) was 1.0 from the human value on average over 6 "
        "past items"
    )
    # with fewer past items than min_history, a bin does not count
    strict = config.model_copy(update={"sampling": config.sampling.model_copy(update={"min_history": 7})})
    assert set(select_items(strict, frame, history, humans)["item_id"]) == {"t2", "t6"}


def test_a_traces_source_with_evaluators_keeps_only_the_traces_they_judged(local_judge, runtime):
    frame, rows = judged(local_judge, runtime, TODAY, DAY)
    extra = traces([{"trace_id": "unjudged", "input": "q", "output": "a"}])
    config = task(source={"traces": {"days": [DAY], "evaluators": ["lenient"]}})
    items = select_items(config, pl.concat([frame, extra]), rows)
    assert "unjudged" not in set(items["item_id"]) and items.height == len(TODAY)
    with pytest.raises(ValueError, match="needs their judge_scores rows"):
        select_items(config, frame, None)


# ---- the example task over the demo's data -------------------------------------------------------------------


def test_the_example_task_picks_a_stratified_sample_of_what_the_demo_judged(local_judge, tmp_path):
    """data/annotation_tasks/helpfulness_review.yaml over one sample day, judged as the demo judges it (no key:
    the local judge), read as `traces` ingests it."""
    from eval_platform.annotation.config import load_annotation_tasks
    from eval_platform.ingest.traces import read_trace_day
    from eval_platform.judging.loading import load_evaluators
    from eval_platform.llm.budget import BudgetLedger
    from eval_platform.llm.cache import ModelCache
    from eval_platform.llm.client import LiteLLMModelClient
    from eval_platform.llm.runtime import ModelRuntime
    from eval_platform_tests.conftest import REPO_DATA

    evaluators = load_evaluators(REPO_DATA / "evaluators", data_root=REPO_DATA)
    config = load_annotation_tasks(REPO_DATA, evaluators, check_datasets=True).files["helpfulness_review"]
    day = config.source.traces.day_keys()[0]
    runtime = ModelRuntime(
        client=LiteLLMModelClient(max_concurrency=8),
        cache=ModelCache(tmp_path / "cache"),
        ledger=BudgetLedger(tmp_path / "budget.sqlite"),
        local_judge_url=local_judge.base_url,
        local_judge_for_missing_keys=True,  # the demo's mode
        env={},
    )
    day_traces = read_trace_day(REPO_DATA, day).traces
    rows = judge_day(evaluators["helpfulness"], day, day_traces, runtime).rows
    judged = set(rows.filter(pl.col("status") == "COMPLETED")["trace_id"])
    items = select_items(config, day_traces, rows)
    assert items.height == config.size and set(items["item_id"]) <= judged
    by_model = dict(items.group_by("stratum").len().iter_rows())
    candidates = day_traces.filter(pl.col("trace_id").is_in(list(judged)))
    share = dict(candidates.group_by("model").len().iter_rows())
    assert set(by_model) == set(share)  # every model that has judged traces is in the sample
    for model, n in by_model.items():  # proportional: within one of its quota
        assert abs(n - config.size * share[model] / candidates.height) < 1
