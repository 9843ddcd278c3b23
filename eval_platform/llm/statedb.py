"""The state files opened from many processes (the judge-call cache, the budget ledgers, the batch state) and the
two databases the shared state can live in.

`SqliteFile`: one SQLite file under the data root's `state/` folder, for a local instance. Its write lock
(`BEGIN IMMEDIATE`) serialises writers, which must therefore share one POSIX file system with working locks.

`PostgresState`: the Dagster instance's PostgreSQL database, when the instance runs on PostgreSQL, so that
every host that runs our assets reads and writes one state. Writers that must not interleave (a budget's
check-and-reserve) take a transaction-level advisory lock named after what they guard
(`pg_advisory_xact_lock`): PostgreSQL releases it at commit, at rollback, and when the connection dies with
its process (kill -9 included), so a crash never leaves a lock or a half-written change behind. Statements
then run at READ COMMITTED, each seeing everything committed before the lock was granted.

Both take statements written with `?` placeholders (the SQL our stores use is written once, in the dialect
both accept: `ON CONFLICT ... DO UPDATE`, `RETURNING`) and run them inside `transaction()`, which commits on
exit and rolls back on any exception.

Opening a SQLite file (`connect_wal`): every connection waits up to `timeout_s` for another's lock (SQLite's busy
timeout). Switching a fresh file to WAL is the exception: `PRAGMA journal_mode=WAL` answers "database is locked" at
once, without waiting, while another process holds the file (several runs opening a new cache or ledger together),
so it is retried here until `timeout_s` has passed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

BUSY_TIMEOUT_S = 60.0
# The size the write-ahead log is cut back to whenever it is reset (after a checkpoint that copied it all): while
# readers keep snapshots open (a judge day's lookups), checkpoints cannot reset it and it grows with the writes
# (1.29 GB beside a 160 MB cache, issue 34); it never shrank before, even once every writer was gone.
WAL_SIZE_LIMIT = 64 * 1024 * 1024


def is_locked(error: BaseException) -> bool:
    """SQLite's "database is locked" / "database is busy": another connection holds the lock; try again."""
    message = str(error).lower()
    return isinstance(error, sqlite3.OperationalError) and ("locked" in message or "busy" in message)


def connect_wal(path: Path, timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) to `path` in WAL mode."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        connection = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            return connection
        except sqlite3.OperationalError as error:
            connection.close()
            if not is_locked(error) or time.monotonic() >= deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.25)


def checkpoint_wal(path: Path, timeout_s: float = 5.0) -> None:
    """Copy the write-ahead log of `path` into the database and truncate it to zero bytes, waiting at most
    `timeout_s` for readers of other connections to finish their snapshot (past that, what can be copied is, and
    the log is cut back at its next reset). Nothing happens when the file or its log does not exist."""
    if not Path(path).exists() or not Path(f"{path}-wal").exists():
        return
    try:
        connection = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
    except sqlite3.Error:
        return
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass  # busy or locked past the timeout: the log is cut back at its next reset (WAL_SIZE_LIMIT)
    finally:
        connection.close()


# Open files a forked child inherited from its parent (see `SqliteFile._handle`).
_INHERITED: list[_SqliteHandle] = []


class SqliteFile:
    """A SQLite file in WAL mode (readers in other processes are not blocked), opened once per thread and process.

    Opening the file for every transaction cost more than the transaction: the connect, the WAL switch, and, as
    the last connection of the process closed, a checkpoint of the WAL with its own fsyncs (a budgeted judge ran
    at 150-190 calls/s on it). A connection is kept per thread (sqlite3 connections are not shared between
    threads) and per process (a forked child opens its own: a connection is never used across a fork); between
    transactions it holds no lock, so other processes are never kept waiting by it.

    Writers queue on an `flock` of a file beside it (`<name>.lock`) before SQLite's write lock: the kernel wakes a
    waiter the moment the lock is freed, where SQLite's own busy handler polls at up to 100 ms, so a process
    committing back to back on an open connection would take every turn and the others would wait their busy
    timeout out. The kernel frees the lock of a killed process with its files.

    `durable=False` commits without waiting for the disk (`PRAGMA synchronous=NORMAL` in WAL mode): such a
    commit survives the process being killed (kill -9) like any other, and is made durable by the next durable
    commit; only a power loss or an operating-system crash before then can undo it. Callers use it only for a
    change whose loss leaves the file on the safe side (see `BudgetLedger.settle`).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._local = threading.local()

    def describe(self) -> str:
        return str(self.path)

    def _handle(self) -> _SqliteHandle:
        handle = getattr(self._local, "handle", None)
        if handle is None or handle.pid != os.getpid():
            if handle is not None:
                # Inherited through a fork: never used, and never closed either (closing runs SQLite's own
                # clean-up of a file the parent still has open, and the lock file's flock is the parent's too);
                # kept here so that it is never collected.
                _INHERITED.append(handle)
            handle = self._local.handle = _SqliteHandle(self.path)
        return handle

    def close(self) -> None:
        """Close this thread's connection (the next transaction opens a new one)."""
        handle = getattr(self._local, "handle", None)
        if handle is not None:
            if handle.pid == os.getpid():
                handle.close()
            else:
                _INHERITED.append(handle)
        self._local.handle = None

    @contextmanager
    def transaction(self, *locks: str, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction: SQLite's one write lock stands for every named lock."""
        handle = self._handle()
        conn = handle.conn
        if handle.durable != durable:
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            handle.durable = durable
        fcntl.flock(handle.queue, fcntl.LOCK_EX)
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error:
                self.close()  # a broken connection (the file replaced or gone): the next transaction opens anew
                raise
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            if not handle.closed:
                fcntl.flock(handle.queue, fcntl.LOCK_UN)


class _SqliteHandle:
    """One thread's open ledger file: its connection and the lock file writers queue on (closed when collected)."""

    def __init__(self, path: Path):
        self.pid = os.getpid()
        self.queue = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self.conn = connect_wal(path)
            self.conn.execute("PRAGMA synchronous=FULL")  # every commit on disk before it returns (the default)
        except BaseException:
            os.close(self.queue)
            raise
        self.durable = True
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.conn.close()
            os.close(self.queue)

    def __del__(self) -> None:
        try:
            if self.pid == os.getpid():  # an inherited handle is the parent's to close (and is never collected)
                self.close()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit the OS closes them anyway
            pass


class _PgCursor:
    """A psycopg2 cursor taking `?` placeholders, returning itself from `execute` as sqlite3 does."""

    def __init__(self, cursor):
        self._cursor = cursor

    def execute(self, sql: str, params: Sequence[Any] = ()):
        self._cursor.execute(sql.replace("?", "%s"), tuple(params))
        return self._cursor

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]):
        self._cursor.executemany(sql.replace("?", "%s"), [tuple(row) for row in rows])
        return self._cursor

    def execute_values(self, sql: str, rows: Sequence[Sequence[Any]]):
        """Many rows in one statement (`VALUES %s`): one round trip per page, not per row."""
        from psycopg2.extras import execute_values

        execute_values(self._cursor, sql, rows, page_size=1000)
        return self._cursor


