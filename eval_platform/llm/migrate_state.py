"""Moving the shared state of a data root (SQLite files under `state/`) into the Dagster instance's PostgreSQL
database, once, when a team moves its instance to PostgreSQL:

    python -m eval_platform.llm.migrate_state [--data-dir DIR] [--postgres-url URL]

(default: the data root of `EVAL_PLATFORM_DATA_DIR` and the PostgreSQL storage of the instance in `DAGSTER_HOME`).

What moves, and how a second run (after a crash, or after spend was added to the files since) stays exact:
- Both budget ledgers (the judges' and the benchmark's). Each file gets an identity (a table in the file) and the
  database remembers, per file, evaluator and day, the spend and calls already carried over; a run adds only what
  the file holds beyond that, so spend is never counted twice and never subtracted. Reservations (a submitted
  batch's, or the worst case of a call killed in flight) are copied once each, with their state and expiry; a
  reservation settled in the file after it was copied is dropped from the database again (its settlement arrives
  with the day's total). A reservation of a run still going (its process alive) stops the migration: stop the
  runs first, or the run would settle in the file what the database already counts.
- Batch state: each partition's batches, with their reservations pointing at the copies (a reservation whose row
  is gone was settled: it is dropped from the record, so it is never settled twice), and the lines (custom_id ->
  cache key) of those still open, a page at a time, before their records. A partition the database already
  holds (written by a run on PostgreSQL) is kept as it is and reported.
- The judge cache: every reply, those of the older one-file-per-entry layout included; an entry already in the
  database wins.
Each ledger is carried over in one PostgreSQL transaction holding its evaluators' budget locks, while the file's
write lock is held: a crash leaves either all of it or none of it, and the next run picks up from there.

When the instance is on PostgreSQL, `SharedState.of` refuses to hand out a ledger while a data root file holds
spend the database does not (`unmigrated`): a budget must not restart from zero unnoticed.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from eval_platform.llm.batch.state import OPEN_STATES, BatchState
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import _POSTGRES_TABLE as CACHE_TABLE
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.statedb import PostgresState, postgres_state
from eval_platform.settings import data_root, state_dir

log = logging.getLogger(__name__)

LEDGER_FILES = {"judge": "budget.sqlite", "benchmark": "benchmark_budget.sqlite"}
CACHE_FOLDER, BATCH_FOLDER = "judge_cache", "judge_batches"
COMMAND = "python -m eval_platform.llm.migrate_state"

_MIGRATIONS = "eval_platform_state_migrations"
_MIGRATIONS_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_MIGRATIONS} (
    source TEXT NOT NULL,            -- a ledger file's identity
    item TEXT NOT NULL,              -- daily:<evaluator>:<day> | spend:<row id in the file>
    spend_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    calls BIGINT NOT NULL DEFAULT 0,
    target_id BIGINT,                -- spend: the copy's id in the database
    PRIMARY KEY (source, item)
)
"""
_IDENTITY_SCHEMA = "CREATE TABLE IF NOT EXISTS ledger_identity (id TEXT NOT NULL)"
_EPSILON = 1e-12


class UnmigratedState(RuntimeError):
    """The instance is on PostgreSQL, but a data root file holds budget spend the database does not."""


@dataclass
class Report:
    """What a migration carried over (printed by the CLI; nothing here is ever a secret)."""

    spend_usd: dict[str, float] = field(default_factory=dict)  # per ledger: spend added to the database now
    calls: dict[str, int] = field(default_factory=dict)
    reservations: dict[str, int] = field(default_factory=dict)  # per ledger: reservations copied now
    dropped_reservations: dict[str, int] = field(default_factory=dict)  # copies dropped: settled in the file
    batch_partitions: int = 0
    kept_batch_partitions: list[str] = field(default_factory=list)  # already in the database: left as they are
    cache_entries: int = 0

    def lines(self) -> list[str]:
        out = []
        for name in LEDGER_FILES:
            if name in self.spend_usd:
                out.append(
                    f"{name} ledger: {self.spend_usd[name]:.6f} USD over {self.calls[name]} call(s) added, "
                    f"{self.reservations[name]} reservation(s) copied, "
                    f"{self.dropped_reservations[name]} copy(ies) dropped (settled in the file since)"
                )
        out.append(f"batch state: {self.batch_partitions} partition(s) copied")
        out += [
            f"batch state: {p} kept as the database has it (a run on PostgreSQL wrote it)"
            for p in self.kept_batch_partitions
        ]
        out.append(f"judge cache: {self.cache_entries} entr(ies) read and copied where missing")
        return out


