"""What the viewer's pages show, asked of the warehouse's Parquet partitions with DuckDB, read-only.

The viewer never opens the DuckDB catalog file: a session holding it (even read-only) would make a run that must
change the views wait (`CatalogLocked`). It reads the partition files the catalog's views read, through the storage
layer (`storage/warehouse.py`: local disk or a bucket) in an in-memory DuckDB. A page reads only what it shows: an
evaluator's day is its one partition file, sorted, filtered and cut to a page by DuckDB (LIMIT/OFFSET), never
loaded into Python whole; a trace reads the partitions of its day only.

Every value from a request reaches SQL as a parameter; the names placed in SQL text (a file location, a sort
column) are checked against what the warehouse has or a fixed list first.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from eval_platform.judging.loading import load_evaluators
from eval_platform.schemas import COMPLETED, FAILED, NOT_SAMPLED, SKIPPED, spans_view_sql
from eval_platform.storage.location import LocalStore, store_for
from eval_platform.storage.warehouse import (
    connect,
    has_files,
    partition_path,
    partition_values,
    table_glob,
)

DAY_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}")
PAGE_ROWS = 50
# The day page's sortable columns (name in the URL -> SQL); every other value is refused.
# (the columns sorted under their own name, then those whose URL name is shorter)
SORTS = {column: column for column in ("score", "status", "reason", "model", "judged_at")} | {
    "trace": "trace_id",
    "cost": "cost_usd",
    "latency": "latency_ms",
}
# The day page's columns: enough to decide which verdict to open (the trace page shows the rest).
DAY_COLUMNS = (
    "trace_id, span_id, session_id, model, sample, role, status, reason, reason_detail, score, label, passed, "
    "reasoning, cost_usd, latency_ms, cache_hit, variant, config_hash"
)
# A trace page's verdicts: everything but the raw reply's neighbours that are identical for every row.
VERDICT_COLUMNS = (
    "evaluator, date, trace_id, trace_id_b, span_id, session_id, model, provider_model, sample, role, is_final, "
    "status, reason, reason_detail, score, raw_score, label, passed, winner, confidence, flags, reasoning, "
    "raw_response, prompt_tokens, completion_tokens, cost_usd, latency_ms, calls, cache_hit, config_hash, "
    "experiment_id, variant, project_id, judged_at"
)


def _literal(location: str | Path) -> str:
    """A file location as a SQL string literal (locations come from the store, never from a request)."""
    return "'" + str(location).replace("'", "''") + "'"


def _records(relation: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in relation.description or []]
    return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]


@dataclass
class DayFilters:
    """The day page's filters, as given in the URL (all optional)."""

    status: str = ""
    reason: str = ""
    model: str = ""
    variant: str = ""
    session: str = ""
    text: str = ""  # a substring of the reasoning (or the failure's detail), case-insensitive
    metadata: str = ""  # `key=value` on the trace's metadata, or a substring of its JSON
    min_score: float | None = None
    max_score: float | None = None
    final_only: bool = True  # consensus members (role member) hidden unless asked for
    sort: str = "trace"
    descending: bool = False
    page: int = 1

    def where(self, traces_location: str | None) -> tuple[str, list[Any]]:
        """The SQL condition and its parameters."""
        clauses: list[str] = ["TRUE"]
        params: list[Any] = []
        for column, value in (
            ("status", self.status),
            ("reason", self.reason),
            ("model", self.model),
            ("variant", self.variant),
            ("session_id", self.session),
        ):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if self.text:
            clauses.append("(reasoning ILIKE ? OR reason_detail ILIKE ?)")
            params += [f"%{self.text}%"] * 2
        if self.min_score is not None:
            clauses.append("score >= ?")
            params.append(self.min_score)
        if self.max_score is not None:
            clauses.append("score <= ?")
            params.append(self.max_score)
        if self.final_only:
            clauses.append("role <> 'member'")
        if self.metadata and traces_location:
            key, sep, value = self.metadata.partition("=")
            if sep and key.strip():
                match, match_params = "json_extract_string(metadata, ?) = ?", [f"$.{key.strip()}", value.strip()]
            else:
                match, match_params = "metadata ILIKE ?", [f"%{self.metadata}%"]
            clauses.append(
                f"trace_id IN (SELECT trace_id FROM read_parquet({_literal(traces_location)}) WHERE {match})"
            )
            params += match_params
        return " AND ".join(clauses), params

    def order(self) -> str:
        column = SORTS.get(self.sort, "trace_id")
        direction = "DESC" if self.descending else "ASC"
        # ties keep one stable order so that pages never overlap
        return f"{column} {direction} NULLS LAST, trace_id, span_id NULLS FIRST, session_id NULLS FIRST, model, sample"


