"""Judge one day of traces with one evaluator: selection, calls, cache, budget, and one status per row.

Framework-free: the `judge_scores` asset calls `judge_day` and writes what it returns. A unit is a trace, a
pair or a group, as the evaluator's mode plans them (`JudgeMode.units`, see `judging.units`). Every unit gets
one row per slot (trace, pair or candidate) and member (model x sample) with status COMPLETED, FAILED
(reason and raw reply kept, never a score) or SKIPPED (reason). With several members a `consensus` row
per slot combines them (see `consensus`); `role <> 'member'` selects the one final row per slot.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import polars as pl

from eval_platform.judging.checks import check_day
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.consensus import consensus_row
from eval_platform.judging.day import DayResult, in_projects, selection_skip, summarize
from eval_platform.judging.parsing import ParseFailure, Verdict, parse_reply
from eval_platform.judging.prompts import PromptBuilder, candidates_text
from eval_platform.judging.targets import plan_units, trace_skip, trace_values
from eval_platform.judging.units import Day, Unit
from eval_platform.llm.batch.mode import judge_day_in_batch
from eval_platform.llm.budget import Budget, reservation_ttl_s
from eval_platform.llm.call import CallResult, ModelCaller, ReplyRejected
from eval_platform.llm.endpoint import Endpoint, evaluator_endpoint
from eval_platform.llm.runtime import JudgeRuntime, run_calls
from eval_platform.schemas import (
    JUDGE_SCORE_SCHEMA,
    NO_CREDENTIALS,
    PROMPT_TOO_LARGE,
    SKIPPED,
    conform,
)


class _Judge:
    """One evaluator model's calls: its prompts through the one call path (`llm.call`), replies parsed as
    verdicts of the evaluator's mode."""

    def __init__(self, config: EvaluatorConfig, endpoint: Endpoint, runtime: JudgeRuntime):
        self.config = config
        limits = (config.max_daily_cost_usd, config.max_monthly_cost_usd)
        budget = None
        if any(limit is not None for limit in limits):
            ttl_s = reservation_ttl_s(config.timeout_s, config.max_retries)
            budget = Budget(runtime.ledger, config.name, *limits, ttl_s)
        # Every key this evaluator may send: its models' api_key_env values.
        names = {spec.api_key_env for spec in config.judge_models() if spec.api_key_env}
        self.caller = ModelCaller(runtime, endpoint, budget=budget, key_envs=names)

    async def call(
        self, messages: list[dict[str, str]], sample: int, n_candidates: int | None = None
    ) -> CallResult[Verdict]:
        config = self.config
        size = sum(len(m["content"]) for m in messages)
        if size > config.max_prompt_chars:
            # A 5 MB output is not sent blindly: the trace stays whole in `traces`, this verdict is SKIPPED.
            detail = f"the prompt is {size:,} characters, over max_prompt_chars {config.max_prompt_chars:,}"
            return CallResult(status=SKIPPED, reason=PROMPT_TOO_LARGE, detail=detail, cost_usd=0.0)

        def parse(content: str) -> Verdict:
            try:
                return parse_reply(config, content, n_candidates)
            except ParseFailure as failure:
                raise ReplyRejected(failure.reason, failure.detail) from failure

        request = self.caller.request(
            messages,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout_s=config.timeout_s,
            max_retries=config.max_retries,
        )
        return await self.caller.call(request, sample, parse)


def _no_credentials_detail(config: EvaluatorConfig) -> str:
    names = sorted({spec.api_key_env for spec in config.judge_models() if spec.api_key_env})
    return f"{' / '.join(names) or 'the key variable'} not set and no local judge configured"


@dataclass(frozen=True)
class _Member:
    label: str  # what rows show in `model`
    judge: _Judge | None  # None: the model's key is missing and no local judge is configured
    sample: int


def judge_day(
    config: EvaluatorConfig,
    day: str,
    traces: pl.DataFrame,
    runtime: JudgeRuntime,
    manual_trace_ids: set[str] | None = None,
) -> DayResult:
    """Judge every selected trace (pair, group) of `day` (of the evaluator's `projects`); every slot ends with exactly
    one status per member."""
    manual = manual_trace_ids or set()
    traces = in_projects(config, traces)
    if config.check is not None:
        # A check evaluator runs a scorer on each trace: no model, call, cache or budget (judging.checks).
        return check_day(config, day, traces, manual)

    def judge_pass(runtime: JudgeRuntime) -> DayResult:
        return run_calls(_judge_day_closing(config, day, traces, runtime, manual))

    if config.batched and runtime.batch is None:
        # Batch mode runs this same pass twice: recording the calls, then answering them from the batches.
        return judge_day_in_batch(config, day, runtime, judge_pass)
    return judge_pass(runtime)


