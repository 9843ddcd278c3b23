"""n_wise: a ranking of several candidates ({{candidates}}); each candidate's rank is its value.

Read from JSON `ranking` (or `rank`, `order`), else `[[C > A > B]]` or `Ranking: C, A, B`.

Units: the traces of a day sharing `group_by` (sorted by variant, trace_id) are one group, shown in
`permutations` orders (as found, reversed, then seeded shuffles); a candidate's value is its mean rank over
the orders. Members are combined by mean or median of those ranks; agreement compares them as scores.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from typing import TYPE_CHECKING, Any

from pydantic import Field

from eval_platform.judging.fencing import new_secret
from eval_platform.judging.modes import AVERAGES, JudgeMode
from eval_platform.judging.replies import (
    BRACKET_RE,
    WRAPPING,
    ParseFailure,
    Verdict,
    field,
    norm,
    one_verdict,
    text_candidates,
)
from eval_platform.judging.units import (
    Caller,
    CallResult,
    Day,
    Unit,
    add_flag,
    candidates_skip,
    fill_from_call,
    grouped,
    merge_calls,
    verdict_of,
)
from eval_platform.schemas import COMPLETED, GROUP_SIZE, SCHEMA_VIOLATION, SPAN_NOT_FOUND, UNPARSEABLE
from eval_platform.strict import Strict

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig


MAX_CANDIDATES = 10


class NWiseOptions(Strict):
    group_by: str = Field("metadata.item_id", description="Traces of one day sharing this value are ranked together.")
    permutations: int = Field(
        2,
        ge=1,
        le=MAX_CANDIDATES,
        description="Presentation orders per group: as found, reversed, then seeded shuffles.",
    )
    seed: int = 0
    min_candidates: int = Field(2, ge=2, le=MAX_CANDIDATES)


def _options(config: EvaluatorConfig) -> NWiseOptions:
    """The evaluator's `n_wise`, which an evaluator of this mode always has once loaded (defaulted or required)."""
    value = config.n_wise
    if value is None:
        raise ValueError(f"evaluator '{config.name}' of mode '{config.mode}' has no `n_wise`")
    return value


def candidate_letters(n: int) -> list[str]:
    """The letters candidates are shown under: A, B, C, ..."""
    return [chr(ord("A") + i) for i in range(n)]


def verdict_schema(_config: EvaluatorConfig, n_candidates: int | None) -> dict[str, Any]:
    letters = candidate_letters(n_candidates or 2)
    return {
        "ranking": {
            "type": "array",
            "description": "every candidate's letter exactly once, best first",
            "items": {"type": "string", "enum": letters},
            "minItems": len(letters),
            "maxItems": len(letters),
            "uniqueItems": True,
        }
    }


def _letters(items: list) -> list[str]:
    return [re.sub(r"^(?:candidate\s+)?", "", norm(str(item)), flags=re.IGNORECASE).upper() for item in items]


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, n_candidates: int | None) -> Verdict:
    letters = candidate_letters(n_candidates or 0)
    value = field(obj, "ranking", "rank", "order")
    if obj is not None and value is not None:
        items = value if isinstance(value, list) else re.split(r"\s*(?:>|,|;)\s*", str(value))
    elif obj is not None and config.strict:
        raise ParseFailure(SCHEMA_VIOLATION, "the reply has no 'ranking'")
    else:
        found = [m for m in BRACKET_RE.findall(text) if ">" in m or "," in m]
        found += [c for c in text_candidates(text) if re.fullmatch(r"\W*\w+(?:\s*[>,]\s*\w+)+\W*", c.strip())]
        split = [(c, tuple(_letters(re.split(r"\s*(?:>|,)\s*", c.strip(WRAPPING + "[]"))))) for c in found]
        ranking = one_verdict(split, "ranking")
        if ranking is None:
            raise ParseFailure(UNPARSEABLE, "no JSON object, [[C > A > B]] or 'Ranking: C, A, B' line")
        items = list(ranking)
    ranking = _letters(items)
    if sorted(ranking) != letters:
        raise ParseFailure(SCHEMA_VIOLATION, f"the ranking must list each of {letters} exactly once, got {ranking}")
    return Verdict(None, None, None, None, None, None, ranking=tuple(ranking))


