"""Check evaluators: run a scorer from the registry on each trace of a day instead of calling a judge.

The rows are `judge_scores` rows like a judge's (`model` = `check:<scorer>`, role `verdict`, one per trace):
COMPLETED with `score` = the scorer's value (0..1), `raw_score` = what it measured (a count, a rate, ms, USD),
`passed` = value >= pass_threshold and `reasoning` = the finding in words; no call, no tokens, cost 0, no cache,
no budget. A trace the check cannot read is never a 0: SKIPPED `missing_field` (no tool_calls, no output, no
latency_ms ...), `not_applicable` (e.g. a tool error rate over no calls) or `partial_trace`; FAILED
`scorer_error` when its field holds something unreadable. Selection (enabled, trigger, sample_rate) is the
judges' (`runner.selection_skip`), so a sampled check picks the same traces on every rerun. A trace whose
`expected_output` is a list (stored as its JSON text) gives a reference scorer several references, the best
counting, as a suite's case does (`scored_case`).

A check whose scorer compares embeddings (`Scorer.embeds`: semantic_similarity) calls a model: its texts are
embedded first, one request per trace, through the one call path (`scoring.embedding_calls`), under the evaluator's
budgets (`max_daily_cost_usd`, `max_monthly_cost_usd`, in the judges' ledger), and its rows carry the call's tokens,
cost, latency, calls and cache hit as a judge's do. A failed embedding call is FAILED with the call's reason, a
refused reservation SKIPPED budget_exhausted: never a score.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import polars as pl

from eval_platform.ingest.records import reference_value
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import DayResult, selection_skip, summarize
from eval_platform.judging.units import base_row, fill_from_call
from eval_platform.llm.budget import Budget, reservation_ttl_s
from eval_platform.llm.runtime import ModelRuntime
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
from eval_platform.scoring.base import EMBEDDINGS, EmbeddingModelOptions, MissingField, NotApplicable, Scorer
from eval_platform.scoring.embedding_calls import embed_cases

log = logging.getLogger(__name__)


def check_day(
    config: EvaluatorConfig,
    day: str,
    traces: pl.DataFrame,
    manual_trace_ids: set[str],
    judged_at: datetime | None = None,
    runtime: ModelRuntime | None = None,
) -> DayResult:
    """One row per trace of `day`: the check's verdict, or why it has none (`judged_at`: the day's, when its
    traces come in several batches). `runtime` makes the calls of a check that embeds (see the module doc)."""
    judged_at = judged_at or datetime.now(UTC)
    assert config.check is not None  # a check evaluator's day: it has its check
    records, rows = traces.to_dicts(), []
    for trace in records:
        row = base_row(config, day, trace, judged_at)
        row.update(model=config.check.label, role="verdict", is_final=True)
        rows.append(row)
    if config.check.scorer_def.calls_model:
        if runtime is None:
            raise ValueError(f"check '{config.check.label}' embeds texts: it needs a runtime to call its model")
        _embedding_checks(config, records, rows, manual_trace_ids, runtime)
    else:
        for row, trace in zip(rows, records, strict=True):
            row.update(check_trace(config, trace, manual_trace_ids))
    frame = conform(
        pl.DataFrame(rows, schema_overrides=JUDGE_SCORE_SCHEMA, infer_schema_length=None), JUDGE_SCORE_SCHEMA
    )
    return DayResult(frame, summarize(frame, traces.height))


def _skip(config: EvaluatorConfig, trace: dict, manual_trace_ids: set[str]) -> dict | None:
    """Why the check does not read this trace (selection, a partial trace, no final answer), or None."""
    assert config.check is not None  # a check evaluator's day: it has its check
    scorer = config.check.scorer_def
    skipped = selection_skip(config, trace["trace_id"], manual_trace_ids)
    if skipped is None and trace.get("partial_reason"):
        skipped = PARTIAL_TRACE, f"the trace is partial ({trace['partial_reason']}): its counts would be wrong"
    if skipped is None and scorer.reads_output and trace.get("output") is None:
        skipped = MISSING_FIELD, f"scorer '{scorer.name}' reads the trace's output (its final answer): it has none"
    if skipped is None:
        return None
    return {"status": SKIPPED, "reason": skipped[0], "reason_detail": skipped[1]}


def scored_case(trace: dict) -> dict:
    """The trace as a scorer reads it: a list `expected_output` is its accepted answers (each scorer takes the best,
    as in suites), not the list's JSON text as one reference."""
    return {**trace, "expected_output": reference_value(trace.get("expected_output"))}