async def _judge_day_closing(config, day, traces, runtime, manual_trace_ids) -> DayResult:
    try:
        with _calls_gc():
            result = await _judge_day(config, day, traces, runtime, manual_trace_ids)
    finally:
        # The day's event loop ends here: its HTTP sessions close with it, and cache writes land.
        close = getattr(runtime.client, "aclose", None)
        if close is not None:
            await close()
        # The replies are paid for: a cache that cannot keep them costs no row.
        cache_failure = runtime.cache.flush_or_report()
    if cache_failure is not None:
        # Reported with the rows: the next run pays for these calls again instead of finding them cached.
        result.summary["cache_write_failed"] = cache_failure
    return result


async def _judge_day(config, day, traces, runtime, manual_trace_ids) -> DayResult:
    judged_at = datetime.now(UTC)
    records = traces.to_dicts()
    members = []
    for spec in config.judge_models():
        endpoint = evaluator_endpoint(config, spec, runtime)
        judge = _Judge(config, endpoint, runtime) if endpoint else None
        members.extend(_Member(endpoint.label if endpoint else spec.model, judge, s) for s in range(config.samples))
    several = len(members) > 1
    final_label = f"consensus:{config.consensus}" if several else members[0].label
    final_role = "consensus" if several else "verdict"

    def skip_reason(unit_id: str) -> tuple[str, str | None] | None:
        selection = selection_skip(config, unit_id, manual_trace_ids)
        if selection:
            return selection
        if all(member.judge is None for member in members):
            return NO_CREDENTIALS, _no_credentials_detail(config)
        return None

    async def member_rows(unit: Unit, member: _Member) -> list[dict]:
        if member.judge is None:
            detail = _no_credentials_detail(config)
            rows = [
                {**slot, "status": SKIPPED, "reason": NO_CREDENTIALS, "reason_detail": detail} for slot in unit.slots
            ]
        else:
            rows = await unit.judge(member.judge, member.sample)
        for row in rows:
            row.update(model=member.label, sample=member.sample, role="member" if several else "verdict")
        return rows

    async def run(unit: Unit) -> list[dict]:
        skipped = unit.skip or skip_reason(unit.unit_id)
        if skipped:
            code, detail = skipped
            return [
                {
                    **slot,
                    "model": final_label,
                    "role": final_role,
                    "status": SKIPPED,
                    "reason": code,
                    "reason_detail": detail,
                }
                for slot in unit.slots
            ]
        if not several:  # one member: awaited in this task (a task per call is event-loop work for nothing)
            return await member_rows(unit, members[0])
        per_member = await asyncio.gather(*(member_rows(unit, m) for m in members))
        rows = [row for group in per_member for row in group]
        for i, slot in enumerate(unit.slots):
            votes = [group[i] for group in per_member]
            final = {**slot, "model": final_label, "role": "consensus", "sample": None}
            rows.append(consensus_row(config, final, votes))
        return rows

    plan = Day(
        config,
        day,
        records,
        judged_at,
        values=partial(
            trace_values,
            span=config.span,
            conversation_last_n=config.conversation_last_n,
            context_from=config.context_from,
        ),
        messages=PromptBuilder(config),
        candidates=candidates_text,
        skip=partial(trace_skip, config),
    )
    units = plan_units(plan)
    rows = [row for group in await asyncio.gather(*(run(u) for u in units)) for row in group]
    for row in rows:
        row["is_final"] = row["role"] != "member"
    frame = conform(
        pl.DataFrame(rows, schema_overrides=JUDGE_SCORE_SCHEMA, infer_schema_length=None), JUDGE_SCORE_SCHEMA
    )
    # A session partition reads earlier days too (`targets.session_window`); it counts the day's own traces.
    in_partition = sum(r.get("date") == day for r in records) if config.judged_target == "session" else len(records)
    return DayResult(frame, summarize(frame, in_partition))


# A day allocates objects quickly (traces, prompts, requests, replies, rows, futures: hundreds of calls a second),
# and each full collection of the cyclic garbage collector walks every object of the process (the loaded modules,
# the day's traces and prompts): measured, ~0.1 ms of CPU per call at concurrency 128, a fifth of the judge path.
# While a day is judged, what existed before it is frozen (`gc.freeze`: kept out of collections, not collected
# until it is unfrozen) and the youngest generation collects every CALLS_GC_THRESHOLD allocations instead of 700;
# both are restored when the last running day ends. Cyclic garbage is still collected, later.
CALLS_GC_THRESHOLD = 10_000
_gc_lock = threading.Lock()
_gc_users = 0
_gc_threshold: tuple[int, int, int] | None = None


@contextmanager
def _calls_gc() -> Iterator[None]:
    global _gc_users, _gc_threshold
    with _gc_lock:
        if _gc_users == 0:
            _gc_threshold = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(CALLS_GC_THRESHOLD, _gc_threshold[0]), *_gc_threshold[1:])
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_threshold is not None:
                gc.set_threshold(*_gc_threshold)
                gc.unfreeze()
