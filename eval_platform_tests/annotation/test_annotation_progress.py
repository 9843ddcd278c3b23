"""Progress of an annotation task (counts, agreement so far, time) and its ground truth at the consensus threshold;
alpha checked against the `krippendorff` package."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta

import krippendorff
import numpy as np
import polars as pl
import pytest

from eval_platform.agreement import compute
from eval_platform.annotation.config import AnnotationTaskConfig, load_annotation_tasks
from eval_platform.annotation.progress import ground_truth, open_items, progress
from eval_platform.ingest.annotations import read_annotations
from eval_platform.schemas import (
    ANNOTATION_GROUND_TRUTH_SCHEMA,
    ANNOTATION_PROGRESS_SCHEMA,
    IMPORTED_JUDGMENT_SCHEMA,
    JUDGE_SCORE_SCHEMA,
    empty_frame,
)

START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)  # the first annotation


def task(**fields) -> AnnotationTaskConfig:
    base = {
        "name": "review",
        "source": {"traces": {"days": ["2026-11-10"]}},
        "instructions": "Label the answer.",
        "criteria": {
            "helpful": {"schema": "classification", "labels": {"yes": 1, "no": 0, "partly": 0.5}},
            "clarity": {"schema": "rating", "min": 1, "max": 5},
            "best": {"schema": "ranking", "candidates": ["A", "B", "C"]},
            "comment": {"schema": "text"},
        },
        "annotations_per_item": 3,
        "size": 20,
        "consensus_threshold": 0.75,
    }
    return AnnotationTaskConfig.model_validate({**base, **fields})


def rows_of(annotations: list[tuple], lead: dict | None = None) -> pl.DataFrame:
    """(item, annotator, criterion, label) -> human_annotations-like rows as the tool pull-back gives them, each
    annotation's lead time repeated on each of its criterion rows (in `metadata`, as a JSON key)."""
    spec = task().criteria
    out = []
    for i, (item, annotator, criterion, label) in enumerate(annotations):
        schema = spec[criterion].schema_
        seconds = (lead or {}).get((item, annotator))
        base = {
            "task": "review",
            "item_id": item,
            "trace_id": item,
            "annotator": annotator,
            "criterion": criterion,
            "schema": schema,
            "annotated_at": START + timedelta(minutes=i),
            "metadata": json.dumps({"lead_time_s": seconds} if seconds is not None else {}),
        }
        if schema == "ranking":
            out += [{**base, "label": c, "value": float(r)} for r, c in enumerate(label.split(" > "), start=1)]
        elif schema == "rating":
            out.append({**base, "label": str(label), "value": float(label)})
        else:
            out.append({**base, "label": label, "value": spec[criterion].label_value(label)})
    return pl.DataFrame(out).with_columns(pl.col("value").cast(pl.Float64))


def random_annotations(seed: int, items: int = 15, annotators=("ann1", "ann2", "ann3", "ann4")) -> list[tuple]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(items):
        truth = rng.integers(0, 3)
        for a in annotators:
            if rng.random() < 0.25:  # this annotator did not get to the item
                continue
            noisy = truth if rng.random() < 0.7 else rng.integers(0, 3)
            out.append((f"i{i:02d}", a, "helpful", ["yes", "no", "partly"][noisy]))
            out.append((f"i{i:02d}", a, "clarity", int(1 + noisy + rng.integers(0, 2))))
            order = ["A", "B", "C"] if noisy == 0 else ["B", "A", "C"] if noisy == 1 else ["C", "B", "A"]
            out.append((f"i{i:02d}", a, "best", " > ".join(order)))
            out.append((f"i{i:02d}", a, "comment", f"free text {i} {a}"))
    return out


def reliability_matrix(annotations: list[tuple], criterion: str, coder_value) -> np.ndarray:
    """The coders × units matrix `krippendorff.alpha` takes, NaN where a coder did not code a unit."""
    picked = [a for a in annotations if a[2] == criterion]
    units = sorted({u for u, *_ in picked})
    coders = sorted({c for _, c, *_ in picked})
    matrix = np.full((len(coders), len(units)), np.nan)
    for unit, coder, _, label in picked:
        matrix[coders.index(coder), units.index(unit)] = coder_value(label)
    return matrix


