"""Judge one day of traces with one evaluator: selection, calls, cache, budget, and one status per row.

Framework-free: the `judge_scores` asset judges a day with `judge_stream` (the day's traces in batches, its rows
handed on in chunks as they are ready, see `evaluator_day`); `judge_day` is the same with the day and its rows in
memory (the dry run, the demo, benchmark suites, tests). A unit is a trace, a
pair or a group, as the evaluator's mode plans them (`JudgeMode.units`, see `judging.units`). Every unit gets
one row per slot (trace, pair or candidate) and member (model x sample) with status COMPLETED, FAILED
(reason and raw reply kept, never a score) or SKIPPED (reason). With several members a `consensus` row
per slot combines them (see `consensus`); `role <> 'member'` selects the one final row per slot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import polars as pl

from eval_platform.judging.batch_day import judge_day_in_batch
from eval_platform.judging.checks import check_day
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.consensus import consensus_row
from eval_platform.judging.day import DayResult, DayTally, in_projects, selection_skip
from eval_platform.judging.models import evaluator_endpoint
from eval_platform.judging.parsing import ParseFailure, Verdict, parse_reply
from eval_platform.judging.prompts import PromptBuilder, candidates_text
from eval_platform.judging.targets import plan_units, trace_skip, trace_values
from eval_platform.judging.units import Day, Skip, Unit
from eval_platform.llm.budget import Budget, reservation_ttl_s
from eval_platform.llm.call import CallResult, ModelCaller, ReplyRejected
from eval_platform.llm.endpoint import Endpoint, unreachable
from eval_platform.llm.runtime import ModelRuntime, run_calls
from eval_platform.llm.scheduler import InOrder
from eval_platform.schemas import (
    JUDGE_SCORE_SCHEMA,
    PROMPT_TOO_LARGE,
    SKIPPED,
    conform,
)

log = logging.getLogger(__name__)


class _Judge:
    """One evaluator model's calls: its prompts through the one call path (`llm.call`), replies parsed as
    verdicts of the evaluator's mode."""

    def __init__(self, config: EvaluatorConfig, endpoint: Endpoint, runtime: ModelRuntime, budget: Budget | None):
        self.config = config
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


def _budget(config: EvaluatorConfig, runtime: ModelRuntime) -> Budget | None:
    """The evaluator's budget, one for all its models and samples (their waits for other hosts are one wait)."""
    limits = (config.max_daily_cost_usd, config.max_monthly_cost_usd)
    if all(limit is None for limit in limits):
        return None
    ttl_s = reservation_ttl_s(config.timeout_s, config.max_retries)
    return Budget(runtime.ledger, config.name, *limits, ttl_s, max_wait_s=runtime.budget_wait_s, log=runtime.log)


@dataclass(frozen=True)
class _Member:
    label: str  # what rows show in `model`
    judge: _Judge | None  # None: the model cannot be called (its key is missing), `skip` says why
    sample: int
    skip: tuple[str, str] | None = None  # (reason, detail) of the member's SKIPPED rows when `judge` is None


@dataclass
class DayOutcome:
    """What judging a day leaves once its rows are handed on: the summary, how many of the partition's traces got
    no row (the `every_trace_has_one_status` check), and the tally the materialization's metadata reads."""

    summary: dict[str, Any]
    traces_without_a_row: int
    tally: DayTally


def judge_day(
    config: EvaluatorConfig,
    day: str,
    traces: pl.DataFrame,
    runtime: ModelRuntime,
    manual_trace_ids: set[str] | None = None,
) -> DayResult:
    """Judge every selected trace (pair, group) of `day` (of the evaluator's `projects`); every slot ends with exactly
    one status per member. The rows in memory: `judge_stream` hands them on in chunks instead."""
    frames: list[pl.DataFrame] = []
    outcome = judge_stream(config, day, [traces], runtime, manual_trace_ids, frames.append)
    rows = pl.concat(frames) if frames else conform(pl.DataFrame(schema=JUDGE_SCORE_SCHEMA), JUDGE_SCORE_SCHEMA)
    return DayResult(rows, outcome.summary)


