"""What the viewer's pages show, asked of the warehouse's Parquet partitions with DuckDB, read-only.

The viewer never opens the DuckDB catalog file: a session holding it (even read-only) would make a run that must
change the views wait (`CatalogLocked`). It reads the partition files the catalog's views read, through the storage
layer (`storage/warehouse.py`: local disk or a bucket) in an in-memory DuckDB. A page reads only what it shows: an
evaluator's day is its own partition's files (`<partition folder>/**/part.parquet`: one file, or a folder of
parts), filtered, sorted and cut to a page by DuckDB, never loaded into Python whole. Pages are keyset pages: a
page's link names the sort key of its last (or first) row, and the next page is the rows after it (`after=`) or
before it (`before=`), so page 200 reads no more than page 1 (no OFFSET); a jump to page N finds the keys of the
row before it one key column at a time (`Warehouse._key_at`) and shows the keyset page after it. A trace reads the
partitions of its day only (its verdicts: the current ones and the superseded ones of `judge_scores_history`).
The evaluators page and a day's summary and filter choices come from one grouped scan per partition, kept in
memory per version of its files (a partition is replaced, never edited: a new version is a new key).

Every value from a request reaches SQL as a parameter; the names placed in SQL text (a file location, a sort
column) are checked against what the warehouse has or a fixed list first.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from eval_platform.judging.day_numbers import GROUPS, SUMS, scores_glob, scores_version
from eval_platform.judging.day_numbers import TABLE as DAY_NUMBERS
from eval_platform.judging.history import HISTORY_TABLE
from eval_platform.judging.loading import load_evaluators
from eval_platform.schemas import COMPLETED, FAILED, NOT_SAMPLED, SKIPPED, spans_view_sql
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import (
    PARTITION_FILE,
    connect,
    has_files,
    partition_values,
    table_glob,
)
from eval_platform.viewer.history import history_location

DAY_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}")
PAGE_ROWS = 50
_FEW = 2000  # tied rows few enough to sort on every key when finding the row at a place (`Warehouse._key_at`)
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
# After the sort column, the columns that make a verdict's place in the order unique (one verdict per trace, pair,
# span, session, role, model and sample): a keyset page starts right after (or ends right before) one such key.
TIEBREAK = ("trace_id", "trace_id_b", "span_id", "session_id", "role", "model", "sample")
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


# A metadata value that JSON writes as it is (no escaping): a row whose metadata text lacks it cannot match.
_VERBATIM_IN_JSON = re.compile(r"[A-Za-z0-9 _.:/@+-]+")


def encode_cursor(sort: str, descending: bool, values: list[Any]) -> str:
    """A row's keys in the page order as a URL-safe token (sort and direction included, so a token of another
    order is not misread)."""
    data = [sort, descending, *(v.isoformat() if hasattr(v, "isoformat") else v for v in values)]
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(token: str, sort: str, descending: bool) -> list[Any] | None:
    """The key values of a token from `encode_cursor`, or None when it is absent, broken or of another order."""
    if not token:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError:
        return None
    if not isinstance(data, list) or len(data) < 2 or data[:2] != [sort, descending]:
        return None
    values = data[2:]
    if not all(v is None or isinstance(v, str | int | float) for v in values):
        return None
    return values


def _records(relation: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in relation.description or []]
    return [dict(zip(names, row, strict=True)) for row in relation.fetchall()]


# A keyset order: (column, ascending, nulls first) per key, the last keys making each row's place unique.
Keys = list[tuple[str, bool, bool]]


def order_sql(keys: Keys, reverse: bool = False) -> str:
    """The ORDER BY of `keys` (reversed: the order read backwards, for the page before a row)."""
    return ", ".join(
        f"{column} {'ASC' if ascending != reverse else 'DESC'} NULLS {'FIRST' if first != reverse else 'LAST'}"
        for column, ascending, first in keys
    )


def seek_sql(keys: Keys, values: list[Any], backwards: bool) -> tuple[str, list[Any]]:
    """The condition of the rows after (or before) the row whose keys are `values`, in the order of `keys`: the
    first key that differs decides, as in a lexicographic comparison (SQL's NULLs placed as the order does)."""
    disjuncts: list[str] = []
    params: list[Any] = []
    equal: list[str] = []
    equal_params: list[Any] = []
    for (column, ascending, first), value in zip(keys, values, strict=True):
        if backwards:
            ascending, first = not ascending, not first
        if value is None:
            later, later_params = (f"{column} IS NOT NULL", []) if first else ("", [])
        else:
            later = f"{column} {'>' if ascending else '<'} ?" + ("" if first else f" OR {column} IS NULL")
            later_params = [value]
        if later:
            disjuncts.append("(" + " AND ".join([*equal, f"({later})"]) + ")")
            params += equal_params + later_params
        equal.append(f"{column} IS NOT DISTINCT FROM ?")
        equal_params.append(value)
    return "(" + (" OR ".join(disjuncts) or "FALSE") + ")", params


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
    after: str = ""  # a keyset cursor (`encode_cursor`): the page of rows after that row
    before: str = ""  # ... or the page of rows before it (a previous page)
    page: int = 0  # with no cursor: jump to this page (its first row's place found by `Warehouse._key_at`)

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
                if _VERBATIM_IN_JSON.fullmatch(value.strip()):
                    # a value JSON writes as it is: only the rows whose text holds it are parsed
                    match, match_params = f"contains(metadata, ?) AND {match}", [value.strip(), *match_params]
            else:
                match, match_params = "metadata ILIKE ?", [f"%{self.metadata}%"]
            clauses.append(
                f"trace_id IN (SELECT trace_id FROM read_parquet({_literal(traces_location)}) WHERE {match})"
            )
            params += match_params
        return " AND ".join(clauses), params

    def keys(self) -> Keys:
        """The page order: (column, ascending, nulls first) per key, the sort column then the tiebreak, so that
        every verdict has one place and pages never overlap."""
        column = SORTS.get(self.sort, "trace_id")
        keys = [(column, not self.descending, False)]  # a verdict without that value (a FAILED score) last
        return keys + [(c, True, True) for c in TIEBREAK if c != column]

    def order(self, reverse: bool = False) -> str:
        return order_sql(self.keys(), reverse)

    def cursor(self) -> tuple[list[Any] | None, bool]:
        """The cursor's key values (None: the first page) and whether the page is the one before it."""
        token, backwards = (self.before, True) if self.before else (self.after, False)
        values = decode_cursor(token, self.sort, self.descending)
        return (values if values is not None and len(values) == len(self.keys()) else None), backwards

    def seek(self, values: list[Any], backwards: bool) -> tuple[str, list[Any]]:
        return seek_sql(self.keys(), values, backwards)


@dataclass
class DayPage:
    """One keyset page of a day's verdicts."""

    rows: list[dict[str, Any]]
    total: int  # verdicts matching the filters
    first: str  # cursor of the first row shown (the previous page ends before it)
    last: str  # cursor of the last row shown (the next page starts after it)
    has_previous: bool
    has_next: bool
    number: int | None = None  # the page's number when it was reached by a jump (`DayFilters.page`)


@dataclass
class Warehouse:
    """The viewer's read-only access to one data root's warehouse."""

    root: DataRoot
    _cache: dict[tuple[Any, ...], Any] = field(default_factory=dict)
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
        return load_evaluators(self.root.path / "evaluators", broken=broken, data_root=self.root.path)

    def judged_evaluators(self) -> list[str]:
        return [
            value.removeprefix("evaluator=")
            for value in self.root.store.children(("judge_scores",))
            if value.startswith("evaluator=")
        ]

    def days(self, evaluator: str) -> list[str]:
        return [d for d in partition_values(self.root, "judge_scores", {"evaluator": evaluator}, "date") if _is_day(d)]

    def has_day(self, evaluator: str, day: str) -> bool:
        return _is_day(day) and evaluator in self.judged_evaluators() and day in self.days(evaluator)

    def _partition(self, table: str, keys: dict[str, str]) -> tuple[str, ...]:
        return (table, *(f"{name}={value}" for name, value in keys.items()))

    def _glob(self, table: str, keys: dict[str, str]) -> str:
        """Every file of one partition: its `part.parquet`, or the parts in its folder (never a temp file)."""
        return self.root.store.location(*self._partition(table, keys), "**", PARTITION_FILE)

    def scores_location(self, evaluator: str, day: str) -> str:
        return scores_glob(self.root, evaluator, day)

    def day_location(self, table: str, day: str) -> str | None:
        """The files of a table partitioned by day alone (traces), or None when that day has none."""
        if not _is_day(day) or day not in partition_values(self.root, table, {}, "date"):
            return None
        return self._glob(table, {"date": day})

    def _day_scores(self, day: str) -> list[str]:
        """Every evaluator's judge_scores files for one day."""
        return [self.scores_location(e, day) for e in self.judged_evaluators() if day in self.days(e)]

    # --- page 1: the evaluators ---------------------------------------------------------------------------------
    def partition_summary(self, evaluator: str, day: str) -> dict[str, Any]:
        """One evaluator's day in numbers: rows, mean score and pass rate of the final verdicts, FAILED and SKIPPED
        by reason, calls, cache hits, cost, and the values its filters offer."""
        return self.summaries([(evaluator, day)])[(evaluator, day)]

    def summaries(self, partitions: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """`partition_summary` of several partitions: the ones not in memory in one grouped scan of their files
        (a few rows per status, reason, model and variant each), kept per version of the files."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        missing: dict[tuple[str, str], str | None] = {}
        for evaluator, day in partitions:
            version = scores_version(self.root, evaluator, day)
            key = ("summary", evaluator, day, version)
            with self._lock:
                cached = self._cache.get(key) if version is not None else None
            if cached is not None:
                found[(evaluator, day)] = cached
            else:
                missing[(evaluator, day)] = version
        if missing:
            groups = self._stored_groups(missing)
            groups |= self._groups([p for p in missing if p not in groups])
            for (evaluator, day), version in missing.items():
                summary = _summary(groups.get((evaluator, day), []), day)
                found[(evaluator, day)] = summary
                if version is not None:
                    with self._lock:
                        self._cache[("summary", evaluator, day, version)] = summary
        return found

    def _stored_groups(
        self, partitions: dict[tuple[str, str], str | None]
    ) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """The numbers written with the partitions (`judge_day_numbers`) that still describe their files."""
        store = self.root.store
        stored = {
            (parts[1].removeprefix("evaluator="), parts[2].removeprefix("date=")): parts
            for parts in store.files((DAY_NUMBERS,), PARTITION_FILE)
            if len(parts) == 4
        }
        wanted = [stored[p] for p, version in partitions.items() if version is not None and p in stored]
        if not wanted:
            return {}
        sources = "[" + ", ".join(_literal(store.location(*parts)) for parts in wanted) + "]"
        with self.sql() as conn:
            rows = _records(
                conn.execute(f"SELECT * FROM read_parquet({sources}, union_by_name = true, hive_partitioning = false)")
            )
        grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
        versions: dict[tuple[str, str], set[str | None]] = {}
        for row in rows:
            partition = (row.pop("evaluator"), row.pop("date"))
            versions.setdefault(partition, set()).add(row.pop("source_version"))
            grouped.setdefault(partition, []).append(row)
        return {p: g for p, g in grouped.items() if versions[p] == {partitions.get(p)}}

    def _groups(self, partitions: list[tuple[str, str]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Per partition, its rows grouped as `judge_day_numbers` groups them, summed from its verdicts (all the
        partitions in one query)."""
        if not partitions:
            return {}
        by_glob = {self.scores_location(e, d): (e, d) for e, d in partitions}
        sources = "[" + ", ".join(_literal(g) for g in by_glob) + "]"
        with self.sql() as conn:
            rows = _records(
                conn.execute(
                    f"SELECT filename, {GROUPS}, {SUMS} "
                    f"FROM read_parquet({sources}, filename = true, union_by_name = true) GROUP BY ALL"
                )
            )
        grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            partition = _partition_of(row.pop("filename"))
            if partition in by_glob.values():
                grouped.setdefault(partition, []).append(row)
        return grouped

    def evaluators(self, last_days: int) -> list[dict[str, Any]]:
        """Every evaluator (configured or with verdicts in the warehouse) with its config and its last N judged
        days' numbers, most recent day last."""
        configs = self.evaluator_configs()
        judged = set(self.judged_evaluators())
        numbers = self.summaries([(name, day) for name in sorted(judged) for day in self.days(name)[-last_days:]])
        shown = []
        for name in sorted(set(configs) | judged):
            config = configs.get(name)
            days = self.days(name)[-last_days:] if name in judged else []
            per_day = [numbers[(name, day)] for day in days]
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
        """The values the day's select filters offer (statuses, reasons, models, variants present that day)."""
        return self.partition_summary(evaluator, day)["choices"]

    def day_verdicts(self, evaluator: str, day: str, filters: DayFilters) -> DayPage:
        """One keyset page of the day's verdicts under the filters (after or before the filters' cursor), and how
        many match in all."""
        source = f"read_parquet({_literal(self.scores_location(evaluator, day))}, union_by_name = true)"
        where, params = filters.where(self.day_location("traces", day))
        values, backwards = filters.cursor()
        seek, seek_params = ("TRUE", []) if values is None else filters.seek(values, backwards)
        keys = [column for column, _, _ in filters.keys()]
        extra = ", ".join(k for k in keys if k not in {c.strip() for c in DAY_COLUMNS.split(",")})
        number = None
        with self.sql() as conn:
            total = conn.execute(f"SELECT count(*) FROM {source} WHERE {where}", params).fetchone()
            if values is None and filters.page > 1 and total and total[0]:
                # jump to page N: the keyset page after the last row of page N - 1
                number = min(filters.page, -(-int(total[0]) // PAGE_ROWS))
                if number > 1:
                    values = self._key_at(conn, source, where, params, filters.keys(), (number - 1) * PAGE_ROWS - 1)
                    backwards = False
                    seek, seek_params = filters.seek(values, backwards)
            cap, cap_params = self._cap(conn, source, where, params, filters, values, backwards)
            rows = _records(
                conn.execute(
                    f"SELECT {DAY_COLUMNS}{', ' + extra if extra else ''} FROM {source} "
                    f"WHERE {where} AND {seek} AND {cap} ORDER BY {filters.order(reverse=backwards)} "
                    f"LIMIT {PAGE_ROWS + 1}",
                    params + seek_params + cap_params,
                )
            )
        more = len(rows) > PAGE_ROWS
        rows = rows[:PAGE_ROWS]
        if backwards:
            rows.reverse()

        def token(row: dict[str, Any]) -> str:
            return encode_cursor(filters.sort, filters.descending, [row[k] for k in keys])

        return DayPage(
            rows=rows,
            total=int(total[0]) if total else 0,
            first=token(rows[0]) if rows else "",
            last=token(rows[-1]) if rows else "",
            has_previous=more if backwards else values is not None,
            has_next=values is not None if backwards else more,
            number=number,
        )

    @staticmethod
    def _key_at(
        conn: duckdb.DuckDBPyConnection, source: str, where: str, params: list[Any], keys: Keys, position: int
    ) -> list[Any]:
        """The keys of the row at `position` (0: the first) among the rows matching `where`, in the order of
        `keys`, found one key column at a time and never sorting the rows whole: the sort column's value at that
        position (read alone: the rows before it counted), then among the rows tied on that value the next
        key's, and so on; once few rows are left (`_FEW`), they are sorted on the remaining keys."""
        found: list[Any] = []
        cond, cond_params, rest = where, list(params), position
        for index, (column, ascending, nulls_first) in enumerate(keys):
            nulls, rows = conn.execute(
                f"SELECT count(*) FILTER ({column} IS NULL), count(*) FROM {source} WHERE {cond}", cond_params
            ).fetchone() or (0, 0)
            if rows <= _FEW or index == len(keys) - 1:
                remaining = keys[index:]
                row = conn.execute(
                    f"SELECT {', '.join(c for c, _, _ in remaining)} FROM {source} WHERE {cond} "
                    f"ORDER BY {order_sql(remaining)} LIMIT 1 OFFSET {rest}",
                    cond_params,
                ).fetchone()
                return found + list(row or [None] * len(remaining))
            valued = rows - nulls
            if (nulls_first and rest < nulls) or (not nulls_first and rest >= valued):
                rest -= 0 if nulls_first else valued
                cond += f" AND {column} IS NULL"
                found.append(None)
                continue
            rest -= nulls if nulls_first else 0
            # the value at that place among the valued rows, read from whichever end is nearer
            forward = rest <= valued // 2
            direction = "ASC" if ascending == forward else "DESC"
            (value,) = conn.execute(
                f"SELECT {column} FROM {source} WHERE {cond} AND {column} IS NOT NULL "
                f"ORDER BY {column} {direction} LIMIT 1 OFFSET {rest if forward else valued - 1 - rest}",
                cond_params,
            ).fetchone() or (None,)
            (before,) = conn.execute(
                f"SELECT count(*) FROM {source} WHERE {cond} AND {column} {'<' if ascending else '>'} ?",
                [*cond_params, value],
            ).fetchone() or (0,)
            rest -= before
            cond += f" AND {column} = ?"
            cond_params.append(value)
            found.append(value)
        return found

    @staticmethod
    def _cap(
        conn: duckdb.DuckDBPyConnection,
        source: str,
        where: str,
        params: list[Any],
        filters: DayFilters,
        values: list[Any] | None,
        backwards: bool,
    ) -> tuple[str, list[Any]]:
        """A bound on the sort column that the page's rows are within, found reading that column alone: the
        value of the page's last row among the rows strictly after the cursor's value. The page's query then
        sorts the few rows within it on every key, instead of every row of the day."""
        column, ascending, nulls_first = filters.keys()[0]
        if backwards:
            ascending, nulls_first = not ascending, not nulls_first
        value = values[0] if values is not None else None
        if (values is None and nulls_first) or (values is not None and value is None):
            return "TRUE", []  # the cursor is among the rows without a value: they are ordered by the tiebreak
        strict, strict_params = ("TRUE", []) if values is None else (f"{column} {'>' if ascending else '<'} ?", [value])
        bound = conn.execute(
            f"SELECT {column} FROM {source} WHERE {where} AND {strict} AND {column} IS NOT NULL "
            f"ORDER BY {column} {'ASC' if ascending else 'DESC'} LIMIT 1 OFFSET {PAGE_ROWS}",
            params + strict_params,
        ).fetchone()
        if bound is None:
            return "TRUE", []  # fewer rows than a page after the cursor's value
        return f"{column} {'<=' if ascending else '>='} ?", [bound[0]]

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
        trace a session's verdict stands on): the current configurations' verdicts, then those of superseded
        configurations kept in `judge_scores_history` (with `superseded_by` and `superseded_at`; None on a current
        verdict), the most recently superseded first."""
        evaluators = [e for e in self.judged_evaluators() if day in self.days(e)]
        files = [self.scores_location(e, day) for e in evaluators]
        if not files:
            return []
        kept = {v.removeprefix("evaluator=") for v in self.root.store.children((HISTORY_TABLE,))}
        history = [h for h in (history_location(self, e, day) for e in evaluators if e in kept) if h is not None]
        current = "[" + ", ".join(_literal(f) for f in files) + "]"
        sources = [(f"read_parquet({current}, union_by_name = true)", "NULL::VARCHAR", "NULL::TIMESTAMPTZ")]
        if history:
            superseded = "[" + ", ".join(_literal(h) for h in history) + "]"
            sources.append((f"read_parquet({superseded}, union_by_name = true)", "superseded_by", "superseded_at"))
        # two equality filters rather than one OR: each is pushed into the Parquet scan (row-group stats)
        selects = [
            f"""SELECT {VERDICT_COLUMNS}, {by} AS superseded_by, {at} AS superseded_at FROM {source}
                WHERE trace_id = ? UNION ALL
                SELECT {VERDICT_COLUMNS}, {by} AS superseded_by, {at} AS superseded_at FROM {source}
                WHERE trace_id_b = ? AND trace_id IS DISTINCT FROM ?"""
            for source, by, at in sources
        ]
        with self.sql() as conn:
            return _records(
                conn.execute(
                    f"""SELECT * FROM ({" UNION ALL ".join(selects)})
                    ORDER BY evaluator, superseded_at DESC NULLS FIRST, role DESC, span_id NULLS FIRST, model,
                        sample""",
                    [trace_id, trace_id, trace_id] * len(sources),
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


_PARTITION_KEY = re.compile(r"[/\\]evaluator=([^/\\]+)[/\\]date=([^/\\]+)[/\\]")


def _partition_of(filename: str) -> tuple[str, str]:
    """The (evaluator, day) of a judge_scores file, from its path."""
    found = _PARTITION_KEY.search(filename)
    return (found.group(1), found.group(2)) if found else ("", "")


def _summary(groups: list[dict[str, Any]], day: str) -> dict[str, Any]:
    """A partition's numbers from its grouped rows (`Warehouse._groups`): final verdicts for the means and the
    reasons, every row for calls, cache hits and cost, as the judge_scores materialization counts them."""
    final = [g for g in groups if g["is_final"]]
    completed = [g for g in final if g["status"] == COMPLETED]
    scores = sum(g["scores"] for g in completed)
    passed_known = sum(g["passed_known"] for g in completed)

    def by_reason(status: str) -> list[tuple[str, int]]:
        counts: dict[str, int] = {}
        for g in final:
            if g["status"] == status:
                counts[g["reason"] or "(none)"] = counts.get(g["reason"] or "(none)", 0) + g["rows"]
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def distinct(column: str, rows: list[dict[str, Any]] = groups) -> list[str]:
        return sorted({g[column] for g in rows if g[column] is not None})

    return {
        "day": day,
        "rows": sum(g["rows"] for g in groups),
        "selected": sum(g["rows"] for g in final if not (g["status"] == SKIPPED and g["reason"] == NOT_SAMPLED)),
        "completed": sum(g["rows"] for g in completed),
        "failed": sum(g["rows"] for g in final if g["status"] == FAILED),
        "skipped": sum(g["rows"] for g in final if g["status"] == SKIPPED),
        "mean_score": sum(g["score_sum"] or 0 for g in completed) / scores if scores else None,
        "pass_rate": sum(g["passes"] or 0 for g in completed) / passed_known if passed_known else None,
        "calls": sum(g["calls"] for g in groups),
        "cache_hits": sum(g["cache_hits"] for g in groups),
        "cost_usd": sum(g["cost_usd"] for g in groups),
        "models": ", ".join(distinct("model")) or None,
        "config_hashes": ", ".join(distinct("config_hash")) or None,
        "failed_by_reason": by_reason(FAILED),
        "skipped_by_reason": by_reason(SKIPPED),
        "choices": {name: distinct(name) for name in ("status", "reason", "model", "variant")},
    }


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
