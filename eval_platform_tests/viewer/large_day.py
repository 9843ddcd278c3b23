"""A large judged day written directly as partition files (no judge run): `traces` and two evaluators'
`judge_scores` on the same traces, seeded, every column conformed to its table's contract.

- `quality`: one final verdict per trace, a score (about 4% FAILED with a reason and no score, 2% SKIPPED), a
  reasoning text drawn from a few, a model of two, a variant of three, sessions of five turns;
- `quality_v2`: the same traces judged again (scores moved, other failures), written as a partition made of two
  parts (`date=<day>/src=a/part.parquet` and `src=b/...`), as an incremental ingest leaves one;
- traces with JSON metadata (`tier`, `region`, `item_id`);
- `judge_day_numbers` of `quality` as the judge_scores asset writes them (none for `quality_v2`: the viewer sums
  its verdicts).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from eval_platform.judging.day_numbers import write_day_numbers
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, TRACE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition

REASONINGS = [
    "The answer is correct and complete.",
    "The answer misses the second question.",
    "The reply contradicts the retrieved context.",
    "Polite, but the refund policy is wrong.",
    "Clear steps; one command is outdated.",
]

_VERDICTS = """
SELECT ? AS evaluator, ? AS date, 'trace-' || lpad(i::VARCHAR, 7, '0') AS trace_id,
       CASE WHEN i % 97 = 0 THEN 'span-' || i END AS span_id,
       'session-' || (i // 5) AS session_id,
       CASE WHEN (hash(i, ?) % 3)::BIGINT = 0 THEN 'openai/judge-b' ELSE 'openai/judge-a' END AS model,
       0 AS sample, 'verdict' AS role, TRUE AS is_final,
       CASE WHEN (hash(i, ?, 1) % 100)::BIGINT < 4 THEN 'FAILED' WHEN (hash(i, ?, 1) % 100)::BIGINT < 6 THEN 'SKIPPED'
            ELSE 'COMPLETED' END AS status,
       CASE status WHEN 'FAILED' THEN (['timeout', 'unparseable', 'rate_limited'])[1 + (hash(i, ?, 2) % 3)::BIGINT]
                   WHEN 'SKIPPED' THEN 'budget_exhausted' END AS reason,
       CASE status WHEN 'FAILED' THEN 'no usable reply: ' || reason END AS reason_detail,
       CASE WHEN status = 'COMPLETED' THEN round(((hash(i, ?, 3) % 1000)::BIGINT) / 999.0, 3) END AS score,
       CASE WHEN status = 'COMPLETED' THEN score >= 0.5 END AS passed,
       CASE WHEN status = 'COMPLETED' THEN (?::VARCHAR[])[1 + (hash(i, ?, 4) % 5)::BIGINT] END AS reasoning,
       ((hash(i, ?, 5) % 100)::BIGINT) / 100000.0 AS cost_usd,
       200 + (hash(i, ?, 6) % 3000)::BIGINT AS latency_ms, 1 AS calls,
       (hash(i, ?, 7) % 12)::BIGINT = 0 AS cache_hit, ? AS config_hash, 'exp-1' AS experiment_id,
       (['prompt-v1', 'prompt-v2', 'prompt-v3'])[1 + i % 3] AS variant,
       TIMESTAMPTZ '2026-11-20 12:00:00+00' + to_milliseconds(i) AS judged_at
FROM range(?) AS r(i)
"""


def _frame(sql: str, params: list) -> pl.DataFrame:
    with duckdb.connect() as conn:
        return pl.DataFrame(pl.from_arrow(conn.sql(sql, params=params).to_arrow_table()))


def verdicts(evaluator: str, day: str, rows: int, seed: int, config_hash: str) -> pl.DataFrame:
    params = [evaluator, day, seed, seed, seed, seed, seed, REASONINGS, seed, seed, seed, seed, config_hash, rows]
    return conform(_frame(_VERDICTS, params), JUDGE_SCORE_SCHEMA)


def traces(day: str, rows: int) -> pl.DataFrame:
    frame = _frame(
        """SELECT 'trace-' || lpad(i::VARCHAR, 7, '0') AS trace_id, ? AS date,
                  TIMESTAMPTZ '2026-11-20 00:00:00+00' + to_milliseconds(i * 10) AS timestamp,
                  'question ' || i AS input, 'answer ' || i AS output, 'session-' || (i // 5) AS session_id,
                  json_object('tier', (['free', 'pro', 'team'])[1 + i % 3], 'region', (['eu', 'us'])[1 + i % 2],
                              'item_id', 'item-' || (i % 1000))::VARCHAR AS metadata,
                  'exp-1' AS experiment_id, (['prompt-v1', 'prompt-v2', 'prompt-v3'])[1 + i % 3] AS variant
           FROM range(?) AS r(i)""",
        [day, rows],
    )
    return conform(frame, TRACE_SCHEMA)


def write_large_day(root: Path, day: str, rows: int) -> None:
    """`traces` and the two evaluators' `judge_scores` for `day`, `rows` traces (and verdicts each)."""
    write_partition(DataRoot.from_env(root), "traces", {"date": day}, traces(day, rows))
    write_partition(
        DataRoot.from_env(root),
        "judge_scores",
        {"evaluator": "quality", "date": day},
        verdicts("quality", day, rows, 1, "c0ffee01"),
    )
    write_day_numbers(
        DataRoot.from_env(root), "quality", day
    )  # as the judge_scores asset does (quality_v2's are summed by the viewer)
    second = verdicts("quality_v2", day, rows, 2, "c0ffee02")
    half = rows // 2
    for source, part in (("a", second.head(half)), ("b", second.tail(rows - half))):
        write_partition(
            DataRoot.from_env(root), "judge_scores", {"evaluator": "quality_v2", "date": day, "src": source}, part
        )