def _identity(conn) -> str:
    conn.execute(_IDENTITY_SCHEMA)
    row = conn.execute("SELECT id FROM ledger_identity").fetchone()
    if row is None:
        row = (uuid.uuid4().hex,)
        conn.execute("INSERT INTO ledger_identity (id) VALUES (?)", row)
    return row[0]


def _live_reservations(rows: list[tuple]) -> list[tuple]:
    """Reservations of runs that may still be going (a call's: its process; a batch's are copied, not live)."""
    return [row for row in rows if row[4] == "reserved" and row[7] is not None]


def migrate_ledger(path: Path, target: BudgetLedger, name: str, report: Report) -> dict[int, int]:
    """Carry the ledger file at `path` over into `target` (see the module's docstring); returns the map from the
    file's reservation ids to their copies' ids (every copy, this run's and earlier runs')."""
    source = BudgetLedger(path)  # brings an older file up to date (columns, compaction)
    source.totals()  # marks reservations of gone processes and expired ones unsettled, as any reader does
    spend_table, daily_table = target.tables
    postgres = target.database
    assert isinstance(postgres, PostgresState)
    postgres.ensure_schema(_MIGRATIONS, _MIGRATIONS_SCHEMA)
    added_usd, added_calls, copied, dropped = 0.0, 0, 0, 0
    with source.database.transaction() as conn:  # committed first: a second run must find the same identity
        identity = _identity(conn)
    # The file's write lock is held throughout: nothing changes in it between reading and the database's commit.
    with source.database.transaction() as conn:
        daily = conn.execute(
            "SELECT evaluator, day, month, spend_usd, calls FROM judge_spend_daily ORDER BY evaluator, day"
        ).fetchall()
        spend = conn.execute(
            "SELECT id, evaluator, day, month, state, amount_usd, created_at, pid, host, expires_at "
            "FROM judge_spend WHERE state IN ('reserved', 'unsettled') ORDER BY id"
        ).fetchall()
        live = _live_reservations(spend)
        if live:
            raise RuntimeError(
                f"{path}: {len(live)} call(s) of a run still going hold reservations (process "
                f"{', '.join(sorted({f'{row[7]}@{row[8]}' for row in live}))}); stop the runs on this data root "
                "and run the migration again"
            )
        evaluators = sorted({row[0] for row in daily} | {row[1] for row in spend})
        locks = [target.lock_name(evaluator) for evaluator in evaluators]
        with postgres.transaction(f"migrate:{identity}", *locks) as cursor:
            done = {
                item: (spend_usd, calls, target_id)
                for item, spend_usd, calls, target_id in cursor.execute(
                    f"SELECT item, spend_usd, calls, target_id FROM {_MIGRATIONS} WHERE source = ?", (identity,)
                ).fetchall()
            }
            for evaluator, day, month, spend_usd, calls in daily:
                item = f"daily:{evaluator}:{day}"
                before_usd, before_calls, _ = done.get(item, (0.0, 0, None))
                more_usd, more_calls = max(0.0, spend_usd - before_usd), max(0, calls - before_calls)
                if more_usd <= _EPSILON and more_calls == 0:
                    continue
                cursor.execute(
                    f"INSERT INTO {daily_table} (evaluator, day, month, spend_usd, calls) VALUES (?, ?, ?, ?, ?) "
                    f"ON CONFLICT (evaluator, day) DO UPDATE SET spend_usd = {daily_table}.spend_usd + "
                    f"excluded.spend_usd, calls = {daily_table}.calls + excluded.calls",
                    (evaluator, day, month, more_usd, more_calls),
                )
                cursor.execute(
                    f"INSERT INTO {_MIGRATIONS} (source, item, spend_usd, calls) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (source, item) DO UPDATE SET spend_usd = excluded.spend_usd, calls = excluded.calls",
                    (identity, item, before_usd + more_usd, before_calls + more_calls),
                )
                added_usd, added_calls = added_usd + more_usd, added_calls + more_calls
            ids: dict[int, int] = {}
            for row_id, evaluator, day, month, state, amount, created_at, pid, host, expires_at in spend:
                item = f"spend:{row_id}"
                if item in done:
                    ids[row_id] = int(done[item][2])
                    continue
                (copy_id,) = cursor.execute(
                    f"INSERT INTO {spend_table}"
                    " (evaluator, day, month, amount_usd, state, created_at, expires_at, pid, host) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (evaluator, day, month, amount, state, created_at, expires_at, pid, host),
                ).fetchone()
                cursor.execute(
                    f"INSERT INTO {_MIGRATIONS} (source, item, spend_usd, target_id) VALUES (?, ?, ?, ?)",
                    (identity, item, amount, copy_id),
                )
                ids[row_id] = int(copy_id)
                copied += 1
            # Copied earlier and settled in the file since: its settlement came with the day's total above.
            in_file = {row[0] for row in spend}
            for item, (_, _, target_id) in done.items():
                if item.startswith("spend:") and int(item.split(":", 1)[1]) not in in_file and target_id is not None:
                    gone = cursor.execute(
                        f"DELETE FROM {spend_table} WHERE id = ? AND state IN ('reserved', 'unsettled') RETURNING id",
                        (target_id,),
                    ).fetchone()
                    cursor.execute(
                        f"UPDATE {_MIGRATIONS} SET target_id = NULL WHERE source = ? AND item = ?", (identity, item)
                    )
                    dropped += gone is not None
    report.spend_usd[name], report.calls[name] = added_usd, added_calls
    report.reservations[name], report.dropped_reservations[name] = copied, dropped
    return ids


