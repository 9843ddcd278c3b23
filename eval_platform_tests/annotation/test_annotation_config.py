"""Annotation task files: what loads, and errors that name the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_platform.annotation.config import (
    FOLDER,
    AnnotationTaskError,
    load_annotation_tasks,
    resolve_dataset_version,
)
from eval_platform.ingest.annotations import read_annotations
from eval_platform.ingest.datasets import version_sha256
from eval_platform.judging.loading import load_evaluators
from eval_platform_tests.conftest import docs_text

REPO_DATA = Path(__file__).resolve().parents[2] / "data"

GOOD = """
description: helpful answers
source:
  traces:
    from: 2026-11-09
    to: 2026-11-11
    evaluators: [helpfulness]
instructions: Is the answer helpful?
criteria:
  helpful: {schema: classification, labels: {"yes": 1, "no": 0}}
  clarity: {schema: rating, min: 1, max: 5}
  comment: {schema: text}
annotations_per_item: 3
sampling: {method: stratified, field: metadata.route, seed: 7}
size: 20
consensus_threshold: 0.66
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_a_task_file_loads_with_its_stem_as_name_and_its_days_listed(tmp_path):
    write(tmp_path / FOLDER, "helpful_review.yaml", GOOD)
    tasks = load_annotation_tasks(tmp_path).files
    task = tasks["helpful_review"]
    assert task.source.traces.day_keys() == ["2026-11-09", "2026-11-10", "2026-11-11"]
    assert task.criteria["comment"].schema_ == "text"
    assert task.comparable_criteria == ["helpful", "clarity"]
    assert (task.annotations_per_item, task.size, task.consensus_threshold) == (3, 20, 0.66)
    # the criterion model is the one tasks.yaml uses: pulled-back labels are validated by it
    assert task.task_spec().criteria["clarity"].max == 5


def test_name_given_in_the_file_wins_and_two_files_of_one_name_are_an_error(tmp_path):
    write(tmp_path / FOLDER, "a.yaml", "name: review\n" + GOOD)
    assert list(load_annotation_tasks(tmp_path).files) == ["review"]
    write(tmp_path / FOLDER, "b.yaml", "name: review\n" + GOOD)
    with pytest.raises(AnnotationTaskError, match=r"b\.yaml: field 'name': task 'review' is already defined by a"):
        load_annotation_tasks(tmp_path)
    broken: dict[str, str] = {}
    assert list(load_annotation_tasks(tmp_path, broken=broken).files) == ["review"]
    assert list(broken) == ["b.yaml"]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (("size: 20", "size: 0"), "size", "greater than or equal to 1"),
        (("consensus_threshold: 0.66", "consensus_threshold: 0.5"), "consensus_threshold", "greater than 0.5"),
        (("annotations_per_item: 3", "annotations_per_item: 0"), "annotations_per_item", "greater than or equal"),
        (("    to: 2026-11-11", "    to: 2026-11-01"), "source.traces", "'from' 2026-11-09 is after 'to'"),
        (("    from: 2026-11-09\n", "    days: [2026-11-08]\n"), "source.traces", "not both"),
        (("    to: 2026-11-11\n", "    to: '2026-11-31'\n"), "source.traces.to", "valid date"),
        (("schema: text}", "schema: free}"), "criteria.comment.schema", "'classification', 'rating'"),
        (("schema: rating, min: 1", "schema: rating, labels: [a], min: 1"), "criteria.clarity", "'labels' does not"),
        (("field: metadata.route, ", ""), "sampling", "stratified sampling needs 'field'"),
        (("method: stratified", "method: cluster"), "sampling.method", "'random', 'stratified' or 'disagreement'"),
        (("size: 20", "size: 20\ncolour: red"), "colour", "Extra inputs are not permitted"),
        (("field: metadata.route", "field: modle"), "sampling", "field 'modle' is neither a trace column"),
        (("instructions: Is the answer helpful?", "instructions: '  '"), "instructions", "blank"),
        (
            ("method: stratified, field: metadata.route", "method: disagreement"),
            None,  # valid: the traces source names an evaluator
            None,
        ),
        (
            ("method: stratified, field: metadata.route", "method: disagreement, human_criterion: nope"),
            "sampling",
            "human_criterion 'nope' is not a criterion",
        ),
        (
            (
                "    evaluators: [helpfulness]\n",
                "",
                "method: stratified, field: metadata.route",
                "method: disagreement",
            ),
            "sampling",
            "needs 'source.traces.evaluators'",
        ),
    ],
)
def test_a_broken_file_is_an_error_naming_the_file_and_the_field(tmp_path, change, field, message):
    text = GOOD
    for old, new in zip(change[::2], change[1::2], strict=True):
        assert old in text
        text = text.replace(old, new)
    path = write(tmp_path / FOLDER, "broken_task.yaml", text)
    if field is None:
        assert load_annotation_tasks(tmp_path).files["broken_task"].sampling.method == "disagreement"
        return
    with pytest.raises(AnnotationTaskError) as caught:
        load_annotation_tasks(tmp_path)
    assert str(caught.value).startswith(f"{path}: field '{field}'")
    assert message in str(caught.value)