def judge_stream(
    config: EvaluatorConfig,
    day: str,
    batches: Iterable[pl.DataFrame] | Callable[[], Iterable[pl.DataFrame]],
    runtime: ModelRuntime,
    manual_trace_ids: set[str] | None,
    sink: Callable[[pl.DataFrame], None],
) -> DayOutcome:
    """`judge_day` over the day's traces given in `batches` (read one at a time), handing the rows to `sink` in
    order, in chunks of at most ROWS_PER_CHUNK, as they are ready. What is held is bounded by the batch size
    and IN_FLIGHT_UNITS, not by the day: the calls of one batch are still running when the next is planned, so
    the concurrency pipeline never drains between batches. A unit (pair, group, session) is planned from one
    batch: the caller gives a grouped mode or a session target its whole day as one batch
    (`evaluator_day.judge_partition`). `batches` may be a function giving them: batch mode reads the day twice,
    calling it once per pass (an iterator that can be read once is held in memory instead)."""
    manual = manual_trace_ids or set()
    if config.check is not None:
        # A check evaluator runs a scorer on each trace: no model, call, cache or budget (judging.checks), but for
        # a scorer of embeddings, whose calls take the one call path with `runtime`.
        return _check_stream(config, day, batches() if callable(batches) else batches, manual, sink, runtime)

    def judge_pass(runtime: ModelRuntime, sink: Callable[[pl.DataFrame], None]) -> DayOutcome:
        day_batches = batches() if callable(batches) else batches
        return run_calls(_judge_stream_closing(config, day, day_batches, runtime, manual, sink))

    if config.batched and runtime.batch is None:
        # Batch mode runs this same pass twice, reading the day each time: recording the calls (its rows are not
        # the partition's), then answering them from the batches (its rows go to `sink` as they come).
        if not callable(batches) and iter(batches) is batches:
            batches = list(batches)

        def batch_pass(runtime: ModelRuntime) -> DayOutcome:
            recording = runtime.batch is not None and runtime.batch.recording
            return judge_pass(runtime, (lambda _frame: None) if recording else sink)

        return judge_day_in_batch(config, day, runtime, batch_pass)
    return judge_pass(runtime, sink)


def _rows_frame(rows: list[dict]) -> pl.DataFrame:
    # Column by column (a list per column some row has; `conform` adds the others as nulls): half the CPU of
    # polars reading the row dicts.
    present: set[str] = set()
    for row in rows:
        present.update(row)
    schema = {name: dtype for name, dtype in JUDGE_SCORE_SCHEMA.items() if name in present}
    columns: dict[str, Any] = {name: [row.get(name) for row in rows] for name in schema}
    for name, dtype in schema.items():
        values = columns[name]
        # A day's rows share one `judged_at`: polars converts a time-zoned datetime object by object (a third of
        # this function's CPU); the same object throughout is converted once and repeated.
        if isinstance(dtype, pl.Datetime) and values and values.count(values[0]) == len(values):
            columns[name] = pl.repeat(values[0], len(values), dtype=dtype, eager=True).alias(name)
    return conform(pl.DataFrame(columns, schema=schema), JUDGE_SCORE_SCHEMA)


class _Coverage:
    """Which of one batch's own traces (those of the partition's day) got a row: a row's trace_id and
    trace_id_b, and every trace of a session that has a row. Counted per batch, so nothing grows with the day."""

    def __init__(self, own: list[dict[str, Any]]):
        self.own = [(t["trace_id"], t.get("session_id")) for t in own]
        self.traces: set[str] = set()
        self.sessions: set[str] = set()

    def add(self, row: dict) -> None:
        self.traces.add(row["trace_id"])
        if row.get("trace_id_b") is not None:
            self.traces.add(row["trace_id_b"])
        if row.get("session_id") is not None:
            self.sessions.add(row["session_id"])

    def without_a_row(self) -> int:
        return sum(1 for t, s in self.own if t not in self.traces and (s is None or s not in self.sessions))


