"""Judge one day of traces with one evaluator: selection, calls, cache, budget, and one status per row.

Framework-free: the `judge_scores` asset calls `judge_day` and writes what it returns. A unit is a trace, a
pair or a group, as the evaluator's mode plans them (`JudgeMode.units`, see `judging.units`). Every unit gets
one row per slot (trace, pair or candidate) and member (model x sample) with status COMPLETED, FAILED
(reason and raw reply kept, never a score) or SKIPPED (reason). With several members a `consensus` row
per slot combines them (see `consensus`); `role <> 'member'` selects the one final row per slot.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from eval_platform.judging import pricing
from eval_platform.judging.budget import BudgetLedger, BudgetRefused, Reservation, reserve_or_wait
from eval_platform.judging.cache import JudgeCache, cache_key
from eval_platform.judging.client import CallOutcome, JudgeClient, JudgeRequest
from eval_platform.judging.config import EvaluatorConfig, ModelSpec
from eval_platform.judging.consensus import COMPLETED, FAILED, SKIPPED, consensus_row
from eval_platform.judging.parsing import ParseFailure, Verdict, parse_reply
from eval_platform.judging.prompts import build_messages, candidates_text, trace_values
from eval_platform.judging.redaction import remember, remember_env
from eval_platform.judging.units import Day, Unit
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, conform

if TYPE_CHECKING:
    from eval_platform.judging.batch import BatchCalls



@dataclass(frozen=True)
class Endpoint:
    """Where an evaluator's calls go after credentials are resolved."""

    model: str  # litellm model string actually called
    label: str  # what rows show in `model`
    api_base: str | None
    api_key: str | None
    prices: pricing.Prices | None


@dataclass
class JudgeRuntime:
    client: JudgeClient
    cache: JudgeCache
    ledger: BudgetLedger
    local_judge_url: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    batch_dir: Path | None = None  # where batch mode keeps submitted batches; default: beside the cache
    batch: BatchCalls | None = None  # set by batch mode while it judges a day (see `batch`)


def resolve_endpoint(spec: ModelSpec, runtime: JudgeRuntime) -> Endpoint | None:
    """The endpoint to call, or None when the judge's key is missing and no local judge is configured."""
    key = runtime.env.get(spec.api_key_env) if spec.api_key_env else None
    if spec.api_key_env and not key:
        if not runtime.local_judge_url:
            return None
        return Endpoint(
            model=f"openai/{spec.local_judge}",
            label=f"local/{spec.local_judge}",
            api_base=runtime.local_judge_url,
            api_key="local",
            prices=pricing.FREE,
        )
    # OpenAI-compatible servers that need no key (vLLM, llama.cpp, the local judge) still get a placeholder,
    # because the OpenAI client refuses to send a request without one.
    api_key = key or ("no-key" if spec.api_base else None)
    return Endpoint(spec.model, spec.model, spec.api_base, api_key, spec.prices())


def evaluator_endpoint(config: EvaluatorConfig, spec: ModelSpec, runtime: JudgeRuntime) -> Endpoint | None:
    """Where one of the evaluator's models is called (see `resolve_endpoint`), priced at the batch discount
    in batch mode."""
    endpoint = resolve_endpoint(spec, runtime)
    if endpoint is not None and endpoint.prices is not None and config.batched:
        endpoint = replace(endpoint, prices=endpoint.prices.scaled(config.batch.discount))
    return endpoint


def unit_hash(*parts: str) -> float:
    """A stable number in [0, 1) per evaluator and trace: sampling picks the same traces on every rerun."""
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def worst_case_prompt_tokens(messages: list[dict[str, str]]) -> int:
    # BPE tokens are at least one byte each, so bytes bound tokens; plus per-message framing.
    return sum(len(m["content"].encode()) + 8 for m in messages) + 16


@dataclass
class _CallResult:
    verdict: Verdict | None = None
    status: str = COMPLETED
    reason: str | None = None  # a stable code: timeout, unparseable, budget_exhausted, ...
    detail: str | None = None  # the human message that goes with it (reason_detail)
    raw: str | None = None
    provider_model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float | None = 0.0
    cached_cost_usd: float = 0.0
    latency_ms: float = 0.0
    calls: int = 0
    cache_hit: bool = False


