"""One day of every fine-tuning export: read the day's traces and verdicts, write each export's JSONL.

Files: `<warehouse>/finetune_exports/export=<name>/date=<day>/train.jsonl` (the examples, in trace timestamp
order) and `manifest.json` beside it (the filter, the counts, and the trace of each line), each written whole
(`storage.warehouse.write_file`: a temporary file renamed on local disk, one put on a bucket). Re-materializing a
day replaces both; a day with no passing trace writes an empty JSONL, so an earlier day's lines never linger.
"""

from __future__ import annotations

import json

import polars as pl

from eval_platform.finetune.config import FinetuneExport
from eval_platform.finetune.export import ExportDay, export_day
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, TRACE_SCHEMA, conform, empty_frame
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition, write_file

TABLE = "finetune_exports"
JSONL_NAME, MANIFEST_NAME = "train.jsonl", "manifest.json"


def export_keys(name: str, day: str) -> dict[str, str]:
    return {"export": name, "date": day}


def _day_scores(root: DataRoot, day: str, evaluators: set[str]) -> tuple[pl.DataFrame, list[str]]:
    """The day's judge_scores rows of `evaluators`, and the evaluators with no partition for the day."""
    frames, missing = [], []
    for name in sorted(evaluators):
        frame = read_partition(root, "judge_scores", {"evaluator": name, "date": day})
        if frame is None:
            missing.append(name)
        else:
            frames.append(conform(frame, JUDGE_SCORE_SCHEMA))
    return (pl.concat(frames) if frames else empty_frame(JUDGE_SCORE_SCHEMA)), missing


def manifest(export: FinetuneExport, day: str, result: ExportDay, unscored: list[str]) -> dict:
    return {
        "export": export.name,
        "date": day,
        "filter": export.filter_metadata(),
        "traces_considered": result.considered,
        "traces_passed": result.passed,
        "excluded_by_reason": result.excluded,
        "evaluators_not_scored_that_day": unscored,
        "trace_ids": result.trace_ids,  # line i of the JSONL is trace_ids[i]
    }


def run_day(root: DataRoot, day: str, exports: dict[str, FinetuneExport]) -> dict[str, dict]:
    """Write every export's files for `day`; returns each export's manifest (without its trace ids) and path."""
    traces = read_partition(root, "traces", {"date": day})
    if traces is None:
        raise FileNotFoundError(f"traces of {day} are not materialized: materialize traces for {day} first")
    traces = conform(traces, TRACE_SCHEMA)
    wanted = {t.evaluator for export in exports.values() for t in export.evaluators}
    scores, missing = _day_scores(root, day, wanted)
    done = {}
    for name, export in sorted(exports.items()):
        result = export_day(export, traces, scores)
        unscored = sorted(set(missing) & {t.evaluator for t in export.evaluators})
        summary = manifest(export, day, result, unscored)
        keys = export_keys(name, day)
        path = write_file(root, TABLE, keys, JSONL_NAME, result.jsonl())
        # Each file is replaced whole; a crash between the two leaves the previous run's manifest until the rerun.
        write_file(root, TABLE, keys, MANIFEST_NAME, json.dumps(summary, indent=2).encode())
        done[name] = {**{k: v for k, v in summary.items() if k != "trace_ids"}, "path": str(path)}
    return done
