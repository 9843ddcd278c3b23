"""Judge one day of traces with one evaluator: selection, calls, cache, budget, and one status per row.

Framework-free: the `judge_scores` asset calls `judge_day` and writes what it returns. Every trace of the
day gets exactly one row per model sample with status COMPLETED, FAILED (reason and raw reply kept, never
a score) or SKIPPED (reason), so counts are conserved and visible.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from eval_platform.judging import pricing
from eval_platform.judging.budget import BudgetLedger
from eval_platform.judging.cache import JudgeCache, cache_key
from eval_platform.judging.client import CallOutcome, JudgeClient, JudgeRequest
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.parsing import ParseFailure, Verdict, parse_reply
from eval_platform.judging.prompts import build_messages, trace_values
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, conform

COMPLETED, FAILED, SKIPPED = "COMPLETED", "FAILED", "SKIPPED"
_PAIRWISE_SCORE = {"A": 1.0, "B": 0.0, "tie": 0.5}


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


def resolve_endpoint(config: EvaluatorConfig, runtime: JudgeRuntime) -> Endpoint | None:
    """The endpoint to call, or None when the evaluator's key is missing and no local judge is configured."""
    key = runtime.env.get(config.api_key_env) if config.api_key_env else None
    if config.api_key_env and not key:
        if not runtime.local_judge_url:
            return None
        return Endpoint(
            model=f"openai/{config.local_judge}",
            label=f"local/{config.local_judge}",
            api_base=runtime.local_judge_url,
            api_key="local",
            prices=pricing.FREE,
        )
    # OpenAI-compatible servers that need no key (vLLM, llama.cpp, the local judge) still get a placeholder,
    # because the OpenAI client refuses to send a request without one.
    api_key = key or ("no-key" if config.api_base else None)
    return Endpoint(config.model, config.model, config.api_base, api_key, config.prices())


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
    reason: str | None = None
    raw: str | None = None
    provider_model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
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

    def _cost(self, outcome: CallOutcome) -> float | None:
        prices = self.endpoint.prices
        return prices.cost(outcome.prompt_tokens, outcome.completion_tokens) if prices else None

    def _parse_cached(self, cached: dict | None) -> Verdict | None:
        # An entry written before a parser change may no longer parse: then the call is made again.
        if cached is None:
            return None
        try:
            return parse_reply(self.config, cached.get("content") or "")
        except ParseFailure:
            return None

    async def call(self, messages: list[dict[str, str]], sample: int) -> _CallResult:
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
        )
        key = cache_key(request, sample)
        cached = self.runtime.cache.get(key)
        verdict = self._parse_cached(cached)
        if verdict is not None:
            return _CallResult(
                verdict=verdict,
                raw=cached["content"],
                provider_model=cached.get("provider_model"),
                prompt_tokens=cached.get("prompt_tokens", 0),
                completion_tokens=cached.get("completion_tokens", 0),
                cost_usd=0.0,
                cached_cost_usd=cached.get("cost_usd") or 0.0,
                cache_hit=True,
            )
        reservation = None
        if self.budgeted and endpoint.prices is not None and endpoint.prices != pricing.FREE:
            worst = endpoint.prices.cost(worst_case_prompt_tokens(messages), config.max_tokens)
            reservation = self.runtime.ledger.reserve(
                config.name, worst, config.max_daily_cost_usd, config.max_monthly_cost_usd
            )
            if reservation is None:
                return _CallResult(status=SKIPPED, reason="budget_exhausted", cost_usd=0.0)
        outcome = await self.runtime.client.complete(request)
        cost = self._cost(outcome)
        if reservation is not None:
            self.runtime.ledger.settle(reservation, cost or 0.0)
        result = _CallResult(
            raw=outcome.content,
            provider_model=outcome.provider_model,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            cost_usd=cost,
            latency_ms=outcome.latency_ms,
            calls=outcome.attempts,
        )
        if not outcome.ok:
            result.status = FAILED
            result.reason = f"{outcome.error_reason} after {outcome.attempts} attempt(s): {outcome.error_detail}"
            result.raw = outcome.error_detail
            return result
        try:
            result.verdict = parse_reply(config, outcome.content or "")
        except ParseFailure as failure:
            code = "truncated" if outcome.finish_reason == "length" else failure.reason
            result.status, result.reason = FAILED, f"{code}: {failure.detail}"
            return result
        self.runtime.cache.put(
            key,
            {
                "content": outcome.content,
                "provider_model": outcome.provider_model,
                "prompt_tokens": outcome.prompt_tokens,
                "completion_tokens": outcome.completion_tokens,
                "cost_usd": cost,
            },
        )
        return result


def _pair_value(trace: dict[str, Any], pair_by: str) -> str | None:
    if pair_by.startswith("metadata."):
        metadata = json.loads(trace.get("metadata") or "{}")
        value = metadata.get(pair_by.removeprefix("metadata."))
    else:
        value = trace.get(pair_by)
    return None if value is None else str(value)