class _Judge:
    def __init__(self, config: EvaluatorConfig, endpoint: Endpoint, runtime: JudgeRuntime):
        self.config, self.endpoint, self.runtime = config, endpoint, runtime
        limits = (config.max_daily_cost_usd, config.max_monthly_cost_usd)
        self.budgeted = any(limit is not None for limit in limits)
        # Every key this evaluator may send (its models' api_key_env values), and the endpoint's own key.
        names = {spec.api_key_env for spec in config.judge_models() if spec.api_key_env}
        self.secrets = {runtime.env.get(name) for name in names} | {endpoint.api_key}
        self.secrets = {s for s in self.secrets if s}
        # Remembered for the redaction of rows and log lines, with the environment's keys, which litellm falls
        # back on when an endpoint names none (ANTHROPIC_API_KEY, ...).
        remember(*self.secrets)
        remember_env(runtime.env)

    async def _reserve(self, worst_usd: float) -> Reservation:
        """A reservation of the call's worst case; waits while calls in flight may settle below theirs."""
        config = self.config
        # Longest a call can hold its reservation: every attempt timing out, plus the backoff between them.
        ttl_s = max(900.0, (config.max_retries + 1) * config.timeout_s + config.max_retries * 30.0 + 60.0)
        return await reserve_or_wait(
            self.runtime.ledger, config.name, worst_usd, config.max_daily_cost_usd, config.max_monthly_cost_usd, ttl_s
        )

    def _cost(self, outcome: CallOutcome) -> float | None:
        prices = self.endpoint.prices
        return prices.cost(outcome.prompt_tokens, outcome.completion_tokens, outcome.cached_prompt_tokens) if prices else None

    def _parse_cached(self, cached: dict | None, n_candidates: int | None) -> Verdict | None:
        # An entry written before a parser change may no longer parse: then the call is made again.
        if cached is None:
            return None
        try:
            return parse_reply(self.config, cached.get("content") or "", n_candidates)
        except ParseFailure:
            return None

    async def call(self, messages: list[dict[str, str]], sample: int, n_candidates: int | None = None) -> _CallResult:
        config, endpoint = self.config, self.endpoint
        request = JudgeRequest(
            model=endpoint.model,
            messages=messages,
            api_base=endpoint.api_base,
            api_key=endpoint.api_key,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout_s=config.timeout_s,
            max_retries=config.max_retries,
            fence_secret=getattr(messages, "fence_secret", None),
        )
        size = sum(len(m["content"]) for m in messages)
        if size > config.max_prompt_chars:
            # A 5 MB output is not sent blindly: the trace stays whole in `traces`, this verdict is SKIPPED.
            detail = f"the prompt is {size:,} characters, over max_prompt_chars {config.max_prompt_chars:,}"
            return _CallResult(status=SKIPPED, reason="prompt_too_large", detail=detail, cost_usd=0.0)
        local = endpoint.label.startswith("local/")
        key = cache_key(request, sample, endpoint="local-judge" if local else None)
        cached = self.runtime.cache.get(key)
        verdict = self._parse_cached(cached, n_candidates)
        if verdict is not None:
            return _CallResult(
                verdict=verdict,
                raw=cached["content"],
                provider_model=cached.get("provider_model"),
                prompt_tokens=cached.get("prompt_tokens", 0),
                completion_tokens=cached.get("completion_tokens", 0),
                cached_prompt_tokens=cached.get("cached_prompt_tokens", 0),
                cost_usd=0.0,
                cached_cost_usd=cached.get("cost_usd") or 0.0,
                cache_hit=True,
            )
        reservation: Reservation | None = None
        before_send = None
        batch = self.runtime.batch
        worst = None
        if self.budgeted and endpoint.prices is not None and endpoint.prices != pricing.FREE:
            worst = endpoint.prices.cost(worst_case_prompt_tokens(messages), config.max_tokens)

            async def before_send() -> None:
                nonlocal reservation
                reservation = await self._reserve(worst)

        try:
            if batch is not None:
                # The batch reserved the worst case of all its requests before it was submitted.
                outcome = await batch.outcome(endpoint, request, key, worst)
            else:
                outcome = await self.runtime.client.complete(request, before_send=before_send)
            # A provider may echo the Authorization header: no key reaches a row, the cache or a log (batch
            # answers come this way too).
            outcome.redact(self.secrets)
        except BudgetRefused as refused:
            return _CallResult(status=SKIPPED, reason="budget_exhausted", detail=str(refused), cost_usd=0.0)
        cost = self._cost(outcome)
        if reservation is not None:
            self.runtime.ledger.settle(reservation, cost or 0.0)
        result = _CallResult(
            raw=outcome.content,
            provider_model=outcome.provider_model,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            cached_prompt_tokens=outcome.cached_prompt_tokens,
            cost_usd=cost,
            latency_ms=outcome.latency_ms,
            calls=outcome.attempts,
        )
        if not outcome.ok:
            result.status = FAILED
            result.reason = outcome.error_reason
            result.detail = f"after {outcome.attempts} attempt(s): {outcome.error_detail}"
            result.raw = outcome.error_detail
            return result
        try:
            result.verdict = parse_reply(config, outcome.content or "", n_candidates)
        except ParseFailure as failure:
            code = "truncated" if outcome.finish_reason == "length" else failure.reason
            result.status, result.reason, result.detail = FAILED, code, failure.detail
            return result
        self.runtime.cache.put(
            key,
            {
                "content": outcome.content,
                "provider_model": outcome.provider_model,
                "prompt_tokens": outcome.prompt_tokens,
                "completion_tokens": outcome.completion_tokens,
                "cached_prompt_tokens": outcome.cached_prompt_tokens,
                "cost_usd": cost,
            },
        )
        return result