def migrate_batches(folder: Path, postgres: PostgresState, reservation_ids: dict[int, int], report: Report) -> None:
    """Copy each partition's batch state, its reservations pointing at their copies in the judges' ledger."""
    for file in sorted(folder.glob("*/*.json")):
        evaluator, day = file.parent.name, file.stem
        source = BatchState(file.parent.parent, evaluator, day)
        record = source.batches
        for batch in record:
            reservation = batch.get("reservation")
            if reservation is not None:
                copy_id = reservation_ids.get(int(reservation["id"]))
                # No copy: the row was settled or released in the file, so it must never be settled again.
                batch["reservation"] = None if copy_id is None else {**reservation, "id": copy_id}
        target = BatchState(postgres, evaluator, day)
        if target.batches == record:
            continue  # copied by an earlier run
        if target.batches:
            report.kept_batch_partitions.append(f"{evaluator}/{day}")
            continue
        # The open batches' lines first (already copied ones are kept): a record is never without its lines.
        for batch in record:
            if batch.get("state") in OPEN_STATES and batch.get("submission"):
                target.add_requests(batch["submission"], source.requests(batch["submission"]))
        target.batches = record
        target.save()
        report.batch_partitions += 1


def migrate_cache(folder: Path, postgres: PostgresState, report: Report, page: int = 5000) -> None:
    source = ModelCache(folder)
    source._migrate_legacy()  # the older one-file-per-entry layout's entries, into the file first (cache.py's own)
    ModelCache(postgres)  # creates the table
    if source.path is None or not source.path.exists():
        return
    table = CACHE_TABLE
    with _readonly(source.path) as conn:
        rows = conn.execute("SELECT key, entry FROM replies ORDER BY key")
        while batch := rows.fetchmany(page):
            with postgres.transaction() as cursor:
                cursor.execute_values(f"INSERT INTO {table} (key, entry) VALUES %s ON CONFLICT (key) DO NOTHING", batch)
            report.cache_entries += len(batch)


