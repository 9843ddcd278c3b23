"""Which verdicts of a judge_scores partition are exported, with the app's trace and span they are about.

Exported: the final COMPLETED verdicts (role verdict or consensus, never a panel member's) on traces the app traced
with OpenTelemetry, each linked to the span it is about, looked up in the `spans` view of the day (the OTLP trace
id and span ids the app itself sent):
- a trace's verdict: the root span of the trace (the run the verdict is about); a span's verdict: the evaluator's
  target span (`judge_scores.span_id`);
- a session's verdict: the root span of the trace it stands on (`judge_scores.trace_id`, the session's last trace
  when it was judged), with the session id (`session_id`) beside it;
- a pairwise verdict (two traces compared): one row per side, each on its own trace's root span, from that side's
  point of view: `pair_side` A or B, the other side's trace (`opponent_trace_id`), the side's score (A's score is
  judge_scores.score, B's is 1 - it: 1 a win, 0.5 a tie, 0 a loss) and label `win`, `loss` or `tie`. A side whose
  trace has no span of the app's is not exported (`no_otel_span`); the other side still is.

Not exported, each counted by reason in the run's metadata (never in silence):
- `failed`: a FAILED row is no verdict (a failure is never a score): the app's backend would show a judge outage as
  a quality signal; the FAILED row and its reason stay in judge_scores, and a later run that completes it exports
  the COMPLETED verdict then;
- `skipped`: a SKIPPED row was not judged;
- `no_otel_span`: the trace did not come as OpenTelemetry spans (JSONL, CSV, ... exports) or its span is not in the
  day's `spans` view: there is no span of the app's to attach it to.

The verdict's identity (`verdict_key`) is what the ledger and Phoenix's annotation identifier are keyed by:
evaluator, day, trace, span, judge model, sample and the evaluator's config hash (a pairwise side's also the B trace
and the side). Re-materializing a partition unchanged gives the same keys (nothing is sent again); a changed
evaluator config is a new verdict, sent anew.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import polars as pl

from eval_platform.export.base import VERDICT_COLUMNS
from eval_platform.ingest.traces import span_rows
from eval_platform.schemas import COMPLETED, FAILED, SKIPPED
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition

IDENTITY = ("evaluator", "date", "trace_id", "span_id", "model", "sample", "config_hash")
_SCORE_COLUMNS = [
    *IDENTITY,
    "trace_id_b",
    "session_id",
    "provider_model",
    "is_final",
    "status",
    "score",
    "label",
    "passed",
    "winner",
    "reasoning",
    "judged_at",
]
PAIR_LABELS = {"A": ("win", "loss"), "B": ("loss", "win"), "tie": ("tie", "tie")}  # per winner: A's, B's label


class NoScores(FileNotFoundError):
    """The partition has no judge_scores file: judge it first."""


@dataclass
class Exportable:
    """A partition's verdicts to export (VERDICT_COLUMNS) and the final rows not exported, by reason."""

    verdicts: pl.DataFrame
    not_exported: dict[str, int] = field(default_factory=dict)


def verdict_keys(frame: pl.DataFrame, extra: tuple[str, ...] = ()) -> pl.Series:
    """The verdict's identity, a 32-hex-digit digest of IDENTITY and the `extra` columns (a null is an empty
    field)."""
    text = frame.select(
        pl.concat_str([pl.col(name).cast(pl.String).fill_null("") for name in (*IDENTITY, *extra)], separator="\x1f")
    ).to_series()
    return pl.Series("verdict_key", [hashlib.sha256(t.encode()).hexdigest()[:32] for t in text], dtype=pl.String)


