"""Judge a day whose traces are made of parts a part at a time: only new or changed traces are planned and called.

A day is ingested in parts, one per file (flat files: `ingest/increments.py`; OTLP files, whose rewritten parts are
those holding the traces an arrival touched: `ingest/otlp_increments.py`); its `judge_scores` partition then
mirrors them, one judge part per traces part (same `src=<name>`, `storage/parts.py`). Each judge part records in its
footer the evaluator's `config_hash`, the traces part's write it judged (`traces_written`), how many of that part's
traces are the evaluator's (`traces`) and each trace's content digest (`digests`). A run:

- removes the judge parts whose traces part is gone (first: removing comes before adding);
- keeps as they are the judge parts whose traces part and config_hash are the ones they judged (nothing read);
- for a traces part that is new or rewritten, keeps byte for byte the rows of its traces whose content digest is
  unchanged (their `judged_at` too) and judges the others, all changed parts' traces in one `judge_stream`;
- a changed config_hash re-judges every part (none is kept), as judging the day whole would;
- a new or changed trace not complete at `now` (`judging/completion.py`: a span-made trace within its quiet
  period) waits: no row, no digest, its part's `waiting` counts it, and the part is read again by the next run
  (the one `judge_waiting_traces_sensor` requests once it is due), as judging the day whole would.

The day's metadata still describes the whole day: its tally (counts, FAILED rate, verdicts, preview) is counted
over every part's rows, without their raw replies; `calls`, `cache_hits` and `cost_usd` are this run's (what it
asked and paid), `rows_kept` the rows kept from earlier runs.

Modes that need the whole day stay on the whole-day path (`evaluator_day.judge_partition`), and `judge_in_parts`
returns None for them: a grouped mode (pairwise, n_wise: a group spans files), the session target, batch mode (two
passes over the day), trigger `manual` (the traces named change with each run), a reference dataset (its version
changes the prompts), check evaluators (no call to spare), and a day whose traces are not in parts (ingested
before parts).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime

import polars as pl

from eval_platform.judging.completion import Completion, Waiting
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import DayTally, in_projects
from eval_platform.judging.evaluator_day import JudgedPartition, group_key
from eval_platform.judging.history import keep_superseded
from eval_platform.judging.runner import judge_stream
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.parts import Part, parts, read_part, remove_part, write_part
from eval_platform.storage.warehouse import partition_path, read_partition

TABLE = "judge_scores"
# What the day's tally reads of every row: all but the raw replies (the largest column, which no count uses).
TALLY_COLUMNS = [name for name in JUDGE_SCORE_SCHEMA if name != "raw_response"]


def judged_in_parts(evaluator: EvaluatorConfig) -> bool:
    """Whether the evaluator's day can be judged a part at a time (module docstring)."""
    reference = evaluator.reference
    return (
        evaluator.check is None
        and not evaluator.batched
        and evaluator.judged_target in ("trace", "span")
        and group_key(evaluator) is None
        and evaluator.trigger != "manual"
        and (reference is None or reference.source != "dataset")
    )


def trace_digests(traces: pl.DataFrame) -> dict[str, str]:
    """Each trace's content digest: every column of its row (a changed output, a new span, another project)."""
    return {
        row["trace_id"]: hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()[:20]
        for row in traces.iter_rows(named=True)
    }


def _current(judged: Part | None, traces: Part, config_hash: str) -> bool:
    return (
        judged is not None
        and judged.metadata.get("config_hash") == config_hash
        and judged.metadata.get("traces_written") == traces.metadata.get("written")
        and judged.metadata.get("waiting", "0") == "0"
    )


