"""Run one benchmark task for one model under test: its cases' outputs, statuses and scores.

Framework-free: each task asset calls `run_task` and writes what it returns to `benchmark_cases`, then
`task_results.task_results` to `benchmark_results`. A case gets one row per sample (and, for a judge task, per
presentation order) with status COMPLETED, FAILED (reason kept, never a score) or SKIPPED (reason).

Where outputs come from:
- `prompt`: the model under test answers the suite's template over the case (plain text, no fences);
- `as_judge`: the model under test is a pairwise judge; prompts are built and replies parsed by the
  pairwise mode's own code (`build_messages`, `parse_reply`), each pair shown in both orders;
- `outputs_from`: a case field holds recorded outputs (no call);
- `outputs_of`: another task's outputs for the same model (no call), e.g. a judge task over generations.

Every call goes through the judge client and cache: a re-run after changing only a scorer finds every
reply in the cache and makes no call; a re-run after a crash calls only what is missing or FAILED.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.benchmarks.config import ModelUnderTest, Suite, Task
from eval_platform.benchmarks.scoring import judge_config, score_rows
from eval_platform.ingest.datasets import DatasetVersion, read_dataset_version
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.prompts import build_messages
from eval_platform.judging.templates import parse_template, render
from eval_platform.llm.budget import Budget, BudgetLedger, reservation_ttl_s
from eval_platform.llm.call import ModelCaller
from eval_platform.llm.endpoint import Endpoint, model_endpoint
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.llm.shared_state import SharedState
from eval_platform.record_fields import field_text
from eval_platform.schemas import (
    BENCHMARK_CASE_SCHEMA,
    COMPLETED,
    FAILED,
    GATE_FAILED,
    MISSING_FIELD,
    NO_CREDENTIALS,
    NO_LOCAL_JUDGE,
    NOT_IN_SCOPE,
    SKIPPED,
    UPSTREAM_MISSING,
)
from eval_platform.scoring import registry

TIMEOUT_S, MAX_RETRIES = 120.0, 3
# Rows (cases x samples x presentation orders) turned into Python rows, calls and scores at a time: a few KB each,
# so memory stays bounded whatever the dataset's size; a chunk's calls run concurrently (the model's limit applies
# within it). `EVAL_PLATFORM_BENCHMARK_CHUNK_CASES` sets the cases per chunk instead.
CHUNK_ROWS, CHUNK_CASES_ENV = 10_000, "EVAL_PLATFORM_BENCHMARK_CHUNK_CASES"


def benchmark_ledger(root: Path) -> BudgetLedger:
    """Spend of the models under test, in the data root (see `SharedState.benchmark_ledger`)."""
    return SharedState(root).benchmark_ledger()


def budget_name(model_name: str) -> str:
    return f"model:{model_name}"


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def task_config_hash(task: Task) -> str:
    """What decides the outputs: dataset, prompt or judge, sampling; not the scorers (nor the k of pass@k)."""
    return _hash(task.model_dump(exclude={"scorers", "weight", "max_failed_rate", "depends_on", "gate", "pass_at"}))


def scorer_config_hash(task: Task, evaluators: Mapping[str, EvaluatorConfig]) -> str:
    """What decides the scores from given outputs: the scorers, and any judge evaluator's verdict config."""
    names = [s.options["evaluator"] for s in task.scorers if registry.SCORERS[s.name].calls_evaluator]
    judged = {name: evaluators[name].config_hash for name in names if name in evaluators}
    return _hash([[s.model_dump() for s in task.scorers], judged])


def load_dataset(root: Path, task: Task) -> DatasetVersion:
    """The task's dataset version (the newest declared when not pinned), through the one dataset reader."""
    return read_dataset_version(root, task.dataset, None if task.version == "newest" else task.version)


def case_field(case: Mapping[str, Any], name: str) -> str | None:
    """A case field by name: `input`, `expected_output`, `case_id` or `metadata.<key>`."""
    return field_text({k: case.get(k) for k in ("input", "expected_output", "case_id", "metadata")}, name)


@dataclass
class TaskRun:
    """Everything one task needs for one model under test."""

    root: Path
    suite_name: str
    suite: Suite
    task_name: str
    model_name: str
    model: ModelUnderTest
    runtime: ModelRuntime
    evaluators: Mapping[str, EvaluatorConfig] = field(default_factory=dict)
    upstream_rows: pl.DataFrame | None = None  # `outputs_of` task's rows for this model
    gate_value: float | None = None  # the gating task's metric for this model (None: not available)
    # Set by `run_task` when the judge cache could not keep the task's replies: the rows are kept (paid for), and
    # the next run pays for those calls again instead of finding them cached.
    cache_write_failed: str | None = None

    @property
    def task(self) -> Task:
        return self.suite.tasks[self.task_name]