def pair_sides(pairs: pl.DataFrame) -> pl.DataFrame:
    """Each pairwise verdict as two rows, one per side, each from its side's point of view (module docstring)."""
    if pairs.height == 0:
        return pairs.with_columns(
            pl.lit(None, pl.String).alias("verdict_key"),
            pl.lit(None, pl.String).alias("pair_side"),
            pl.lit(None, pl.String).alias("opponent_trace_id"),
        )
    a_side = pairs.with_columns(pair_side=pl.lit("A"))
    a_side = a_side.with_columns(verdict_keys(a_side, ("trace_id_b", "pair_side")))
    b_side = pairs.with_columns(pair_side=pl.lit("B"))
    b_side = b_side.with_columns(verdict_keys(b_side, ("trace_id_b", "pair_side")))
    label = {side: {w: labels[i] for w, labels in PAIR_LABELS.items()} for i, side in enumerate("AB")}
    a_side = a_side.with_columns(
        opponent_trace_id=pl.col("trace_id_b"),
        label=pl.col("winner").replace_strict(label["A"], default=pl.col("label"), return_dtype=pl.String),
    )
    b_side = b_side.with_columns(
        opponent_trace_id=pl.col("trace_id"),
        trace_id=pl.col("trace_id_b"),
        score=1.0 - pl.col("score"),
        label=pl.col("winner").replace_strict(label["B"], default=pl.col("label"), return_dtype=pl.String),
    )
    return pl.concat([a_side, b_side], how="diagonal_relaxed")


def _root_spans(spans: pl.DataFrame) -> pl.DataFrame:
    """Per trace, its root span: no parent, or a parent that is not in the trace; the earliest when several."""
    ids = spans.select("trace_id", pl.col("span_id").alias("parent_span_id"), pl.lit(True).alias("_parent_known"))
    roots = spans.join(ids, on=["trace_id", "parent_span_id"], how="left").filter(pl.col("_parent_known").is_null())
    return (
        roots.sort("start_time", nulls_last=True)
        .unique("trace_id", keep="first", maintain_order=True)
        .select("trace_id", "otel_trace_id", pl.col("span_id").alias("otel_span_id"))
    )


def exportable(root: DataRoot, evaluator: str, day: str) -> Exportable:
    """The partition's verdicts to export, linked to the app's spans (see the module's docstring)."""
    scores = read_partition(root, "judge_scores", {"evaluator": evaluator, "date": day}, columns=_SCORE_COLUMNS)
    if scores is None:
        raise NoScores(f"no judge_scores for evaluator '{evaluator}' on {day}: materialize that partition first")
    final = scores.filter(pl.col("is_final"))
    counts = {
        "failed": final.filter(pl.col("status") == FAILED).height,
        "skipped": final.filter(pl.col("status") == SKIPPED).height,
    }
    completed = final.filter(pl.col("status") == COMPLETED)
    is_pair = pl.col("trace_id_b").is_not_null()
    single = completed.filter(~is_pair)
    single = single.with_columns(
        verdict_keys(single),
        pl.lit(None, pl.String).alias("pair_side"),
        pl.lit(None, pl.String).alias("opponent_trace_id"),
    )
    completed = pl.concat([single, pair_sides(completed.filter(is_pair))], how="diagonal_relaxed")

    # the `spans` view's rows of the day: spans are stored once, in their trace's row
    traces = read_partition(root, "traces", {"date": day}, columns=["trace_id", "date", "spans", "span_count"])
    spans = None if traces is None else span_rows(traces)
    if spans is None or spans.height == 0:
        linked = completed.with_columns(
            pl.lit(None, pl.String).alias("otel_trace_id"), pl.lit(None, pl.String).alias("otel_span_id")
        )
    else:
        on_root = completed.filter(pl.col("span_id").is_null()).join(_root_spans(spans), on="trace_id", how="left")
        targets = spans.select("trace_id", "span_id", "otel_trace_id", pl.col("span_id").alias("otel_span_id"))
        on_span = completed.filter(pl.col("span_id").is_not_null()).join(
            targets, on=["trace_id", "span_id"], how="left"
        )
        linked = pl.concat([on_root, on_span], how="diagonal_relaxed")
    has_span = pl.col("otel_trace_id").is_not_null() & pl.col("otel_span_id").is_not_null()
    counts["no_otel_span"] = linked.filter(~has_span).height
    verdicts = linked.filter(has_span)
    verdicts = verdicts.select(VERDICT_COLUMNS).sort("trace_id", "verdict_key")
    return Exportable(verdicts, {reason: n for reason, n in counts.items() if n})