def _no_credentials_detail(config: EvaluatorConfig) -> str:
    names = sorted({spec.api_key_env for spec in config.judge_models() if spec.api_key_env})
    return f"{' / '.join(names) or 'the key variable'} not set and no local judge configured"


@dataclass
class DayResult:
    rows: pl.DataFrame
    summary: dict[str, Any]


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
    """Judge every selected trace (pair, group) of `day`; every slot ends with exactly one status per member."""
    if config.batched and runtime.batch is None:
        from eval_platform.judging.batch import judge_day_in_batch  # batch builds on this module

        return judge_day_in_batch(config, day, traces, runtime, manual_trace_ids or set())
    return asyncio.run(_judge_day_closing(config, day, traces, runtime, manual_trace_ids or set()))


async def _judge_day_closing(config, day, traces, runtime, manual_trace_ids) -> DayResult:
    try:
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
        if not config.enabled:
            return "disabled", "the evaluator has enabled: false"
        if config.trigger == "sampled" and unit_hash(config.name, unit_id) >= config.sample_rate:
            return "not_sampled", f"outside sample_rate {config.sample_rate}"
        if config.trigger == "manual" and unit_id not in manual_trace_ids:
            return "not_selected", "trigger 'manual' and the trace was not named in the run config"
        if all(member.judge is None for member in members):
            return "no_credentials", _no_credentials_detail(config)
        return None

    async def member_rows(unit: Unit, member: _Member) -> list[dict]:
        if member.judge is None:
            detail = _no_credentials_detail(config)
            rows = [{**slot, "status": SKIPPED, "reason": "no_credentials", "reason_detail": detail} for slot in unit.slots]
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
                {**slot, "model": final_label, "role": final_role, "status": SKIPPED, "reason": code, "reason_detail": detail}
                for slot in unit.slots
            ]
        per_member = await asyncio.gather(*(member_rows(unit, m) for m in members))
        rows = [row for group in per_member for row in group]
        if several:
            for i, slot in enumerate(unit.slots):
                votes = [group[i] for group in per_member]
                rows.append(consensus_row(config, {**slot, "model": final_label, "role": "consensus", "sample": None}, votes))
        return rows

    plan = Day(config, day, records, judged_at, values=lambda trace: trace_values(trace, config.span),
               messages=partial(build_messages, config), candidates=candidates_text)
    units = config.judge_mode.units(plan)
    rows = [row for group in await asyncio.gather(*(run(u) for u in units)) for row in group]
    for row in rows:
        row["is_final"] = row["role"] != "member"
    frame = conform(pl.DataFrame(rows, schema_overrides=JUDGE_SCORE_SCHEMA, infer_schema_length=None), JUDGE_SCORE_SCHEMA)
    return DayResult(frame, summarize(frame, len(records)))


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
