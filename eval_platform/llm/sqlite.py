"""Opening the platform's SQLite files (the judge-call cache, the budget ledgers) from many processes at once.

Every connection waits up to `timeout_s` for another's lock (SQLite's busy timeout). Switching a fresh file to
WAL is the exception: `PRAGMA journal_mode=WAL` answers "database is locked" at once, without waiting, while
another process holds the file (several runs opening a new cache or ledger together), so it is retried here
until `timeout_s` has passed.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

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
