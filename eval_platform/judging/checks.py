"""Check evaluators: run a scorer from the registry on each trace of a day instead of calling a judge.

The rows are `judge_scores` rows like a judge's (`model` = `check:<scorer>`, role `verdict`, one per trace):
COMPLETED with `score` = the scorer's value (0..1), `raw_score` = what it measured (a count, a rate, ms, USD),
`passed` = value >= pass_threshold and `reasoning` = the finding in words; no call, no tokens, cost 0, no cache,
no budget. A trace the check cannot read is never a 0: SKIPPED `missing_field` (no tool_calls, no output, no
latency_ms ...), `not_applicable` (e.g. a tool error rate over no calls) or `partial_trace`; FAILED
`scorer_error` when its field holds something unreadable. Selection (enabled, trigger, sample_rate) is the
judges' (`runner.selection_skip`), so a sampled check picks the same traces on every rerun.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import DayResult, selection_skip, summarize
from eval_platform.judging.units import base_row
from eval_platform.schemas import (
    COMPLETED,
    FAILED,
    JUDGE_SCORE_SCHEMA,
    MISSING_FIELD,
    NOT_APPLICABLE,
    PARTIAL_TRACE,
    SCORER_ERROR,
    SKIPPED,
    conform,
)
from eval_platform.scoring.base import MissingField, NotApplicable


def check_day(
    config: EvaluatorConfig,
    day: str,
    traces: pl.DataFrame,
    manual_trace_ids: set[str],
    judged_at: datetime | None = None,
) -> DayResult:
    """One row per trace of `day`: the check's verdict, or why it has none (`judged_at`: the day's, when its
    traces come in several batches)."""
    judged_at = judged_at or datetime.now(UTC)
    rows = []
    for trace in traces.iter_rows(named=True):
        row = base_row(config, day, trace, judged_at)
        row.update(model=config.check.label, role="verdict", is_final=True)
        row.update(check_trace(config, trace, manual_trace_ids))
        rows.append(row)
    frame = conform(
        pl.DataFrame(rows, schema_overrides=JUDGE_SCORE_SCHEMA, infer_schema_length=None), JUDGE_SCORE_SCHEMA
    )
    return DayResult(frame, summarize(frame, traces.height))


def check_trace(config: EvaluatorConfig, trace: dict, manual_trace_ids: set[str]) -> dict:
    """The verdict columns of one trace: status, reason, and when COMPLETED score, raw_score, passed, reasoning."""
    check = config.check
    scorer, options = check.scorer_def, check.scorer_options
    skipped = selection_skip(config, trace["trace_id"], manual_trace_ids)
    if skipped is None and trace.get("partial_reason"):
        skipped = PARTIAL_TRACE, f"the trace is partial ({trace['partial_reason']}): its counts would be wrong"
    if skipped is None and scorer.reads_output and trace.get("output") is None:
        skipped = MISSING_FIELD, f"scorer '{scorer.name}' reads the trace's output (its final answer): it has none"
    if skipped is not None:
        return {"status": SKIPPED, "reason": skipped[0], "reason_detail": skipped[1]}
    output = trace.get("output") or ""
    try:
        value = scorer.score(output, trace, options)
        measured, finding = scorer.describe(output, trace, options) if scorer.describe else (value, "")
    except MissingField as exc:
        return {"status": SKIPPED, "reason": MISSING_FIELD, "reason_detail": str(exc)}
    except NotApplicable as exc:
        return {"status": SKIPPED, "reason": NOT_APPLICABLE, "reason_detail": f"{scorer.name}: {exc}"}
    except ValueError as exc:  # the field holds something the scorer cannot read (not a JSON list, ...)
        return {"status": FAILED, "reason": SCORER_ERROR, "reason_detail": f"{scorer.name}: {exc}"}
    passed = value >= check.pass_threshold
    verdict = f"{'passed' if passed else 'failed'}: {scorer.name} {value:.4g} (pass_threshold {check.pass_threshold:g})"
    return {
        "status": COMPLETED,
        "score": float(value),
        "raw_score": float(measured),
        "passed": passed,
        "reasoning": f"{finding}; {verdict}" if finding else verdict,
    }
