"""What every evaluator-day shares, judged or checked: which traces are its and selected, and the day's result.

`judging.runner` (judge evaluators) and `judging.checks` (check evaluators, no model) both build on it, so the
same traces are selected whoever scores them and both report the same summary.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import COMPLETED, DISABLED, FAILED, NOT_SAMPLED, NOT_SELECTED, SKIPPED


def unit_hash(*parts: str) -> float:
    """A stable number in [0, 1) per evaluator and trace: sampling picks the same traces on every rerun."""
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def selection_skip(config: EvaluatorConfig, unit_id: str, manual_trace_ids: set[str]) -> tuple[str, str] | None:
    """Why a trace (pair, group) is not judged, whoever judges it: disabled, not sampled, not named (manual)."""
    if not config.enabled:
        return DISABLED, "the evaluator has enabled: false"
    if config.trigger == "sampled" and unit_hash(config.name, unit_id) >= config.sample_rate:
        return NOT_SAMPLED, f"outside sample_rate {config.sample_rate}"
    if config.trigger == "manual" and unit_id not in manual_trace_ids:
        return NOT_SELECTED, "trigger 'manual' and the trace was not named in the run config"
    return None


def in_projects(config: EvaluatorConfig, traces: pl.DataFrame) -> pl.DataFrame:
    """The traces that are the evaluator's: those of its `projects`, or every trace when it names none. The others
    get no row (they are not this evaluator's, as another day's traces are not this partition's)."""
    if config.projects is None:
        return traces
    if "project_id" not in traces.columns:  # traces of no project: none is the evaluator's
        return traces.clear()
    return traces.filter(pl.col("project_id").is_in(config.projects))


@dataclass
class DayResult:
    rows: pl.DataFrame
    summary: dict[str, Any]


def summarize(rows: pl.DataFrame, traces_in_partition: int) -> dict[str, Any]:
    """Counts per status and reason code, mean score, spend: what the materialization reports."""
    status = Counter(rows["status"].to_list())
    reasons = Counter(
        r for r, s in zip(rows["reason"].to_list(), rows["status"].to_list(), strict=True) if s != COMPLETED
    )
    completed = rows.filter((pl.col("status") == COMPLETED) & pl.col("is_final"))
    return {
        "traces_in_partition": traces_in_partition,
        "rows": rows.height,
        "completed": status.get(COMPLETED, 0),
        "final_rows": int(rows["is_final"].sum()),
        "failed": status.get(FAILED, 0),
        "skipped": status.get(SKIPPED, 0),
        "reasons": dict(sorted(reasons.items())),
        "mean_score": float(completed["score"].mean()) if completed.height else None,
        "cost_usd": float(rows["cost_usd"].fill_null(0).sum()),
        "calls": int(rows["calls"].sum()),
        "cache_hits": int(rows["cache_hit"].sum()),
    }
