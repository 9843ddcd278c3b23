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
from eval_platform.viewer.comparison import VERDICT, ChangedPage, Side, changed_page, summarize
from eval_platform.viewer.queries import Warehouse, _literal

DEFAULT_PAIR_BY = "metadata.item_id"
PAIR = ("pair",)  # the join key of two variants' grouped verdicts


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
    warehouse: Warehouse, day: str, a: Side, b: Side, pair_by: str = DEFAULT_PAIR_BY, after: str = "", before: str = ""
) -> tuple[dict[str, Any], ChangedPage]:
    """The two variants' numbers, their agreement on the inputs both answered, and one keyset page of the pairs
    whose verdicts differ (`comparison.changed_page`: the largest score change first, a status change first of
    all), each side with its trace and reasoning."""
    traces = warehouse.day_location("traces", day)
    key = _pair_key(pair_by)
    if traces is None or key is None:
        raise ValueError(f"pair_by {pair_by!r} is not a trace column or metadata.<key>")
    key_sql, key_params = key
    with warehouse.sql() as conn:
        for name, side in (("a", a), ("b", b)):
            source, params = side.source(warehouse, day)
            conn.execute(
                f"""CREATE OR REPLACE TEMP TABLE {name} AS
                SELECT k.pair, min(s.trace_id) AS trace_id, count(DISTINCT s.trace_id) AS traces,
                       min(s.status) AS status, any_value(s.reason) AS reason, avg(s.score) AS score,
                       any_value(s.label) AS label, bool_and(s.passed) AS passed,
                       any_value(coalesce(s.reasoning, s.reason_detail)) AS reasoning
                FROM {source} AS s
                JOIN (SELECT trace_id, {key_sql} AS pair FROM read_parquet({_literal(traces)})) k USING (trace_id)
                WHERE k.pair IS NOT NULL
                GROUP BY k.pair""",
                params + key_params,
            )
        summary = summarize(conn, PAIR)
        page = changed_page(conn, PAIR, ("trace_id", *VERDICT, "reasoning"), after, before)
        conn.execute("DROP TABLE a; DROP TABLE b")
    summary["pair_by"] = pair_by
    return summary, page
