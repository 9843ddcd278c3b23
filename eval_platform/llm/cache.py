"""Content-addressed cache of judge replies: an identical request is answered without calling the provider.

The key covers everything that shapes the reply (model, endpoint, messages, temperature, max_tokens and
the sample index, so several samples stay several calls). Entries live in one SQLite file (WAL, so runs in
other processes read while one writes). Writes go through one background thread that commits whatever has
queued up in one transaction: the judge's event loop only hands entries over. One JSON file per entry,
written to a temporary name and renamed, was the format before; it cost about 1 ms of CPU per call, which at
hundreds of calls per second was the largest share of our own overhead (README, judge throughput). Entries
in that older layout are moved into the SQLite file on the first lookup (once per process: a miss then costs
no file probe, which was ~25 us of CPU per call). `flush()` waits for the queued writes; the runner flushes at
the end of every day, and a write that failed is reported with the day's rows, never instead of them (the
replies were paid for). Only replies that parsed into a verdict are stored: a failed call is retried by the
next run.

When the Dagster instance runs on PostgreSQL the entries live in one table of its database instead (every host
finds what any host paid for); the same writer thread commits them there, in batches.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eval_platform import jsontext
from eval_platform.llm.client import ModelRequest
from eval_platform.llm.request_json import SORTED_JSON, escape, scalar
from eval_platform.llm.statedb import PostgresState, checkpoint_wal, connect_wal

_SORTED_JSON = SORTED_JSON  # the JSON the key is the hash of (`request_json`: the POST body's messages too)
# SHA-256 after the part of a key that is the same in every request of an evaluator's day (endpoint, max_tokens and
# the system message: most of the key's bytes), per such part; each key hashes a copy of it on with its own rest.
# Bounded like request_json's own memo of leading messages.
_PREFIX_HASHES: dict[tuple[str, str], Any] = {}
_PREFIX_HASHES_MAX = 256


def cache_key(request: ModelRequest, sample: int, endpoint: str | None = None) -> str:
    """`endpoint` names where the reply comes from when the URL does not (the local judge's port changes
    from run to run); by default the request's api_base.

    The key is the SHA-256 of `json.dumps(material, sort_keys=True)` (see `_key_material`); this builds the same
    bytes from their parts: the messages' JSON is the request's own (`request.messages_json`, written once for the
    key and the POST body), and the hash of the part every request of the day shares is taken once per day."""
    secret, scope = request.fence_secret, request.cache_scope
    messages, lead, lead_escaped = request.messages_json
    # The fence secret is drawn per request; the same content must still find its cached reply. The key holds
    # the text between the secret's occurrences, as a list: where the secret stood is marked by a list boundary,
    # which no content can write (a fixed word in its place could be written by the content itself, and two
    # traces could then share an entry: the second would get the first one's verdict without a call). A request
    # without fences (a benchmark's prompt to the model under test) keeps its text whole, as its key always did.
    head = '{"api_base": ' + scalar(endpoint or request.api_base) + ', "max_tokens": ' + scalar(request.max_tokens)
    head += ', "messages": ' + ("[" if secret else "")
    tail = (
        ("]" if secret else "")
        + ', "model": '
        + scalar(request.model)
        + ', "sample": '
        + scalar(sample)
        # two spans of one trace never share a reply; unscoped keys stay as they were
        + ("" if scope is None else ', "scope": ' + scalar(scope))
        + ', "temperature": '
        + scalar(request.temperature)
        + "}"
    )
    if secret and not (secret.isascii() and secret.isalnum()):
        return _key_of_pieces(messages.split(secret), lead, lead_escaped, head, tail)
    # The list of pieces, written at once: `messages` is JSON text (ASCII, no control character), which escaping
    # as a string changes only at its quotes and backslashes (each gets a backslash before it), so the escaped text
    # holds the secret (letters and digits, as every fence secret is) exactly where `messages` does, and each
    # occurrence written as '", "' is the list `[escape(piece), ...]` of `_key_of_pieces`, in one C call each.
    start = 0
    if (
        lead
        and messages.startswith(lead)
        and not (secret and messages.find(secret, 0, len(lead) + len(secret) - 1) >= 0)
    ):
        start = len(lead)  # no secret in the lead: its escaped part is hashed once per day (`_shared_prefix`)
    rest = escape(messages[start:])
    if secret:
        rest = rest.replace(secret, '", "')
    if start:
        digest = _shared_prefix(head, lead, lead_escaped)
        digest.update((rest[1:] + tail).encode())
        return digest.hexdigest()
    return hashlib.sha256((head + rest + tail).encode()).hexdigest()


def _shared_prefix(head: str, lead: str, lead_escaped: str) -> Any:
    """A copy of the SHA-256 state after `head` and the escaped leading message, hashed once per such pair."""
    memo = (head, lead)
    shared = _PREFIX_HASHES.get(memo)
    if shared is None:
        if len(_PREFIX_HASHES) >= _PREFIX_HASHES_MAX:
            _PREFIX_HASHES.clear()
        shared = _PREFIX_HASHES[memo] = hashlib.sha256((head + '"' + lead_escaped).encode())
    return shared.copy()


def _key_of_pieces(pieces: list[str], lead: str, lead_escaped: str, head: str, tail: str) -> str:
    """The key of a request whose fence secret is not only letters and digits: each piece between its occurrences
    escaped on its own."""
    written = [escape(piece) for piece in pieces[1:]]
    first = pieces[0]
    rest = ", ".join(written)
    if lead and first.startswith(lead):  # escaping is character by character: the lead's is kept, the rest added
        digest = _shared_prefix(head, lead, lead_escaped)
        digest.update((escape(first[len(lead) :])[1:] + (", " if written else "") + rest + tail).encode())
        return digest.hexdigest()
    body = escape(first) + (", " if written else "") + rest
    return hashlib.sha256((head + body + tail).encode()).hexdigest()


def _key_material(request: ModelRequest, sample: int, endpoint: str | None = None) -> dict[str, Any]:
    """What the key is the hash of, as JSON with sorted keys (the definition `cache_key` builds the bytes of)."""
    messages = _SORTED_JSON.encode(request.messages)
    material = {
        "model": request.model,
        "api_base": endpoint or request.api_base,
        "messages": messages.split(request.fence_secret) if request.fence_secret else messages,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "sample": sample,
    }
    if request.cache_scope is not None:
        material["scope"] = request.cache_scope
    return material


# The writer commits at most every WRITE_GATHER_S seconds (a flush at once), or when WRITE_BATCH entries wait.
WRITE_GATHER_S = 0.25
WRITE_BATCH = 4000

# A batch is one JSON array of [key, entry] pairs (written by one `jsontext.dumps` in the writer thread, not one per
# entry in the judge's event loop); `value -> 1` is the entry's JSON text (compact: what `json.loads` reads back).
_INSERT_BATCH = "INSERT OR REPLACE INTO replies (key, entry) SELECT value ->> 0, value -> 1 FROM json_each(?)"
# Within a day (`ModelCache.reading`), a thread's lookups share one read transaction of the SQLite file instead of
# one each (two fcntl locks and a check of the WAL per lookup, about half of a miss's CPU): a snapshot, taken again
# after every commit of this cache's writer and at least every SNAPSHOT_S seconds (what other processes wrote
# since is seen that much later: a call they paid for in that window may be made again, never a wrong reply).
SNAPSHOT_S = 0.25
_SCHEMA = "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, entry TEXT NOT NULL)"
_POSTGRES_TABLE = "eval_platform_judge_cache"


# The cache files this process opened: when it exits, each one's log is copied into the file and truncated.
# Connections that threads leave open at exit are never closed (SQLite's own checkpoint on the last close never
# runs), and the log stayed as large as a day of writes had made it (issue 34). At exit, not when a cache object is
# collected: a checkpoint waits for other connections' readers (up to 5 s), which a judging thread must not.
_OPENED: set[Path] = set()
_OPENED_LOCK = threading.Lock()


def _checkpoint_at_exit(path: Path) -> None:
    with _OPENED_LOCK:
        if not _OPENED:
            atexit.register(_checkpoint_opened)
        _OPENED.add(path)


def _checkpoint_opened() -> None:
    with _OPENED_LOCK:
        paths = sorted(_OPENED)
    for path in paths:
        checkpoint_wal(path)


class _Readers(threading.local):
    """Per thread: its connection to the SQLite file, and its read snapshot within `ModelCache.reading`."""

    def __init__(self) -> None:
        self.connection: sqlite3.Connection | None = None
        self.scoped = 0  # `reading` blocks this thread is in
        self.snapshot: int | None = None  # the writer's commits when the snapshot was taken; None: none open
        self.snapshot_until = 0.0


class ModelCache:
    """The cache in a folder (`where` a path: one SQLite file in it), or in the Dagster instance's PostgreSQL
    database (`where` a `PostgresState`: one table, read and written by every host)."""

    def __init__(self, where: Path | PostgresState):
        self._postgres = where if isinstance(where, PostgresState) else None
        self.directory = None if isinstance(where, PostgresState) else Path(where)
        if self._postgres is not None:
            self._postgres.ensure_schema(_POSTGRES_TABLE, _SCHEMA.replace("replies", _POSTGRES_TABLE))
        # looked up on every miss until the file exists (a Path costs ~10 us there); None: entries in PostgreSQL
        self._file = None if self.path is None else str(self.path)
        self._readers = _Readers()
        self._cond = threading.Condition()
        self._queue: list[tuple[str, dict[str, Any]]] = []
        self._queued = self._written = 0
        self._commits = 0  # batches the writer committed (a reader's snapshot older than the last one is renewed)
        self._error: BaseException | None = None
        self._writer: threading.Thread | None = None
        self._writer_connection: sqlite3.Connection | None = None  # the writer thread's, on SQLite
        self._unwritten: dict[str, dict[str, Any]] = {}  # handed to the writer, maybe not committed yet
        self._migrated = False  # the older layout's entries are in the SQLite file
        self._legacy_files = False  # ... or could not be moved there: a miss still looks for the file
        self._flushing = 0  # flush() calls waiting for the writer

    @property
    def path(self) -> Path | None:
        return None if self.directory is None else self.directory / "replies.sqlite"

    def describe(self) -> str:
        """Where the entries are (never a password)."""
        return self._postgres.describe() + f" ({_POSTGRES_TABLE})" if self._postgres else str(self.path)

    def _connect(self) -> sqlite3.Connection:
        assert self.directory is not None and self.path is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        _checkpoint_at_exit(self.path)
        connection = connect_wal(self.path)  # waits for other processes opening the cache (a fresh one included)
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute(_SCHEMA)
        return connection

    def _reader(self) -> sqlite3.Connection | None:
        connection = self._readers.connection
        if connection is None:
            if self._file is None or not os.path.exists(self._file):
                return None  # nothing stored yet: do not create files on a read
            connection = self._readers.connection = self._connect()
        return connection

    def _migrate_legacy(self) -> None:
        """Move the entries of the one-file-per-entry layout (`<key[:2]>/<key>.json`) into the SQLite file.

        An entry already in the SQLite file wins, as it did when both were read; a file that cannot be read
        stays where it is (it was a miss before too). Safe with other processes doing the same at once."""
        assert self.directory is not None  # the older layout only ever was in a folder
        with self._cond:
            if self._migrated:
                return
            files = [f for f in self.directory.glob("??/*.json") if len(f.stem) == 64 and f.parent.name == f.stem[:2]]
            rows = []
            for file in files:
                try:
                    rows.append((file.stem, json.dumps(json.loads(file.read_text(encoding="utf-8")))))
                except (OSError, ValueError):
                    continue
            if rows:
                try:
                    connection = self._connect()
                    try:
                        connection.execute("BEGIN IMMEDIATE")
                        connection.executemany("INSERT OR IGNORE INTO replies (key, entry) VALUES (?, ?)", rows)
                        connection.execute("COMMIT")
                    finally:
                        connection.close()
                except (OSError, sqlite3.Error):
                    # Cannot be moved (a read-only folder, say): the files stay, and are read as before.
                    self._legacy_files = True
                    self._migrated = True
                    return
                for key, _ in rows:
                    (self.directory / key[:2] / f"{key}.json").unlink(missing_ok=True)
                for directory in {self.directory / key[:2] for key, _ in rows}:
                    try:
                        directory.rmdir()
                    except OSError:
                        pass  # not empty: an unreadable file stays
            self._migrated = True

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._unwritten.get(key)
        if entry is not None:
            return entry
        if self._postgres is not None:
            row = self._postgres.fetchone(f"SELECT entry FROM {_POSTGRES_TABLE} WHERE key = ?", (key,))
            return json.loads(row[0]) if row is not None else None
        if not self._migrated:
            self._migrate_legacy()
        reader = self._reader()
        row = None
        if reader is not None:
            local = self._readers
            if local.scoped and (local.snapshot != self._commits or time.monotonic() >= local.snapshot_until):
                if reader.in_transaction:
                    reader.execute("COMMIT")
                reader.execute("BEGIN")
                local.snapshot, local.snapshot_until = self._commits, time.monotonic() + SNAPSHOT_S
            row = reader.execute("SELECT entry FROM replies WHERE key = ?", (key,)).fetchone()
        try:
            if row is not None:
                return jsontext.loads(row[0])
            if self._legacy_files and self.directory is not None:
                return json.loads((self.directory / key[:2] / f"{key}.json").read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            pass
        return None

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Within it, this thread's lookups share a read snapshot of the SQLite file (see SNAPSHOT_S); it ends with
        the block, so no read transaction is left open to hold the WAL back. A judge day reads in one."""
        local = self._readers
        local.scoped += 1
        try:
            yield
        finally:
            local.scoped -= 1
            connection = getattr(local, "connection", None)
            if not local.scoped and connection is not None and connection.in_transaction:
                connection.execute("COMMIT")
            local.snapshot = None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        with self._cond:
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop, name="judge-cache-writer", daemon=True)
                self._writer.start()
            self._unwritten[key] = entry
            self._queue.append((key, entry))
            self._queued += 1
            if len(self._queue) in (1, WRITE_BATCH):  # the writer waits for a first entry, or for a full batch
                self._cond.notify_all()

    def _write(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        """Commit one batch of entries, in the writer thread."""
        if self._postgres is not None:
            # One row per key (a key twice in one statement is an error there), in key order: two hosts writing
            # overlapping batches lock their rows in the same order and never deadlock.
            rows = sorted((key, json.dumps(entry)) for key, entry in dict(batch).items())
            with self._postgres.transaction() as cursor:
                cursor.execute_values(
                    f"INSERT INTO {_POSTGRES_TABLE} (key, entry) VALUES %s "
                    "ON CONFLICT (key) DO UPDATE SET entry = excluded.entry",
                    rows,
                )
            return
        try:
            connection = self._writer_connection = self._writer_connection or self._connect()
            connection.execute("BEGIN IMMEDIATE")
            # The batch as one JSON array in one statement: SQLite inserts every row in one step, without the GIL.
            # `executemany` steps once per row, giving the GIL up and taking it back each time: at hundreds of calls
            # a second that was a thread switch against the judge's event loop per row (README, judge throughput).
            connection.execute(_INSERT_BATCH, (jsontext.dumps(batch),))
            connection.execute("COMMIT")
        except BaseException:
            if self._writer_connection is not None:  # the next batch starts afresh, outside this failed transaction
                self._writer_connection.close()
                self._writer_connection = None
            raise

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                # More entries come while calls run: one transaction for many (fewer commits and wake-ups of
                # this thread, each of which takes the GIL from the judge's event loop), unless a flush waits.
                self._cond.wait_for(lambda: self._flushing or len(self._queue) >= WRITE_BATCH, WRITE_GATHER_S)
                batch, self._queue = self._queue, []
            try:
                self._write(batch)
                committed = True
            except BaseException as error:  # noqa: BLE001 - reported by flush() in the judging thread
                committed = False
                with self._cond:
                    self._error = self._error or error  # the first failure says why
            with self._cond:
                if committed:
                    self._commits += 1  # before the entries leave `_unwritten`: a lookup then renews its snapshot
                    # Readable from the file now: not held in memory for the rest of the day (a day of a million
                    # calls held them all), unless the key was put again since and waits in the queue.
                    queued = {key for key, _ in self._queue}
                    for key, _ in batch:
                        if key not in queued:
                            self._unwritten.pop(key, None)
                self._written += len(batch)
                self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every entry put so far is committed; a failed write raises here."""
        with self._cond:
            target = self._queued
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._written < target:
                    self._cond.wait()
            finally:
                self._flushing -= 1
            if self._written == self._queued:
                self._unwritten.clear()
            error, self._error = self._error, None
        if error is not None:
            raise RuntimeError(f"judge cache write failed ({self.describe()})") from error

    def flush_or_report(self) -> str | None:
        """`flush()`, with a failed write returned as its message instead of raised.

        The replies a failed write could not keep were paid for: callers keep their rows and report this beside
        them (the next run pays for those calls again instead of finding them cached)."""
        try:
            self.flush()
        except RuntimeError as error:
            return f"{error}: {type(error.__cause__).__name__}: {error.__cause__}"
        return None
