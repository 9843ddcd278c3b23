"""Human annotation exports -> `human_annotations`: formats, criteria, tasks.yaml validation, quarantine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from eval_platform.annotation.config import AnnotationTaskError, load_annotation_tasks
from eval_platform.ingest.annotations import annotation_overview, read_annotations
from eval_platform.schemas import HUMAN_ANNOTATION_SCHEMA
from eval_platform_tests.conftest import REPO_DATA

TASKS = """
tasks:
  summary_quality:
    criteria:
      relevance: {schema: rating, min: 1, max: 5}
      fluency: {schema: rating, min: 1, max: 5}
      verdict: {schema: classification, labels: {good: 1.0, bad: 0.0}}
      best: {schema: ranking, candidates: [A, B, C]}
"""


def write(root: Path, name: str, text: str) -> Path:
    path = root / "annotations" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(*rows: object) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


def by_reason(result) -> dict[str, list[tuple[str, int | None]]]:
    grouped: dict[str, list] = {}
    for row in result.quarantine.iter_rows(named=True):
        grouped.setdefault(row["reason"], []).append((row["file"], row["line"]))
    return grouped


def test_the_pandalm_export_becomes_one_row_per_item_and_annotator(tmp_path):
    shutil.copytree(REPO_DATA / "annotations", tmp_path / "annotations")
    result = read_annotations(tmp_path, tasks=load_annotation_tasks(tmp_path).declared())

    frame = result.annotations
    assert result.quarantine.height == 0
    assert result.tasks_file == "annotations/tasks.yaml"
    assert frame.height == 2997
    assert frame.schema == pl.Schema(HUMAN_ANNOTATION_SCHEMA)
    assert frame["item_id"].n_unique() == 999
    assert sorted(frame["annotator"].unique()) == ["annotator1", "annotator2", "annotator3"]
    assert frame.group_by("item_id").len()["len"].unique().to_list() == [3]
    assert set(frame["schema"]) == {"classification"} and set(frame["criterion"]) == {"preference"}
    # The labels as recorded by the PandaLM authors (testset-v1.json), and the values tasks.yaml maps them to.
    items = json.loads((REPO_DATA / "sources/pandalm/testset-v1.json").read_text(encoding="utf-8"))
    expected = {(f"pandalm-{i['idx']:04d}", f"annotator{n}"): str(i[f"annotator{n}"]) for i in items for n in (1, 2, 3)}
    assert {(r["item_id"], r["annotator"]): r["label"] for r in frame.iter_rows(named=True)} == expected
    assert (frame["value"] == frame["label"].cast(pl.Float64)).all()
    first = frame.row(0, named=True)
    assert (first["response1_trace_id"], first["response2_trace_id"]) == (
        "pandalm-0000-bloom-7b",
        "pandalm-0000-llama-7b",
    )
    assert json.loads(first["metadata"]) == {"label_meaning": "0 tie, 1 response1 better, 2 response2 better"}
    assert (first["source_file"], first["source_line"]) == ("annotations/pandalm_human.jsonl", 1)

    overview = annotation_overview(frame).row(0, named=True)
    assert overview == {
        "task": "pandalm_pairwise",
        "criterion": "preference",
        "schema": "classification",
        "items": 999,
        "annotators": ["annotator1", "annotator2", "annotator3"],
        "rows": 2997,
    }


def test_several_criteria_in_one_row_become_one_row_each_in_every_format(tmp_path):
    write(tmp_path, "tasks.yaml", TASKS)
    write(
        tmp_path,
        "a.jsonl",
        jsonl(
            {
                "task": "summary_quality",
                "item_id": "doc-1",
                "annotator": "ann1",
                "labels": {"relevance": 3, "fluency": 4.5},
                "created_at": "2026-11-10T08:00:00Z",
                "tool": "labelbox",
            },
        ),
    )
    write(
        tmp_path,
        "b.csv",
        "task,item,annotator_id,labels.relevance,labels.verdict,trace_id\nsummary_quality,doc-1,ann2,5,GOOD,t-1\n",
    )
    write(
        tmp_path,
        "c.json",
        json.dumps(
            [
                {
                    "task": "summary_quality",
                    "item_id": "doc-1",
                    "rater": "ann3",
                    "criterion": "best",
                    "label": ["B", "A", "C"],
                },
            ]
        ),
    )
    pl.DataFrame(
        {
            "task": ["summary_quality"],
            "item_id": ["doc-1"],
            "annotator": ["ann4"],
            "labels": ['{"verdict": "bad", "best": "C > A > B"}'],
        }
    ).write_parquet(tmp_path / "annotations" / "d.parquet")

    result = read_annotations(tmp_path, tasks=load_annotation_tasks(tmp_path).declared())
    assert result.quarantine.height == 0, result.quarantine.to_dicts()
    rows = {(r["annotator"], r["criterion"], r["label"]): r for r in result.annotations.iter_rows(named=True)}
    assert {k: rows[k]["value"] for k in rows} == {
        ("ann1", "relevance", "3"): 3.0,
        ("ann1", "fluency", "4.5"): 4.5,
        ("ann2", "relevance", "5"): 5.0,
        ("ann2", "verdict", "good"): 1.0,
        ("ann3", "best", "B"): 1.0,
        ("ann3", "best", "A"): 2.0,
        ("ann3", "best", "C"): 3.0,
        ("ann4", "verdict", "bad"): 0.0,
        ("ann4", "best", "C"): 1.0,
        ("ann4", "best", "A"): 2.0,
        ("ann4", "best", "B"): 3.0,
    }
    ann1 = rows[("ann1", "relevance", "3")]
    assert ann1["annotated_at"].isoformat() == "2026-11-10T08:00:00+00:00"
    assert json.loads(ann1["metadata"]) == {"tool": "labelbox"}
    assert (rows[("ann2", "verdict", "good")]["source_file"], rows[("ann2", "verdict", "good")]["source_line"]) == (
        "annotations/b.csv",
        2,
    )
    assert rows[("ann2", "relevance", "5")]["trace_id"] == "t-1"
    assert {r["schema"] for r in rows.values() if r["criterion"] == "best"} == {"ranking"}


def test_without_tasks_yaml_any_task_is_accepted_and_the_schema_inferred(tmp_path):
    write(
        tmp_path,
        "reviews.jsonl",
        jsonl(
            {"item_id": "x", "annotator": "a", "label": 4},
            {"item_id": "x", "annotator": "b", "label": "toxic"},
            {"item_id": "x", "annotator": "c", "label": ["m1", "m2"], "criterion": "order"},
            {"item_id": "y", "annotator": "a", "label": "2", "schema": "classification"},
        ),
    )
    result = read_annotations(tmp_path, tasks=load_annotation_tasks(tmp_path).declared())
    assert result.tasks_file is None and result.quarantine.height == 0
    got = [
        (r["task"], r["criterion"], r["schema"], r["label"], r["value"])
        for r in result.annotations.iter_rows(named=True)
    ]
    assert got == [
        ("reviews", "overall", "rating", "4", 4.0),
        ("reviews", "overall", "classification", "toxic", None),
        ("reviews", "order", "ranking", "m1", 1.0),
        ("reviews", "order", "ranking", "m2", 2.0),
        ("reviews", "overall", "classification", "2", None),
    ]


def test_bad_rows_are_quarantined_with_file_line_and_reason(tmp_path):
    write(tmp_path, "tasks.yaml", TASKS)
    good = {"task": "summary_quality", "item_id": "doc-1", "annotator": "ann1", "labels": {"relevance": 3}}
    write(
        tmp_path,
        "bad.jsonl",
        jsonl(
            good,  # 1 kept
            '{"task": "summary_quality", "item_id": "doc-2", "annot',  # 2 cut off
            {"task": "summary_quality", "item_id": "doc-2", "labels": {"relevance": 3}},  # 3 no annotator
            {"task": "summary_quality", "annotator": "ann1", "labels": {"relevance": 3}},  # 4 no item
            {"task": "summary_quality", "item_id": "doc-2", "annotator": "ann1", "labels": {"relevance": 9}},  # 5 range
            {"task": "summary_quality", "item_id": "doc-2", "annotator": "ann1", "labels": {"verdict": "meh"}},  # 6 set
            {"task": "summary_quality", "item_id": "doc-2", "annotator": "ann1", "labels": {"tone": 2}},  # 7 criterion
            {"task": "other", "item_id": "doc-2", "annotator": "ann1", "label": 1},  # 8 unknown task
            {
                "task": "summary_quality",
                "item_id": "doc-2",
                "annotator": "ann1",
                "labels": {"best": ["A", "A", "B"]},
            },  # 9
            {"task": "summary_quality", "item_id": "doc-2", "annotator": "ann1", "labels": {"fluency": "fine"}},  # 10
            good,  # 11 duplicate of line 1
            ["not", "an", "object"],  # 12
            {"task": "summary_quality", "item_id": "doc-2", "annotator": "ann1"},  # 13 no label
            {
                "task": "summary_quality",
                "item_id": "doc-3",
                "annotator": "ann1",
                "labels": {"relevance": 2, "fluency": 7},
            },  # 14
            {
                "task": "summary_quality",
                "item_id": "doc-2",
                "annotator": "ann1",
                "labels": {"relevance": 2},
                "annotated_at": "soon",
            },  # 15
        ),
    )
    write(tmp_path, "notes.txt", "remember to export again\n")
    result = read_annotations(tmp_path, tasks=load_annotation_tasks(tmp_path).declared())

    kept = result.annotations
    assert kept.select("item_id", "annotator", "criterion", "label").rows() == [("doc-1", "ann1", "relevance", "3")]
    file = "annotations/bad.jsonl"
    assert by_reason(result) == {
        "invalid_json": [(file, 2)],
        "missing_field:annotator": [(file, 3)],
        "missing_field:item_id": [(file, 4)],
        "label_out_of_range:relevance": [(file, 5)],
        "label_not_allowed:verdict": [(file, 6)],
        "unknown_criterion:tone": [(file, 7)],
        "unknown_task": [(file, 8)],
        "invalid_ranking:best": [(file, 9)],
        "invalid_label:fluency": [(file, 10)],
        "duplicate_annotation": [(file, 11)],
        "not_an_object": [(file, 12)],
        "missing_field:label": [(file, 13)],
        "label_out_of_range:fluency": [(file, 14)],
        "invalid_timestamp": [(file, 15)],
        "unsupported_file_type": [("annotations/notes.txt", None)],
    }
    details = {r["line"]: r for r in result.quarantine.iter_rows(named=True)}
    assert details[5]["detail"] == f"{file} line 5: rating of 'relevance' is 9, outside 1..5"
    assert details[11]["detail"].endswith(f"in {file} line 1; the first occurrence is kept")
    assert details[14]["raw"] == json.dumps(
        {"task": "summary_quality", "item_id": "doc-3", "annotator": "ann1", "labels": {"relevance": 2, "fluency": 7}}
    )
    assert "'other' is not declared" in details[8]["detail"]
    assert set(result.quarantine["source"]) == {"human_annotations"}


def test_a_broken_tasks_file_names_the_file_and_the_field(tmp_path):
    path = write(tmp_path, "tasks.yaml", "tasks:\n  t:\n    criteria:\n      c: {schema: rating, labels: [a, b]}\n")
    write(tmp_path, "a.jsonl", jsonl({"item_id": "x", "annotator": "a", "label": 1}))
    with pytest.raises(AnnotationTaskError) as error:
        load_annotation_tasks(tmp_path)
    assert (
        str(error.value)
        == f"{path}: field 'tasks.t.criteria.c': Value error, 'labels' does not apply to schema 'rating'"
    )

    path.write_text("tasks:\n  t:\n    criteria:\n      c: {kind: rating}\n")
    with pytest.raises(AnnotationTaskError, match=r"tasks.yaml: field 'tasks.t.criteria.c.kind': Extra inputs"):
        load_annotation_tasks(tmp_path)


def test_an_empty_or_missing_folder_is_an_empty_typed_table(tmp_path):
    result = read_annotations(tmp_path, tasks=load_annotation_tasks(tmp_path).declared())
    assert result.annotations.height == 0 and result.quarantine.height == 0
    assert result.annotations.schema == pl.Schema(HUMAN_ANNOTATION_SCHEMA)
