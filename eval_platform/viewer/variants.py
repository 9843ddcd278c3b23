"""Two variants of an experiment on the same inputs: which verdicts changed between them.

An experiment's variants answer the same inputs in different traces (`traces.variant`), so a variant comparison
cannot pair verdicts by trace as the other comparisons do. It pairs them the way the platform pairs variants for
a pairwise judge: by a field of the trace both variants' traces share (`pair_by`, a trace column or
`metadata.<key>`; default `metadata.item_id`, the pairwise mode's default). Per side and input value, the side's
final verdicts on its traces with that value (usually one) are one verdict; a pair is an input both variants
answered. The pairs whose verdicts differ are listed by size of change, a status change first.
"""

from __future__ import annotations

from typing import Any

from eval_platform.record_fields import METADATA_PREFIX
from eval_platform.schemas import TRACE_SCHEMA
from eval_platform.viewer.history import scores_source
from eval_platform.viewer.queries import _SAME, PAGE_ROWS, Side, Warehouse, _literal, _records

DEFAULT_PAIR_BY = "metadata.item_id"


def variant_mode(a: Side, b: Side) -> bool:
    """Whether the two sides are two variants (then they are paired by input, not by trace)."""
    return bool(a.variant and b.variant and a.variant != b.variant)


def _pair_key(pair_by: str) -> tuple[str, list[Any]] | None:
    """The SQL of the pairing value of a trace row, or None when `pair_by` names no trace field."""
    if pair_by.startswith(METADATA_PREFIX) and pair_by.removeprefix(METADATA_PREFIX):
        return "json_extract_string(metadata, ?)", ["$." + pair_by.removeprefix(METADATA_PREFIX)]
    if pair_by in TRACE_SCHEMA and pair_by != "trace_id":
        return f'CAST("{pair_by}" AS VARCHAR)', []
    return None


def compare_variants(
    warehouse: Warehouse, day: str, a: Side, b: Side, pair_by: str = DEFAULT_PAIR_BY, page: int = 1
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The two variants' numbers, their agreement on the inputs both answered, and one page of the pairs whose
    verdicts differ, the largest score change first (a status change first of all)."""
    traces = warehouse.day_location("traces", day)
    key = _pair_key(pair_by)
    if traces is None or key is None:
        raise ValueError(f"pair_by {pair_by!r} is not a trace column or metadata.<key>")
    key_sql, key_params = key
    offset = (max(page, 1) - 1) * PAGE_ROWS
    with warehouse.sql() as conn:
        for name, side in (("va", a), ("vb", b)):
            where, params = side.where()
            source = scores_source(warehouse, side.evaluator, day, side.config_hash)
            conn.execute(
                f"""CREATE OR REPLACE TEMP TABLE {name} AS
                SELECT k.pair, min(s.trace_id) AS trace_id, count(DISTINCT s.trace_id) AS traces,
                       min(s.status) AS status, any_value(s.reason) AS reason, avg(s.score) AS score,
                       any_value(s.label) AS label, bool_and(s.passed) AS passed,
                       any_value(coalesce(s.reasoning, s.reason_detail)) AS reasoning
                FROM (SELECT * FROM {source} WHERE {where}) s
                JOIN (SELECT trace_id, {key_sql} AS pair FROM read_parquet({_literal(traces)})) k USING (trace_id)
                WHERE k.pair IS NOT NULL
                GROUP BY k.pair""",
                params + key_params,
            )
        summary = _records(
            conn.execute(
                f"""WITH sides AS (
                    SELECT (SELECT count(*) FROM va) AS n_a, (SELECT count(*) FROM vb) AS n_b,
                           (SELECT avg(score) FROM va WHERE status = 'COMPLETED') AS mean_a,
                           (SELECT avg(score) FROM vb WHERE status = 'COMPLETED') AS mean_b,
                           (SELECT avg(passed::INT) FROM va WHERE status = 'COMPLETED') AS pass_a,
                           (SELECT avg(passed::INT) FROM vb WHERE status = 'COMPLETED') AS pass_b)
                SELECT sides.*, count(j.pair) AS shared,
                       count(*) FILTER (j.both_completed) AS both_completed,
                       count(*) FILTER (j.same) AS agree,
                       count(*) FILTER (j.pair IS NOT NULL AND NOT j.same) AS changed,
                       avg(abs(j.score_b - j.score_a)) FILTER (j.both_completed) AS mean_abs_difference,
                       avg(j.score_b - j.score_a) FILTER (j.both_completed) AS mean_difference,
                       corr(j.score_a, j.score_b) FILTER (j.both_completed) AS correlation
                FROM sides LEFT JOIN (
                    SELECT a.pair, a.score AS score_a, b.score AS score_b, {_SAME} AS same,
                           a.status = 'COMPLETED' AND b.status = 'COMPLETED' AS both_completed
                    FROM va a JOIN vb b USING (pair)) j ON TRUE
                GROUP BY ALL"""
            )
        )[0]
        changed = _records(
            conn.execute(
                f"""SELECT a.pair, a.trace_id AS trace_a, b.trace_id AS trace_b,
                       a.status AS status_a, a.reason AS reason_a, a.score AS score_a, a.label AS label_a,
                       a.passed AS passed_a, a.reasoning AS reasoning_a,
                       b.status AS status_b, b.reason AS reason_b, b.score AS score_b, b.label AS label_b,
                       b.passed AS passed_b, b.reasoning AS reasoning_b,
                       b.score - a.score AS difference
                FROM va a JOIN vb b USING (pair)
                WHERE NOT {_SAME}
                ORDER BY abs(b.score - a.score) DESC NULLS FIRST, a.pair
                LIMIT {PAGE_ROWS} OFFSET {offset}"""
            )
        )
        conn.execute("DROP TABLE va; DROP TABLE vb")
    shared = summary["shared"] or 0
    summary["agreement"] = summary["agree"] / shared if shared else None
    summary["pair_by"] = pair_by
    return summary, changed
