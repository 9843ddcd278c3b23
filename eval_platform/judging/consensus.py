"""Combine the verdicts of several judges (models x samples) on one slot into a consensus row.

Rules, per `consensus`:
- `mean` / `median` (score, reference, n_wise): of the COMPLETED members' raw scores (mean ranks for
  n_wise); the normalized score follows, being linear in the raw score.
- `majority_vote`: the most common verdict (pairwise winner, binary/assertion pass, categorical label,
  or raw score). A tie for first place is FAILED `no_consensus`, except in pairwise, where a split
  between A and B (or with tie) is a tie, as a verdict that flips with the order is.
- `unanimous`: every COMPLETED member gave the same verdict; otherwise FAILED `no_consensus`
  (pairwise: a tie).

`agreement` says how much the members agreed: for labels, the share of members voting for the
consensus verdict; for numbers, 1 minus the range of their normalized scores (1 = identical, 0 = at
opposite ends of the scale). Below `min_agreement_threshold` the row is FAILED `low_agreement` (the
members' verdicts stay in their own rows); with `flag_on_disagreement` any agreement below 1 adds the
flag `disagreement`. FAILED and SKIPPED members do not vote; `votes` counts the members that did.
The consensus row carries no spend: calls are accounted on the member rows.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import TYPE_CHECKING

from eval_platform.schemas import ALL_MEMBERS_FAILED, COMPLETED, FAILED, LOW_AGREEMENT, NO_CONSENSUS, SKIPPED

if TYPE_CHECKING:  # the config (and its mode) come in at run time: the modes import this module
    from eval_platform.judging.config import EvaluatorConfig


def _vote(config: EvaluatorConfig, row: dict):
    return row[config.judge_mode.vote_column]


def consensus_row(config: EvaluatorConfig, row: dict, members: list[dict]) -> dict:
    """`row` (the slot's base fields) completed from the member rows of that slot."""
    row = {
        **row,
        "calls": 0,
        "cost_usd": 0.0,
        "cached_cost_usd": 0.0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_prompt_tokens": 0,
    }
    done = [m for m in members if m["status"] == COMPLETED]
    row["votes"] = len(done)
    row["cache_hit"] = all(m.get("cache_hit") for m in members)
    if not done:
        failed = [m for m in members if m["status"] == FAILED]
        if failed:
            first = failed[0]
            detail = (
                f"{first['reason']}: {first.get('reason_detail')}" if first.get("reason_detail") else first["reason"]
            )
            return {**row, "status": FAILED, "reason": ALL_MEMBERS_FAILED, "reason_detail": detail}
        return {
            **row,
            "status": SKIPPED,
            "reason": members[0]["reason"],
            "reason_detail": members[0].get("reason_detail"),
        }
    if config.judge_mode.numeric and config.consensus in {"mean", "median"}:
        row.update(_numeric(config, done))
    else:
        outcome = _by_vote(config, done)
        if outcome is None:
            counts = Counter(str(_vote(config, m)) for m in done)
            return {**row, "status": FAILED, "reason": NO_CONSENSUS, "reason_detail": f"votes {dict(counts)}"}
        row.update(outcome)
    row["status"] = COMPLETED
    confidences = [m["confidence"] for m in done if m.get("confidence") is not None]
    row["confidence"] = min(confidences) if confidences else None
    row["reasoning"] = f"{config.consensus} of {len(done)} verdict(s), agreement {row['agreement']:.2f}"
    threshold = config.min_agreement_threshold
    if threshold is not None and row["agreement"] < threshold:
        for key in ("score", "raw_score", "label", "passed", "winner", "winner_trace_id", "winner_variant"):
            row[key] = None
        return {
            **row,
            "status": FAILED,
            "reason": LOW_AGREEMENT,
            "reason_detail": f"{row['agreement']:.2f} < min_agreement_threshold {threshold}",
        }
    if config.flag_on_disagreement and row["agreement"] < 1.0:
        row["flags"] = "disagreement"
    return row


def _numeric(config: EvaluatorConfig, done: list[dict]) -> dict:
    combine = statistics.fmean if config.consensus == "mean" else statistics.median
    scores = [m["score"] for m in done]
    result = {
        "raw_score": combine([m["raw_score"] for m in done]),
        "score": combine(scores),
        "agreement": 1.0 - (max(scores) - min(scores)),
    }
    # No label: a label carried by a member (n_wise's competition rank) needs the whole group (raw_score has
    # the mean rank), and a scaled verdict has none.
    return result


def _by_vote(config: EvaluatorConfig, done: list[dict]) -> dict | None:
    counts = Counter(_vote(config, m) for m in done)
    (top, top_count), *rest = counts.most_common()
    split = (rest and rest[0][1] == top_count) if config.consensus == "majority_vote" else bool(rest)
    mode = config.judge_mode
    if split:
        if mode.split_vote is None:
            return None
        top = mode.split_vote
    agreement = counts.get(top, 0) / len(done)
    carrier = next((m for m in done if _vote(config, m) == top), None)
    if mode.vote_fields is not None:
        return {**mode.vote_fields(top, carrier), "agreement": agreement}
    assert carrier is not None  # `top` is a vote cast: only a mode with its own vote_fields gives a split vote
    return {
        "agreement": agreement,
        "score": carrier["score"],
        "raw_score": carrier["raw_score"],
        "label": carrier["label"],
        "passed": carrier["passed"],
    }
