"""No piece of an echoed key in the newer outputs: judge drift (`anchor_verdicts`, `judge_drift`), the fine-tuning
export files (`train.jsonl`, `manifest.json`) and embedding calls (a `semantic_similarity` check evaluator's
`judge_scores` rows, a benchmark task scored by it, the cache).

As `test_no_key_leaks` does for the judges and benchmarks: the local judge plays a provider that echoes the
caller's key (in an error long enough that the key straddles any cut, and in the model name a valid reply reports,
on the chat and on the embeddings endpoint); a fresh process materializes traces, judge_scores, judge_drift,
finetune_exports and a benchmark suite on a real Dagster instance in a temporary DAGSTER_HOME; then every file under
the data root and DAGSTER_HOME (Parquet and SQLite cell by cell, JSONL, JSON, compute logs, the cache) and
everything printed is searched for every 8-character piece of the key."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import duckdb
import yaml

from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.defs.test_no_key_leaks import KEY, KEY_ENV, decoded_texts, leak, run_and_capture
from tools.local_judge_wires import WiredJudgeServer

DAY = "2026-11-09"
MODEL = "leaky"

RUN = r"""
import sys
from pathlib import Path

import dagster as dg

from eval_platform.definitions import build_definitions

root, day, model = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
defs = build_definitions(root)
assets = list(defs.assets)
instance = dg.DagsterInstance.get()  # the one DAGSTER_HOME names
instance.add_dynamic_partitions("benchmark_models", [model])


def run(selection, partition=None):
    result = dg.materialize(assets=assets, selection=selection, partition_key=partition, instance=instance,
                            resources=defs.resources, raise_on_error=False)
    print(f"materialized {selection} {partition}: {'ok' if result.success else 'FAILED'}", flush=True)


run(["traces"], day)
evaluators = defs.resolve_assets_def("judge_scores").partitions_def.get_partitions_def_for_dimension("evaluator")
for name in evaluators.get_partition_keys():
    run(["judge_scores"], dg.MultiPartitionKey({"date": day, "evaluator": name}))
