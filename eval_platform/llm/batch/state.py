"""What batch mode keeps between runs and tracks within one: the state of a partition's batches, the partition
lock, and the batches a run handles.

A partition's state is two things:
- its batch records (id, submission, state, reservation, how many requests), a few per partition: one JSON file,
  `<state>/judge_batches/<evaluator>/<date>.json`, replaced atomically (one row of the instance's database when it
  runs on PostgreSQL);
- the custom_id -> cache key map of each batch still open (or being created), which grows with the day (a
  million-trace day is a million lines): rows of a table, `<state>/judge_batches/requests.sqlite` (a table of the
  instance's database on PostgreSQL), written and read a page at a time, never held whole. A batch's rows are
  deleted once it is collected or abandoned: only open batches are ever matched against a run's requests.

A record written by an earlier version, with its map inline (`"requests": {custom_id: key}`), is read as it is and
its map moved into the table on the next save.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_platform.llm.batch.api import BatchAPI
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.statedb import PostgresState, SqliteFile

_POSTGRES_TABLE = "eval_platform_judge_batches"
_POSTGRES_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_POSTGRES_TABLE} "
    "(evaluator TEXT NOT NULL, day TEXT NOT NULL, batches TEXT NOT NULL, PRIMARY KEY (evaluator, day))"
)
# Each open batch's lines: which request (cache key) its custom_id answers. The same SQL in both databases.
REQUESTS_TABLE = "eval_platform_judge_batch_requests"
REQUESTS_FILE = "requests.sqlite"
_REQUESTS_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {REQUESTS_TABLE} (evaluator TEXT NOT NULL, day TEXT NOT NULL, "
    "submission TEXT NOT NULL, ordinal INTEGER NOT NULL, custom_id TEXT NOT NULL, key TEXT NOT NULL, "
    "PRIMARY KEY (evaluator, day, submission, ordinal))"
)
_INSERT_REQUESTS = (
    f"INSERT INTO {REQUESTS_TABLE} (evaluator, day, submission, ordinal, custom_id, key) VALUES {{values}} "
    "ON CONFLICT (evaluator, day, submission, ordinal) DO NOTHING"
)
PAGE_ROWS = 10_000  # map rows written or read at once
OPEN_STATES = ("open", "submitting")  # a batch whose lines a run may still claim (see `mode._claim`)


class BatchState:
    """The batches one partition submitted (`batches`, records as dicts; see the module doc for where they are
    kept), and the map of each open batch's lines (`add_requests`, `requests`)."""

    def __init__(self, where: Path | PostgresState, evaluator: str, day: str):
        self.evaluator, self.day = evaluator, day
        self.batches: list[dict[str, Any]] = []
        self._inline: dict[str, dict[str, str]] = {}  # maps of records an earlier version wrote inline
        if isinstance(where, PostgresState):
            self.path = None
            self._postgres: PostgresState | None = where
            self._requests: PostgresState | SqliteFile = where
            where.ensure_schema(_POSTGRES_TABLE, _POSTGRES_SCHEMA)
            where.ensure_schema(REQUESTS_TABLE, _REQUESTS_SCHEMA)
            with where.transaction() as cursor:
                row = cursor.execute(
                    f"SELECT batches FROM {_POSTGRES_TABLE} WHERE evaluator = ? AND day = ?", (evaluator, day)
                ).fetchone()
            if row is not None:
                self.batches = json.loads(row[0])["batches"]
        else:
            self._postgres = None
            self._requests = SqliteFile(Path(where) / REQUESTS_FILE)
            self._requests_ready = False
            self.path = Path(where) / evaluator / f"{day}.json"
            if self.path.exists():
                self.batches = json.loads(self.path.read_text(encoding="utf-8"))["batches"]
        for record in self.batches:
            inline = record.get("requests")
            if isinstance(inline, dict):
                del record["requests"]
                record["request_count"] = len(inline)
                self._inline[record.get("submission") or ""] = inline
        # Submissions whose lines may be in the table: those of a closed record are deleted at the next save.
        self._mapped = {r["submission"] for r in self.batches if r.get("submission")}

    def open_batches(self, endpoint_id: str) -> list[dict[str, Any]]:
        return [b for b in self.batches if b["state"] == "open" and b["endpoint"] == endpoint_id]

    def submitting(self, endpoint_id: str) -> list[dict[str, Any]]:
        """Batches a run was creating when it stopped: they may or may not exist at the provider."""
        return [b for b in self.batches if b["state"] == "submitting" and b["endpoint"] == endpoint_id]

    @contextmanager
    def _map(self):
        """A transaction on the table of batch lines (created on first use)."""
        if isinstance(self._requests, SqliteFile) and not self._requests_ready:
            self._requests.path.parent.mkdir(parents=True, exist_ok=True)
            with self._requests.transaction() as cursor:
                cursor.execute(_REQUESTS_SCHEMA)
            self._requests_ready = True
        with self._requests.transaction() as cursor:
            yield cursor

    def add_requests(self, submission: str, lines: Iterable[tuple[str, str]]) -> None:
        """Record a batch's lines, (custom_id, cache key) in the batch's order, a page at a time in one transaction
        (so a batch is never claimed with half its lines). Lines already recorded are left as they are."""
        self._mapped.add(submission)
        common = (self.evaluator, self.day, submission)
        with self._map() as cursor:
            page: list[tuple] = []
            for ordinal, (custom_id, key) in enumerate(lines):
                page.append((*common, ordinal, custom_id, key))
                if len(page) >= PAGE_ROWS:
                    self._insert(cursor, page)
                    page = []
            if page:
                self._insert(cursor, page)

    def _insert(self, cursor, rows: list[tuple]) -> None:
        if self._postgres is not None:
            cursor.execute_values(_INSERT_REQUESTS.format(values="%s"), rows)
        else:
            cursor.executemany(_INSERT_REQUESTS.format(values="(?, ?, ?, ?, ?, ?)"), rows)

    def requests(self, submission: str) -> Iterator[tuple[str, str]]:
        """A batch's lines, (custom_id, cache key) in the batch's order, read a page at a time."""
        if submission in self._inline:
            yield from self._inline[submission].items()
            return
        after = -1
        while True:
            with self._map() as cursor:
                rows = cursor.execute(
                    f"SELECT ordinal, custom_id, key FROM {REQUESTS_TABLE} WHERE evaluator = ? AND day = ? "
                    "AND submission = ? AND ordinal > ? ORDER BY ordinal LIMIT ?",
                    (self.evaluator, self.day, submission, after, PAGE_ROWS),
                ).fetchall()
            for _, custom_id, key in rows:
                yield custom_id, key
            if len(rows) < PAGE_ROWS:
                return
            after = rows[-1][0]

    def save(self) -> None:
        """Write the records (atomically), then forget the lines of the batches no longer open."""
        for submission, inline in list(self._inline.items()):
            if submission:
                self.add_requests(submission, inline.items())
            del self._inline[submission]
        if self._postgres is not None:
            with self._postgres.transaction() as cursor:
                cursor.execute(
                    f"INSERT INTO {_POSTGRES_TABLE} (evaluator, day, batches) VALUES (?, ?, ?) "
                    "ON CONFLICT (evaluator, day) DO UPDATE SET batches = excluded.batches",
                    (self.evaluator, self.day, json.dumps({"batches": self.batches})),
                )
        else:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(f".json.{os.getpid()}.tmp")
            with temporary.open("w", encoding="utf-8") as handle:
                json.dump({"batches": self.batches}, handle, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        live = {r.get("submission") for r in self.batches if r.get("state") in OPEN_STATES}
        closed = self._mapped - live
        if closed:
            with self._map() as cursor:
                for submission in sorted(closed):
                    cursor.execute(
                        f"DELETE FROM {REQUESTS_TABLE} WHERE evaluator = ? AND day = ? AND submission = ?",
                        (self.evaluator, self.day, submission),
                    )
            self._mapped &= live


@contextmanager
def partition_lock(where: Path | PostgresState, evaluator: str, day: str):
    """Held while a run submits, waits for and collects one partition's batches (released if it dies): a file
    lock under `where` (a folder), or, on PostgreSQL, an advisory lock of the session (every host sees it)."""
    if isinstance(where, PostgresState):
        with where.session_lock(f"judge_batches:{evaluator}:{day}"):
            yield
        return
    path = Path(where) / evaluator / f"{day}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def endpoint_id(endpoint: Endpoint) -> str:
    """Which endpoint a batch lives at (never the key): a batch is resumed only where it was submitted."""
    return f"{endpoint.model}@{endpoint.api_base or ''}"


@dataclass
class TrackedBatch:
    """One batch this run waits for: submitted now or found in the state."""

    record: dict[str, Any]  # its record in the state
    api: BatchAPI
    endpoint: Endpoint
    claimed: int = 0  # requests of this run it answers (see `mode.DayCalls`, which knows which)
    resumed: bool = False
    provider: dict[str, Any] | None = None  # the batch object last retrieved
    collected: bool = False
    spend_usd: float = 0.0

    @property
    def batch_id(self) -> str:
        return self.record["batch_id"]

    @property
    def submission(self) -> str:
        return self.record.get("submission") or ""

    def summary(self) -> dict[str, Any]:
        status = (self.provider or {}).get("status") or self.record.get("status")
        return {
            "batch_id": self.batch_id,
            "model": self.record["model"],
            "status": status,
            "resumed": self.resumed,
            "requests": self.claimed,
            "collected": self.collected,
            "cost_usd": round(self.spend_usd, 8),
        }
