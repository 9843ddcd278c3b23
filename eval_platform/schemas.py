"""Column contracts of the tables every module agrees on.

Polars dtypes are the source of truth; Parquet files and DuckDB views follow them.
"""

from __future__ import annotations

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")

# A normalized trace (DESIGN.md "canonical trace"). Text fields hold plain text: chat messages are
# rendered as "role: content" lines; `*_messages` keep the original structure as JSON when it existed.
TRACE_SCHEMA: dict[str, pl.DataType] = {
    "trace_id": pl.String(),
    "timestamp": UTC_TS,
    "date": pl.String(),  # the UTC day partition (YYYY-MM-DD) the trace was exported under
    "input": pl.String(),
    "output": pl.String(),
    "input_messages": pl.String(),  # JSON list of {role, content} or null
    "output_messages": pl.String(),  # JSON list of {role, content} or null
    "context": pl.String(),  # JSON list of strings (retrieved documents) or null
    "expected_output": pl.String(),
    "metadata": pl.String(),  # JSON object, "{}" when absent
    "project_id": pl.String(),
    "model": pl.String(),
    "experiment_id": pl.String(),
    "variant": pl.String(),
    "latency_ms": pl.Float64(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "cost_usd": pl.Float64(),  # the traced application's own spend, never judge spend
    "spans": pl.String(),  # JSON list of GenAI spans {span_id, parent_span_id, name, operation, model, input, output, context} or null
    "source_file": pl.String(),  # path relative to the data root
    "source_line": pl.Int64(),  # 1-based line / row / element number inside source_file
}

# A rejected input row: nothing is dropped silently.
QUARANTINE_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),  # which asset rejected it: traces, dataset_versions, human_annotations, ...
    "partition": pl.String(),
    "file": pl.String(),  # relative to the data root
    "line": pl.Int64(),  # 1-based; null when the whole file was rejected
    "reason": pl.String(),  # short machine-readable code, e.g. missing_field:trace_id
    "detail": pl.String(),  # human-readable explanation naming the field
    "raw": pl.String(),  # the raw text of the row (truncated to 10k chars)
    "quarantined_at": UTC_TS,
}

# One verdict row per (evaluator, trace or pair, model, sample).
JUDGE_SCORE_SCHEMA: dict[str, pl.DataType] = {
    "evaluator": pl.String(),
    "date": pl.String(),
    "trace_id": pl.String(),  # for pairwise: the A-side trace of the pair
    "trace_id_b": pl.String(),  # pairwise only: the B-side trace
    "pair_key": pl.String(),  # pairwise only: the value both traces share
    "model": pl.String(),  # the configured model (or local/replay/..., local/mock)
    "provider_model": pl.String(),  # what the provider reported answering
    "sample": pl.Int64(),
    "role": pl.String(),  # verdict (the only judge) | member (one of several) | consensus (their combination)
    "is_final": pl.Boolean(),  # one final row per trace/pair/candidate: role <> 'member'
    "status": pl.String(),  # COMPLETED | FAILED | SKIPPED
    "reason": pl.String(),  # a stable code: timeout, rate_limited, unparseable, ambiguous, budget_exhausted, ...
    "reason_detail": pl.String(),  # the human message for that code (which limit, after how many attempts, ...)
    "score": pl.Float64(),  # normalized 0..1; null unless COMPLETED
    "raw_score": pl.Float64(),
    "label": pl.String(),
    "passed": pl.Boolean(),
    "winner": pl.String(),  # pairwise: A | B | tie
    "winner_trace_id": pl.String(),
    "winner_variant": pl.String(),
    "verdict_ab": pl.String(),  # pairwise: verdict with A shown first
    "verdict_ba": pl.String(),  # pairwise: verdict with B shown first (mapped back to A/B names)
    "position_consistent": pl.Boolean(),  # pairwise/n_wise: all presentation orders agreed (null: one order)
    "confidence": pl.Float64(),  # the judge's reported confidence in 0..1, when it gives one
    "flags": pl.String(),  # comma-separated: low_confidence, inconsistent_order, rank_inconsistent, disagreement
    "agreement": pl.Float64(),  # consensus rows: how much the members agreed (0..1)
    "votes": pl.Int64(),  # consensus rows: members that completed
    "reasoning": pl.String(),
    "raw_response": pl.String(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "cached_prompt_tokens": pl.Int64(),  # of prompt_tokens, served from the provider's prompt cache (cheaper)
    "cost_usd": pl.Float64(),  # judge spend actually incurred by this materialization
    "cached_cost_usd": pl.Float64(),  # what the cached call(s) had cost when first made
    "latency_ms": pl.Float64(),
    "calls": pl.Int64(),  # HTTP requests made for this row, retries included
    "cache_hit": pl.Boolean(),
    "config_hash": pl.String(),
    "experiment_id": pl.String(),
    "variant": pl.String(),
    "project_id": pl.String(),
    "judged_at": UTC_TS,
}


def empty_frame(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def conform(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Add missing columns as nulls, cast to the schema's dtypes and order columns as the schema does."""
    missing = [pl.lit(None, dtype=dtype).alias(name) for name, dtype in schema.items() if name not in df.columns]
    if missing:
        df = df.with_columns(missing)
    return df.select([pl.col(name).cast(dtype) for name, dtype in schema.items()])

# One row per case of a dataset version (`dataset_versions`, the `test_cases` view).
TEST_CASE_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(),
    "version": pl.Int64(),
    "case_id": pl.String(),
    "input": pl.String(),
    "expected_output": pl.String(),
    # true: expected_output is the JSON text of a list (any of its items is right), object, number or boolean the
    # dataset file wrote as JSON; false: plain text (CSV cells are always text)
    "expected_output_json": pl.Boolean(),
    "metadata": pl.String(),
    "source_file": pl.String(),
    "source_line": pl.Int64(),
}
