"""One dataset reader: a benchmark suite and a `reference` evaluator reading the same dataset version get the same
cases, and the asset graph draws the edge dataset_versions -> suite (with Dagster's staleness across it)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import write_evaluator

DAY = "2026-11-10"
MODEL = "recorded"
TASK = dg.AssetKey(["benchmark", "faq", "answers"])
JUDGED = dg.MultiPartitionKey({"date": DAY, "evaluator": "gold"})
DEFINITIONS_FILE = str(Path(__file__).resolve().parents[2] / "eval_platform" / "definitions.py")
STALE = """
query Stale($path: [String!]!, $partition: String!) {
  assetNodeOrError(assetKey: {path: $path}) {
    ... on AssetNode { staleStatus(partition: $partition) staleCauses(partition: $partition) { reason } }
  }
}
"""


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def write_cases(root: Path, version: int, answers: dict[str, str]) -> None:
    path = root / "datasets" / "faq" / f"v{version}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"case_id": case, "input": f"question {case}", "expected_output": a} for case, a in answers.items()]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def run(root: Path, instance, selection, partition) -> None:
    defs = build_definitions(root)  # as a code location reload would: the suite's newest version is read again
    result = dg.materialize(
        assets=list(defs.assets),
        selection=selection,
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )
    assert result.success, [e.event_specific_data.error.message for e in result.get_step_failure_events()]


def ingest(root: Path, instance, version: int) -> None:
    instance.add_dynamic_partitions("dataset_versions", [f"faq@v{version}"])
    run(root, instance, ["dataset_versions"], f"faq@v{version}")


def suite_reads(root: Path) -> dict[str, tuple[str, int]]:
    """What the suite's task read of each case: its recorded output is the case's expected_output, as read."""
    rows = query(root, "SELECT case_id, output, dataset_version FROM benchmark_cases")
    return {case: (output, version) for case, output, version in rows}


def evaluator_reads(root: Path) -> dict[str, str]:
    """What the evaluator read as each trace's gold answer: the local judge's echo/expected replies with it."""
    rows = query(root, "SELECT trace_id, raw_score FROM judge_scores WHERE status = 'COMPLETED'")
    return {trace.removeprefix("t-"): f"{score:g}" for trace, score in rows}


@pytest.fixture
def project(data_root, local_judge, tmp_path):
    write_cases(data_root, 1, {"c1": "4", "c2": "2"})  # the evaluator's scale is 1..5
    (data_root / "benchmarks").mkdir()
    suite = {"name": "faq", "tasks": {"answers": {"dataset": "faq", "outputs_from": "expected_output"}}}
    suite["tasks"]["answers"]["scorers"] = [{"name": "exact_match"}]
    (data_root / "benchmarks" / "faq.yaml").write_text(yaml.safe_dump(suite))
    (data_root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump({"models": {MODEL: {"model": "none"}}}))
    traces = [
        {"trace_id": f"t-{c}", "timestamp": f"{DAY}T10:00:00Z", "input": "q", "output": "a", "metadata": {"case": c}}
        for c in ("c1", "c2")
    ]
    (data_root / "traces" / DAY).mkdir(parents=True)
    (data_root / "traces" / DAY / "export.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    write_evaluator(
        data_root,
        "gold",
        mode="reference",
        model="openai/echo/expected",
        api_base=local_judge.base_url,
        reference={"source": "dataset", "dataset": "faq", "match_on": "metadata.case"},
        prompt="{{output}} vs {{expected}}",
    )
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions("benchmark_models", [MODEL])
        yield data_root, instance


def test_the_asset_graph_draws_dataset_to_suite(project):
    root, _ = project
    specs = {spec.key: spec for spec in build_definitions(root).resolve_all_asset_specs()}
    [edge] = [dep for dep in specs[TASK].deps if dep.asset_key == dg.AssetKey("dataset_versions")]
    # whatever the model partition, the task reads the one version it names (here the newest declared)
    assert edge.partition_mapping == dg.SpecificPartitionsPartitionMapping(["faq@v1"])
    suite = specs[dg.AssetKey(["benchmark_scores", "faq"])]
    assert TASK in {dep.asset_key for dep in suite.deps}


def test_a_suite_and_an_evaluator_read_the_same_cases_of_a_version_and_of_the_next(project):
    root, instance = project
    ingest(root, instance, 1)
    run(root, instance, ["traces"], DAY)
    run(root, instance, [TASK], MODEL)
    run(root, instance, ["judge_scores"], JUDGED)
    assert suite_reads(root) == {"c1": ("4", 1), "c2": ("2", 1)}
    assert evaluator_reads(root) == {case: output for case, (output, _) in suite_reads(root).items()}

    # A new version: the suite (newest) and the evaluator (newest materialized) both read it, and agree again.
    write_cases(root, 2, {"c1": "5", "c2": "3"})
    ingest(root, instance, 2)
    run(root, instance, [TASK], MODEL)
    run(root, instance, ["judge_scores"], JUDGED)
    assert suite_reads(root) == {"c1": ("5", 2), "c2": ("3", 2)}
    assert evaluator_reads(root) == {"c1": "5", "c2": "3"}

    # The version's file changed in place: both read it as it is now, not one the file and the other an old copy.
    write_cases(root, 2, {"c1": "5", "c2": "1"})
    run(root, instance, [TASK], MODEL)
    run(root, instance, ["judge_scores"], JUDGED)
    assert suite_reads(root) == {"c1": ("5", 2), "c2": ("1", 2)}
    assert evaluator_reads(root) == {"c1": "5", "c2": "1"}


def stale_status(instance) -> tuple[str, list[str]]:
    """The task's staleness for the model partition as the UI shows it (the webserver's GraphQL, its own process)."""
    with define_out_of_process_context(DEFINITIONS_FILE, "defs", instance) as context:
        node = execute_dagster_graphql(context, STALE, {"path": TASK.path, "partition": MODEL}).data["assetNodeOrError"]
    return node["staleStatus"], [cause["reason"] for cause in node["staleCauses"]]


def test_a_dataset_version_ingested_again_with_other_content_marks_the_suite_stale(project):
    root, instance = project
    ingest(root, instance, 1)
    run(root, instance, [TASK], MODEL)
    assert stale_status(instance) == ("FRESH", [])

    ingest(root, instance, 1)  # the same content again: nothing the task read has changed
    assert stale_status(instance) == ("FRESH", [])

    write_cases(root, 1, {"c1": "4", "c2": "1"})  # the file changed in place, then ingested again
    ingest(root, instance, 1)
    status, causes = stale_status(instance)
    assert status == "STALE" and causes, causes
