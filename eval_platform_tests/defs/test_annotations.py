"""`human_annotations` and `imported_judgments` in a real Dagster instance over the PandaLM files, queried
through the DuckDB views, with bad rows of each kind in the quarantine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.storage.location import DataRoot
from eval_platform_tests.conftest import REPO_DATA

ASSETS = ["human_annotations", "imported_judgments"]
BAD_ANNOTATIONS = (
    "task,item_id,annotator,criterion,label\n"
    "pandalm_pairwise,pandalm-0000,annotator4,preference,1\n"  # 2: kept, a fourth annotator
    "pandalm_pairwise,pandalm-0001,,preference,1\n"  # 3: no annotator
    "pandalm_pairwise,,annotator4,preference,1\n"  # 4: no item
    "pandalm_pairwise,pandalm-0002,annotator4,preference,3\n"  # 5: not an allowed label
    "pandalm_pairwise,pandalm-0000,annotator1,preference,2\n"  # 6: annotator1 already labelled item 0
    'pandalm_pairwise,"pandalm-0003,annotator4\n'  # 7: an unterminated quote runs to the end of the file
)
BAD_JUDGMENTS = "\n".join(
    [
        json.dumps({"source": "my-judge", "item_id": "pandalm-0000", "verdict": "2"}),  # 1: kept
        json.dumps({"source": "my-judge", "verdict": "1"}),  # 2: no item
        "{not json",  # 3
        json.dumps({"source": "my-judge", "item_id": "pandalm-0001"}),  # 4: no verdict
    ]
)


@pytest.fixture
def project(data_root, tmp_path):
    shutil.copytree(REPO_DATA / "annotations", data_root / "annotations", dirs_exist_ok=True)
    shutil.copytree(REPO_DATA / "judgments", data_root / "judgments", dirs_exist_ok=True)
    (data_root / "annotations" / "zz_bad.csv").write_text(BAD_ANNOTATIONS, encoding="utf-8")
    (data_root / "judgments" / "zz_bad.jsonl").write_text(BAD_JUDGMENTS + "\n", encoding="utf-8")
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, build_definitions(data_root), instance


def materialize(defs, instance, selection=ASSETS, **kwargs) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets=list(defs.assets), selection=selection, instance=instance, resources=defs.resources, **kwargs
    )


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.sql(sql).fetchall()


def metadata(instance, asset: str) -> dict:
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    return {key: value.value for key, value in event.asset_materialization.metadata.items()}


def test_assets_are_defined_and_views_exist_before_any_run(project):
    root, defs, _ = project
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert set(ASSETS) <= keys
    for asset in ASSETS:
        assert defs.resolve_assets_def(asset).partitions_def is None
    from eval_platform.defs.catalog import refresh

    refresh(DataRoot.from_env(root))  # typed empty views until the first materialization
    assert query(root, "SELECT count(*) FROM human_annotations") == [(0,)]
    assert {c[0] for c in query(root, "DESCRIBE imported_judgments")} >= {
        "source",
        "item_id",
        "verdict",
        "value",
        "reasoning",
    }


def test_pandalm_labels_and_verdicts_land_in_duckdb_and_bad_rows_in_quarantine(project):
    root, defs, instance = project
    assert materialize(defs, instance).success

    # 999 items x 3 annotators, plus the one good row of the bad file.
    assert query(root, "SELECT count(*), count(DISTINCT item_id) FROM human_annotations") == [(2998, 999)]
    assert query(root, "SELECT annotator, count(*) FROM human_annotations GROUP BY 1 ORDER BY 1") == [
        ("annotator1", 999),
        ("annotator2", 999),
        ("annotator3", 999),
        ("annotator4", 1),
    ]
    # The published majority-vote label distribution (PandaLM README): 0: 105, 1: 422, 2: 472.
    majority = """
        WITH votes AS (SELECT item_id, label, count(*) AS n FROM human_annotations
                       WHERE source_file = 'annotations/pandalm_human.jsonl' GROUP BY ALL),
             gold AS (SELECT item_id, arg_max(label, n) AS label FROM votes GROUP BY item_id)"""
    assert query(root, f"{majority} SELECT label, count(*) FROM gold GROUP BY 1 ORDER BY 1") == [
        ("0", 105),
        ("1", 422),
        ("2", 472),
    ]
    # ... and GPT-3.5-turbo's published accuracy against it, 71.07% (Tie and garbage count as 0).
    accuracy = query(
        root,
        f"""{majority}
        SELECT avg((CASE WHEN j.verdict IN ('Tie', 'garbage') THEN '0' ELSE j.verdict END = g.label)::INT)
        FROM imported_judgments j JOIN gold g USING (item_id) WHERE j.source = 'gpt-3.5-turbo (PandaLM study)'""",
    )
    assert round(accuracy[0][0], 4) == 0.7107
    assert query(root, "SELECT source, count(*) FROM imported_judgments GROUP BY 1 ORDER BY 1") == [
        ("gpt-3.5-turbo (PandaLM study)", 999),
        ("my-judge", 1),
        ("pandalm-7b (PandaLM study)", 999),
    ]

    quarantined = query(root, "SELECT source, file, line, reason, detail FROM quarantine ORDER BY source, line")
    annotations_file, judgments_file = "annotations/zz_bad.csv", "judgments/zz_bad.jsonl"
    assert [row[:4] for row in quarantined] == [
        ("human_annotations", annotations_file, 3, "missing_field:annotator"),
        ("human_annotations", annotations_file, 4, "missing_field:item_id"),
        ("human_annotations", annotations_file, 5, "label_not_allowed:preference"),
        ("human_annotations", annotations_file, 6, "duplicate_annotation"),
        ("human_annotations", annotations_file, 7, "malformed_csv_row"),
        ("imported_judgments", judgments_file, 2, "missing_field:item_id"),
        ("imported_judgments", judgments_file, 3, "invalid_json"),
        ("imported_judgments", judgments_file, 4, "missing_field:verdict"),
    ]
    for _, file, line, _, detail in quarantined:
        assert detail.startswith(f"{file} line {line}: ")
    assert "annotations/pandalm_human.jsonl line 1" in quarantined[3][4]

    annotations_meta, judgments_meta = metadata(instance, "human_annotations"), metadata(instance, "imported_judgments")
    assert (annotations_meta["rows"], annotations_meta["quarantined"], annotations_meta["dagster/row_count"]) == (
        2998,
        5,
        2998,
    )
    assert annotations_meta["annotators"] == ["annotator1", "annotator2", "annotator3", "annotator4"]
    assert annotations_meta["tasks_file"] == "annotations/tasks.yaml"
    assert "| pandalm_pairwise | preference | classification | 999 |" in annotations_meta["tasks"]
    assert (judgments_meta["rows"], judgments_meta["quarantined"]) == (1999, 3)
    assert judgments_meta["quarantine_reasons"] == {
        "invalid_json": 1,
        "missing_field:item_id": 1,
        "missing_field:verdict": 1,
    }


def test_rematerializing_replaces_the_tables_and_their_quarantine(project):
    root, defs, instance = project
    assert materialize(defs, instance).success
    assert materialize(defs, instance).success
    assert query(root, "SELECT count(*) FROM human_annotations") == [(2998,)]
    assert query(root, "SELECT count(*) FROM imported_judgments") == [(1999,)]
    assert query(root, "SELECT count(*) FROM quarantine") == [(8,)]

    # Fixing the exports (here: removing the bad files) clears their quarantine rows on the next run.
    (root / "annotations" / "zz_bad.csv").unlink()
    (root / "judgments" / "zz_bad.jsonl").unlink()
    assert materialize(defs, instance).success
    assert query(root, "SELECT count(*) FROM quarantine") == [(0,)]
    assert query(root, "SELECT count(*) FROM human_annotations") == [(2997,)]


def test_a_broken_tasks_file_fails_the_run_naming_the_file_and_field(project):
    root, defs, instance = project
    (root / "annotations" / "tasks.yaml").write_text(
        "tasks:\n  pandalm_pairwise:\n    criteria:\n      preference: {schema: vote}\n"
    )
    result = materialize(defs, instance, selection=["human_annotations"], raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.step_failure_data.error.message
    assert "tasks.yaml: field 'tasks.pandalm_pairwise.criteria.preference.schema'" in message