def _own_traces(config: EvaluatorConfig, day: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # A session partition reads earlier days too (`targets.session_window`); it counts the day's own traces.
    return [r for r in records if r.get("date") == day] if config.judged_target == "session" else records


def _check_stream(
    config: EvaluatorConfig,
    day: str,
    batches: Iterable[pl.DataFrame],
    manual: set[str],
    sink: Callable[[pl.DataFrame], None],
    runtime: ModelRuntime | None = None,
) -> DayOutcome:
    judged_at = datetime.now(UTC)
    tally, in_partition, missing = DayTally(), 0, 0
    for batch in batches:
        traces = in_projects(config, batch)
        rows = check_day(config, day, traces, manual, judged_at, runtime).rows
        coverage = _Coverage(traces.select("trace_id").to_dicts())
        for trace_id in rows["trace_id"].to_list():
            coverage.traces.add(trace_id)
        in_partition += traces.height
        missing += coverage.without_a_row()
        if rows.height:
            tally.add(rows)
            sink(rows)
    return DayOutcome(tally.summary(in_partition), missing, tally)


async def _judge_stream_closing(
    config: EvaluatorConfig,
    day: str,
    batches: Iterable[pl.DataFrame],
    runtime: ModelRuntime,
    manual_trace_ids: set[str],
    sink: Callable[[pl.DataFrame], None],
) -> DayOutcome:
    try:
        # The day's cache lookups share a read snapshot (`ModelCache.reading`), ended with the day.
        with runtime.cache.reading():
            outcome = await _judge_stream(config, day, batches, runtime, manual_trace_ids, sink)
    finally:
        # The day's event loop ends here: its HTTP sessions close with it, and cache writes land.
        close = getattr(runtime.client, "aclose", None)
        if close is not None:
            await close()
        # The replies are paid for: a cache that cannot keep them costs no row.
        cache_failure = runtime.cache.flush_or_report()
    if cache_failure is not None:
        # Reported with the rows: the next run pays for these calls again instead of finding them cached.
        outcome.summary["cache_write_failed"] = cache_failure
    return outcome


# Rows handed to the sink at once (one Parquet row group's worth, a frame built per chunk, not per day).
ROWS_PER_CHUNK = 10_000


class _UnitJudge:
    """A unit's rows: one per slot and member (model x sample), each member's call parsed as a verdict, with a
    consensus row per slot when there are several members; or the unit's SKIPPED rows (not selected, nothing to
    judge, no model reachable)."""

    def __init__(
        self,
        config: EvaluatorConfig,
        day: str,
        runtime: ModelRuntime,
        budget: Budget | None,
        manual_trace_ids: set[str],
    ) -> None:
        self.config, self.manual_trace_ids = config, manual_trace_ids
        self.members: list[_Member] = []
        # the model (configured) -> why it was not called, naming the variable to set
        self.unreachable_models: dict[str, str] = {}
        for spec in config.judge_models():
            endpoint = evaluator_endpoint(config, spec, runtime)
            judge = _Judge(config, endpoint, runtime, budget) if endpoint else None
            skip = None if endpoint else unreachable(spec.address(), runtime)
            if skip is not None:
                self.unreachable_models[spec.model] = skip[1]
                log.warning(f"evaluator {config.name} [{day}]: {spec.model} is not called: {skip[1]}")
            label = endpoint.label if endpoint else spec.model
            self.members.extend(_Member(label, judge, s, skip) for s in range(config.samples))
        self.several = len(self.members) > 1
        self.final_label = f"consensus:{config.consensus}" if self.several else self.members[0].label
        self.final_role = "consensus" if self.several else "verdict"
        self.no_judge = all(member.judge is None for member in self.members)

    def skip_reason(self, unit: Unit) -> Skip | None:
        # A trace the evaluator does not select (not sampled, not named) says so first, whatever its text: the
        # target's own skips (empty text, no final answer, ...) are for the selected ones.
        selection = selection_skip(self.config, unit.unit_id, self.manual_trace_ids)
        if selection:
            return selection
        if unit.skip:
            return unit.skip
        first = self.members[0].skip
        if self.no_judge and first is not None:  # every model unreachable: the first's reason, every model's detail
            return first[0], "; ".join(self.unreachable_models.values())
        return None

    async def member_rows(self, unit: Unit, member: _Member) -> list[dict]:
        if member.judge is None:
            assert member.skip is not None  # a member without a judge says why
            code, detail = member.skip
            rows = [{**slot, "status": SKIPPED, "reason": code, "reason_detail": detail} for slot in unit.slots]
        else:
            assert unit.judge is not None  # a unit with nothing to judge has its skip (`skip_reason`)
            rows = await unit.judge(member.judge, member.sample)
        for row in rows:
            row.update(model=member.label, sample=member.sample, role="member" if self.several else "verdict")
        return rows

    async def rows(self, unit: Unit) -> list[dict]:
        skipped = self.skip_reason(unit)
        if skipped:
            code, detail = skipped
            skip_row = {"model": self.final_label, "role": self.final_role, "status": SKIPPED}
            return [{**slot, **skip_row, "reason": code, "reason_detail": detail} for slot in unit.slots]
        if not self.several:  # one member: awaited in this task (a task per call is event-loop work for nothing)
            return await self.member_rows(unit, self.members[0])
        per_member = await asyncio.gather(*(self.member_rows(unit, m) for m in self.members))
        rows = [row for group in per_member for row in group]
        for i, slot in enumerate(unit.slots):
            votes = [group[i] for group in per_member]
            final: dict[str, Any] = {**slot, "model": self.final_label, "role": "consensus", "sample": None}
            rows.append(consensus_row(self.config, final, votes))
        return rows


class _Handing:
    """The day's rows handed to the sink in order, in chunks of ROWS_PER_CHUNK, tallied as they go; and how many
    of each batch's own traces got no row, counted once the batch's units are all handed on."""

    def __init__(self, sink: Callable[[pl.DataFrame], None]) -> None:
        self.sink = sink
        self.ready: list[dict] = []
        self.tally = DayTally()
        self.missing = 0

    def take(self, coverage: _Coverage, rows: list[dict]) -> None:
        for row in rows:
            row["is_final"] = row["role"] != "member"
            coverage.add(row)
        self.ready.extend(rows)
        if len(self.ready) >= ROWS_PER_CHUNK:
            self.hand_on()

    def batch_end(self, coverage: _Coverage) -> None:
        self.missing += coverage.without_a_row()

    def hand_on(self) -> None:
        if self.ready:
            frame = _rows_frame(self.ready)
            self.ready.clear()
            self.tally.add(frame)
            self.sink(frame)


async def _judge_stream(
    config: EvaluatorConfig,
    day: str,
    batches: Iterable[pl.DataFrame],
    runtime: ModelRuntime,
    manual_trace_ids: set[str],
    sink: Callable[[pl.DataFrame], None],
) -> DayOutcome:
    """Plan each batch's units, judge them at once (`llm.scheduler.InOrder`: bounded, in order), hand the rows on."""
    judged_at = datetime.now(UTC)
    budget = _budget(config, runtime)
    judge = _UnitJudge(config, day, runtime, budget, manual_trace_ids)
    values = partial(
        trace_values,
        span=config.span,
        conversation_last_n=config.conversation_last_n,
        context_from=config.context_from,
        framework_prompt=config.framework_prompt,
    )
    messages, skip = PromptBuilder(config), partial(trace_skip, config)
    handing, in_partition = _Handing(sink), 0
    async with InOrder[list[dict]](getattr(runtime.client, "max_concurrency", 0)) as line:
        for batch in batches:
            records = in_projects(config, batch).to_dicts()
            own = _own_traces(config, day, records)
            in_partition += len(own)
            coverage = _Coverage(own)
            plan = Day(
                config, day, records, judged_at, values=values, messages=messages, candidates=candidates_text, skip=skip
            )
            take = partial(handing.take, coverage)
            for unit in plan_units(plan):
                await line.start(judge.rows(unit), take)
            line.then(partial(handing.batch_end, coverage))
            del records, own, plan
    handing.hand_on()
    outcome = DayOutcome(handing.tally.summary(in_partition), handing.missing, handing.tally)
    if judge.unreachable_models:
        outcome.summary["unreachable_models"] = judge.unreachable_models
    waited = budget.host_wait.report() if budget is not None else None
    if waited is not None:  # its calls waited for other hosts' budget reservations (the metadata says so)
        outcome.summary["budget_wait"] = waited
    return outcome
