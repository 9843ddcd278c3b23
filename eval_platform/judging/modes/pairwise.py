"""pairwise: which of two outputs ({{output_a}}, {{output_b}}) is better, or a tie; consensus by vote.

Units: the traces of a day sharing `pair_by` (sorted by variant, trace_id) are paired every way; each pair is
shown in both orders (a verdict that flips with the order is a tie) or one seeded random order. Members split
between A and B give a tie. Agreement compares A/B/tie preferences (and position consistency).

Read from JSON `winner` (or `verdict`, `choice`), else `[[A]]` / `[[B]]` / `[[C]]` (MT-Bench), `Output (a)`
(LLMBar), a candidate's name or `Response 1` alone on the first or last line (PandaLM), `Tie`, `Winner: B`.
A reply naming both candidates in those places is `ambiguous`, unless the evaluator declares
`when_both_named: first_shown` (LLMBar's parser's convention).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from eval_platform.judging.modes import VOTES, JudgeMode
from eval_platform.judging.replies import (
    ParseFailure,
    Verdict,
    choices_in_text,
    field,
    norm,
    one_verdict,
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
from eval_platform.schemas import (
    COMPLETED,
    INCONSISTENT_ORDER,
    NO_PAIR,
    SCHEMA_VIOLATION,
    SPAN_NOT_FOUND,
    UNPARSEABLE,
)
from eval_platform.strict import Strict

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig

# Words that mean a tie, so never allowed as a candidate's name.
TIE_WORDS = frozenset({"tie", "draw", "equal", "c"})
PAIRWISE_SCORE = {"A": 1.0, "B": 0.0, "tie": 0.5}  # the 0..1 score of the first-shown (A) side
_CANDIDATE_WORDS = ("output", "response", "assistant", "candidate", "model", "answer", "option")


class PairwiseOptions(Strict):
    pair_by: str = Field(
        "metadata.item_id",
        description="Traces of one day sharing this value are compared: a trace column or metadata.<key>.",
    )
    orders: Literal["both", "random"] = Field(
        "both", description="both: judge A/B and B/A, a flipped verdict is a tie; random: one seeded order."
    )
    seed: int = 0
    allow_ties: bool = Field(True, description="false: the judge must pick one; a 'tie' reply is FAILED.")
    candidate_names: tuple[str, str] = Field(
        ("A", "B"), description="What the prompt calls the two candidates, first-shown first."
    )
    when_both_named: Literal["ambiguous", "first_shown"] = Field(
        "ambiguous",
        description="A reply naming both candidates as its verdict: ambiguous (FAILED, the default), or "
        "first_shown, the convention of LLMBar's published parser (it tries the first-shown candidate's pattern "
        "first), only to reproduce figures produced by that parser.",
    )

    @field_validator("candidate_names")
    @classmethod
    def _distinct_names(cls, names: tuple[str, str]) -> tuple[str, str]:
        if names[0].strip().lower() == names[1].strip().lower() or not all(n.strip() for n in names):
            raise ValueError(f"candidate_names must be two different non-empty names, got {list(names)}")
        if any(n.strip().lower() in TIE_WORDS for n in names):
            raise ValueError(f"candidate_names may not be a tie word ({sorted(TIE_WORDS)})")
        return names


def _options(config: EvaluatorConfig) -> PairwiseOptions:
    """The evaluator's `pairwise`, which an evaluator of this mode always has once loaded (defaulted or required)."""
    value = config.pairwise
    if value is None:
        raise ValueError(f"evaluator '{config.name}' of mode '{config.mode}' has no `pairwise`")
    return value


def pairwise_aliases(names: tuple[str, str]) -> dict[str, str]:
    """Every way a judge may name the first-shown (A) or second-shown (B) candidate, or a tie."""
    aliases: dict[str, str] = {}
    for position, name in zip("AB", names, strict=True):
        inner = re.fullmatch(r".*\((\w+)\)", name.strip())
        bases = {norm(name)} | ({inner.group(1).lower()} if inner else set())
        for base in bases:
            aliases[base] = position
            for word in _CANDIDATE_WORDS:
                aliases[f"{word} {base}"] = position
                aliases[f"{word} ({base})"] = position
    for word in TIE_WORDS | {"both", "tied", "it's a tie", "it is a tie"}:
        aliases.setdefault(word, "tie")
    return aliases


def verdict_schema(config: EvaluatorConfig, _n_candidates: int | None) -> dict[str, Any]:
    options = _options(config)
    names = list(options.candidate_names) + (["tie"] if options.allow_ties else [])
    return {"winner": {"type": "string", "enum": names}}


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, _n: int | None) -> Verdict:
    options = _options(config)
    aliases = pairwise_aliases(options.candidate_names)
    value = field(obj, "winner", "verdict", "choice")
    if obj is not None and value is not None:
        winner = aliases.get(norm(str(value)))
        if winner is None:
            names = [*options.candidate_names, *(["tie"] if options.allow_ties else [])]
            raise ParseFailure(SCHEMA_VIOLATION, f"'winner' must be one of {names}, got {value!r}")
    elif obj is not None and config.strict:
        raise ParseFailure(SCHEMA_VIOLATION, "the reply has no 'winner'")
    else:
        found = choices_in_text(text, aliases)
        if options.when_both_named == "first_shown" and {named for _, named in found} == {"A", "B"}:
            found = [(where, named) for where, named in found if named == "A"]  # LLMBar's parser tries (a) first
        winner = one_verdict(found, "candidate")
        if winner is None:
            raise ParseFailure(UNPARSEABLE, "no JSON object and no single candidate on its own line or in [[...]]")
    if winner == "tie" and not options.allow_ties:
        raise ParseFailure(SCHEMA_VIOLATION, "the judge answered tie, but this evaluator forbids ties")
    return Verdict(PAIRWISE_SCORE[winner], None, winner, None, winner, None)


