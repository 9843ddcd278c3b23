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
import gc
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
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
from eval_platform.judging.units import Day, Unit
from eval_platform.llm.budget import Budget, reservation_ttl_s
from eval_platform.llm.call import CallResult, ModelCaller, ReplyRejected
from eval_platform.llm.endpoint import Endpoint, unreachable
from eval_platform.llm.runtime import ModelRuntime, run_calls
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
    if not config.batched or runtime.batch is not None:
        batches = batches() if callable(batches) else batches
    if config.check is not None:
        # A check evaluator runs a scorer on each trace: no model, call, cache or budget (judging.checks), but for
        # a scorer of embeddings, whose calls take the one call path with `runtime`.
        return _check_stream(config, day, batches, manual, sink, runtime)

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


def _check_stream(config, day, batches, manual, sink, runtime=None) -> DayOutcome:
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


async def _judge_stream_closing(config, day, batches, runtime, manual_trace_ids, sink) -> DayOutcome:
    try:
        # The day's cache lookups share a read snapshot (`ModelCache.reading`), ended with the day.
        with _calls_gc(), runtime.cache.reading():
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
# Units started and not yet handed on, at most: many times the concurrency, so that while the oldest unit
# waits (a retry, a slow reply) the others keep every slot busy; small enough to bound what is held.
IN_FLIGHT_UNITS = 4096
# Units running at once (calling, or waiting for a slot of the endpoint's limiter): RUNNING_PER_SLOT times the
# client's concurrency, at least RUNNING_MIN, so a freed slot is taken at once and units sleeping before a retry do
# not leave slots idle. More costs CPU for nothing: every unit past the slots waits in the limiter (a future, and a
# wake-up through its coroutines) and stays alive for the garbage collector to walk; 4,096 running instead of 512
# measured 3.3% more instructions per call at concurrency 128 (README, "Performance: judge throughput").
RUNNING_PER_SLOT = 4
RUNNING_MIN = 256