run(["judge_drift"])
run(["finetune_exports"], day)
run(dg.AssetSelection.groups("benchmark_leaky_embeddings"), model)
"""


def write_project(root: Path, server: WiredJudgeServer) -> None:
    v1 = server.base_url
    traces = root / "traces" / DAY
    traces.mkdir(parents=True)
    lines = [
        {
            "trace_id": f"t{i}",
            "timestamp": f"{DAY}T10:00:0{i}Z",
            "input": "Why? " * (i + 1),
            "output": "Because it rains." if i % 2 else "Because.",
            "expected_output": "It rains, that is why.",
        }
        for i in range(4)
    ]
    (traces / "export.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))

    anchors = root / "datasets" / "judge_anchors"
    anchors.mkdir(parents=True)
    cases = [
        {
            "case_id": f"a{i}",
            "input": "Rate this. " * (i + 1),
            "expected_output": "3",
            "metadata": {"response": "An answer. " * (i + 1), "out": "It rains." * (i + 1)},
        }
        for i in range(3)
    ]
    (anchors / "v1.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))

    judge = {
        "mode": "score",
        "score_scale": {"min": 1, "max": 5},
        "prompt": "Q: {{input}} A: {{output}}",
        "api_base": v1,
        "api_key_env": KEY_ENV,
        "max_retries": 0,
        "timeout_s": 30,
        "anchors": {"dataset": "judge_anchors", "version": 1, "output": "metadata.response"},
    }
    # The reply parses: its reasoning and reported model quote the key (anchor_verdicts keeps the model); the other
    # answers every anchor with an error quoting it.
    write_evaluator(root, "anchored_reply", name="anchored_reply", model="openai/fault/echo_key_reply", **judge)
    write_evaluator(root, "anchored_error", name="anchored_error", model="openai/fault/echo_key_long", **judge)
    for kind in ("echo_key_reply", "echo_key_long"):
        check = {"scorer": "semantic_similarity", "model": f"openai/fault/{kind}", "api_base": v1}
        check |= {"api_key_env": KEY_ENV, "max_retries": 0, "pass_threshold": 0.0}
        write_evaluator(root, f"similar_{kind}", name=f"similar_{kind}", check=check)

    exports = root / "finetune_exports"
    exports.mkdir()
    export = {
        "description": "answers the echoing judges passed",
        "evaluators": [
            {"evaluator": "anchored_reply", "min_score": 0.0},
            {"evaluator": "similar_echo_key_reply", "verdict": "pass"},
        ],
        "system_prompt": "You answer why.",
    }
    (exports / "echoed.yaml").write_text(yaml.safe_dump(export))

    benchmarks = root / "benchmarks"
    benchmarks.mkdir()
    tasks = {
        f"similar_{kind}": {
            "dataset": "judge_anchors",
            "outputs_from": "metadata.out",
            "max_failed_rate": 1.0,
            "scorers": [
                {
                    "name": "semantic_similarity",
                    "options": {
                        "model": f"openai/fault/{kind}",
                        "api_base": v1,
                        "api_key_env": KEY_ENV,
                        "max_retries": 0,
                    },
                }
            ],
        }
        for kind in ("echo_key_reply", "echo_key_long")
    }
    (benchmarks / "leaky_embeddings.yaml").write_text(yaml.safe_dump({"tasks": tasks}, sort_keys=False))
    models = {MODEL: {"model": "local/mock"}}
    (benchmarks / "models.yaml").write_text(yaml.safe_dump({"models": models}))


def test_no_piece_of_an_echoed_key_in_drift_finetune_exports_or_embeddings(data_root, tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with WiredJudgeServer() as server:
        write_project(data_root, server)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "EVAL_PLATFORM_DATA_DIR": str(data_root),
            "EVAL_PLATFORM_LOCAL_JUDGE_URL": server.base_url,  # serves the suite's local/mock model under test
            KEY_ENV: KEY,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        printed = run_and_capture([sys.executable, "-c", RUN, str(data_root), DAY, MODEL], env)

    assert "FAILED" not in printed and printed.count(": ok") == 1 + 4 + 3, printed
    # Every path ran and the provider did echo on each (redacted): the search below has something to find.
    with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
        anchors = dict(
            conn.execute(
                "SELECT evaluator, count(*) FILTER (WHERE provider_model LIKE '%[REDACTED]%' OR reason LIKE "
                "'provider_error%') FROM anchor_verdicts GROUP BY ALL"
            ).fetchall()
        )
        drift = conn.execute("SELECT count(*) FROM judge_drift").fetchone()[0]
        similar = dict(
            conn.execute(
                "SELECT evaluator, count(*) FILTER (WHERE provider_model LIKE '%[REDACTED]%' OR reason_detail LIKE "
                "'%Authorization: Bearer [REDACTED]%') FROM judge_scores WHERE evaluator LIKE 'similar%' GROUP BY ALL"
            ).fetchall()
        )
        cases = dict(
            conn.execute(
                "SELECT task, count(*) FILTER (WHERE status = 'COMPLETED' OR reason_detail LIKE '%[REDACTED]%') "
                "FROM benchmark_cases GROUP BY ALL"
            ).fetchall()
        )
    assert anchors == {"anchored_reply": 3, "anchored_error": 3} and drift == 2, (anchors, drift)
    assert similar == {"similar_echo_key_reply": 4, "similar_echo_key_long": 4}, similar
    assert cases == {"similar_echo_key_reply": 3, "similar_echo_key_long": 3}, cases
    jsonl = next((data_root / "warehouse").rglob("train.jsonl")).read_text()
    assert len(jsonl.splitlines()) == 4, jsonl  # every trace passed both echoing evaluators: the export has lines

    found = {}
    for folder in (data_root, home):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            where = next(filter(None, map(leak, decoded_texts(path))), None)
            if where:
                found[str(path.relative_to(tmp_path))] = where
    if leak(printed):
        found["printed"] = leak(printed)
    assert not found, "pieces of the key found:\n" + "\n".join(f"{k}: {v}" for k, v in found.items())