@contextmanager
def _readonly(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def migrate(root: Path, postgres: PostgresState) -> Report:
    """Carry every SQLite store under `root`'s state folder over into `postgres` (see the module's docstring)."""
    report, folder = Report(), state_dir(root)
    ids: dict[int, int] = {}
    for name, file_name in LEDGER_FILES.items():
        if (folder / file_name).exists():
            mapping = migrate_ledger(folder / file_name, BudgetLedger(postgres, name=name), name, report)
            ids = mapping if name == "judge" else ids
    if (folder / BATCH_FOLDER).is_dir():
        migrate_batches(folder / BATCH_FOLDER, postgres, ids, report)
    if (folder / CACHE_FOLDER).is_dir():
        migrate_cache(folder / CACHE_FOLDER, postgres, report)
    return report


def unmigrated(root: Path, postgres: PostgresState) -> list[str]:
    """What the data root's ledger files hold that the database does not: spend per file (evaluator-days whose
    spend or calls exceed what was carried over) and reservations never copied. Empty: nothing to migrate."""
    problems = []
    for name, file_name in LEDGER_FILES.items():
        path = state_dir(root) / file_name
        if not path.exists():
            continue
        with _readonly(path) as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "judge_spend_daily" not in tables:
                continue
            daily = conn.execute("SELECT evaluator, day, spend_usd, calls FROM judge_spend_daily").fetchall()
            spend = conn.execute(
                "SELECT id, amount_usd FROM judge_spend WHERE state IN ('reserved', 'unsettled', 'settled')"
            ).fetchall()
            identity = (
                conn.execute("SELECT id FROM ledger_identity").fetchone() if "ledger_identity" in tables else None
            )
        done: dict[str, tuple[float, int]] = {}
        if identity is not None:
            postgres.ensure_schema(_MIGRATIONS, _MIGRATIONS_SCHEMA)
            with postgres.transaction() as cursor:
                done = {
                    item: (usd, calls)
                    for item, usd, calls in cursor.execute(
                        f"SELECT item, spend_usd, calls FROM {_MIGRATIONS} WHERE source = ?", (identity[0],)
                    ).fetchall()
                }
        missing_usd, missing_days = 0.0, 0
        for evaluator, day, usd, calls in daily:
            before_usd, before_calls = done.get(f"daily:{evaluator}:{day}", (0.0, 0))
            if usd > before_usd + _EPSILON or calls > before_calls:
                missing_usd, missing_days = missing_usd + max(0.0, usd - before_usd), missing_days + 1
        missing_rows = [amount for row_id, amount in spend if f"spend:{row_id}" not in done]
        if missing_days or missing_rows:
            problems.append(
                f"{path} ({name} ledger): {missing_usd + sum(missing_rows):.6g} USD of spend on {missing_days} "
                f"evaluator-day(s) and {len(missing_rows)} reservation(s) not in {postgres.describe()}"
            )
    return problems


def check_migrated(root: Path, postgres: PostgresState) -> None:
    """Refuse (`UnmigratedState`) when the data root's ledger files hold spend the database does not; warn when
    its judge cache has never been carried over (replies would be paid for again)."""
    problems = unmigrated(root, postgres)
    if problems:
        raise UnmigratedState(
            "The Dagster instance is on PostgreSQL, but the data root's SQLite ledgers hold spend it does not: "
            + "; ".join(problems)
            + f". Budgets would restart from zero. Stop the runs and run `{COMMAND}` once (it is safe to re-run); "
            "or move the files away if that spend must not count."
        )
    cache = state_dir(root) / CACHE_FOLDER / "replies.sqlite"
    if cache.exists() and not _cache_copied(root, postgres):
        log.warning(
            "%s holds judge replies that were never copied into %s: they will be paid for again. Run `%s` once.",
            cache,
            postgres.describe(),
            COMMAND,
        )


def _cache_copied(root: Path, postgres: PostgresState, sample: int = 1000) -> bool:
    """Whether the cache file's newest entries (up to `sample`) are all in the database: a warning's test, cheap
    at millions of entries."""
    with _readonly(state_dir(root) / CACHE_FOLDER / "replies.sqlite") as conn:
        try:
            keys = [row[0] for row in conn.execute("SELECT key FROM replies ORDER BY rowid DESC LIMIT ?", (sample,))]
        except sqlite3.Error:  # a file without the table holds no entries
            return True
    if not keys:
        return True
    ModelCache(postgres)  # creates the table
    with postgres.transaction() as cursor:
        (found,) = cursor.execute(f"SELECT COUNT(*) FROM {CACHE_TABLE} WHERE key = ANY(?)", (keys,)).fetchone()
    return int(found) == len(keys)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="the data root (default: $EVAL_PLATFORM_DATA_DIR or ./data)")
    parser.add_argument(
        "--postgres-url", help="the database (default: the PostgreSQL storage of the instance in $DAGSTER_HOME)"
    )
    args = parser.parse_args(argv)
    root = (args.data_dir or data_root()).resolve()
    url = args.postgres_url
    if url is None:
        import dagster as dg

        from eval_platform.llm.shared_state import instance_postgres_url

        url = instance_postgres_url(dg.DagsterInstance.get())
        if url is None:
            print("The Dagster instance (DAGSTER_HOME) is not on PostgreSQL: nothing to migrate to.", file=sys.stderr)
            return 2
    postgres = postgres_state(url)
    try:
        report = migrate(root, postgres)
    except RuntimeError as error:
        print(f"Not migrated: {error}", file=sys.stderr)
        return 1
    print(f"Migrated {state_dir(root)} into {postgres.describe()}:")
    for line in report.lines():
        print(f"  {line}")
    left = unmigrated(root, postgres)
    for problem in left:
        print(f"  still not in the database: {problem}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    # a process start (`eval-platform migrate-state` goes through cli.py's start_process): what
    # `startup.start_process` does, from this floor (startup.py stands above the call layer)
    from eval_platform.llm.redaction import install_log_redaction

    install_log_redaction()
    sys.exit(main())