def only_shared(annotations: list[tuple], criterion: str) -> list[tuple]:
    counts: dict[str, int] = {}
    for item, _, c, _ in annotations:
        if c == criterion:
            counts[item] = counts.get(item, 0) + 1
    return [a for a in annotations if a[2] == criterion and counts[a[0]] >= 2]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_task_agreement_so_far_matches_the_krippendorff_package_and_pairwise_counts(seed):
    annotations = random_annotations(seed)
    table = progress(rows_of(annotations), task())
    assert list(table.columns) == list(ANNOTATION_PROGRESS_SCHEMA)
    at_task = {row["criterion"]: row for row in table.filter(pl.col("level") == "task").iter_rows(named=True)}

    codes = {"yes": 0, "no": 1, "partly": 2}
    expected = krippendorff.alpha(
        reliability_data=reliability_matrix(annotations, "helpful", codes.get), level_of_measurement="nominal"
    )
    assert at_task["helpful"]["alpha"] == pytest.approx(expected, abs=1e-12)
    assert at_task["helpful"]["alpha_level"] == "nominal"
    expected = krippendorff.alpha(
        reliability_data=reliability_matrix(annotations, "clarity", float), level_of_measurement="ordinal"
    )
    assert at_task["clarity"]["alpha"] == pytest.approx(expected, abs=1e-12)
    # a ranking: each (item, candidate)'s rank is a unit
    per_candidate = [
        (f"{item}/{candidate}", a, "best", rank)
        for item, a, c, label in annotations
        if c == "best"
        for rank, candidate in enumerate(label.split(" > "), start=1)
    ]
    expected = krippendorff.alpha(
        reliability_data=reliability_matrix(per_candidate, "best", float), level_of_measurement="ordinal"
    )
    assert at_task["best"]["alpha"] == pytest.approx(expected, abs=1e-12)

    # percent agreement: per item with two or more annotators, the share of agreeing pairs; their mean
    for criterion in ("helpful", "clarity", "best"):
        shared = only_shared(annotations, criterion)
        by_item: dict[str, list] = {}
        for item, _, _, label in shared:
            by_item.setdefault(item, []).append(label)
        shares = [np.mean([a == b for a, b in itertools.combinations(v, 2)]) for v in by_item.values()]
        assert at_task[criterion]["percent_agreement"] == pytest.approx(np.mean(shares))
        assert at_task[criterion]["items_compared"] == len(by_item)
    assert at_task["comment"]["alpha"] is None and at_task["comment"]["note"] == "free text: not compared"


def test_counts_items_with_n_annotations_and_time_spent_once_per_annotation():
    annotations = [
        ("a", "x", "helpful", "yes"),
        ("a", "x", "clarity", 4),
        ("a", "y", "helpful", "yes"),
        ("a", "y", "clarity", 4),
        ("a", "z", "helpful", "no"),
        ("b", "x", "helpful", "no"),
        ("b", "y", "helpful", "no"),
        ("c", "x", "helpful", "yes"),
    ]
    lead = {("a", "x"): 30.0, ("a", "y"): 10.0, ("a", "z"): 20.0, ("b", "x"): 5.0, ("b", "y"): 7.0, ("c", "x"): 9.0}
    items = pl.DataFrame({"task": ["review"] * 4, "item_id": ["a", "b", "c", "d"]})
    table = progress(rows_of(annotations, lead), task(), items)
    whole = table.filter(pl.col("criterion").is_null())
    overall = whole.filter(pl.col("level") == "task").row(0, named=True)
    assert (overall["items_total"], overall["items_done"], overall["items_complete"], overall["annotations"]) == (
        4,
        3,
        1,
        6,
    )
    # a's x annotation has two criterion rows: its 30 s count once
    assert overall["time_spent_s"] == 81.0 and overall["median_lead_time_s"] == 9.5
    assert overall["first_annotated_at"] == START and overall["last_annotated_at"] == START + timedelta(minutes=7)
    per_annotator = {r["annotator"]: r for r in whole.filter(pl.col("level") == "annotator").iter_rows(named=True)}
    assert {a: (r["items_done"], r["items_complete"], r["time_spent_s"]) for a, r in per_annotator.items()} == {
        "x": (3, 1, 44.0),
        "y": (2, 1, 17.0),
        "z": (1, 1, 20.0),
    }
    clarity = table.filter(pl.col("level") == "task", pl.col("criterion") == "clarity").row(0, named=True)
    assert (clarity["items_done"], clarity["items_complete"], clarity["items_compared"]) == (1, 0, 1)
    # z against the others' majority on `helpful`: x and y say yes on a, z no
    helpful = table.filter(pl.col("level") == "annotator", pl.col("criterion") == "helpful")
    z = helpful.filter(pl.col("annotator") == "z").row(0, named=True)
    assert (z["agreement_with_majority"], z["items_compared"]) == (0.0, 1)
    x = helpful.filter(pl.col("annotator") == "x").row(0, named=True)
    # x on a: the others (y yes, z no) tie, so a is left out; on b, y agrees with x
    assert (x["agreement_with_majority"], x["items_compared"]) == (1.0, 1)


def test_rows_as_a_tool_gives_them_text_times_and_a_lead_time_column():
    rows = pl.DataFrame(
        {
            "task": ["review"] * 3,
            "item_id": ["a", "a", "b"],
            "annotator": ["x", "y", "x"],
            "criterion": ["helpful"] * 3,
            "label": ["yes", "yes", "no"],
            "created_at": ["2026-11-20T09:00:00.5Z", "2026-11-20T09:05:00Z", "2026-11-20T10:00:00Z"],
            "lead_time_s": [12.5, 7, 30],
        }
    )
    overall = progress(rows, task(annotations_per_item=2)).row(0, named=True)
    assert (overall["items_done"], overall["items_complete"], overall["time_spent_s"]) == (2, 1, 49.5)
    assert overall["first_annotated_at"] == START + timedelta(milliseconds=500)
    assert overall["last_annotated_at"] == START + timedelta(hours=1)