@dataclass
class Warehouse:
    """The viewer's read-only access to one data root's warehouse."""

    root: Path
    _cache: dict[tuple[str, str, int, int], Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _database: duckdb.DuckDBPyConnection | None = None
    _closing: ExitStack = field(default_factory=ExitStack)

    @contextmanager
    def sql(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of the viewer's one in-memory DuckDB (opened on first use with the store's reader registered):
        each request has its own cursor, as requests run on several threads."""
        with self._lock:
            if self._database is None:
                self._database = self._closing.enter_context(connect(self.root))
            database = self._database
        cursor = database.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    def close(self) -> None:
        self._closing.close()
        self._database = None

    # --- what exists -------------------------------------------------------------------------------------------
    def evaluator_configs(self) -> dict[str, Any]:
        broken: dict[str, str] = {}
        return load_evaluators(self.root / "evaluators", broken=broken, data_root=self.root)

    def judged_evaluators(self) -> list[str]:
        return [
            value.removeprefix("evaluator=")
            for value in store_for(self.root).children(("judge_scores",))
            if value.startswith("evaluator=")
        ]

    def days(self, evaluator: str) -> list[str]:
        return [d for d in partition_values(self.root, "judge_scores", {"evaluator": evaluator}, "date") if _is_day(d)]

    def has_day(self, evaluator: str, day: str) -> bool:
        return _is_day(day) and evaluator in self.judged_evaluators() and day in self.days(evaluator)

    def scores_location(self, evaluator: str, day: str) -> str:
        return str(partition_path(self.root, "judge_scores", {"evaluator": evaluator, "date": day}))

    def day_location(self, table: str, day: str) -> str | None:
        """The file of a table partitioned by day alone (traces), or None when that day has none."""
        if not _is_day(day) or day not in partition_values(self.root, table, {}, "date"):
            return None
        return str(partition_path(self.root, table, {"date": day}))

    def _day_scores(self, day: str) -> list[str]:
        """Every evaluator's judge_scores file for one day."""
        return [self.scores_location(e, day) for e in self.judged_evaluators() if day in self.days(e)]

    # --- page 1: the evaluators ---------------------------------------------------------------------------------
    def _version(self, location: str) -> tuple[int, int] | None:
        store = store_for(self.root)
        if not isinstance(store, LocalStore):
            return None  # a bucket's object is read each time (no cheap version to key a cache on)
        if "*" in location:  # a partition made of parts (storage/parts.py): the version of all of them
            found = sorted((p, p.stat()) for p in Path(location.split("**")[0]).rglob("part.parquet"))
            return max((s.st_mtime_ns for _, s in found), default=0), hash(
                tuple((str(p), s.st_mtime_ns, s.st_size) for p, s in found)
            )
        stat = Path(location).stat()
        return stat.st_mtime_ns, stat.st_size

    def partition_summary(self, evaluator: str, day: str) -> dict[str, Any]:
        """One evaluator's day in numbers: rows, mean score and pass rate of the final verdicts, FAILED and SKIPPED
        by reason, calls, cache hits, cost. Kept in memory per file version: a partition is replaced whole, so a
        new file is a new key and an unchanged day is never read twice."""
        return self._per_version("summary", self.scores_location(evaluator, day), day, self._summary)

    def _per_version(self, kind: str, location: str, day: str, compute) -> Any:
        """`compute(location, day)`, kept in memory per file version (local disk; a bucket's is computed again)."""
        version = self._version(location)
        key = (kind, location, *version) if version else None
        if key is not None:
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
        value = compute(location, day)
        if key is not None:
            with self._lock:
                self._cache[key] = value
        return value

    def _summary(self, location: str, day: str) -> dict[str, Any]:
        source = f"read_parquet({_literal(location)})"
        with self.sql() as conn:
            numbers = _records(
                conn.execute(
                    f"""
                    SELECT count(*) AS rows,
                           count(*) FILTER (is_final AND (status <> '{SKIPPED}' OR reason <> '{NOT_SAMPLED}'))
                               AS selected,
                           count(*) FILTER (is_final AND status = '{COMPLETED}') AS completed,
                           count(*) FILTER (is_final AND status = '{FAILED}') AS failed,
                           count(*) FILTER (is_final AND status = '{SKIPPED}') AS skipped,
                           avg(score) FILTER (is_final AND status = '{COMPLETED}') AS mean_score,
                           avg(passed::INT) FILTER (is_final AND status = '{COMPLETED}' AND passed IS NOT NULL)
                               AS pass_rate,
                           coalesce(sum(calls), 0) AS calls,
                           count(*) FILTER (cache_hit) AS cache_hits,
                           coalesce(sum(cost_usd), 0) AS cost_usd,
                           string_agg(DISTINCT model, ', ' ORDER BY model) AS models,
                           string_agg(DISTINCT config_hash, ', ' ORDER BY config_hash) AS config_hashes
                    FROM {source}
                    """
                )
            )[0]
            reasons = conn.execute(
                f"""
                SELECT status, reason, count(*) FROM {source}
                WHERE is_final AND status <> '{COMPLETED}' GROUP BY ALL ORDER BY 3 DESC, 1, 2
                """
            ).fetchall()
        numbers["failed_by_reason"] = [(r or "(none)", n) for s, r, n in reasons if s == FAILED]
        numbers["skipped_by_reason"] = [(r or "(none)", n) for s, r, n in reasons if s == SKIPPED]
        numbers["day"] = day
        return numbers

    def evaluators(self, last_days: int) -> list[dict[str, Any]]:
        """Every evaluator (configured or with verdicts in the warehouse) with its config and its last N judged
        days' numbers, most recent day last."""
        configs = self.evaluator_configs()
        judged = set(self.judged_evaluators())
        shown = []
        for name in sorted(set(configs) | judged):
            config = configs.get(name)
            days = self.days(name)[-last_days:] if name in judged else []
            per_day = [self.partition_summary(name, day) for day in days]
            totals = {
                key: sum(d[key] for d in per_day)
                for key in ("rows", "selected", "completed", "failed", "skipped", "calls", "cache_hits", "cost_usd")
            }
            failed: dict[str, int] = {}
            skipped: dict[str, int] = {}
            for d in per_day:
                for reason, n in d["failed_by_reason"]:
                    failed[reason] = failed.get(reason, 0) + n
                for reason, n in d["skipped_by_reason"]:
                    skipped[reason] = skipped.get(reason, 0) + n
            means = [d["mean_score"] for d in per_day if d["mean_score"] is not None]
            shown.append(
                {
                    "name": name,
                    "config": config,
                    "configured": config is not None,
                    "model": config.model_label if config else None,
                    "mode": config.mode if config else None,
                    "target": (config.target or "trace") if config else None,
                    "trigger": config.trigger if config else None,
                    "sample_rate": config.sample_rate if config else None,
                    "enabled": config.enabled if config else None,
                    "days": per_day,
                    "totals": totals,
                    "failed_by_reason": sorted(failed.items(), key=lambda kv: -kv[1]),
                    "skipped_by_reason": sorted(skipped.items(), key=lambda kv: -kv[1]),
                    "mean_score": sum(means) / len(means) if means else None,
                    "latest_day": days[-1] if days else None,
                }
            )
        return shown

    # --- page 2: an evaluator's day -----------------------------------------------------------------------------
    def day_choices(self, evaluator: str, day: str) -> dict[str, list[str]]:
        """The values the day's select filters offer (statuses, reasons, models, variants present that day), read
        once per file version."""
        return self._per_version("choices", self.scores_location(evaluator, day), day, self._choices)

    def _choices(self, location: str, day: str) -> dict[str, list[str]]:
        source = f"read_parquet({_literal(location)})"
        with self.sql() as conn:
            row = conn.execute(
                f"""
                SELECT list(DISTINCT status ORDER BY status) FILTER (status IS NOT NULL),
                       list(DISTINCT reason ORDER BY reason) FILTER (reason IS NOT NULL),
                       list(DISTINCT model ORDER BY model) FILTER (model IS NOT NULL),
                       list(DISTINCT variant ORDER BY variant) FILTER (variant IS NOT NULL)
                FROM {source}
                """
            ).fetchone()
        names = ("status", "reason", "model", "variant")
        return {name: list(values or []) for name, values in zip(names, row or (None,) * 4, strict=True)}

    def day_verdicts(self, evaluator: str, day: str, filters: DayFilters) -> tuple[list[dict[str, Any]], int]:
        """One page of the day's verdicts under the filters, and how many match in all."""
        source = f"read_parquet({_literal(self.scores_location(evaluator, day))})"
        where, params = filters.where(self.day_location("traces", day))
        offset = (max(filters.page, 1) - 1) * PAGE_ROWS
        with self.sql() as conn:
            total = conn.execute(f"SELECT count(*) FROM {source} WHERE {where}", params).fetchone()
            rows = _records(
                conn.execute(
                    f"SELECT {DAY_COLUMNS} FROM {source} WHERE {where} ORDER BY {filters.order()} "
                    f"LIMIT {PAGE_ROWS} OFFSET {offset}",
                    params,
                )
            )
        return rows, int(total[0]) if total else 0

    # --- page 3: a trace and a session ------------------------------------------------------------------------
    def trace(self, day: str, trace_id: str) -> dict[str, Any] | None:
        location = self.day_location("traces", day)
        if location is None:
            return None
        with self.sql() as conn:
            found = _records(
                conn.execute(f"SELECT * FROM read_parquet({_literal(location)}) WHERE trace_id = ? LIMIT 1", [trace_id])
            )
        return found[0] if found else None

    def spans(self, day: str, trace_id: str) -> list[dict[str, Any]]:
        """The trace's spans, parents before children, each with its depth in the tree."""
        location = self.day_location("traces", day)  # spans are stored once, in their trace's row
        if location is None:
            return []
        # the trace's row first (pushed into the Parquet scan), then its spans unnested
        spans = spans_view_sql(f"(SELECT * FROM read_parquet({_literal(location)}) WHERE trace_id = ?) AS t")
        with self.sql() as conn:
            rows = _records(
                conn.execute(
                    f"""
                    SELECT span_id, parent_span_id, name, operation, status, error_type, error_message, model,
                           prompt_tokens, completion_tokens, start_time, end_time, latency_ms, tool_name,
                           tool_arguments, tool_result
                    FROM ({spans}) ORDER BY start_time, span_id
                    """,
                    [trace_id],
                )
            )
        return span_tree(rows)

    def trace_verdicts(self, day: str, trace_id: str) -> list[dict[str, Any]]:
        """Every verdict of every evaluator on the trace (as the judged trace, the B side of a pair, or the
        trace a session's verdict stands on)."""
        files = self._day_scores(day)
        if not files:
            return []
        sources = "[" + ", ".join(_literal(f) for f in files) + "]"
        with self.sql() as conn:
            return _records(
                # two equality filters rather than one OR: each is pushed into the Parquet scan (row-group stats)
                conn.execute(
                    f"""
                    SELECT * FROM (
                        SELECT {VERDICT_COLUMNS} FROM read_parquet({sources}, union_by_name = true)
                        WHERE trace_id = ?
                        UNION ALL
                        SELECT {VERDICT_COLUMNS} FROM read_parquet({sources}, union_by_name = true)
                        WHERE trace_id_b = ? AND trace_id IS DISTINCT FROM ?)
                    ORDER BY evaluator, role DESC, span_id NULLS FIRST, model, sample
                    """,
                    [trace_id, trace_id, trace_id],
                )
            )

    def labels(self, trace_id: str) -> list[dict[str, Any]]:
        """Human labels on the trace (every annotation task)."""
        if not has_files(self.root, "human_annotations"):
            return []
        source = _literal(table_glob(self.root, "human_annotations"))
        with self.sql() as conn:
            return _records(
                conn.execute(
                    f"""
                    SELECT task, criterion, annotator, label, value
                    FROM read_parquet({source}, union_by_name = true)
                    WHERE trace_id = ? ORDER BY task, criterion, annotator
                    """,
                    [trace_id],
                )
            )

    def session(self, day: str, session_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A session's traces of the day (in time order) and the verdicts on the session as a whole."""
        location = self.day_location("traces", day)
        if location is None:
            return [], []
        with self.sql() as conn:
            traces = _records(
                conn.execute(
                    f"""
                    SELECT trace_id, timestamp, input, output, conversation, model, variant, experiment_id
                    FROM read_parquet({_literal(location)}) WHERE session_id = ? ORDER BY timestamp, trace_id
                    """,
                    [session_id],
                )
            )
            files = self._day_scores(day)
            verdicts = []
            if files:
                sources = "[" + ", ".join(_literal(f) for f in files) + "]"
                verdicts = _records(
                    conn.execute(
                        f"SELECT {VERDICT_COLUMNS} FROM read_parquet({sources}, union_by_name = true) "
                        "WHERE session_id = ? ORDER BY evaluator, role DESC, model, sample",
                        [session_id],
                    )
                )
        return traces, verdicts


def span_tree(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans in depth-first order under their parents, each with `depth` (a span whose parent is not in the trace
    is a root)."""
    ids = {row["span_id"] for row in rows}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row["parent_span_id"] if row["parent_span_id"] in ids else None
        children.setdefault(parent, []).append(row)
    ordered: list[dict[str, Any]] = []
    seen: set[str] = set()

    def walk(parent: str | None, depth: int) -> None:
        for row in children.get(parent, []):
            if row["span_id"] in seen:  # a cycle in broken input: shown once
                continue
            seen.add(row["span_id"])
            ordered.append({**row, "depth": depth})
            walk(row["span_id"], depth + 1)

    walk(None, 0)
    ordered += [{**row, "depth": 0} for row in rows if row["span_id"] not in seen]
    return ordered


def _is_day(value: str) -> bool:
    return bool(DAY_PATTERN.fullmatch(value))


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


# Two verdicts agree when both are COMPLETED and give the same pass/fail, else the same label, else the same score;
# any other pair (a status that changed, a different verdict) is a change, sized by the score difference.
_SAME = """(a.status = 'COMPLETED' AND b.status = 'COMPLETED' AND CASE
    WHEN a.passed IS NOT NULL AND b.passed IS NOT NULL THEN a.passed = b.passed
    WHEN a.label IS NOT NULL AND b.label IS NOT NULL THEN a.label = b.label
    ELSE abs(a.score - b.score) < 1e-9 END)"""


def _side_sql(warehouse: Warehouse, day: str, side: Side) -> tuple[str, list[Any]]:
    """One side's verdicts per target (trace, span, session), as SQL with its parameters."""
    where, params = side.where()
    source = _literal(warehouse.scores_location(side.evaluator, day))
    return (
        f"""SELECT trace_id, coalesce(span_id, '') AS span, coalesce(session_id, '') AS sess,
                   min(status) AS status, any_value(reason) AS reason, avg(score) AS score,
                   any_value(label) AS label, bool_and(passed) AS passed,
                   any_value(coalesce(reasoning, reason_detail)) AS reasoning,
                   any_value(variant) AS variant, count(*) AS rows
            FROM read_parquet({source}) WHERE {where} GROUP BY ALL""",
        params,
    )


def compare(
    warehouse: Warehouse, day: str, a: Side, b: Side, page: int = 1
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The two sides' numbers, their agreement on the targets both judged, and one page of the verdicts that
    changed, the largest score change first (a status change, with no score on one side, counts as the largest)."""
    offset = (max(page, 1) - 1) * PAGE_ROWS
    with warehouse.sql() as conn:
        # each side is read and grouped once per request, into the cursor's own temporary tables (gone with it)
        for name, side in (("a", a), ("b", b)):
            sql, params = _side_sql(warehouse, day, side)
            conn.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}", params)
        summary = _records(
            conn.execute(
                f"""WITH sides AS (
                    SELECT (SELECT count(*) FROM a) AS n_a, (SELECT count(*) FROM b) AS n_b,
                           (SELECT avg(score) FROM a WHERE status = 'COMPLETED') AS mean_a,
                           (SELECT avg(score) FROM b WHERE status = 'COMPLETED') AS mean_b,
                           (SELECT avg(passed::INT) FROM a WHERE status = 'COMPLETED') AS pass_a,
                           (SELECT avg(passed::INT) FROM b WHERE status = 'COMPLETED') AS pass_b)
                SELECT sides.*, count(j.trace_id) AS shared,
                       count(*) FILTER (j.both_completed) AS both_completed,
                       count(*) FILTER (j.same) AS agree,
                       count(*) FILTER (j.trace_id IS NOT NULL AND NOT j.same) AS changed,
                       avg(abs(j.score_b - j.score_a)) FILTER (j.both_completed) AS mean_abs_difference,
                       avg(j.score_b - j.score_a) FILTER (j.both_completed) AS mean_difference,
                       corr(j.score_a, j.score_b) FILTER (j.both_completed) AS correlation
                FROM sides LEFT JOIN (
                    SELECT a.trace_id, a.score AS score_a, b.score AS score_b, {_SAME} AS same,
                           a.status = 'COMPLETED' AND b.status = 'COMPLETED' AS both_completed
                    FROM a JOIN b USING (trace_id, span, sess)) j ON TRUE
                GROUP BY ALL
                """
            )
        )[0]
        changed = _records(
            conn.execute(
                f"""
                SELECT a.trace_id, nullif(a.span, '') AS span_id, nullif(a.sess, '') AS session_id,
                       a.status AS status_a, a.reason AS reason_a, a.score AS score_a, a.label AS label_a,
                       a.passed AS passed_a, a.reasoning AS reasoning_a,
                       b.status AS status_b, b.reason AS reason_b, b.score AS score_b, b.label AS label_b,
                       b.passed AS passed_b, b.reasoning AS reasoning_b,
                       b.score - a.score AS difference
                FROM a JOIN b USING (trace_id, span, sess)
                WHERE NOT {_SAME}
                ORDER BY abs(b.score - a.score) DESC NULLS FIRST, a.trace_id, a.span, a.sess
                LIMIT {PAGE_ROWS} OFFSET {offset}
                """
            )
        )
        conn.execute("DROP TABLE a; DROP TABLE b")
    shared = summary["shared"] or 0
    summary["agreement"] = summary["agree"] / shared if shared else None
    return summary, changed


# The decision tables as their pages show them: the columns a reader decides with, intervals included.
TABLE_PAGES: dict[str, tuple[str, str]] = {
    "agreement": (
        "section, task, criterion, subject, reference, period, period_start, period_end, convention, statistic, "
        "value, n, interpretation, floor, below_floor, placeholder, note",
        "section, subject, reference, criterion, statistic, period, period_start",
    ),
    "experiment_results": (
        "experiment, kind, metric, evaluator, metric_role, variant, control_variant, opponent, method, n, n_control, "
        "mean, ci_low, ci_high, mean_control, difference, diff_ci_low, diff_ci_high, p_value, p_value_adjusted, "
        "prob_improvement, credible_low, credible_high, significant, outcome, recommendation, guardrail_passed, "
        "win_rate, rank, start_date, end_date, stale, stale_reason, placeholder, note",
        "experiment, metric_role, metric, variant, opponent",
    ),
    "alerts": (
        "day, evaluator, kind, severity, rule, value, threshold, mean, n, baseline_mean, baseline_n, difference, "
        "p_value, ppi_ci_low, ppi_ci_high, placeholder, message, detected_at",
        "day DESC, evaluator, kind, rule",
    ),
}


def table_page(warehouse: Warehouse, table: str, filters: dict[str, str]) -> list[dict[str, Any]]:
    """A decision table's rows (agreement, experiment_results, alerts), narrowed by exact column values."""
    columns, order = TABLE_PAGES[table]
    if not has_files(warehouse.root, table):
        return []
    allowed = {c.strip() for c in columns.split(",")}
    clauses, params = ["TRUE"], []
    for column, value in filters.items():
        if column in allowed and value:
            clauses.append(f"{column} = ?")
            params.append(value)
    source = _literal(table_glob(warehouse.root, table))
    with warehouse.sql() as conn:
        return _records(
            conn.execute(
                f"SELECT {columns} FROM read_parquet({source}, union_by_name = true) "
                f"WHERE {' AND '.join(clauses)} ORDER BY {order} LIMIT 2000",
                params,
            )
        )