async def _judge_stream(config, day, batches, runtime, manual_trace_ids, sink) -> DayOutcome:
    judged_at = datetime.now(UTC)
    members, unreachable_models = [], {}
    budget = _budget(config, runtime)
    for spec in config.judge_models():
        endpoint = evaluator_endpoint(config, spec, runtime)
        judge = _Judge(config, endpoint, runtime, budget) if endpoint else None
        skip = None if endpoint else unreachable(spec.address(), runtime)
        if skip is not None:
            unreachable_models[spec.model] = skip[1]
            log.warning(f"evaluator {config.name} [{day}]: {spec.model} is not called: {skip[1]}")
        label = endpoint.label if endpoint else spec.model
        members.extend(_Member(label, judge, s, skip) for s in range(config.samples))
    several = len(members) > 1
    final_label = f"consensus:{config.consensus}" if several else members[0].label
    final_role = "consensus" if several else "verdict"

    no_judge = all(member.judge is None for member in members)

    def skip_reason(unit: Unit) -> tuple[str, str | None] | None:
        # A trace the evaluator does not select (not sampled, not named) says so first, whatever its text: the
        # target's own skips (empty text, no final answer, ...) are for the selected ones.
        selection = selection_skip(config, unit.unit_id, manual_trace_ids)
        if selection:
            return selection
        if unit.skip:
            return unit.skip
        if no_judge:  # every model unreachable: the first's reason, every model's detail
            return members[0].skip[0], "; ".join(unreachable_models.values())
        return None

    async def member_rows(unit: Unit, member: _Member) -> list[dict]:
        if member.judge is None:
            code, detail = member.skip
            rows = [{**slot, "status": SKIPPED, "reason": code, "reason_detail": detail} for slot in unit.slots]
        else:
            rows = await unit.judge(member.judge, member.sample)
        for row in rows:
            row.update(model=member.label, sample=member.sample, role="member" if several else "verdict")
        return rows

    async def run(unit: Unit) -> list[dict]:
        skipped = skip_reason(unit)
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

    values = partial(
        trace_values,
        span=config.span,
        conversation_last_n=config.conversation_last_n,
        context_from=config.context_from,
        framework_prompt=config.framework_prompt,
    )
    messages, skip = PromptBuilder(config), partial(trace_skip, config)
    tally, in_partition, missing = DayTally(), 0, 0
    ready: list[dict] = []
    # In order: (a unit's task, its batch's coverage), and (None, coverage) once a batch's units are all queued.
    pending: deque[tuple[asyncio.Task | None, _Coverage]] = deque()
    slots = getattr(runtime.client, "max_concurrency", 0)
    window = max(IN_FLIGHT_UNITS, 8 * slots)
    running_limit = min(window, max(RUNNING_MIN, RUNNING_PER_SLOT * slots))

    def hand_on() -> None:
        frame = _rows_frame(ready)
        ready.clear()
        tally.add(frame)
        sink(frame)

    def take(task: asyncio.Task | None, coverage: _Coverage) -> None:
        """The oldest pending unit's rows (or its batch's end), handed on in order."""
        nonlocal missing
        if task is None:
            missing += coverage.without_a_row()
            return
        rows = task.result()
        for row in rows:
            row["is_final"] = row["role"] != "member"
            coverage.add(row)
        ready.extend(rows)
        if len(ready) >= ROWS_PER_CHUNK:
            hand_on()

    def take_done() -> None:
        while pending and (pending[0][0] is None or pending[0][0].done()):
            take(*pending.popleft())

    async def settle(limit: int) -> None:
        """Hand on the oldest units' rows, in order, until at most `limit` remain pending."""
        while len(pending) > limit:
            task, _ = pending[0]
            if task is not None:
                await asyncio.wait([task])
            take(*pending.popleft())

    # The loop wakes once per `refill` finished units (not once per unit: a wake-up per call was a tenth of our
    # CPU per call), then hands on every finished unit at the head of the line and starts as many.
    running, refill, room = 0, max(1, running_limit // 4), asyncio.Event()
    loop = asyncio.get_running_loop()  # once: `asyncio.create_task` looks it up per task (a getpid() in Python 3.11)

    def finished(_task: asyncio.Task) -> None:
        nonlocal running
        running -= 1
        if running <= running_limit - refill:
            room.set()

    try:
        for batch in batches:
            records = in_projects(config, batch).to_dicts()
            own = _own_traces(config, day, records)
            in_partition += len(own)
            coverage = _Coverage(own)
            plan = Day(
                config, day, records, judged_at, values=values, messages=messages, candidates=candidates_text, skip=skip
            )
            for unit in plan_units(plan):
                if running >= running_limit:
                    room.clear()
                    await room.wait()
                    take_done()
                if len(pending) >= 4 * window:  # the oldest unit holds the line (a slow retry): wait for it
                    await settle(3 * window)
                task = loop.create_task(run(unit))
                task.add_done_callback(finished)
                running += 1
                pending.append((task, coverage))
            pending.append((None, coverage))
            del records, own, plan
        await settle(0)
    finally:
        for task, _ in pending:  # a failure above: the units still running are not left behind
            if task is not None:
                task.cancel()
    if ready:
        hand_on()
    outcome = DayOutcome(tally.summary(in_partition), missing, tally)
    if unreachable_models:  # the model (configured) -> why it was not called, naming the variable to set
        outcome.summary["unreachable_models"] = unreachable_models
    waited = budget.host_wait.report() if budget is not None else None
    if waited is not None:  # its calls waited for other hosts' budget reservations (the metadata says so)
        outcome.summary["budget_wait"] = waited
    return outcome


# A day allocates objects quickly (traces, prompts, requests, replies, rows, futures: hundreds of calls a second),
# and each full collection of the cyclic garbage collector walks every object of the process (the loaded modules,
# the day's traces and prompts): measured, ~0.1 ms of CPU per call at concurrency 128, a fifth of the judge path.
# Measured again (issue 33: `tools.perf.judge_throughput --traces 2000 --before` a copy without it, on a loaded
# machine): 0.56 ms of CPU per call with it, 0.85 ms without.
# While a day is judged, what existed before it is frozen (`gc.freeze`: kept out of collections, not collected
# until it is unfrozen) and the youngest generation collects every CALLS_GC_THRESHOLD allocations instead of 700;
# both are restored when the last running day ends. Cyclic garbage is still collected, later. Scoped: the process's
# collector is left as found: its thresholds are restored; a process that froze objects itself keeps its freeze
# (nothing is frozen or unfrozen then), and a collector turned off (or threshold 0) is not touched.
CALLS_GC_THRESHOLD = 10_000
_gc_lock = threading.Lock()
_gc_users = 0
_gc_previous: tuple[tuple[int, int, int], bool] | None = None  # (thresholds, whether this froze the heap)


@contextmanager
def _calls_gc() -> Iterator[None]:
    global _gc_users, _gc_previous
    with _gc_lock:
        if _gc_users == 0:
            threshold = gc.get_threshold()
            tune = gc.isenabled() and threshold[0] > 0  # a collector turned off stays off
            freeze = tune and gc.get_freeze_count() == 0
            _gc_previous = (threshold, freeze)
            if freeze:
                gc.freeze()
            if tune:
                gc.set_threshold(max(CALLS_GC_THRESHOLD, threshold[0]), *threshold[1:])
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_previous is not None:
                threshold, froze = _gc_previous
                _gc_previous = None
                gc.set_threshold(*threshold)
                if froze:
                    gc.unfreeze()
