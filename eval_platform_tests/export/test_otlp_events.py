"""Verdicts as OpenTelemetry GenAI evaluation events over OTLP/HTTP, received by a real collector (Rotel).

The app is traced with the OpenTelemetry SDK; the platform ingests its spans, judges them (the local judge playing
a provider that echoes the caller's key in its reasoning, a placeholder judge on each chat span, and a judge whose
every call fails), then the `verdict_exports` asset sends the verdicts to the collector. What a user of the
collector would see is checked: one `gen_ai.evaluation.result` event per COMPLETED verdict, on the app's own trace
and judged span, with the verdict's name, score, label and explanation; nothing for FAILED rows or traces that did
not come as OpenTelemetry spans; nothing sent twice; no piece of the key anywhere in what was received; and a
receiver that is down fails the run loudly, changes no verdict, and the next run sends what was missing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.defs.test_no_key_leaks import KEY, KEY_ENV, leak
from eval_platform_tests.export.app import run_app
from eval_platform_tests.postgres_server import free_port

DAY = "2026-11-09"
QUESTIONS = [
    ("What is the capital of France?", "Paris."),
    ("How many legs has a spider?", "Eight."),
    ("Who wrote Hamlet?", "Shakespeare."),
]
EVALUATORS = ("helpfulness", "chat_quality", "always_fails")


def write_project(root: Path, judge_url: str, phoenix_url: str | None = None) -> list[dict]:
    runs = run_app(root, DAY, QUESTIONS, phoenix_url=phoenix_url)
    # A trace exported as JSONL, not as OpenTelemetry spans: judged, but it has no span of the app's to carry it.
    plain = {"trace_id": "plain-1", "timestamp": f"{DAY}T11:00:00Z", "input": "Hi?", "output": "Hello."}
    (root / "traces" / DAY / "plain.jsonl").write_text(json.dumps(plain) + "\n")
    common = {"api_base": judge_url, "max_retries": 0, "timeout_s": 30}
    write_evaluator(
        root,
        "helpfulness",
        mode="score",
        score_scale={"min": 1, "max": 5},
        model="openai/fault/echo_key_reply",  # a valid verdict whose reasoning quotes the caller's key
        api_key_env=KEY_ENV,
        prompt="{{input}} -> {{output}}",
        **common,
    )
    write_evaluator(
        root,
        "chat_quality",
        mode="score",
        score_scale={"min": 0, "max": 1},
        model="openai/mock",
        target="span",
        span={"operation": "chat"},
        prompt="{{input}} -> {{output}}",
        **common,
    )
    write_evaluator(
        root,
        "always_fails",
        mode="score",
        score_scale={"min": 0, "max": 1},
        model="openai/fault/echo_key",  # every call answers 400 quoting the key: FAILED rows
        api_key_env=KEY_ENV,
        prompt="{{input}} -> {{output}}",
        **common,
    )
    return runs


def configure(root: Path, endpoint: str, **fields) -> None:
    destination = {"name": "collector", "type": "otlp", "endpoint": endpoint, **fields}
    (root / "verdict_export.yaml").write_text(yaml.safe_dump({"destinations": [destination]}))


@pytest.fixture
def project(data_root, local_judge, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    runs = write_project(data_root, local_judge.base_url)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, runs, instance


def materialize(root: Path, instance, asset: str, partition, ok: bool = True) -> dg.ExecuteInProcessResult:
    defs = build_definitions(root)  # read again: verdict_export.yaml turns the export on
    result = dg.materialize(
        assets=list(defs.assets),
        selection=[asset],
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )
    assert result.success is ok, result.all_events[-1]
    return result


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    """The messages of the failed step's error and of every error that caused it."""
    data = result.failure_data_for_node("verdict_exports")
    assert data is not None and data.error is not None
    messages, error = [], data.error
    while error is not None:
        messages.append(error.message)
        error = error.cause
    return "\n".join(messages)


def key(evaluator: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"date": DAY, "evaluator": evaluator})


def judge_all(root: Path, instance) -> None:
    materialize(root, instance, "traces", DAY)
    for evaluator in EVALUATORS:
        materialize(root, instance, "judge_scores", key(evaluator))


def export_metadata(result: dg.ExecuteInProcessResult) -> dict:
    (materialization,) = result.asset_materializations_for_node("verdict_exports")
    return materialization.metadata["export"].value


def completed(root: Path, evaluator: str) -> pl.DataFrame:
    rows = read_partition(DataRoot.from_env(root), "judge_scores", {"evaluator": evaluator, "date": DAY})
    return rows.filter(pl.col("is_final") & (pl.col("status") == "COMPLETED"))


