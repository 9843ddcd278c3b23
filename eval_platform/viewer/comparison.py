"""The compare page's questions: two sides' verdicts on the same targets, their numbers and the verdicts that changed.

Every comparison has the same shape: each side's verdicts are grouped once per request into a temporary table of
the request's cursor (one row per thing compared: a target (trace, span, session) for two evaluators, two config
hashes or two judges; an input for two variants, `variants.py`), then `summarize` answers the numbers and
`changed_page` one keyset page of the changed verdicts from those two tables. The changed verdicts are sorted by
size of change (`|B - A|`, a status change, with no score on one side, first of all), then by the joined key; a
page's links name the sort key of its last (or first) row, so a deep page costs what the first one costs (no
OFFSET over the joined rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from eval_platform.viewer.history import scores_source
from eval_platform.viewer.queries import (
    PAGE_ROWS,
    Keys,
    Warehouse,
    _records,
    decode_cursor,
    encode_cursor,
    order_sql,
    seek_sql,
)

# Two verdicts agree when both are COMPLETED and give the same pass/fail, else the same label, else the same score;
# any other pair (a status that changed, a different verdict) is a change, sized by the score difference.
SAME = """(a.status = 'COMPLETED' AND b.status = 'COMPLETED' AND CASE
    WHEN a.passed IS NOT NULL AND b.passed IS NOT NULL THEN a.passed = b.passed
    WHEN a.label IS NOT NULL AND b.label IS NOT NULL THEN a.label = b.label
    ELSE abs(a.score - b.score) < 1e-9 END)"""
# The columns every grouped side has (besides its join key), shown per side as `<column>_a` and `<column>_b`.
VERDICT = ("status", "reason", "score", "label", "passed")
CURSOR_NAME = "changed"  # the changed list's one order, named in its cursors


@dataclass
class Side:
    """One side of a comparison: an evaluator's verdicts on a day, narrowed to one config hash, one judge model
    (a consensus member's own verdicts) or one variant when given."""

    evaluator: str
    config_hash: str = ""
    model: str = ""
    variant: str = ""

    def where(self) -> tuple[str, list[Any]]:
        clauses = ["NOT (status = 'SKIPPED' AND reason = 'not_sampled')"]
        params: list[Any] = []
        if self.model:
            clauses.append("model = ?")
            params.append(self.model)
        else:
            clauses.append("role <> 'member'")
        for column, value in (("config_hash", self.config_hash), ("variant", self.variant)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        return " AND ".join(clauses), params

    def label(self) -> str:
        narrowed = [
            f"{k} {v}" for k, v in (("model", self.model), ("config", self.config_hash), ("variant", self.variant)) if v
        ]
        return self.evaluator + (f" ({', '.join(narrowed)})" if narrowed else "")

    def source(self, warehouse: Warehouse, day: str) -> tuple[str, list[Any]]:
        """The side's verdicts as a SQL source with its parameters (with a config hash: superseded ones too)."""
        where, params = self.where()
        source = scores_source(warehouse, self.evaluator, day, self.config_hash)
        return f"(SELECT * FROM {source} WHERE {where})", params


@dataclass
class ChangedPage:
    """One keyset page of the changed verdicts."""

    rows: list[dict[str, Any]]
    first: str  # cursor of the first row shown (the previous page ends before it)
    last: str  # cursor of the last row shown (the next page starts after it)
    has_previous: bool
    has_next: bool


def _keys(join: tuple[str, ...]) -> Keys:
    """The changed list's order: the size of change, largest first and a status change (no size) before all, then
    the join key, which makes each row's place unique."""
    return [("size", False, True)] + [(column, True, True) for column in join]


def summarize(conn: duckdb.DuckDBPyConnection, join: tuple[str, ...]) -> dict[str, Any]:
    """The two grouped sides' (temporary tables `a` and `b`, joined on `join`) numbers: verdicts, mean score and
    pass rate per side; on the things both judged, how many agree, how many changed, the mean (absolute)
    difference and the correlation of their scores."""
    summary = _records(
        conn.execute(
            f"""WITH sides AS (
                SELECT (SELECT count(*) FROM a) AS n_a, (SELECT count(*) FROM b) AS n_b,
                       (SELECT avg(score) FROM a WHERE status = 'COMPLETED') AS mean_a,
                       (SELECT avg(score) FROM b WHERE status = 'COMPLETED') AS mean_b,
                       (SELECT avg(passed::INT) FROM a WHERE status = 'COMPLETED') AS pass_a,
                       (SELECT avg(passed::INT) FROM b WHERE status = 'COMPLETED') AS pass_b)
            SELECT sides.*, count(j.joined) AS shared,
                   count(*) FILTER (j.both_completed) AS both_completed,
                   count(*) FILTER (j.same) AS agree,
                   count(*) FILTER (j.joined IS NOT NULL AND NOT j.same) AS changed,
                   avg(abs(j.score_b - j.score_a)) FILTER (j.both_completed) AS mean_abs_difference,
                   avg(j.score_b - j.score_a) FILTER (j.both_completed) AS mean_difference,
                   corr(j.score_a, j.score_b) FILTER (j.both_completed) AS correlation
            FROM sides LEFT JOIN (
                SELECT TRUE AS joined, a.score AS score_a, b.score AS score_b, {SAME} AS same,
                       a.status = 'COMPLETED' AND b.status = 'COMPLETED' AS both_completed
                FROM a JOIN b USING ({", ".join(join)})) j ON TRUE
            GROUP BY ALL"""
        )
    )[0]
    shared = summary["shared"] or 0
    summary["agreement"] = summary["agree"] / shared if shared else None
    return summary


def changed_page(
    conn: duckdb.DuckDBPyConnection, join: tuple[str, ...], columns: tuple[str, ...], after: str, before: str
) -> ChangedPage:
    """One page of the things both sides judged whose verdicts differ (temporary tables `a` and `b`, joined on
    `join`), in the order of `_keys`: the page after the row of cursor `after`, or the one before `before`'s row
    (the first page when neither is understood). Each row: the join key, `<column>_a` and `<column>_b` of each
    of `columns`, `difference` (B - A) and `size`."""
    keys = _keys(join)
    token, backwards = (before, True) if before else (after, False)
    values = decode_cursor(token, CURSOR_NAME, True)
    if values is not None and len(values) != len(keys):
        values = None
    seek, params = ("TRUE", []) if values is None else seek_sql(keys, values, backwards)
    sides = ", ".join(f"{side}.{column} AS {column}_{side}" for column in columns for side in ("a", "b"))
    rows = _records(
        conn.execute(
            f"""SELECT * FROM (
                    SELECT {", ".join(join)}, {sides}, b.score - a.score AS difference, abs(b.score - a.score) AS size
                    FROM a JOIN b USING ({", ".join(join)}) WHERE NOT {SAME})
                WHERE {seek} ORDER BY {order_sql(keys, reverse=backwards)} LIMIT {PAGE_ROWS + 1}""",
            params,
        )
    )
    more = len(rows) > PAGE_ROWS
    rows = rows[:PAGE_ROWS]
    if backwards:
        rows.reverse()

    def cursor(row: dict[str, Any]) -> str:
        return encode_cursor(CURSOR_NAME, True, [row[column] for column, _, _ in keys])

    return ChangedPage(
        rows=rows,
        first=cursor(rows[0]) if rows else "",
        last=cursor(rows[-1]) if rows else "",
        has_previous=more if backwards else values is not None,
        has_next=values is not None if backwards else more,
    )


# Two evaluators, config hashes or judges are compared per target: a trace, a span of it or a session.
TARGET = ("trace_id", "span", "sess")


def _side_sql(warehouse: Warehouse, day: str, side: Side) -> tuple[str, list[Any]]:
    """One side's verdicts per target (trace, span, session), as SQL with its parameters: only the columns the
    numbers and the join need (the texts of the changed verdicts shown are read for that page only)."""
    source, params = side.source(warehouse, day)
    return (
        f"""SELECT trace_id, coalesce(span_id, '') AS span, coalesce(session_id, '') AS sess,
                   min(status) AS status, any_value(reason) AS reason, avg(score) AS score,
                   any_value(label) AS label, bool_and(passed) AS passed, count(*) AS rows
            FROM {source} AS s GROUP BY ALL""",
        params,
    )


def _side_texts(warehouse: Warehouse, day: str, side: Side, name: str) -> tuple[str, list[Any]]:
    """The reasoning (or failure detail) of one side's verdicts on the page's traces (temporary table `page`)."""
    source, params = side.source(warehouse, day)
    return (
        f"""SELECT trace_id, coalesce(span_id, '') AS span, coalesce(session_id, '') AS sess,
                   any_value(coalesce(reasoning, reason_detail)) AS reasoning_{name}
            FROM {source} AS s WHERE trace_id IN (SELECT trace_id FROM page) GROUP BY ALL""",
        params,
    )


def compare(
    warehouse: Warehouse, day: str, a: Side, b: Side, after: str = "", before: str = ""
) -> tuple[dict[str, Any], ChangedPage]:
    """The two sides' numbers, their agreement on the targets both judged, and one keyset page of the verdicts
    that changed (`changed_page`), each with both sides' reasoning."""
    with warehouse.sql() as conn:
        # each side is read and grouped once per request, into the cursor's own temporary tables (gone with it)
        for name, side in (("a", a), ("b", b)):
            sql, params = _side_sql(warehouse, day, side)
            conn.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}", params)
        summary = summarize(conn, TARGET)
        page = changed_page(conn, TARGET, VERDICT, after, before)
        if page.rows:
            conn.execute(
                "CREATE OR REPLACE TEMP TABLE page AS SELECT DISTINCT unnest(?::VARCHAR[]) AS trace_id",
                [[row["trace_id"] for row in page.rows]],
            )
            texts_a, params_a = _side_texts(warehouse, day, a, "a")
            texts_b, params_b = _side_texts(warehouse, day, b, "b")
            texts = {
                (row.pop("trace_id"), row.pop("span"), row.pop("sess")): row
                for row in _records(
                    conn.execute(
                        f"SELECT * FROM ({texts_a}) FULL JOIN ({texts_b}) USING (trace_id, span, sess)",
                        params_a + params_b,
                    )
                )
            }
            for row in page.rows:
                found = texts.get((row["trace_id"], row["span"], row["sess"]), {})
                row.update(
                    reasoning_a=found.get("reasoning_a"),
                    reasoning_b=found.get("reasoning_b"),
                    span_id=row["span"] or None,
                    session_id=row["sess"] or None,
                )
            conn.execute("DROP TABLE page")
        conn.execute("DROP TABLE a; DROP TABLE b")
    return summary, page