def chunk_cases(task: Task) -> int:
    """Cases a task turns into rows, calls and scores at a time: CHUNK_ROWS rows' worth, or
    `EVAL_PLATFORM_BENCHMARK_CHUNK_CASES`."""
    value = os.environ.get(CHUNK_CASES_ENV, "")
    if not value:
        orders = 2 if task.as_judge is not None and task.as_judge.pairwise else 1
        return max(1, CHUNK_ROWS // (task.samples * orders))
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{CHUNK_CASES_ENV}={value!r}: expected a whole number of cases >= 1")
    return int(value)


def run_task(run: TaskRun) -> pl.DataFrame:
    """One row per case x sample (x presentation) with output, status and scores (BENCHMARK_CASE_SCHEMA)."""
    return pl.concat(list(run_task_chunks(run)))


def run_task_chunks(run: TaskRun, cases_per_chunk: int | None = None) -> Iterator[pl.DataFrame]:
    """`run_task`'s rows, a chunk of cases at a time (`chunk_cases(task)` unless given): the Python rows, calls and
    scores of one chunk are in memory at once, whatever the dataset's size. Every row is what one pass over all
    the cases gives: a case's samples and presentation orders stay in one chunk, and a row depends only on its own
    case. A task scored by a batched judge evaluator is one chunk (a batch per chunk would wait once per chunk)."""
    task, started = run.task, datetime.now(UTC)
    data = load_dataset(run.root, task)
    endpoint, no_endpoint = model_endpoint(run.model.address(), run.runtime) if task.calls_model else (None, None)
    skip = _task_skip(run, no_endpoint)
    hashes = {
        "task_config_hash": task_config_hash(task),
        "scorer_config_hash": scorer_config_hash(task, run.evaluators),
    }
    size = cases_per_chunk or chunk_cases(task)
    if _batched_evaluator(run):
        size = max(data.cases.height, 1)
    for start in range(0, max(data.cases.height, 1), size):
        cases = data.cases.slice(start, size).to_dicts()
        yield _chunk_rows(run, data, cases, endpoint, skip, started, hashes)


def _batched_evaluator(run: TaskRun) -> bool:
    names = [s.options["evaluator"] for s in run.task.scorers if registry.SCORERS[s.name].calls_evaluator]
    return any(name in run.evaluators and run.evaluators[name].batched for name in names)


def _chunk_rows(run: TaskRun, data: DatasetVersion, cases: list[dict], endpoint, skip, started, hashes) -> pl.DataFrame:
    task = run.task
    presentations = ["AB", "BA"] if task.as_judge is not None and task.as_judge.pairwise else [""]
    rows = []
    for case in cases:
        for sample in range(task.samples):
            for presentation in presentations:
                rows.append(
                    {
                        "suite": run.suite_name,
                        "task": run.task_name,
                        "model": run.model_name,
                        "model_id": run.model.model,
                        "dataset": task.dataset,
                        "dataset_version": data.version,
                        "dataset_hash": data.sha256,
                        "case_id": case["case_id"],
                        "sample": sample,
                        "presentation": presentation,
                        "input": case["input"],
                        "expected_output": case["expected_output"],
                        "expected_output_json": case["expected_output_json"],
                        "status": None,
                        "cache_hit": False,
                        "_case": case,
                    }
                )
    if skip:
        for row in rows:
            row.update(status=SKIPPED, reason=skip[0], reason_detail=skip[1])
    elif task.calls_model:
        asyncio.run(_call_all(run, endpoint, rows))
    else:
        _take_outputs(run, rows)
    for row in rows:
        # A row that made no call (skipped, another task's or field's output, a case missing what it shows) cost
        # nothing; null stays reserved for a call whose price is unknown, so a total is unknown only then.
        row.setdefault("cost_usd", 0.0)
    score_rows(run, rows)
    primary = task.scorers[0].metric_name
    for row in rows:
        row.pop("_case")
        row.pop("_verdict_other", None)
        row.update(hashes, run_at=started, primary_metric=primary)
        values = {s["metric"]: s["value"] for s in row.get("scores") or []}
        row["primary_value"] = values.get(primary)
        row["stale"] = False  # computed now, from the suite file as it loads
    frame = pl.DataFrame(rows, schema_overrides=BENCHMARK_CASE_SCHEMA, infer_schema_length=None)
    return frame.select(
        [
            pl.col(c).cast(t) if c in frame.columns else pl.lit(None, t).alias(c)
            for c, t in BENCHMARK_CASE_SCHEMA.items()
        ]
    )


def _task_skip(run: TaskRun, no_endpoint: str | None) -> tuple[str, str] | None:
    task = run.task
    if not run.model.runs(run.suite_name, run.task_name):
        return NOT_IN_SCOPE, f"models.yaml limits {run.model_name} to {run.model.only}"
    if task.gate is not None:
        gate = task.gate
        if run.gate_value is None:
            return GATE_FAILED, f"gate: task '{gate.task}' has no {gate.metric} for this model"
        if run.gate_value < gate.min:
            return GATE_FAILED, f"gate: task '{gate.task}' {gate.metric} {run.gate_value:.4g} < min {gate.min:g}"
    if no_endpoint:
        reason = NO_LOCAL_JUDGE if run.model.model.startswith("local/") else NO_CREDENTIALS
        return reason, no_endpoint
    return None


def _messages(run: TaskRun, row: dict) -> list[dict[str, str]]:
    task, case = run.task, row["_case"]
    values = {k: case.get(k) for k in ("input", "expected_output", "case_id", "metadata")}
    if task.as_judge is not None:
        judge = task.as_judge
        # expected_output is the gold verdict: {{expected}} shows the `reference` field, if any, never the gold
        judge_values = {
            "input": case["input"],
            "metadata": case["metadata"],
            "expected": case_field(case, judge.reference) if judge.reference else None,
        }
        if judge.pairwise:
            first, second = (case_field(case, name) for name in judge.pair)
            if row["presentation"] == "BA":
                first, second = second, first
            judge_values |= {"output_a": first, "output_b": second}
        else:
            judge_values["output"] = case_field(case, judge.output)
        return build_messages(judge_config(run), judge_values)
    messages = []
    if task.system is not None:
        messages.append(
            {"role": "system", "content": render(parse_template(task.system, set(values)), values, fenced=False)}
        )
    assert task.prompt is not None  # `Task.calls_model`: a task that calls its model and is no judge has a prompt
    messages.append({"role": "user", "content": render(parse_template(task.prompt, set(values)), values, fenced=False)})
    return messages


def model_budget(run: TaskRun, ttl_s: float = reservation_ttl_s(TIMEOUT_S, MAX_RETRIES)) -> Budget | None:
    """The model under test's budget (models.yaml), which its calls and its scorers' embedding calls count in."""
    model = run.model
    if not model.budgeted:
        return None
    ledger = run.runtime.benchmark_ledger or benchmark_ledger(run.root)
    return Budget(ledger, budget_name(run.model_name), model.max_daily_cost_usd, model.max_monthly_cost_usd, ttl_s)


async def _call_all(run: TaskRun, endpoint: Endpoint, rows: list[dict]) -> None:
    model, budget = run.model, model_budget(run)
    key_envs = [model.api_key_env] if model.api_key_env else []
    caller = ModelCaller(run.runtime, endpoint, budget=budget, key_envs=key_envs)
    try:
        await asyncio.gather(*(_call(run, caller, row) for row in rows))
    finally:
        close = getattr(run.runtime.client, "aclose", None)
        if close is not None:
            await close()
        # a chunk's failure is kept when a later chunk's writes land
        run.cache_write_failed = run.runtime.cache.flush_or_report() or run.cache_write_failed


async def _call(run: TaskRun, caller: ModelCaller, row: dict) -> None:
    task, case = run.task, row["_case"]
    if task.as_judge is not None:
        missing = [name for name in task.as_judge.shown_fields() if case_field(case, name) is None]
        if missing:
            row.update(status=FAILED, reason=MISSING_FIELD, reason_detail=f"the case has no {missing}")
            return
    request = caller.request(
        _messages(run, row),
        temperature=task.temperature,
        max_tokens=task.max_tokens,
        timeout_s=TIMEOUT_S,
        max_retries=MAX_RETRIES,
    )
    started = time.perf_counter()
    # Every reply is kept as the output (a judge task's verdict is parsed when scoring), so every one is cached.
    result = await caller.call(request, row["sample"], parse=lambda content: content)
    if result.status == SKIPPED:
        row.update(status=SKIPPED, reason=result.reason, reason_detail=result.detail, cost_usd=0.0)
        return
    row.update(
        provider_model=result.provider_model,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost_usd=result.cost_usd,
        latency_ms=0.0 if result.cache_hit else result.latency_ms or (time.perf_counter() - started) * 1000,
        cache_hit=result.cache_hit,
    )
    if result.status == FAILED:
        row.update(status=FAILED, reason=result.reason, reason_detail=result.detail)
        return
    row.update(status=COMPLETED, output=result.verdict)


def _take_outputs(run: TaskRun, rows: list[dict]) -> None:
    task = run.task
    if task.outputs_from is not None:
        for row in rows:
            output = case_field(row["_case"], task.outputs_from)
            if output is None:
                row.update(status=FAILED, reason=MISSING_FIELD, reason_detail=f"the case has no {task.outputs_from}")
            else:
                row.update(status=COMPLETED, output=output)
        return
    upstream: dict[tuple[str, int, str], dict[str, Any]] = {}
    if run.upstream_rows is not None:
        ids = [row["case_id"] for row in rows]
        for answered in run.upstream_rows.filter(pl.col("case_id").is_in(ids)).iter_rows(named=True):
            upstream[(answered["case_id"], answered["sample"], answered["presentation"])] = answered
    for row in rows:
        up = upstream.get((row["case_id"], row["sample"], row["presentation"]))
        if up is None:
            row.update(
                status=SKIPPED,
                reason=UPSTREAM_MISSING,
                reason_detail=f"task '{task.outputs_of}' has no row for this case",
            )
        elif up["status"] != COMPLETED:
            row.update(
                status=SKIPPED,
                reason=f"upstream_{up['status'].lower()}",
                reason_detail=f"task '{task.outputs_of}': {up['reason']}",
            )
        else:
            row.update(status=COMPLETED, output=up["output"], provider_model=up["provider_model"])