def _base_row(config: EvaluatorConfig, day: str, trace: dict[str, Any], model: str, judged_at: datetime) -> dict:
    return {
        "evaluator": config.name,
        "date": day,
        "trace_id": trace["trace_id"],
        "model": model,
        "sample": 0,
        "config_hash": config.config_hash,
        "experiment_id": trace.get("experiment_id"),
        "variant": trace.get("variant"),
        "project_id": trace.get("project_id"),
        "judged_at": judged_at,
        "cost_usd": 0.0,
        "cached_cost_usd": 0.0,
        "calls": 0,
        "cache_hit": False,
        "prompt_tokens": 0,
        "completion_tokens": 0,
    }


def _fill_from_call(row: dict, result: _CallResult) -> dict:
    row.update(
        status=result.status,
        reason=result.reason,
        raw_response=result.raw,
        provider_model=result.provider_model,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost_usd=result.cost_usd,
        cached_cost_usd=result.cached_cost_usd,
        latency_ms=result.latency_ms,
        calls=result.calls,
        cache_hit=result.cache_hit,
    )
    if result.status == COMPLETED and result.verdict is not None:
        v = result.verdict
        row.update(score=v.score, raw_score=v.raw_score, label=v.label, passed=v.passed, reasoning=v.reasoning)
    return row


@dataclass
class DayResult:
    rows: pl.DataFrame
    summary: dict[str, Any]


def judge_day(
    config: EvaluatorConfig,
    day: str,
    traces: pl.DataFrame,
    runtime: JudgeRuntime,
    manual_trace_ids: set[str] | None = None,
) -> DayResult:
    """Judge every selected trace (or pair) of `day`; every trace ends with exactly one status per sample."""
    return asyncio.run(_judge_day(config, day, traces, runtime, manual_trace_ids or set()))


async def _judge_day(config, day, traces, runtime, manual_trace_ids) -> DayResult:
    judged_at = datetime.now(UTC)
    records = traces.to_dicts()
    endpoint = resolve_endpoint(config, runtime)
    model_label = endpoint.label if endpoint else config.model

    def skip_reason(item_id: str) -> str | None:
        if not config.enabled:
            return "disabled"
        if config.trigger == "sampled" and unit_hash(config.name, item_id) >= config.sample_rate:
            return "not_sampled"
        if config.trigger == "manual" and item_id not in manual_trace_ids:
            return "not_selected"
        if endpoint is None:
            return "no_credentials"
        return None

    if config.mode == "pairwise":
        tasks = _pairwise_tasks(config, day, records, endpoint, runtime, model_label, judged_at, skip_reason)
    else:
        tasks = _single_tasks(config, day, records, endpoint, runtime, model_label, judged_at, skip_reason)
    rows = [row for group in await asyncio.gather(*tasks) for row in group]
    frame = conform(pl.DataFrame(rows, schema_overrides=JUDGE_SCORE_SCHEMA, infer_schema_length=None), JUDGE_SCORE_SCHEMA)
    return DayResult(frame, summarize(frame, len(records)))


def _skipped(row: dict, reason: str) -> list[dict]:
    row.update(status=SKIPPED, reason=reason)
    return [row]


def _single_tasks(config, day, records, endpoint, runtime, model_label, judged_at, skip_reason):
    judge = _Judge(config, endpoint, runtime) if endpoint else None

    async def one(trace: dict) -> list[dict]:
        reason = skip_reason(trace["trace_id"])
        if reason:
            return _skipped(_base_row(config, day, trace, model_label, judged_at), reason)
        try:
            messages = build_messages(config, trace_values(trace, config.span))
        except LookupError as exc:
            return _skipped(_base_row(config, day, trace, model_label, judged_at), f"span_not_found: {exc}")
        rows = []
        for sample in range(config.samples):
            row = _base_row(config, day, trace, model_label, judged_at)
            row["sample"] = sample
            rows.append(_fill_from_call(row, await judge.call(messages, sample)))
        return rows

    return [one(trace) for trace in records]


def _pairwise_tasks(config, day, records, endpoint, runtime, model_label, judged_at, skip_reason):
    options = config.pairwise
    judge = _Judge(config, endpoint, runtime) if endpoint else None
    groups: dict[str, list[dict]] = {}
    lone: list[tuple[dict, str]] = []
    for trace in records:
        value = _pair_value(trace, options.pair_by)
        if value is None:
            lone.append((trace, f"no_pair_key: {options.pair_by} is missing"))
        else:
            groups.setdefault(value, []).append(trace)
    pairs = []
    for value, members in sorted(groups.items()):
        members.sort(key=lambda t: (t.get("variant") or "", t["trace_id"]))
        if len(members) < 2:
            lone.append((members[0], f"no_pair: no other trace of {day} shares {options.pair_by}={value}"))
        pairs.extend((value, a, b) for a, b in itertools.combinations(members, 2))

    async def lone_row(trace: dict, reason: str) -> list[dict]:
        return _skipped(_base_row(config, day, trace, model_label, judged_at), reason)

    async def pair(value: str, a: dict, b: dict) -> list[dict]:
        pair_id = f"{value}|{a['trace_id']}|{b['trace_id']}"
        reason = skip_reason(pair_id)
        rows = []
        for sample in range(config.samples if not reason else 1):
            row = _base_row(config, day, a, model_label, judged_at)
            row.update(trace_id_b=b["trace_id"], pair_key=value, sample=sample)
            if reason:
                return _skipped(row, reason)
            rows.append(await _judge_pair(judge, config, row, a, b, sample, pair_id))
        return rows

    return [lone_row(t, r) for t, r in lone] + [pair(v, a, b) for v, a, b in pairs]