# ------------------------------------------------------------------------------------------ planning


def plan(day: Day) -> list[Unit]:
    """Every pair of the day's traces sharing `pair_by`; a trace alone in its group is SKIPPED no_pair."""
    config = day.config
    options = _options(config)
    groups, lone = grouped(day.records, options.pair_by)
    units = [Unit(t["trace_id"], [day.base_row(t)], skip=r) for t, r in lone]
    for value, members in groups.items():
        if len(members) < 2:
            reason = (NO_PAIR, f"no other trace of {day.day} shares {options.pair_by}={value}")
            units.append(Unit(members[0]["trace_id"], [day.base_row(members[0])], skip=reason))
        for a, b in itertools.combinations(members, 2):
            pair_id = f"{value}|{a['trace_id']}|{b['trace_id']}"
            slot = {**day.base_row(a), "trace_id_b": b["trace_id"], "pair_key": value}
            unit = Unit(pair_id, [slot], skip=candidates_skip(day, [a, b]))
            if unit.skip is not None:
                units.append(unit)
                continue
            try:
                va, vb = day.values(a), day.values(b)
            except LookupError as exc:
                unit.skip = (SPAN_NOT_FOUND, str(exc))
                units.append(unit)
                continue

            async def one(
                judge: Caller,
                sample: int,
                slot: dict = slot,
                a: dict = a,
                b: dict = b,
                va: dict = va,
                vb: dict = vb,
                pair_id: str = pair_id,
            ) -> list[dict]:
                return [await _judge_pair(judge, day, dict(slot), a, b, va, vb, sample, pair_id)]

            unit.judge = one
            units.append(unit)
    return units


def presentation_orders(config: EvaluatorConfig, pair_id: str, sample: int) -> list[str]:
    """AB, BA or both: the orders a pair is shown in."""
    if _options(config).orders == "random":
        return [random.Random(f"{_options(config).seed}|{pair_id}|{sample}").choice(["AB", "BA"])]
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


async def _judge_pair(
    judge: Caller, day: Day, row: dict, a: dict, b: dict, va: dict, vb: dict, sample: int, pair_id: str
) -> dict:
    config = day.config

    async def judge_order(order: str) -> tuple[str, CallResult]:
        first, second = (va, vb) if order == "AB" else (vb, va)
        values = {**first, "output_a": first["output"], "output_b": second["output"]}
        return order, await judge.call(day.messages(values), sample)

    orders = presentation_orders(config, pair_id, sample)
    results = dict(await asyncio.gather(*(judge_order(o) for o in orders)))
    combined = merge_calls(list(results.values()))
    combined.raw = "\n---\n".join(f"[{o}] {r.raw}" for o, r in results.items() if r.raw is not None) or None

    def mapped(order: str) -> str | None:
        result = results.get(order)
        if result is None or result.status != COMPLETED:
            return None
        winner = verdict_of(result).winner
        return unswap(winner) if order == "BA" and winner is not None else winner

    row.update(verdict_ab=mapped("AB"), verdict_ba=mapped("BA"))
    bad = [(o, r) for o, r in results.items() if r.status != COMPLETED]
    if bad:
        order, worst = bad[0]
        combined.status = worst.status
        combined.reason, combined.detail = worst.reason, f"{worst.detail} (order {order})"
        return fill_from_call(config, row, combined)
    winner, consistent = combine_orders(row["verdict_ab"], row["verdict_ba"])
    verdicts = [verdict_of(r) for r in results.values()]
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
    row = fill_from_call(config, row, combined)
    row["position_consistent"] = consistent
    if consistent is False:
        row["reason"] = INCONSISTENT_ORDER
        row["reason_detail"] = "the verdict flipped with the presentation order, counted as a tie"
        add_flag(row, INCONSISTENT_ORDER)
    row.update(_winner_columns(winner, a, b))
    return row


def _winner_columns(winner: str | None, a: dict, b: dict) -> dict:
    winner_trace = {"A": a, "B": b}.get(winner) if winner is not None else None
    return {
        "winner": winner,
        "winner_trace_id": winner_trace["trace_id"] if winner_trace else None,
        "winner_variant": winner_trace.get("variant") if winner_trace else None,
    }


def vote_fields(top: str, carrier: dict | None) -> dict[str, Any]:
    """The consensus of the members' winners: A, B or tie (a split vote), with the winning trace."""
    result: dict[str, Any] = {"winner": top, "score": PAIRWISE_SCORE[top], "label": top}
    if carrier is not None:
        result.update(winner_trace_id=carrier["winner_trace_id"], winner_variant=carrier["winner_variant"])
    return result


MODE = JudgeMode(
    "pairwise",
    "label",
    ("winner", "verdict", "choice"),
    "winner",
    agreement="preference",
    consensus=VOTES,
    options=("pairwise",),
    output_variables=("output_a", "output_b"),
    parse=parse,
    verdict_schema=verdict_schema,
    unit="pair",
    plan=plan,
    group_by=lambda config: _options(config).pair_by,
    split_vote="tie",
    vote_fields=vote_fields,
    as_judge="preference",
)