def _unreadable(scorer: Scorer, exc: ValueError) -> dict:
    """The row of a trace the scorer cannot score (`exc` from its `value`, `describe` or `embeds`)."""
    if isinstance(exc, MissingField):
        return {"status": SKIPPED, "reason": MISSING_FIELD, "reason_detail": str(exc)}
    if isinstance(exc, NotApplicable):
        return {"status": SKIPPED, "reason": NOT_APPLICABLE, "reason_detail": f"{scorer.name}: {exc}"}
    # the field holds something the scorer cannot read (not a JSON list, ...)
    return {"status": FAILED, "reason": SCORER_ERROR, "reason_detail": f"{scorer.name}: {exc}"}


def check_trace(
    config: EvaluatorConfig, trace: dict, manual_trace_ids: set[str], embeddings: list[Any] | None = None
) -> dict:
    """The verdict columns of one trace: status, reason, and when COMPLETED score, raw_score, passed, reasoning.
    `embeddings`: the vectors of the texts a scorer that embeds compares (fetched by `check_day`)."""
    skipped = _skip(config, trace, manual_trace_ids)
    if skipped is not None:
        return skipped
    check = config.check
    assert check is not None  # a check evaluator's day: it has its check
    scorer, options = check.scorer_def, check.scorer_options
    output = trace.get("output") or ""
    case = scored_case(trace) if embeddings is None else {**scored_case(trace), EMBEDDINGS: embeddings}
    try:
        value = scorer.score(output, case, options)
        measured, finding = scorer.describe(output, case, options) if scorer.describe else (value, "")
    except ValueError as exc:  # MissingField and NotApplicable are ValueErrors too
        return _unreadable(scorer, exc)
    passed = value >= check.pass_threshold
    verdict = f"{'passed' if passed else 'failed'}: {scorer.name} {value:.4g} (pass_threshold {check.pass_threshold:g})"
    return {
        "status": COMPLETED,
        "score": float(value),
        "raw_score": float(measured),
        "passed": passed,
        "reasoning": f"{finding}; {verdict}" if finding else verdict,
    }


def _embedding_checks(
    config: EvaluatorConfig, records: list[dict], rows: list[dict], manual_trace_ids: set[str], runtime: ModelRuntime
) -> None:
    """Fill `rows` for a check that embeds: the texts of every trace it reads, embedded concurrently through the one
    call path under the evaluator's budgets, then scored; a call that did not complete is the row's outcome."""
    check = config.check
    assert check is not None  # a check evaluator's day: it has its check
    scorer, options = check.scorer_def, check.scorer_options
    # `check_day` came here for a scorer that embeds (`calls_model`), which takes EmbeddingModelOptions
    assert scorer.embeds is not None and isinstance(options, EmbeddingModelOptions)
    pending: dict[int, tuple[str, ...]] = {}
    for i, (row, trace) in enumerate(zip(rows, records, strict=True)):
        skipped = _skip(config, trace, manual_trace_ids)
        if skipped is not None:
            row.update(skipped)
            continue
        missing = [name for name in scorer.needs(options) if trace.get(name) is None]
        try:
            if missing:
                raise MissingField(f"scorer '{scorer.name}' needs field(s) {missing}, absent in this trace")
            pending[i] = scorer.embeds(trace.get("output") or "", scored_case(trace), options)
        except ValueError as exc:
            row.update(_unreadable(scorer, exc))
    budget = None
    limits = (config.max_daily_cost_usd, config.max_monthly_cost_usd)
    if any(limit is not None for limit in limits):
        budget = Budget(runtime.ledger, config.name, *limits, reservation_ttl_s(options.timeout_s, options.max_retries))
    results, cache_failure = embed_cases(options, list(pending.values()), runtime, budget)
    if cache_failure is not None:
        # the rows stand (the calls are paid for); the next run pays for these embeddings again
        log.warning(f"evaluator {config.name}: the cache could not keep this batch's embeddings: {cache_failure}")
    for i, result in zip(pending, results, strict=True):
        if result is None:  # nothing to embed (an empty output): scored without a call
            rows[i].update(check_trace(config, records[i], manual_trace_ids, []))
            continue
        fill_from_call(config, rows[i], replace(result, verdict=None))  # tokens, cost, calls, status, reason
        if result.status == COMPLETED:
            rows[i].update(check_trace(config, records[i], manual_trace_ids, result.verdict))
