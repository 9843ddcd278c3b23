"""A day of OTLP files as they arrive costs what the new file touches (issue 34, "Incremental by construction"): the
real `traces` and `judge_scores` assets on a real Dagster instance, the real recordings of agent frameworks split
into files as an exporter rotating its file would write them (spans of one trace over two files, its root in the
later one), real Parquet parts, the local judge over HTTP (its request count is what the provider was asked)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
import polars as pl

from eval_platform.judging.increments import trace_digests
from eval_platform.storage.location import DataRoot
from eval_platform.storage.parts import parts
from eval_platform.storage.warehouse import quarantine_keys, read_partition
from eval_platform_tests.conftest import judge_requests
from eval_platform_tests.defs.test_incremental_days import DAY, _ingest, _run, _view, write_helpful
from eval_platform_tests.defs.test_incremental_days import project as project  # the fixture

FIXTURES = Path(__file__).parents[1] / "fixtures" / "otel"
RECORDINGS = [
    ("genai", "traces.jsonl"),
    ("genai", "logs.jsonl"),
    ("openai_agents", "traces.jsonl"),
    ("langfuse", "traces.jsonl"),
]
LINES_PER_FILE = 3  # export requests per file: a trace's spans leave in batches as they end, its root last


def _files() -> list[list[str]]:
    lines = [line for folder, name in RECORDINGS for line in (FIXTURES / folder / name).read_text().splitlines()]
    return [lines[at : at + LINES_PER_FILE] for at in range(0, len(lines), LINES_PER_FILE)]


def _put(root: Path, k: int, lines: list[str]) -> str:
    path = root / "traces" / DAY / f"export-{k:02d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    then = time.time() - 120  # settled: written two minutes ago
    os.utime(path, (then, then))
    return path.relative_to(root).as_posix()


def _judge(root: Path, instance) -> dict:
    """Judge the day; the run's materialization metadata."""
    result = _run(root, instance, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": "helpful"}))
    assert result.success
    (event,) = result.get_asset_materialization_events()
    return {key: value.value for key, value in event.materialization.metadata.items()}


def _traces(root: Path) -> pl.DataFrame:
    found = read_partition(DataRoot.local(root), "traces", {"date": DAY})
    assert found is not None
    return found.sort("trace_id")


def _quarantine(root: Path) -> list[tuple]:
    found = read_partition(DataRoot.local(root), "quarantine", quarantine_keys("traces", DAY))
    if found is None:
        return []
    return sorted(found.select("file", "line", "reason", "detail", "raw").rows())


def _scores(root: Path) -> pl.DataFrame:
    found = read_partition(DataRoot.local(root), "judge_scores", {"evaluator": "helpful", "date": DAY})
    assert found is not None
    return found.sort("trace_id")


def _one_run(root: Path, tmp_path: Path, monkeypatch, judge) -> Path:
    """The same files of the day in a new data root, ingested and judged in one run each."""
    other = tmp_path / "one_run"
    (other / "evaluators").mkdir(parents=True)
    write_helpful(other, judge)
    for path in (root / "traces" / DAY).iterdir():
        target = other / "traces" / DAY / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    monkeypatch.setenv("EVAL_PLATFORM_DATA_DIR", str(other))
    (tmp_path / "home2").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home2")) as fresh:
        _ingest(other, fresh)
        _judge(other, fresh)
    return other


VERDICT = ["trace_id", "status", "score", "reasoning", "config_hash"]


def test_otlp_files_one_at_a_time_give_the_rows_of_one_run(project, tmp_path, monkeypatch):
    root, instance, judge = project
    waited = set()  # the traces seen waiting for their root (awaiting_root) after an arrival
    for k, lines in enumerate(_files()):
        _put(root, k, lines)
        _ingest(root, instance)
        _judge(root, instance)
        waited |= {
            detail.split("trace ")[1][:32] for _, _, reason, detail, _ in _quarantine(root) if reason == "awaiting_root"
        }
    final = _traces(root)
    late_roots = waited & set(final["trace_id"])
    assert late_roots  # the scenario: spans of a trace in one file, its root in a later one
    assert _quarantine(root) == []  # every root arrived: nothing waits any more

    other = _one_run(root, tmp_path, monkeypatch, judge)
    assert final.equals(_traces(other))
    assert _quarantine(other) == []
    assert _scores(root).select(VERDICT).equals(_scores(other).select(VERDICT))
    assert _view(root, "SELECT count(*), count(DISTINCT trace_id) FROM traces") == [(final.height, final.height)]
    assert _view(root, "SELECT count(*), count(DISTINCT trace_id) FROM judge_scores") == [(final.height,) * 2]


def test_an_otlp_arrival_reads_and_judges_only_the_traces_it_touches(project):
    root, instance, judge = project
    files = _files()
    last = len(files) - 1
    for k in range(last):
        _put(root, k, files[k])
    _ingest(root, instance)
    _judge(root, instance)
    before_traces, before_scores = _traces(root), _scores(root)
    written = {
        p.name: p.metadata["written"] for p in (parts(DataRoot.local(root), "traces", {"date": DAY}) or {}).values()
    }

    new = _put(root, last, files[last])
    assert _ingest(root, instance) == [new]  # the day's other files are not read again
    after_traces = _traces(root)
    before, after = trace_digests(before_traces), trace_digests(after_traces)
    changed = [trace for trace, digest in after.items() if before.get(trace) != digest]  # new, or a new span
    assert 0 < len(changed) < after_traces.height
    rewritten = [
        name
        for name, p in (parts(DataRoot.local(root), "traces", {"date": DAY}) or {}).items()
        if written.get(name) != p.metadata["written"]
    ]
    assert len(rewritten) < len(written)  # the parts of files holding none of its traces are not rewritten

    asked = judge_requests(judge)
    run = _judge(root, instance)
    # the new or changed traces alone are planned (a changed trace whose prompt is the same is a cache hit)
    # the new or changed traces alone are planned (asked, or answered by the judge-call cache when their prompt
    # was asked before, or skipped), the others' rows kept
    assert run["rows"] - run["rows_kept"] == len(changed) and run["parts_judged"] < len(written)
    assert run["calls"] == judge_requests(judge) - asked
    after_scores = _scores(root)
    untouched = before_scores.filter(~pl.col("trace_id").is_in(changed))
    assert untouched.height and after_scores.filter(~pl.col("trace_id").is_in(changed)).equals(untouched)  # judged_at


def test_an_otlp_arrival_killed_mid_way_leaves_no_row_twice_and_the_next_run_completes(project, tmp_path, monkeypatch):
    from eval_platform.ingest import otlp_increments

    root, instance, judge = project
    files = _files()
    for k, lines in enumerate(files):  # until spans wait for a root that a later file brings
        _put(root, k, lines)
        _ingest(root, instance)
        if any(reason == "awaiting_root" for _, _, reason, _, _ in _quarantine(root)):
            break
    _put(root, k + 1, files[k + 1])

    original = otlp_increments.write_part
    calls = {"n": 0}

    def killed(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("no space left on device, while writing the second part")
        return original(*args, **kwargs)

    monkeypatch.setattr(otlp_increments, "write_part", killed)
    assert not _run(root, instance, "traces", DAY).success
    assert calls["n"] == 2
    monkeypatch.setattr(otlp_increments, "write_part", original)
    (total, distinct) = _view(root, "SELECT count(*), count(DISTINCT trace_id) FROM traces")[0]
    assert total == distinct  # rows missing maybe, never one twice

    _ingest(root, instance)
    for later in range(k + 2, len(files)):
        _put(root, later, files[later])
    _ingest(root, instance)
    _judge(root, instance)
    other = _one_run(root, tmp_path, monkeypatch, judge)
    assert _traces(root).equals(_traces(other))
    assert _quarantine(root) == _quarantine(other)
    assert _scores(root).select(VERDICT).equals(_scores(other).select(VERDICT))