def test_annotations_of_items_outside_the_task_are_left_out_and_said():
    annotations = [("a", "x", "helpful", "yes"), ("old", "x", "helpful", "no"), ("old", "y", "helpful", "no")]
    items = pl.DataFrame({"task": ["review"], "item_id": ["a"]})
    overall = progress(rows_of(annotations), task(), items).row(0, named=True)
    assert (overall["items_done"], overall["annotations"]) == (1, 1)
    assert overall["note"] == "2 annotations of items not in the task left out"


def test_ground_truth_needs_n_annotations_and_the_threshold_and_lists_the_rest_with_their_split():
    annotations = [
        # i1: 3 of 4 say yes = 0.75, at the threshold: ground truth
        *[("i1", a, "helpful", lab) for a, lab in zip("wxyz", ["yes", "yes", "yes", "no"], strict=True)],
        # i2: 2 of 3 = 0.67 < 0.75: no row, listed as below the threshold
        *[("i2", a, "helpful", lab) for a, lab in zip("xyz", ["no", "no", "partly"], strict=True)],
        # i3: two annotators agree, but N is 3: too few
        *[("i3", a, "helpful", "yes") for a in "xy"],
        # ratings agree on the same value; a ranking on the same order
        *[("i1", a, "clarity", v) for a, v in zip("xyz", [4, 4, 4], strict=True)],
        *[("i2", a, "clarity", v) for a, v in zip("xyzw", [4, 4, 5, 4], strict=True)],
        *[("i1", a, "best", "B > A > C") for a in "xyz"],
        *[("i1", a, "comment", "free text") for a in "xyz"],  # never ground truth
    ]
    rows = rows_of(annotations)
    truth = ground_truth(rows, task())
    assert list(truth.columns) == list(ANNOTATION_GROUND_TRUTH_SCHEMA)
    got = {(r["criterion"], r["item_id"]): r for r in truth.iter_rows(named=True)}
    assert set(got) == {("helpful", "i1"), ("clarity", "i1"), ("clarity", "i2"), ("best", "i1")}
    helpful = got["helpful", "i1"]
    assert (helpful["label"], helpful["value"], helpful["annotations"], helpful["agreeing"]) == ("yes", 1.0, 4, 3)
    assert helpful["consensus"] == 0.75 and helpful["threshold"] == 0.75 and helpful["trace_id"] == "i1"
    assert (got["clarity", "i2"]["label"], got["clarity", "i2"]["value"]) == ("4", 4.0)
    assert (got["best", "i1"]["label"], got["best", "i1"]["value"]) == ("B > A > C", None)

    open_ = {(r["criterion"], r["item_id"]): r for r in open_items(rows, task()).iter_rows(named=True)}
    assert set(open_) == {("helpful", "i2"), ("helpful", "i3")}
    assert open_["helpful", "i2"]["reason"] == "below_threshold"
    assert json.loads(open_["helpful", "i2"]["split"]) == {"no": 2, "partly": 1}
    assert open_["helpful", "i3"]["reason"] == "too_few_annotations"

    # at 2/3, the 2-of-3 item is settled
    lower = ground_truth(rows, task(consensus_threshold=2 / 3))
    assert ("helpful", "i2") in {(r["criterion"], r["item_id"]) for r in lower.iter_rows(named=True)}
    # an annotator counts once: a second row of the same annotator and item is not a second vote
    repeated = pl.concat([rows, rows_of([("i3", "x", "helpful", "yes")])])
    assert ("helpful", "i3") not in {
        (r["criterion"], r["item_id"]) for r in ground_truth(repeated, task()).rows(named=True)
    }


def test_a_text_criterion_imports_and_is_never_compared_by_the_agreement_table(tmp_path):
    folder = tmp_path / "annotations"
    folder.mkdir()
    (folder / "tasks.yaml").write_text(
        "tasks:\n  review:\n    criteria:\n      helpful: {schema: classification, labels: ['yes', 'no']}\n"
        "      comment: {schema: text}\n"
    )
    lines = [
        {"task": "review", "item_id": f"i{i}", "annotator": a, "labels": {"helpful": "yes", "comment": f"ok {a}"}}
        for i in range(3)
        for a in ("x", "y")
    ]
    (folder / "export.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    read = read_annotations(tmp_path, tasks=load_annotation_tasks(tmp_path).declared())
    assert read.quarantine.is_empty()
    assert set(read.annotations.filter(pl.col("criterion") == "comment")["schema"]) == {"text"}
    agreement, truth = compute(
        {}, empty_frame(JUDGE_SCORE_SCHEMA), read.annotations, empty_frame(IMPORTED_JUDGMENT_SCHEMA)
    )
    assert set(agreement["criterion"]) == {"helpful"}
    assert set(truth["criterion"]) == {"helpful"}
