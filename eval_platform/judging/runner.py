"""Judge one day of traces with one evaluator: selection, calls, cache, budget, and one status per row.

Framework-free: the `judge_scores` asset calls `judge_day` and writes what it returns. A unit is a trace
(score, binary, assertion, categorical, reference), a pair (pairwise) or a group (n_wise). Every unit gets
one row per slot (trace, pair or candidate) and member (model x sample) with status COMPLETED, FAILED
(reason and raw reply kept, never a score) or SKIPPED (reason). With several members a `consensus` row
per slot combines them (see `consensus`); `role <> 'member'` selects the one final row per slot.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import os
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from eval_platform.judging import pricing
from eval_platform.judging.budget import BudgetLedger, BudgetRefused, Reservation, reserve_or_wait
from eval_platform.judging.cache import JudgeCache, cache_key
from eval_platform.judging.client import CallOutcome, JudgeClient, JudgeRequest
from eval_platform.judging.config import MAX_CANDIDATES, EvaluatorConfig, ModelSpec
from eval_platform.judging.consensus import COMPLETED, FAILED, PAIRWISE_SCORE, SKIPPED, consensus_row
from eval_platform.judging.fencing import new_secret
from eval_platform.judging.parsing import ParseFailure, Verdict, parse_reply
from eval_platform.judging.prompts import build_messages, candidates_text, trace_values
from eval_platform.judging.redaction import remember, remember_env
from eval_platform.record_fields import field_text
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


def _base_row(config: EvaluatorConfig, day: str, trace: dict[str, Any], judged_at: datetime) -> dict:
    return {
        "evaluator": config.name,
        "date": day,
        "trace_id": trace["trace_id"],
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
        "cached_prompt_tokens": 0,
    }


def add_flag(row: dict, flag: str) -> None:
    flags = set(filter(None, (row.get("flags") or "").split(",")))
    row["flags"] = ",".join(sorted(flags | {flag}))


def _fill_from_call(config: EvaluatorConfig, row: dict, result: _CallResult) -> dict:
    row.update(
        status=result.status,
        reason=result.reason,
        reason_detail=result.detail,
        raw_response=result.raw,
        provider_model=result.provider_model,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cached_prompt_tokens=result.cached_prompt_tokens,
        cost_usd=result.cost_usd,
        cached_cost_usd=result.cached_cost_usd,
        latency_ms=result.latency_ms,
        calls=result.calls,
        cache_hit=result.cache_hit,
    )
    if result.status == COMPLETED and result.verdict is not None:
        v = result.verdict
        row.update(
            score=v.score,
            raw_score=v.raw_score,
            label=v.label,
            passed=v.passed,
            reasoning=v.reasoning,
            confidence=v.confidence,
        )
        if v.confidence is not None and v.confidence < config.min_confidence:
            add_flag(row, "low_confidence")
    return row


@dataclass
class DayResult:
    rows: pl.DataFrame
    summary: dict[str, Any]


@dataclass(frozen=True)
class _Member:
    label: str  # what rows show in `model`
    judge: _Judge | None  # None: the model's key is missing and no local judge is configured
    sample: int


@dataclass
class _Unit:
    """What one member judges at once: a trace, a pair or a group; one output row per slot."""

    unit_id: str  # what trigger sampling hashes
    slots: list[dict]  # base rows, one per output row
    judge: Any = None  # async (judge, sample) -> list[dict], one row per slot
    skip: tuple[str, str | None] | None = None  # (code, detail) when skipped whatever the member: no pair, ...


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

    async def member_rows(unit: _Unit, member: _Member) -> list[dict]:
        if member.judge is None:
            detail = _no_credentials_detail(config)
            rows = [{**slot, "status": SKIPPED, "reason": "no_credentials", "reason_detail": detail} for slot in unit.slots]
        else:
            rows = await unit.judge(member.judge, member.sample)
        for row in rows:
            row.update(model=member.label, sample=member.sample, role="member" if several else "verdict")
        return rows

    async def run(unit: _Unit) -> list[dict]:
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

    planners = {"pairwise": _pair_units, "n_wise": _group_units}
    units = planners.get(config.mode, _single_units)(config, day, records, judged_at)
    rows = [row for group in await asyncio.gather(*(run(u) for u in units)) for row in group]
    for row in rows:
        row["is_final"] = row["role"] != "member"
    frame = conform(pl.DataFrame(rows, schema_overrides=JUDGE_SCORE_SCHEMA, infer_schema_length=None), JUDGE_SCORE_SCHEMA)
    return DayResult(frame, summarize(frame, len(records)))


def _single_units(config, day, records, judged_at) -> list[_Unit]:
    units = []
    for trace in records:
        unit = _Unit(trace["trace_id"], [_base_row(config, day, trace, judged_at)])
        try:
            values = trace_values(trace, config.span)
        except LookupError as exc:
            unit.skip = ("span_not_found", str(exc))
            units.append(unit)
            continue
        if config.mode == "reference" and not values["expected"]:
            unit.skip = ("no_reference", "the trace has no expected_output (nor a matching dataset case)")
        messages = build_messages(config, values)

        async def one(judge: _Judge, sample: int, slot=unit.slots[0], messages=messages) -> list[dict]:
            return [_fill_from_call(config, dict(slot), await judge.call(messages, sample))]

        unit.judge = one
        units.append(unit)
    return units


def _grouped(records, key: str, day: str):
    """Traces of the day by their `key` value (sorted by variant, trace_id), and the traces without one."""
    groups: dict[str, list[dict]] = {}
    lone: list[tuple[dict, str]] = []
    for trace in records:
        value = field_text(trace, key)
        if value is None:
            lone.append((trace, ("no_group_key", f"{key} is missing")))
        else:
            groups.setdefault(value, []).append(trace)
    for members in groups.values():
        members.sort(key=lambda t: (t.get("variant") or "", t["trace_id"]))
    return dict(sorted(groups.items())), lone


def _pair_units(config, day, records, judged_at) -> list[_Unit]:
    options = config.pairwise
    groups, lone = _grouped(records, options.pair_by, day)
    units = [_Unit(t["trace_id"], [_base_row(config, day, t, judged_at)], skip=r) for t, r in lone]
    for value, members in groups.items():
        if len(members) < 2:
            reason = ("no_pair", f"no other trace of {day} shares {options.pair_by}={value}")
            units.append(_Unit(members[0]["trace_id"], [_base_row(config, day, members[0], judged_at)], skip=reason))
        for a, b in itertools.combinations(members, 2):
            pair_id = f"{value}|{a['trace_id']}|{b['trace_id']}"
            slot = {**_base_row(config, day, a, judged_at), "trace_id_b": b["trace_id"], "pair_key": value}
            unit = _Unit(pair_id, [slot])
            try:
                va, vb = trace_values(a, config.span), trace_values(b, config.span)
            except LookupError as exc:
                unit.skip = ("span_not_found", str(exc))
                units.append(unit)
                continue

            async def one(judge, sample, slot=slot, a=a, b=b, va=va, vb=vb, pair_id=pair_id) -> list[dict]:
                return [await _judge_pair(judge, config, dict(slot), a, b, va, vb, sample, pair_id)]

            unit.judge = one
            units.append(unit)
    return units


def presentation_orders(config: EvaluatorConfig, pair_id: str, sample: int) -> list[str]:
    """AB, BA or both: the orders a pair is shown in."""
    if config.pairwise.orders == "random":
        return [random.Random(f"{config.pairwise.seed}|{pair_id}|{sample}").choice(["AB", "BA"])]
    return ["AB", "BA"]


def combine_orders(verdict_ab: str | None, verdict_ba: str | None) -> tuple[str, bool | None]:
    """The pair's winner from its verdicts per order (both in A/B terms), and whether they agree.

    A verdict that flips with the presentation order is a tie (FastChat's both-order rule); with one order
    judged, that verdict stands and consistency is unknown (None).
    """
    verdicts = [v for v in (verdict_ab, verdict_ba) if v is not None]
    if len(verdicts) < 2:
        return verdicts[0], None
    consistent = verdicts[0] == verdicts[1]
    return (verdicts[0] if consistent else "tie"), consistent


def unswap(winner: str) -> str:
    """A verdict given with B shown first, in A/B terms."""
    return {"A": "B", "B": "A"}.get(winner, winner)


def _merge_calls(results: list[_CallResult]) -> _CallResult:
    """Tokens, spend and calls of several calls made for one row."""
    combined = _CallResult(cost_usd=0.0)
    for result in results:
        combined.prompt_tokens += result.prompt_tokens
        combined.completion_tokens += result.completion_tokens
        combined.cached_prompt_tokens += result.cached_prompt_tokens
        unknown = result.cost_usd is None or combined.cost_usd is None
        combined.cost_usd = None if unknown else combined.cost_usd + result.cost_usd
        combined.cached_cost_usd += result.cached_cost_usd
        combined.latency_ms = max(combined.latency_ms, result.latency_ms)
        combined.calls += result.calls
        combined.provider_model = combined.provider_model or result.provider_model
    combined.cache_hit = all(r.cache_hit for r in results)
    return combined


async def _judge_pair(judge: _Judge, config, row: dict, a: dict, b: dict, va, vb, sample: int, pair_id: str) -> dict:
    async def judge_order(order: str) -> tuple[str, _CallResult]:
        first, second = (va, vb) if order == "AB" else (vb, va)
        values = {**first, "output_a": first["output"], "output_b": second["output"]}
        return order, await judge.call(build_messages(config, values), sample)

    orders = presentation_orders(config, pair_id, sample)
    results = dict(await asyncio.gather(*(judge_order(o) for o in orders)))
    combined = _merge_calls(list(results.values()))
    combined.raw = "\n---\n".join(f"[{o}] {r.raw}" for o, r in results.items() if r.raw is not None) or None

    def mapped(order: str) -> str | None:
        result = results.get(order)
        if result is None or result.status != COMPLETED:
            return None
        return unswap(result.verdict.winner) if order == "BA" else result.verdict.winner

    row.update(verdict_ab=mapped("AB"), verdict_ba=mapped("BA"))
    bad = [(o, r) for o, r in results.items() if r.status != COMPLETED]
    if bad:
        order, worst = bad[0]
        combined.status = worst.status
        combined.reason, combined.detail = worst.reason, f"{worst.detail} (order {order})"
        return _fill_from_call(config, row, combined)
    winner, consistent = combine_orders(row["verdict_ab"], row["verdict_ba"])
    verdicts = [r.verdict for r in results.values()]
    reasons = [v.reasoning for v in verdicts if v.reasoning]
    confidences = [v.confidence for v in verdicts if v.confidence is not None]
    combined.verdict = Verdict(
        PAIRWISE_SCORE[winner],
        None,
        winner,
        None,
        winner,
        "\n---\n".join(reasons) or None,
        confidence=min(confidences) if confidences else None,
    )
    row = _fill_from_call(config, row, combined)
    row["position_consistent"] = consistent
    if consistent is False:
        row["reason"] = "inconsistent_order"
        row["reason_detail"] = "the verdict flipped with the presentation order, counted as a tie"
        add_flag(row, "inconsistent_order")
    row.update(_winner_columns(winner, a, b))
    return row


def _winner_columns(winner: str | None, a: dict, b: dict) -> dict:
    winner_trace = {"A": a, "B": b}.get(winner)
    return {
        "winner": winner,
        "winner_trace_id": winner_trace["trace_id"] if winner_trace else None,
        "winner_variant": winner_trace.get("variant") if winner_trace else None,
    }


def _group_units(config, day, records, judged_at) -> list[_Unit]:
    options = config.n_wise
    groups, lone = _grouped(records, options.group_by, day)
    units = [_Unit(t["trace_id"], [_base_row(config, day, t, judged_at)], skip=r) for t, r in lone]
    for value, members in groups.items():
        slots = [{**_base_row(config, day, t, judged_at), "pair_key": value} for t in members]
        unit = _Unit(f"{value}|" + "|".join(t["trace_id"] for t in members), slots)
        if not options.min_candidates <= len(members) <= MAX_CANDIDATES:
            unit.skip = (
                "group_size",
                f"{len(members)} traces share {options.group_by}={value}; "
                f"n_wise ranks {options.min_candidates}..{MAX_CANDIDATES}",
            )
            units.append(unit)
            continue
        try:
            values = [trace_values(t, config.span) for t in members]
        except LookupError as exc:
            unit.skip = ("span_not_found", str(exc))
            units.append(unit)
            continue

        async def rank(judge, sample, slots=slots, values=values, group_id=unit.unit_id) -> list[dict]:
            return await _judge_group(judge, config, [dict(s) for s in slots], values, sample, group_id)

        unit.judge = rank
        units.append(unit)
    return units


def group_orders(n: int, permutations: int, seed: int, group_id: str, sample: int) -> list[tuple[int, ...]]:
    """Presentation orders of n candidates: as found, reversed, then seeded shuffles; no order twice."""
    orders: list[tuple[int, ...]] = []
    candidates = [tuple(range(n)), tuple(reversed(range(n)))]
    rng = random.Random(f"{seed}|{group_id}|{sample}")
    limit = min(permutations, math.factorial(n))
    while len(orders) < limit:
        order = candidates.pop(0) if candidates else tuple(rng.sample(range(n), n))
        if order not in orders:
            orders.append(order)
    return orders


def mean_ranks(rankings: list[list[int]], n: int) -> list[float]:
    """Each candidate's mean rank (1 = best) over rankings given as candidate indices, best first."""
    totals = [0.0] * n
    for ranking in rankings:
        for position, candidate in enumerate(ranking, start=1):
            totals[candidate] += position
    return [total / len(rankings) for total in totals]


def competition_ranks(values: list[float]) -> list[int]:
    """1 + how many candidates have a strictly better (lower) mean rank: ties share a rank."""
    return [1 + sum(other < value for other in values) for value in values]


async def _judge_group(judge: _Judge, config, rows: list[dict], values: list[dict], sample: int, group_id: str):
    n = len(rows)
    orders = group_orders(n, config.n_wise.permutations, config.n_wise.seed, group_id, sample)

    async def judge_order(order: tuple[int, ...]) -> _CallResult:
        secret = new_secret()
        shown = {**values[order[0]], "candidates": candidates_text([values[i]["output"] for i in order], secret)}
        messages = build_messages(config, shown, n_candidates=n, secret=secret)
        return await judge.call(messages, sample, n_candidates=n)

    results = await asyncio.gather(*(judge_order(o) for o in orders))
    combined = _merge_calls(results)
    combined.raw = "\n---\n".join(f"[{''.join(map(str, o))}] {r.raw}" for o, r in zip(orders, results, strict=True) if r.raw)
    bad = [(o, r) for o, r in zip(orders, results, strict=True) if r.status != COMPLETED]
    # The group's calls are accounted on its first row, so sums over rows count each call once.
    accounted = [_fill_from_call(config, rows[0], combined)] + [
        {**row, "status": combined.status, "latency_ms": combined.latency_ms, "cache_hit": combined.cache_hit}
        for row in rows[1:]
    ]
    if bad:
        order, worst = bad[0]
        for row in accounted:
            row.update(
                status=worst.status,
                reason=worst.reason,
                reason_detail=f"{worst.detail} (order {''.join(map(str, order))})",
            )
        return accounted
    rankings = [
        [order[ord(letter) - ord("A")] for letter in result.verdict.ranking]
        for order, result in zip(orders, results, strict=True)
    ]
    means = mean_ranks(rankings, n)
    final = competition_ranks(means)
    consistent = all(r == rankings[0] for r in rankings) if len(rankings) > 1 else None
    reasons = "\n---\n".join(r.verdict.reasoning for r in results if r.verdict.reasoning) or None
    confidences = [r.verdict.confidence for r in results if r.verdict.confidence is not None]
    for i, row in enumerate(accounted):
        row.update(
            status=COMPLETED,
            raw_score=means[i],
            score=1.0 - (means[i] - 1.0) / (n - 1),
            label=str(final[i]),
            reasoning=reasons,
            confidence=min(confidences) if confidences else None,
            position_consistent=consistent,
        )
        if consistent is False:
            add_flag(row, "rank_inconsistent")
        if confidences and min(confidences) < config.min_confidence:
            add_flag(row, "low_confidence")
    return accounted


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