def test_a_date_that_does_not_exist_is_an_error_naming_the_file_not_a_crash(tmp_path):
    # YAML reads 2026-13-11 as a date and fails building it: a ValueError, which the reader did not catch
    path = write(tmp_path / FOLDER, "t.yaml", GOOD.replace("to: 2026-11-11", "to: 2026-13-11"))
    with pytest.raises(AnnotationTaskError, match=rf"^{path}: a value is not a valid date or time: month must be"):
        load_annotation_tasks(tmp_path)


def test_a_dataset_source_excludes_disagreement_and_needs_one_source(tmp_path):
    dataset = GOOD.replace(
        "  traces:\n    from: 2026-11-09\n    to: 2026-11-11\n    evaluators: [helpfulness]\n",
        "  dataset: {name: gsm8k, version: latest}\n",
    )
    write(
        tmp_path / FOLDER,
        "d.yaml",
        dataset.replace("method: stratified, field: metadata.route", "method: disagreement"),
    )
    with pytest.raises(AnnotationTaskError, match=r"d\.yaml: field 'sampling': .*disagreement sampling needs a traces"):
        load_annotation_tasks(tmp_path)
    write(
        tmp_path / FOLDER, "d.yaml", dataset.replace("  dataset: {name: gsm8k, version: latest}\n", "  dataset: null\n")
    )
    with pytest.raises(AnnotationTaskError, match=r"field 'source': .*exactly one of 'traces' or 'dataset'"):
        load_annotation_tasks(tmp_path)


def test_evaluators_are_checked_against_the_loaded_ones(tmp_path):
    evaluators = load_evaluators(REPO_DATA / "evaluators", data_root=REPO_DATA)
    write(tmp_path / FOLDER, "t.yaml", GOOD.replace("[helpfulness]", "[helpfulness, helpfulnes]"))
    with pytest.raises(AnnotationTaskError, match=r"t\.yaml: field 'source.traces.evaluators.1': no loaded evaluator"):
        load_annotation_tasks(tmp_path, evaluators)
    write(tmp_path / FOLDER, "t.yaml", GOOD.replace("[helpfulness]", "[pairwise_preference]"))
    with pytest.raises(AnnotationTaskError, match=r"evaluators.0': evaluator 'pairwise_preference' judges pairs"):
        load_annotation_tasks(tmp_path, evaluators)
    write(tmp_path / FOLDER, "t.yaml", GOOD)
    assert "t" in load_annotation_tasks(tmp_path, evaluators).files


def test_a_dataset_version_is_a_number_latest_or_a_hash_prefix_of_its_file(tmp_path):
    root = tmp_path / "root"
    for n, text in ((1, '{"input": "a"}\n'), (2, '{"input": "b"}\n')):
        write(root / "datasets" / "qa", f"v{n}.jsonl", text)
    sha_v1 = version_sha256(root / "datasets" / "qa" / "v1.jsonl")
    base = GOOD.replace(
        "  traces:\n    from: 2026-11-09\n    to: 2026-11-11\n    evaluators: [helpfulness]\n",
        "  dataset: {name: qa, version: VERSION}\n",
    )
    for version, expected in (("latest", 2), ("1", 1), (sha_v1[:12], 1)):
        write(root / FOLDER, "qa_task.yaml", base.replace("VERSION", version))
        task = load_annotation_tasks(root, check_datasets=True).files["qa_task"]
        assert resolve_dataset_version(root, task.source.dataset)[0] == expected
    write(root / FOLDER, "qa_task.yaml", base.replace("VERSION", "3"))
    with pytest.raises(AnnotationTaskError, match=r"field 'source.dataset.version': dataset 'qa' has no version 3"):
        load_annotation_tasks(root, check_datasets=True)
    write(root / FOLDER, "qa_task.yaml", base.replace("VERSION", "'00000000'"))
    with pytest.raises(AnnotationTaskError, match=r"field 'source.dataset.version': no version of dataset 'qa'"):
        load_annotation_tasks(root, check_datasets=True)
    write(root / FOLDER, "qa_task.yaml", base.replace("VERSION", "v2"))
    with pytest.raises(AnnotationTaskError, match=r"field 'source.dataset.version': .*not a number, 'latest'"):
        load_annotation_tasks(root)