def scores_digest(root: Path, evaluators: tuple[str, ...] = EVALUATORS) -> dict[str, str]:
    """Each evaluator's judge_scores partition of the day, every file of it (a day judged in parts has several)."""
    digests = {}
    for evaluator in evaluators:
        digest = hashlib.sha256()
        folder = root / "warehouse" / "judge_scores" / f"evaluator={evaluator}" / f"date={DAY}"
        files = sorted(folder.rglob("*.parquet"))
        assert files, folder
        for path in files:
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
        digests[evaluator] = digest.hexdigest()
    return digests


def test_each_verdict_is_one_evaluation_event_on_the_judged_span_once_and_keyless(project, collector):
    root, runs, instance = project
    judge_all(root, instance)
    configure(root, collector.endpoint)
    results = {evaluator: materialize(root, instance, "verdict_exports", key(evaluator)) for evaluator in EVALUATORS}

    helpfulness, chat_quality = completed(root, "helpfulness"), completed(root, "chat_quality")
    expected = helpfulness.height + chat_quality.height
    assert helpfulness.height == len(QUESTIONS) + 1  # the JSONL trace is judged too
    assert chat_quality.height == len(QUESTIONS)
    records = collector.wait_for(expected)
    assert len(records) == len(QUESTIONS) * 2  # not the JSONL trace's verdict, nothing of the failing judge
    assert {r.event_name for r in records} == {"gen_ai.evaluation.result"}

    by_span = {(r.trace_id, r.span_id, r.attributes["gen_ai.evaluation.name"]): r for r in records}
    assert len(by_span) == len(records)
    reasoning = dict(zip(helpfulness["trace_id"], helpfulness["reasoning"], strict=True))
    score = dict(zip(helpfulness["trace_id"], helpfulness["score"], strict=True))
    for run in runs:
        # the trace-level verdict on the run's root span, the span verdict on its chat span
        on_root = by_span[(run["trace_id"], run["root_span_id"], "Str(helpfulness)")]
        on_chat = by_span[(run["trace_id"], run["chat_span_id"], "Str(chat_quality)")]
        trace_id = on_root.attributes["eval_platform.trace_id"].removeprefix("Str(").removesuffix(")")
        assert on_root.attributes["gen_ai.evaluation.score.value"] == f"Double({score[trace_id]})"
        assert on_root.attributes["gen_ai.evaluation.explanation"] == f"Str({reasoning[trace_id]})"
        assert "gen_ai.evaluation.score.value" in on_chat.attributes

    meta = {evaluator: export_metadata(result) for evaluator, result in results.items()}
    assert meta["helpfulness"]["not_exported"] == {"no_otel_span": 1}
    assert meta["always_fails"]["not_exported"] == {"failed": len(QUESTIONS) + 1}
    assert meta["always_fails"]["destinations"][0]["sent"] == 0

    # Re-materialized verdicts (served from the cache, the same verdicts) and a re-run export: nothing sent again.
    materialize(root, instance, "judge_scores", key("helpfulness"))
    again = export_metadata(materialize(root, instance, "verdict_exports", key("helpfulness")))
    assert again["destinations"] == [
        {"destination": "collector", "sent": 0, "already_sent": len(QUESTIONS), "not_sent": 0, "error": None}
    ]
    assert len(collector.wait_for(expected + 1, timeout_s=3)) == len(records)

    # No piece of the key in anything the collector received (the echoed reasoning was redacted before it was kept).
    assert "request authorised by" in collector.log_text()
    assert leak(collector.log_text()) is None


def test_a_receiver_down_fails_the_run_changes_no_verdict_and_the_next_run_sends_what_is_missing(project, collector):
    root, runs, instance = project
    judge_all(root, instance)
    before = scores_digest(root)
    configure(root, f"http://127.0.0.1:{free_port()}", timeout_s=1)  # nothing listens there

    failed = materialize(root, instance, "verdict_exports", key("helpfulness"), ok=False)
    failure = failure_text(failed)
    assert "destination 'collector'" in failure and "Nothing was lost" in failure
    ledger = read_partition(
        DataRoot.from_env(root),
        "verdict_exports",
        {"destination": "collector", "evaluator": "helpfulness", "date": DAY},
    )
    assert ledger["status"].to_list() == ["failed"] * len(QUESTIONS)
    assert all(ledger["last_error"].str.contains("OTLP/HTTP export to"))
    assert scores_digest(root) == before  # the verdicts are untouched

    configure(root, collector.endpoint)
    meta = export_metadata(materialize(root, instance, "verdict_exports", key("helpfulness")))
    assert meta["destinations"][0]["sent"] == len(QUESTIONS)
    assert len(collector.wait_for(len(QUESTIONS))) == len(QUESTIONS)
    ledger = read_partition(
        DataRoot.from_env(root),
        "verdict_exports",
        {"destination": "collector", "evaluator": "helpfulness", "date": DAY},
    )
    assert ledger["status"].to_list() == ["sent"] * len(QUESTIONS)
    assert ledger["attempts"].to_list() == [2] * len(QUESTIONS)
    assert ledger["last_error"].null_count() == len(QUESTIONS)
    assert scores_digest(root) == before
