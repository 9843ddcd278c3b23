"""Units: what one member (model x sample) judges at once, and the pieces every mode's planning shares.

A unit is a trace, a pair or a group; it has one base row per slot (trace, pair or candidate) and a `judge`
coroutine that calls the member's judge and returns those rows filled. A judge mode plans a day's units
(`JudgeMode.units`): one per trace by default (`single_units`), pairs (`modes.pairwise`) or groups
(`modes.n_wise`). The runner hands the planning a `Day`: the evaluator, the day's traces and how prompts are
built (which `judging.prompts` does on top of the modes, so a mode module never imports it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from eval_platform.judging.replies import Verdict
from eval_platform.llm.call import CallResult
from eval_platform.record_fields import field_text
from eval_platform.schemas import COMPLETED, NO_GROUP_KEY, SPAN_NOT_FOUND

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig

Messages = list[dict[str, str]]
Skip = tuple[str, str | None]  # (reason code, detail)


class Caller(Protocol):
    """A member's judge: one call of its model on some messages (cached, budgeted, parsed)."""

    async def call(self, messages: Messages, sample: int, n_candidates: int | None = None) -> CallResult[Verdict]: ...


JudgeUnit = Callable[[Caller, int], Awaitable[list[dict]]]  # (judge, sample) -> one row per slot


@dataclass
class Unit:
    """What one member judges at once: a trace, a pair or a group; one output row per slot."""

    unit_id: str  # what trigger sampling hashes
    slots: list[dict]  # base rows, one per output row
    judge: JudgeUnit | None = None
    skip: Skip | None = None  # when skipped whatever the member: no pair, span not found, ...


@dataclass
class Day:
    """What a mode's planning gets from the runner: the evaluator, the day, its traces, and prompt building."""

    config: EvaluatorConfig
    day: str
    records: list[dict[str, Any]]
    judged_at: datetime
    values: Callable[[dict[str, Any]], dict[str, Any]]  # a trace's template values; LookupError: no such span
    # (values, n_candidates, secret) -> the chat messages of one call
    messages: Callable[..., Messages]
    candidates: Callable[[list[str], str], str]  # (outputs, fence secret) -> the {{candidates}} text
    # a trace that is not sent to the judge, and why (partial, failed, no text: `judging.targets`), or None
    skip: Callable[[dict[str, Any]], Skip | None] = field(default=lambda _trace: None)
    # The evaluator's config_hash, computed once for the day's rows (a model dump and a hash: ~20 us a row).
    config_hash: str = field(init=False)

    def __post_init__(self) -> None:
        self.config_hash = self.config.config_hash

    def base_row(self, trace: dict[str, Any]) -> dict:
        return base_row(self.config, self.day, trace, self.judged_at, self.config_hash)


def base_row(
    config: EvaluatorConfig, day: str, trace: dict[str, Any], judged_at: datetime, config_hash: str | None = None
) -> dict:
    """A row's fields before the judge answers; `config_hash` is `config.config_hash`, when computed already."""
    return {
        "evaluator": config.name,
        "date": day,
        "trace_id": trace["trace_id"],
        "sample": 0,
        "config_hash": config_hash or config.config_hash,
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


def fill_from_call(config: EvaluatorConfig, row: dict, result: CallResult[Verdict]) -> dict:
    """`row` with the call's status, reason, reply, tokens and spend, and its verdict when COMPLETED."""
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


def verdict_of(result: CallResult[Verdict]) -> Verdict:
    """The verdict of a COMPLETED call (its parse gave one; a COMPLETED call without one is a bug, never a row)."""
    if result.verdict is None:
        raise ValueError(f"a {result.status} call has no verdict")
    return result.verdict


def merge_calls(results: list[CallResult[Verdict]]) -> CallResult[Verdict]:
    """Tokens, spend and calls of several calls made for one row (the orders of a pair or group), as one
    result of the calls' own kind: COMPLETED, no verdict yet."""
    combined = type(results[0])(cost_usd=0.0)
    for result in results:
        combined.prompt_tokens += result.prompt_tokens
        combined.completion_tokens += result.completion_tokens
        combined.cached_prompt_tokens += result.cached_prompt_tokens
        spent, more = combined.cost_usd, result.cost_usd
        combined.cost_usd = None if spent is None or more is None else spent + more
        combined.cached_cost_usd += result.cached_cost_usd
        combined.latency_ms = max(combined.latency_ms, result.latency_ms)
        combined.calls += result.calls
        combined.provider_model = combined.provider_model or result.provider_model
    combined.cache_hit = all(r.cache_hit for r in results)
    return combined


def grouped(records: list[dict[str, Any]], key: str) -> tuple[dict[str, list[dict]], list[tuple[dict, Skip]]]:
    """Traces of the day by their `key` value (sorted by variant, trace_id), and the traces without one."""
    groups: dict[str, list[dict]] = {}
    lone: list[tuple[dict, Skip]] = []
    for trace in records:
        value = field_text(trace, key)
        if value is None:
            lone.append((trace, (NO_GROUP_KEY, f"{key} is missing")))
        else:
            groups.setdefault(value, []).append(trace)
    for members in groups.values():
        members.sort(key=lambda t: (t.get("variant") or "", t["trace_id"]))
    return dict(sorted(groups.items())), lone


def candidates_skip(day: Day, members: list[dict[str, Any]]) -> Skip | None:
    """Why a pair or group is not sent, when one of its traces is not (partial, failed, no text: `day.skip`):
    a comparison is never paid for with a candidate that could not be judged alone."""
    for trace in members:
        skip = day.skip(trace)
        if skip is not None:
            code, detail = skip
            return code, f"candidate {trace.get('trace_id')}: {detail}"
    return None


def one_call(day: Day, slot: dict, messages: Messages) -> JudgeUnit:
    """A unit's judge that makes one call on `messages` and fills its one slot."""

    async def one(judge: Caller, sample: int) -> list[dict]:
        return [fill_from_call(day.config, dict(slot), await judge.call(messages, sample))]

    return one


def single_units(day: Day) -> list[Unit]:
    """One unit per trace, judged in one call: the plan of every mode that judges traces one at a time."""
    config = day.config
    out = []
    for trace in day.records:
        unit = Unit(trace["trace_id"], [day.base_row(trace)], skip=day.skip(trace))
        out.append(unit)
        if unit.skip is not None:
            continue
        try:
            values = day.values(trace)
        except LookupError as exc:
            unit.skip = (SPAN_NOT_FOUND, str(exc))
            continue
        for name, code, detail in config.judge_mode.needs_values:
            if not values[name]:
                unit.skip = (code, detail)
        unit.judge = one_call(day, unit.slots[0], day.messages(values))
    return out