async def _judge_pair(judge: _Judge, config, row: dict, a: dict, b: dict, sample: int, pair_id: str) -> dict:
    options = config.pairwise
    try:
        va, vb = trace_values(a, config.span), trace_values(b, config.span)
    except LookupError as exc:
        return _skipped(row, f"span_not_found: {exc}")[0]
    orders = ["AB", "BA"]
    if options.orders == "random":
        orders = [random.Random(f"{options.seed}|{pair_id}|{sample}").choice(orders)]

    async def judge_order(order: str) -> tuple[str, _CallResult]:
        first, second = (va, vb) if order == "AB" else (vb, va)
        values = {**first, "output_a": first["output"], "output_b": second["output"]}
        return order, await judge.call(build_messages(config, values), sample)

    results = dict(await asyncio.gather(*(judge_order(o) for o in orders)))
    combined = _CallResult(cost_usd=0.0)
    for result in results.values():
        combined.prompt_tokens += result.prompt_tokens
        combined.completion_tokens += result.completion_tokens
        combined.cost_usd = None if result.cost_usd is None or combined.cost_usd is None else combined.cost_usd + result.cost_usd
        combined.cached_cost_usd += result.cached_cost_usd
        combined.latency_ms = max(combined.latency_ms, result.latency_ms)
        combined.calls += result.calls
        combined.provider_model = combined.provider_model or result.provider_model
    combined.cache_hit = all(r.cache_hit for r in results.values())
    combined.raw = "\n---\n".join(f"[{o}] {r.raw}" for o, r in results.items() if r.raw is not None) or None

    def mapped(order: str) -> str | None:
        result = results.get(order)
        if result is None or result.status != COMPLETED:
            return None
        winner = result.verdict.winner
        return {"A": "B", "B": "A"}.get(winner, winner) if order == "BA" else winner

    row.update(verdict_ab=mapped("AB"), verdict_ba=mapped("BA"))
    bad = [(o, r) for o, r in results.items() if r.status != COMPLETED]
    if bad:
        order, worst = bad[0]
        combined.status = worst.status
        combined.reason = f"{worst.reason} (order {order})"
        return _fill_from_call(row, combined)
    verdicts = [v for v in (row["verdict_ab"], row["verdict_ba"]) if v is not None]
    winner = verdicts[0] if len(set(verdicts)) == 1 else "tie"
    reasons = [r.verdict.reasoning for r in results.values() if r.verdict and r.verdict.reasoning]
    combined.verdict = Verdict(_PAIRWISE_SCORE[winner], None, winner, None, winner, "\n---\n".join(reasons) or None)
    row = _fill_from_call(row, combined)
    if len(set(verdicts)) > 1:
        row["reason"] = "inconsistent_order: the verdict flipped with the presentation order, counted as a tie"
    winner_trace = {"A": a, "B": b}.get(winner)
    row.update(
        winner=winner,
        winner_trace_id=winner_trace["trace_id"] if winner_trace else None,
        winner_variant=winner_trace.get("variant") if winner_trace else None,
    )
    return row


def summarize(rows: pl.DataFrame, traces_in_partition: int) -> dict[str, Any]:
    """Counts per status and reason code, mean score, spend: what the materialization reports."""
    status = Counter(rows["status"].to_list())
    reasons = Counter(
        (r or "").split(":")[0].split(" after ")[0]
        for r, s in zip(rows["reason"].to_list(), rows["status"].to_list(), strict=True)
        if s != COMPLETED
    )
    completed = rows.filter(pl.col("status") == COMPLETED)
    return {
        "traces_in_partition": traces_in_partition,
        "rows": rows.height,
        "completed": status.get(COMPLETED, 0),
        "failed": status.get(FAILED, 0),
        "skipped": status.get(SKIPPED, 0),
        "reasons": dict(sorted(reasons.items())),
        "mean_score": float(completed["score"].mean()) if completed.height else None,
        "cost_usd": float(rows["cost_usd"].fill_null(0).sum()),
        "calls": int(rows["calls"].sum()),
        "cache_hits": int(rows["cache_hit"].sum()),
    }