def judge_in_parts(
    root: DataRoot,
    evaluator: EvaluatorConfig,
    day: str,
    runtime: ModelRuntime,
    trace_ids: set[str],
    now: datetime | None = None,
) -> JudgedPartition | None:
    """Judge the new or changed traces of `day` (module docstring); None, with nothing written, when the evaluator
    or the day is for the whole-day path."""
    if not judged_in_parts(evaluator) or trace_ids:
        return None
    tkeys, jkeys = {"date": day}, {"evaluator": evaluator.name, "date": day}
    traces_parts = parts(root, "traces", tkeys)
    if not traces_parts:
        return None
    config_hash = evaluator.config_hash
    judged = parts(root, TABLE, jkeys) or {}
    for name in sorted(set(judged) - set(traces_parts)):
        remove_part(root, TABLE, jkeys, name)
    todo = [name for name, part in sorted(traces_parts.items()) if not _current(judged.get(name), part, config_hash)]
    if todo:
        keep_superseded(root, evaluator.name, day, config_hash)  # a changed configuration's verdicts kept first

    kept: dict[str, pl.DataFrame | None] = {}
    digests: dict[str, dict[str, str]] = {}
    counts: dict[str, int] = {}
    held: dict[str, int] = {}  # each part's traces waiting for completion (no row, no digest: judged once due)
    owner: dict[str, str] = {}
    completion = Completion(root.path, evaluator, day, now)
    waiting = Waiting()

    def batches() -> Iterator[pl.DataFrame]:
        """The traces to judge, a part at a time as `judge_stream` takes them (the day is never held)."""
        for name in todo:
            traces = read_part(root, "traces", tkeys, name)
            traces = in_projects(evaluator, traces if traces is not None else pl.DataFrame())
            digests[name] = trace_digests(traces)
            counts[name] = traces.height
            before = judged.get(name)
            same: set[str] = set()
            if before is not None and before.metadata.get("config_hash") == config_hash:
                earlier = json.loads(before.metadata.get("digests", "{}"))
                same = {trace for trace, digest in digests[name].items() if earlier.get(trace) == digest}
            rows = read_part(root, TABLE, jkeys, name) if same else None
            kept[name] = rows.filter(pl.col("trace_id").is_in(list(same))) if rows is not None else None
            fresh = traces.filter(~pl.col("trace_id").is_in(list(same))) if same else traces
            mine = Waiting()
            due = [batch for batch in completion.hold_back([fresh], None, mine) if batch.height]
            fresh = pl.concat(due) if due else fresh.clear()
            held[name] = traces.height - len(same) - fresh.height
            if mine.traces and mine.complete_at is not None:
                waiting.add(mine.traces, mine.complete_at)
            if held[name]:
                judged_now = same | set(fresh["trace_id"].to_list())
                digests[name] = {trace: d for trace, d in digests[name].items() if trace in judged_now}
                counts[name] = len(judged_now)
            owner.update(dict.fromkeys(fresh["trace_id"].to_list(), name))
            if fresh.height:
                yield fresh

    frames: list[pl.DataFrame] = []
    outcome = judge_stream(evaluator, day, batches(), runtime, set(), frames.append)
    new_rows = pl.concat(frames) if frames else conform(pl.DataFrame(schema=JUDGE_SCORE_SCHEMA), JUDGE_SCORE_SCHEMA)
    by_part = new_rows.with_columns(pl.col("trace_id").replace_strict(owner, default=None).alias("_part"))
    rows_kept = 0
    for name in todo:
        mine = by_part.filter(pl.col("_part") == name).drop("_part")
        earlier_rows = kept[name]
        if earlier_rows is not None:
            rows_kept += earlier_rows.height
            mine = pl.concat([conform(earlier_rows, JUDGE_SCORE_SCHEMA), mine])
        metadata = {
            "config_hash": config_hash,
            "traces_written": traces_parts[name].metadata.get("written", ""),
            "traces": str(counts[name]),
            "digests": json.dumps(digests[name], sort_keys=True),
            "waiting": str(held.get(name, 0)),
        }
        write_part(root, TABLE, jkeys, name, mine, JUDGE_SCORE_SCHEMA, metadata)
    rows_kept += sum(part.rows for name, part in judged.items() if name in traces_parts and name not in todo)

    # the whole day's tally, over every part's rows (the parts just written and those kept)
    tally = DayTally()
    everything = read_partition(root, TABLE, jkeys, columns=TALLY_COLUMNS)
    if everything is not None and everything.height:
        tally.add(everything)
    judge_parts = parts(root, TABLE, jkeys) or {}
    in_partition = sum(int(part.metadata.get("traces", "0")) for part in judge_parts.values())
    summary = tally.summary(in_partition + waiting.traces)
    summary.update(waiting.summary())
    run = outcome.summary
    summary.update(calls=run["calls"], cache_hits=run["cache_hits"], cost_usd=run["cost_usd"])
    summary["rows_kept"] = rows_kept
    summary["parts_judged"] = len(todo)
    for extra in ("unreachable_models", "budget_wait", "cache_write_failed"):
        if extra in run:
            summary[extra] = run[extra]
    path = partition_path(root, TABLE, jkeys)
    return JudgedPartition(root, evaluator, day, summary, path, outcome.traces_without_a_row, tally)