# ------------------------------------------------------------------------------------------ planning


def plan(day: Day) -> list[Unit]:
    """One group per `group_by` value; a group outside min_candidates..MAX_CANDIDATES is SKIPPED group_size."""
    config = day.config
    options = _options(config)
    groups, lone = grouped(day.records, options.group_by)
    units = [Unit(t["trace_id"], [day.base_row(t)], skip=r) for t, r in lone]
    for value, members in groups.items():
        slots = [{**day.base_row(t), "pair_key": value} for t in members]
        unit = Unit(f"{value}|" + "|".join(t["trace_id"] for t in members), slots)
        if not options.min_candidates <= len(members) <= MAX_CANDIDATES:
            unit.skip = (
                GROUP_SIZE,
                f"{len(members)} traces share {options.group_by}={value}; "
                f"n_wise ranks {options.min_candidates}..{MAX_CANDIDATES}",
            )
            units.append(unit)
            continue
        unit.skip = candidates_skip(day, members)
        if unit.skip is not None:
            units.append(unit)
            continue
        try:
            values = [day.values(t) for t in members]
        except LookupError as exc:
            unit.skip = (SPAN_NOT_FOUND, str(exc))
            units.append(unit)
            continue

        async def rank(
            judge: Caller,
            sample: int,
            slots: list[dict] = slots,
            values: list[dict] = values,
            group_id: str = unit.unit_id,
        ) -> list[dict]:
            return await _judge_group(judge, day, [dict(s) for s in slots], values, sample, group_id)

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


async def _judge_group(
    judge: Caller, day: Day, rows: list[dict], values: list[dict], sample: int, group_id: str
) -> list[dict]:
    config = day.config
    n = len(rows)
    orders = group_orders(n, _options(config).permutations, _options(config).seed, group_id, sample)

    async def judge_order(order: tuple[int, ...]) -> CallResult:
        secret = new_secret()
        shown = {**values[order[0]], "candidates": day.candidates([values[i]["output"] for i in order], secret)}
        messages = day.messages(shown, n_candidates=n, secret=secret)
        return await judge.call(messages, sample, n_candidates=n)

    results = await asyncio.gather(*(judge_order(o) for o in orders))
    combined = merge_calls(results)
    combined.raw = "\n---\n".join(
        f"[{''.join(map(str, o))}] {r.raw}" for o, r in zip(orders, results, strict=True) if r.raw
    )
    bad = [(o, r) for o, r in zip(orders, results, strict=True) if r.status != COMPLETED]
    # The group's calls are accounted on its first row, so sums over rows count each call once.
    accounted = [fill_from_call(config, rows[0], combined)] + [
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
        [order[ord(letter) - ord("A")] for letter in verdict_of(result).ranking or ()]
        for order, result in zip(orders, results, strict=True)
    ]
    means = mean_ranks(rankings, n)
    final = competition_ranks(means)
    consistent = all(r == rankings[0] for r in rankings) if len(rankings) > 1 else None
    verdicts = [verdict_of(r) for r in results]
    reasons = "\n---\n".join(v.reasoning for v in verdicts if v.reasoning) or None
    confidences = [v.confidence for v in verdicts if v.confidence is not None]
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


MODE = JudgeMode(
    "n_wise",
    "ranking",
    ("ranking", "rank", "order"),
    "raw_score",
    agreement="scores",
    consensus=AVERAGES,
    options=("n_wise",),
    output_variables=("candidates",),
    required_variables=(("candidates", "where the candidates are listed"),),
    parse=parse,
    verdict_schema=verdict_schema,
    few_shot=False,
    unit="group",
    plan=plan,
    group_by=lambda config: _options(config).group_by,
)
