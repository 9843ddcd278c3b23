"""Verdicts as Arize Phoenix span annotations, on a real Phoenix server started from its own venv.

The app sends its trace to Phoenix over OTLP (the OpenTelemetry SDK's exporter) and to the day's OTLP/JSON file the
platform ingests; the platform judges it; `verdict_exports` sends the verdicts; the annotations are read back
through Phoenix's REST API, as a Phoenix user's script or UI would see them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_path, read_partition
from eval_platform_tests.defs.test_no_key_leaks import KEY, KEY_ENV, leak
from eval_platform_tests.export.app import PROJECT, run_app
from eval_platform_tests.export.test_otlp_events import (
    DAY,
    QUESTIONS,
    completed,
    export_metadata,
    key,
    materialize,
    scores_digest,
    write_project,
)
from eval_platform_tests.postgres_server import free_port

JUDGED = ("helpfulness", "chat_quality")


def configure(root, url: str, **fields) -> None:
    destination = {"name": "phoenix", "type": "phoenix", "url": url, **fields}
    (root / "verdict_export.yaml").write_text(yaml.safe_dump({"destinations": [destination]}))


def ledger(root, evaluator: str) -> pl.DataFrame:
    return read_partition(
        DataRoot.from_env(root), "verdict_exports", {"destination": "phoenix", "evaluator": evaluator, "date": DAY}
    )


@pytest.fixture
def project(data_root, local_judge, phoenix_server, tmp_path, monkeypatch):
    import dagster as dg

    monkeypatch.setenv(KEY_ENV, KEY)
    runs = write_project(data_root, local_judge.base_url, phoenix_url=phoenix_server.url)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, instance, runs


def wait_for_spans(phoenix_server, traces: set[str]) -> list[dict]:
    """The project's spans once every run's two spans arrived (Phoenix inserts them in the background)."""
    deadline = time.monotonic() + 60  # a guard only
    while time.monotonic() < deadline:
        spans = phoenix_server.spans(PROJECT)
        if sum(s["context"]["trace_id"] in traces for s in spans) >= 2 * len(traces):
            return spans
        time.sleep(0.5)
    return phoenix_server.spans(PROJECT)


def test_each_verdict_is_one_annotation_on_the_apps_span_once_even_after_a_failure_and_a_lost_ledger(
    project, phoenix_server
):
    root, instance, runs = project
    traces = {run["trace_id"] for run in runs}
    spans = [s for s in wait_for_spans(phoenix_server, traces) if s["context"]["trace_id"] in traces]
    assert len(spans) == 2 * len(QUESTIONS)  # each run's root and chat span, under the app's own ids
    materialize(root, instance, "traces", DAY)
    for evaluator in JUDGED:
        materialize(root, instance, "judge_scores", key(evaluator))
    before = scores_digest_of(root)

    # Phoenix down: the run fails loudly, the batch is recorded as failed, no verdict changes.
    configure(root, f"http://127.0.0.1:{free_port()}", timeout_s=2)
    materialize(root, instance, "verdict_exports", key("helpfulness"), ok=False)
    assert ledger(root, "helpfulness")["status"].to_list() == ["failed"] * len(QUESTIONS)
    assert scores_digest_of(root) == before

    # Phoenix up: everything missing is sent.
    configure(root, phoenix_server.url)
    for evaluator in JUDGED:
        meta = export_metadata(materialize(root, instance, "verdict_exports", key(evaluator)))
        assert meta["destinations"][0]["sent"] == len(QUESTIONS)
    span_ids = [s["context"]["span_id"] for s in spans]
    annotations = phoenix_server.annotations(PROJECT, span_ids)
    assert len(annotations) == 2 * len(QUESTIONS)  # not the JSONL trace's verdict: Phoenix has no span of it

    names = {s["context"]["span_id"]: s["name"] for s in spans}
    helpfulness = completed(root, "helpfulness")
    sent = ledger(root, "helpfulness").join(
        helpfulness.select("trace_id", "score", "reasoning"), on="trace_id", how="inner"
    )
    by_identifier = {a["identifier"]: a for a in annotations}
    for row in sent.iter_rows(named=True):
        annotation = by_identifier[row["verdict_key"]]
        assert annotation["name"] == "helpfulness"
        assert annotation["span_id"] == row["otel_span_id"]
        assert names[annotation["span_id"]] == "invoke_agent helper"  # the run's root span
        assert annotation["annotator_kind"] == "LLM"
        assert annotation["result"]["score"] == pytest.approx(row["score"])
        assert annotation["result"]["explanation"] == row["reasoning"]
    chat = [a for a in annotations if a["name"] == "chat_quality"]
    assert {names[a["span_id"]] for a in chat} == {"chat app-model"}
    assert len({a["span_id"] for a in chat}) == len(QUESTIONS)

    # A re-run sends nothing; a lost ledger (the crash between Phoenix's answer and the ledger's write) sends the
    # verdicts again, and Phoenix still holds one annotation per verdict (the verdict key is its identifier).
    again = export_metadata(materialize(root, instance, "verdict_exports", key("helpfulness")))
    assert again["destinations"][0]["sent"] == 0
    lost = partition_path(
        DataRoot.from_env(root), "verdict_exports", {"destination": "phoenix", "evaluator": "helpfulness", "date": DAY}
    )
    Path(lost).unlink()
    resent = export_metadata(materialize(root, instance, "verdict_exports", key("helpfulness")))
    assert resent["destinations"][0]["sent"] == len(QUESTIONS)
    assert len(phoenix_server.annotations(PROJECT, span_ids)) == 2 * len(QUESTIONS)
    assert scores_digest_of(root) == before

    # The judge echoed the key into its reasoning: no piece of it reached Phoenix.
    assert leak(json.dumps(phoenix_server.annotations(PROJECT, span_ids))) is None


def scores_digest_of(root) -> dict[str, str]:
    return scores_digest(root, JUDGED)


def test_verdicts_on_spans_phoenix_lacks_are_refused_alone_and_the_rest_is_sent(
    data_root, local_judge, phoenix_server, monkeypatch
):
    import dagster as dg

    monkeypatch.setenv(KEY_ENV, KEY)
    runs = write_project(data_root, local_judge.base_url, phoenix_url=phoenix_server.url)
    # one more run of the app whose trace never reached Phoenix (its exporter pointed elsewhere)
    (unsent,) = run_app(data_root, DAY, [("Is it raining?", "No.")], file_name="unsent.otlp.jsonl")
    configure(data_root, phoenix_server.url)
    with dg.instance_for_test() as instance:
        wait_for_spans(phoenix_server, {run["trace_id"] for run in runs})
        materialize(data_root, instance, "traces", DAY)
        materialize(data_root, instance, "judge_scores", key("helpfulness"))
        materialize(data_root, instance, "verdict_exports", key("helpfulness"), ok=False)
    rows = ledger(data_root, "helpfulness")
    refused = rows.filter(pl.col("status") == "failed")
    assert refused["otel_span_id"].to_list() == [unsent["root_span_id"]]
    assert "do not exist" in refused["last_error"][0]
    sent = rows.filter(pl.col("status") == "sent")
    assert sorted(sent["otel_span_id"]) == sorted(run["root_span_id"] for run in runs)
    annotations = phoenix_server.annotations(PROJECT, [run["root_span_id"] for run in runs])
    assert sorted(a["identifier"] for a in annotations) == sorted(sent["verdict_key"])
