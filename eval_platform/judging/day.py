"""What every evaluator-day shares, judged or checked: which traces are its and selected, and the day's result.

`judging.runner` (judge evaluators) and `judging.checks` (check evaluators, no model) both build on it, so the
same traces are selected whoever scores them and both report the same summary.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, SupportsFloat, cast

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import (
    COMPLETED,
    DISABLED,
    FAILED,
    FINAL_COMPLETED,
    NOT_SAMPLED,
    NOT_SELECTED,
    OUT_OF_RANGE,
    PLACEHOLDER_ROW,
    SKIPPED,
    nothing_to_judge,
)


def unit_hash(*parts: str) -> float:
    """A stable number in [0, 1) per evaluator and trace: sampling picks the same traces on every rerun."""
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def selection_skip(config: EvaluatorConfig, unit_id: str, manual_trace_ids: set[str]) -> tuple[str, str] | None:
    """Why a trace (pair, group) is not judged, whoever judges it: disabled, not sampled, not named (manual)."""
    if not config.enabled:
        return DISABLED, "the evaluator has enabled: false"
    if config.trigger == "sampled":
        assert config.sample_rate is not None  # `EvaluatorConfig`: trigger 'sampled' needs sample_rate
        if unit_hash(config.name, unit_id) >= config.sample_rate:
            return NOT_SAMPLED, f"outside sample_rate {config.sample_rate}"
    if config.trigger == "manual" and unit_id not in manual_trace_ids:
        return NOT_SELECTED, "trigger 'manual' and the trace was not named in the run config"
    return None


def in_projects(config: EvaluatorConfig, traces: pl.DataFrame) -> pl.DataFrame:
    """The traces that are the evaluator's: those of its `projects`, or every trace when it names none. The others
    get no row (they are not this evaluator's, as another day's traces are not this partition's)."""
    if config.projects is None:
        return traces
    if "project_id" not in traces.columns:  # traces of no project: none is the evaluator's
        return traces.clear()
    return traces.filter(pl.col("project_id").is_in(config.projects))


@dataclass
class DayResult:
    rows: pl.DataFrame
    summary: dict[str, Any]


def summarize(rows: pl.DataFrame, traces_in_partition: int) -> dict[str, Any]:
    """Counts per status and reason code, mean score, spend: what the materialization reports."""
    tally = DayTally()
    tally.add(rows)
    return tally.summary(traces_in_partition)


class ExactSum:
    """A sum of floats kept exact however many are added (Shewchuk's partials, as `math.fsum`), rounded once
    when read: the day's total is the same number whether its rows came in one chunk or in thousands."""

    def __init__(self) -> None:
        self._partials: list[float] = []

    def add(self, values: list[float]) -> None:
        partials = self._partials
        for x in values:
            i = 0
            for y in partials:
                if abs(x) < abs(y):
                    x, y = y, x
                high = x + y
                low = y - (high - x)
                if low:
                    partials[i] = low
                    i += 1
                x = high
            partials[i:] = [x]

    @property
    def value(self) -> float:
        return math.fsum(self._partials)


PREVIEW_ROWS = 8  # the final rows a materialization shows


def preview_rows(rows: pl.DataFrame, n: int = PREVIEW_ROWS) -> pl.DataFrame:
    """The final rows a user needs to see first: FAILED, then the lowest scores, then rows skipped for a reason
    worth reading, and rows merely not selected (not sampled, not named, disabled) last; in their order otherwise.
    Taking them from a tally's earlier pick plus the next chunk gives the pick of the whole day."""
    unselected = pl.col("reason").is_in([NOT_SAMPLED, NOT_SELECTED, DISABLED])
    rank = (
        pl.when(pl.col("status") == FAILED)
        .then(0)
        .when(pl.col("status") == COMPLETED)
        .then(1)
        .when(unselected.fill_null(False))
        .then(3)
        .otherwise(2)
    )
    final = rows.filter(pl.col("is_final"))
    return final.sort(rank, pl.col("score"), nulls_last=True, maintain_order=True).head(n)


class DayTally:
    """The day's summary counted chunk by chunk as its rows are written, never holding them: status and reason
    counts, the mean final score, spend, calls, the models that answered and the final rows a user needs first
    (`preview_rows`, the materialization's preview); for the partition's checks, its selected final rows and
    verdicts, and the range of the raw values the judges replied with (`raw_low`, `raw_high`, over COMPLETED replies,
    not consensus rows) with one out_of_range reply's detail. `summarize` is one chunk's tally: the in-memory and the
    streamed day report the same numbers."""

    def __init__(self) -> None:
        self.status: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.rows = self.final_rows = self.calls = self.cache_hits = self.scores = 0
        # final COMPLETED rows (verdicts), and those of them the local judge's placeholder gave
        self.verdicts = self.placeholder_verdicts = 0
        self.score_sum, self.cost = ExactSum(), ExactSum()
        self.models: set[str] = set()  # of the rows a model answered (a call, or a cached reply)
        self.provider_models: set[str] = set()
        self.preview: pl.DataFrame | None = None
        self.selected = self.replies = 0  # final rows selected (something to judge); COMPLETED replies
        self.raw_low: float | None = None
        self.raw_high: float | None = None
        self.out_of_range_detail: str | None = None  # one reply outside the scale, as its row says it

    def add(self, rows: pl.DataFrame) -> None:
        statuses = rows["status"].to_list()
        self.status.update(statuses)
        self.reasons.update(r for r, s in zip(rows["reason"].to_list(), statuses, strict=True) if s != COMPLETED)
        self.rows += rows.height
        self.final_rows += int(rows["is_final"].sum())
        verdicts = rows.filter(FINAL_COMPLETED)
        completed = verdicts["score"].drop_nulls()
        self.scores += completed.len()
        self.verdicts += verdicts.height
        self.placeholder_verdicts += verdicts.filter(PLACEHOLDER_ROW).height
        self.score_sum.add(completed.to_list())
        self.cost.add(rows["cost_usd"].fill_null(0).to_list())
        final = rows.filter(pl.col("is_final"))
        skipped_empty = (pl.col("status") == SKIPPED) & nothing_to_judge(pl.col("reason")).fill_null(False)
        self.selected += final.height - int(final.select(skipped_empty.sum()).item())
        replies = rows.filter((pl.col("status") == COMPLETED) & (pl.col("role") != "consensus"))["raw_score"]
        replies = replies.drop_nulls()
        if replies.len():
            # numbers: raw scores, nulls dropped, not empty
            low, high = float(cast(SupportsFloat, replies.min())), float(cast(SupportsFloat, replies.max()))
            self.replies += replies.len()
            self.raw_low = low if self.raw_low is None else min(self.raw_low, low)
            self.raw_high = high if self.raw_high is None else max(self.raw_high, high)
        if self.out_of_range_detail is None and OUT_OF_RANGE in self.reasons:
            wide = rows.filter(pl.col("reason") == OUT_OF_RANGE)["reason_detail"].drop_nulls()
            self.out_of_range_detail = wide[0] if wide.len() else None
        self.calls += int(rows["calls"].sum())
        self.cache_hits += int(rows["cache_hit"].sum())
        answered = rows.filter((pl.col("calls") > 0) | pl.col("cache_hit"))
        self.models.update(answered["model"].drop_nulls().to_list())
        self.provider_models.update(answered["provider_model"].drop_nulls().to_list())
        best = preview_rows(rows)  # this chunk's pick first: the merge below sorts a few rows, not the chunk
        self.preview = best if self.preview is None else preview_rows(pl.concat([self.preview, best]))

    def summary(self, traces_in_partition: int) -> dict[str, Any]:
        return {
            "traces_in_partition": traces_in_partition,
            "rows": self.rows,
            "completed": self.status.get(COMPLETED, 0),
            "final_rows": self.final_rows,
            "failed": self.status.get(FAILED, 0),
            "skipped": self.status.get(SKIPPED, 0),
            "reasons": dict(sorted(self.reasons.items())),
            "mean_score": self.score_sum.value / self.scores if self.scores else None,
            "cost_usd": self.cost.value,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
        }


# A declared score_scale the replies never use: every reply in its bottom BOTTOM_SHARE (some above its minimum: a
# judge answering the minimum to everything has judged, on this scale or another), over at least
# SCALE_MIN_REPLIES replies, as a judge answering 1..5 on a declared 0..100; or any reply outside it (out_of_range).
BOTTOM_SHARE = 0.1
SCALE_MIN_REPLIES = 5


def scale_mismatch(config: EvaluatorConfig, tally: DayTally) -> str | None:
    """Why the judge's replies look like another scale than the evaluator's `score_scale`, naming the scale and the
    observed raw range; None when they fit, or the evaluator has no scale."""
    scale = config.score_scale
    if scale is None or "score_scale" not in config.judge_mode.options:
        return None
    declared = f"score_scale {scale.min:g}..{scale.max:g}"
    observed = f"{tally.raw_low:g}..{tally.raw_high:g}" if tally.raw_low is not None else "none"
    outside = tally.reasons.get(OUT_OF_RANGE, 0)
    if outside:
        return (
            f"{outside} repl{'y' if outside == 1 else 'ies'} outside {declared} (FAILED out_of_range, e.g. "
            f"'{tally.out_of_range_detail}'); the raw range of the accepted replies: {observed}"
        )
    top_of_bottom = scale.min + BOTTOM_SHARE * (scale.max - scale.min)
    high = tally.raw_high
    if tally.replies >= SCALE_MIN_REPLIES and high is not None and scale.min < high <= top_of_bottom:
        top = (high - scale.min) / (scale.max - scale.min)
        return (
            f"all {tally.replies} replies lie in the bottom tenth of {declared} (raw range {observed}): the judge "
            f"seems to answer on another scale; its normalized scores are {top:.3g} at most"
        )
    return None