def lock_id(name: str) -> int:
    """The advisory lock (a signed 64-bit number) that stands for `name`."""
    return int.from_bytes(hashlib.sha256(f"eval_platform:{name}".encode()).digest()[:8], "big", signed=True)


def libpq_url(url: str) -> str:
    """The instance's SQLAlchemy URL (`postgresql+psycopg2://...`) as libpq reads it (`postgresql://...`)."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL (scheme {parts.scheme!r})")
    return urlunsplit((scheme, *parts[1:]))


class PostgresState:
    """The instance's PostgreSQL database: one connection per thread and process, opened on first use.

    Get one with `postgres_state(url)`: every store of a process then shares its connections."""

    # Dead peers are noticed within about a minute instead of the OS's two hours: a lock held by a host that
    # vanished from the network is freed when PostgreSQL drops its connection.
    _KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}

    def __init__(self, url: str):
        self.url = libpq_url(url)
        self._local = threading.local()
        self._schemas: set[str] = set()
        self._schema_lock = threading.Lock()

    def describe(self) -> str:
        """Where, without the password (it never reaches a message)."""
        parts = urlsplit(self.url)
        host = parts.hostname or "localhost"
        return f"PostgreSQL {host}:{parts.port or 5432}{parts.path}"

    def connect(self, autocommit: bool = False):
        import psycopg2  # installed with dagster-postgres; only a PostgreSQL instance needs it

        conn = psycopg2.connect(self.url, application_name="eval_platform", **self._KEEPALIVES)
        conn.autocommit = autocommit
        return conn

    def connection(self, autocommit: bool = False):
        """This thread's connection (a forked child opens its own: a connection is never shared)."""
        name = "reader" if autocommit else "writer"
        conn = getattr(self._local, name, None)
        if conn is None or conn.closed or getattr(self._local, f"{name}_pid", None) != os.getpid():
            conn = self.connect(autocommit=autocommit)
            setattr(self._local, name, conn)
            setattr(self._local, f"{name}_pid", os.getpid())
        return conn

    @contextmanager
    def transaction(self, *locks: str, durable: bool = True) -> Iterator[_PgCursor]:
        """A transaction holding the advisory locks named (taken in one order, so two never deadlock). Every
        commit is durable here (the server's `synchronous_commit`): `durable` is for `SqliteFile`'s sake."""
        conn = self.connection()
        try:
            with conn.cursor() as cursor:
                for lock in sorted(set(locks)):
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id(lock),))
                yield _PgCursor(cursor)
            conn.commit()
        except BaseException:
            try:
                conn.rollback()
            except Exception:  # noqa: BLE001 - the connection is broken: the next transaction opens a new one
                conn.close()
            raise

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        """One row of a single read, outside any transaction (the judge cache's lookups)."""
        with self.connection(autocommit=True).cursor() as cursor:
            cursor.execute(sql.replace("?", "%s"), tuple(params))
            return cursor.fetchone()

    @contextmanager
    def session_lock(self, name: str) -> Iterator[None]:
        """Held until the block ends, or until this process dies (its connection closes): a partition's lock
        across hosts, as `flock` is across the processes of one host. Waits while another holds it."""
        conn = self.connect(autocommit=True)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s)", (lock_id(name),))
            yield
        finally:
            conn.close()  # releases the lock

    def ensure_schema(self, name: str, ddl: str) -> None:
        """Create a store's tables once per process; concurrent first runs on several hosts take turns."""
        with self._schema_lock:
            if name in self._schemas:
                return
            with self.transaction("schema") as cursor:
                for statement in filter(str.strip, ddl.split(";")):
                    cursor.execute(statement)
            self._schemas.add(name)


_STATES: dict[str, PostgresState] = {}
_STATES_LOCK = threading.Lock()


def postgres_state(url: str) -> PostgresState:
    """The process's `PostgresState` for `url` (one per database, so stores share connections)."""
    with _STATES_LOCK:
        state = _STATES.get(url)
        if state is None:
            state = _STATES[url] = PostgresState(url)
        return state