def test_the_config_hash_follows_what_annotators_see_and_which_items_not_n_or_threshold(tmp_path):
    write(tmp_path / FOLDER, "t.yaml", GOOD)
    base = load_annotation_tasks(tmp_path).files["t"].config_hash
    for old, new, same in (
        ("annotations_per_item: 3", "annotations_per_item: 5", True),
        ("consensus_threshold: 0.66", "consensus_threshold: 0.8", True),
        ("description: helpful answers", "description: other words", True),
        ("seed: 7", "seed: 8", False),
        ("size: 20", "size: 21", False),
        ("Is the answer helpful?", "Is it helpful?", False),
    ):
        write(tmp_path / FOLDER, "t.yaml", GOOD.replace(old, new))
        assert (load_annotation_tasks(tmp_path).files["t"].config_hash == base) is same, (old, new)


def test_the_readme_example_is_a_valid_task_file(tmp_path):
    readme = docs_text()
    section = readme[readme.index("## Annotation tasks") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") : section.index("```\n", section.index("```yaml"))]
    write(tmp_path / FOLDER, "readme_example.yaml", block)
    evaluators = load_evaluators(REPO_DATA / "evaluators", data_root=REPO_DATA)
    task = load_annotation_tasks(tmp_path, evaluators).files["readme_example"]
    assert task.sampling.field == "model" and task.criteria["best"].candidates == ["A", "B"]


TASKS_FILE = """
tasks:
  pandalm:
    criteria:
      preference: {labels: ["0", "1", "2"]}
  review:
    criteria:
      helpful: {schema: rating, min: 0, max: 1}
"""


def test_one_loader_reads_both_forms_and_an_error_names_the_file_and_the_field(tmp_path):
    """Two loaders used to read them, `annotations/tasks.yaml` from ingest and the task files from here: one loader
    reads both, the task file's criteria win for its task, and either form's error is one `AnnotationTaskError`
    naming the file and the field."""
    task_file = write(tmp_path / FOLDER, "review.yaml", GOOD)
    tasks_file = write(tmp_path / "annotations", "tasks.yaml", TASKS_FILE)
    tasks = load_annotation_tasks(tmp_path)
    assert list(tasks.files) == ["review"] and tasks.tasks_file_path == tasks_file
    declared = tasks.declared()
    assert declared.tasks_file_path == "annotations/tasks.yaml" and sorted(declared.tasks_file) == ["pandalm", "review"]

    # what `human_annotations` checks with it: the task file's classification for `review`, tasks.yaml for the rest
    rows = [
        {"task": "pandalm", "item_id": "p1", "annotator": "a", "criterion": "preference", "label": "1"},
        {"task": "pandalm", "item_id": "p2", "annotator": "a", "criterion": "preference", "label": "3"},
        {"task": "review", "item_id": "r1", "annotator": "a", "labels": {"helpful": "yes", "clarity": 4}},
        {"task": "other", "item_id": "o1", "annotator": "a", "label": "x"},
    ]
    write(tmp_path / "annotations", "export.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    read = read_annotations(tmp_path, tasks=declared)
    assert sorted(read.annotations.select("item_id", "criterion", "schema").rows()) == [
        ("p1", "preference", "classification"),
        ("r1", "clarity", "rating"),
        ("r1", "helpful", "classification"),
    ]
    assert sorted(read.quarantine["reason"]) == ["label_not_allowed:preference", "unknown_task"]

    # a broken file of either form: the same error class, naming the file and the field
    tasks_file.write_text(TASKS_FILE.replace("{schema: rating,", "{schema: vote,"))
    says = rf"^{tasks_file}: field 'tasks.review.criteria.helpful.schema': Input should be 'classification'"
    with pytest.raises(AnnotationTaskError, match=says):
        load_annotation_tasks(tmp_path)
    broken: dict[str, str] = {}
    kept = load_annotation_tasks(tmp_path, broken=broken)  # as the code location loads: the task files still load
    assert list(kept.files) == ["review"] and broken == {}
    with pytest.raises(AnnotationTaskError, match=says):  # labels are never checked against a broken file
        kept.declared()
    task_file.write_text(GOOD.replace("size: 20", "size: 0"))
    assert list(load_annotation_tasks(tmp_path, broken=broken).files) == []
    assert list(broken) == ["review.yaml"]
    assert broken["review.yaml"].startswith(f"{task_file}: field 'size': Input should be greater than or equal to 1")
