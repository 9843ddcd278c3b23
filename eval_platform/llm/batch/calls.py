"""A day's calls in batch mode, kept on disk: recorded in the first pass, matched to batch lines, answered in the
second (see `mode`).

One row per call the recording pass made, in a SQLite file in the run's temporary folder (deleted with it):
the endpoint, the cache key, the worst case, the request as a batch line needs it (model, messages, temperature,
max_tokens: never the key), then the batch line (submission, custom_id) that carries it and, once known, its
answer (an outcome, or the budget's refusal). Nothing of it is held in memory: a million-trace day is a million
rows on disk, written a thousand at a time, matched to the open batches' lines in SQL, and answered by key.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from eval_platform.llm.batch.state import BatchState, endpoint_id
from eval_platform.llm.budget import BudgetRefused, Refusal
from eval_platform.llm.client import CallOutcome, ModelRequest
from eval_platform.llm.endpoint import Endpoint
from eval_platform.schemas import BATCH_FAILED, BATCH_PENDING

WRITE_ROWS = 1000  # recorded calls written at once
READ_ROWS = 1000  # requests read at once when cutting batches

_SCHEMA = """
CREATE TABLE calls (
    seq INTEGER PRIMARY KEY,  -- the order the calls were recorded in
    endpoint TEXT NOT NULL,   -- `state.endpoint_id`
    key TEXT NOT NULL,        -- the cache key: what matches a request to a batch line, and an answer to its call
    worst REAL,               -- the worst case at the batch price (NULL: the evaluator has no budget)
    request TEXT NOT NULL,    -- what a batch line is built from
    submission TEXT,          -- the batch carrying it
    custom_id TEXT,           -- its line there
    answer TEXT               -- {"outcome": ...} | {"refusal": ...}; NULL until known, and once taken
)
"""


def _request_text(request: ModelRequest) -> str:
    body = {
        "model": request.model,
        "messages": request.messages,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    return json.dumps(body, separators=(",", ":"))


def batch_request(text: str) -> ModelRequest:
    """The request a recorded row stands for, as much of it as a batch line uses (no endpoint, no key)."""
    body = json.loads(text)
    return ModelRequest(
        model=body["model"],
        messages=body["messages"],
        api_base=None,
        api_key=None,
        temperature=body["temperature"],
        max_tokens=body["max_tokens"],
        timeout_s=0.0,
        max_retries=0,
    )


def _answer_text(result: CallOutcome | Refusal) -> str:
    kind = "refusal" if isinstance(result, Refusal) else "outcome"
    return json.dumps({kind: asdict(result)})


def _answer(text: str) -> CallOutcome | Refusal:
    item = json.loads(text)
    if "refusal" in item:
        return Refusal(**item["refusal"])
    # Read back from the scratch file: redacted again by the call path (what the flag said was of another moment).
    return CallOutcome(**{**item["outcome"], "redacted": False})


class BatchCalls:
    """The judge's calls in batch mode (`runtime.batch`): recorded in the first pass, answered in the second."""

    def __init__(self, folder: Path):
        self.recording = True
        self.endpoints: dict[str, Endpoint] = {}
        self._pending: list[tuple[str, str, float | None, str]] = []
        # Writes open a transaction implicitly (sqlite3's default), committed a page at a time by `with`.
        self._conn = sqlite3.connect(Path(folder) / "calls.sqlite", check_same_thread=False)
        # A scratch file, deleted after the run: never synced to disk (nothing to keep through a crash), its sorts
        # and its journal on disk too, not in memory.
        for pragma in ("journal_mode=TRUNCATE", "synchronous=OFF", "temp_store=FILE", "cache_size=-16000"):
            self._conn.execute(f"PRAGMA {pragma}")
        self._conn.execute(_SCHEMA)
        self._taken = 0

    def close(self) -> None:
        self._conn.close()

    # --- the recording pass ---------------------------------------------------------------------------

    async def outcome(
        self, endpoint: Endpoint, request: ModelRequest, key: str, worst_usd: float | None
    ) -> CallOutcome:
        # As an interactive call would, give the other calls of the day their turn before this one's reply
        # lands in the cache: an identical request of the day then waits for this one (single flight, `llm.call`)
        # and is recorded once, answered once, as it is sent once without a batch.
        await asyncio.sleep(0)
        if self.recording:
            eid = endpoint_id(endpoint)
            self.endpoints.setdefault(eid, endpoint)
            self._pending.append((eid, key, worst_usd, _request_text(request)))
            if len(self._pending) >= WRITE_ROWS:
                self._write()
            return CallOutcome(error_reason=BATCH_PENDING, error_detail="recorded for a batch")
        return self._take(key)

    def _write(self) -> None:
        if self._pending:
            with self._conn:
                self._conn.executemany(
                    "INSERT INTO calls (endpoint, key, worst, request) VALUES (?, ?, ?, ?)", self._pending
                )
            self._pending = []

    def recorded(self) -> int:
        """End the recording: every call on disk, indexed for matching; how many there are."""
        self._write()
        self._conn.execute("CREATE INDEX IF NOT EXISTS calls_custom_id ON calls (custom_id)")
        return self._conn.execute("SELECT count(*) FROM calls").fetchone()[0]

    # --- matching requests to batches -----------------------------------------------------------------

    def claim(self, eid: str, records: list[dict[str, Any]], state: BatchState) -> dict[str, int]:
        """Give each request of `eid` that an open batch holds one of that batch's lines (by cache key, each line
        used once, the batches in the order of `records`); how many each batch got, by submission."""
        self._conn.execute("CREATE TEMP TABLE offered (rank INTEGER, submission TEXT, custom_id TEXT, key TEXT)")
        try:
            for rank, record in enumerate(records):
                submission = record.get("submission") or ""
                page: list[tuple] = []
                for custom_id, key in state.requests(submission):
                    page.append((rank, submission, custom_id, key))
                    if len(page) >= WRITE_ROWS:
                        with self._conn:
                            self._conn.executemany("INSERT INTO offered VALUES (?, ?, ?, ?)", page)
                        page = []
                with self._conn:
                    self._conn.executemany("INSERT INTO offered VALUES (?, ?, ?, ?)", page)
            with self._conn:
                # The n-th request of a key (in recording order) takes the n-th line of that key.
                self._conn.execute(
                    """
                    WITH wanted AS (
                        SELECT seq, key, row_number() OVER (PARTITION BY key ORDER BY seq) AS n
                        FROM calls WHERE endpoint = ? AND submission IS NULL AND answer IS NULL
                    ), free AS (
                        SELECT submission, custom_id, key,
                               row_number() OVER (PARTITION BY key ORDER BY rank, rowid) AS n
                        FROM offered
                    ), claims AS (
                        SELECT wanted.seq, free.submission, free.custom_id
                        FROM wanted JOIN free ON free.key = wanted.key AND free.n = wanted.n
                    )
                    UPDATE calls SET submission = claims.submission, custom_id = claims.custom_id
                    FROM claims WHERE calls.seq = claims.seq
                    """,
                    (eid,),
                )
        finally:
            self._conn.execute("DROP TABLE offered")
        counts = self._conn.execute(
            "SELECT submission, count(*) FROM calls WHERE endpoint = ? AND submission IS NOT NULL "
            "AND answer IS NULL GROUP BY submission",
            (eid,),
        ).fetchall()
        return dict(counts)

    def fresh(self, eid: str) -> Iterator[tuple[int, str, float | None, str]]:
        """(seq, key, worst, request) of every request of `eid` no batch carries and nothing answered yet, in
        recording order, read a page at a time (rows already read may change meanwhile)."""
        after = 0
        while True:
            rows = self._conn.execute(
                "SELECT seq, key, worst, request FROM calls WHERE endpoint = ? AND seq > ? AND submission IS NULL "
                "AND answer IS NULL ORDER BY seq LIMIT ?",
                (eid, after, READ_ROWS),
            ).fetchall()
            yield from rows
            if len(rows) < READ_ROWS:
                return
            after = rows[-1][0]

    def carry(self, submission: str, lines: Iterable[tuple[str, int]]) -> None:
        """The batch `submission` carries these requests: (custom_id, seq)."""
        with self._conn:
            self._conn.executemany(
                "UPDATE calls SET submission = ?, custom_id = ? WHERE seq = ?",
                ((submission, custom_id, seq) for custom_id, seq in lines),
            )

    # --- answers --------------------------------------------------------------------------------------

    def answer(self, seq: int, result: CallOutcome | Refusal) -> None:
        with self._conn:
            self._conn.execute("UPDATE calls SET answer = ? WHERE seq = ?", (_answer_text(result), seq))

    def answer_endpoint(self, eid: str, result: CallOutcome) -> None:
        """Every request of `eid` not answered yet gets `result`."""
        with self._conn:
            self._conn.execute(
                "UPDATE calls SET answer = ? WHERE endpoint = ? AND answer IS NULL", (_answer_text(result), eid)
            )

    def answer_batch(self, submission: str, result: CallOutcome) -> None:
        """Every request the batch carries that has no answer yet gets `result`."""
        with self._conn:
            self._conn.execute(
                "UPDATE calls SET answer = ? WHERE submission = ? AND answer IS NULL",
                (_answer_text(result), submission),
            )

    def answer_lines(self, submission: str, outcomes: Iterable[tuple[str, CallOutcome]]) -> None:
        """The batch's answers, (custom_id, outcome), to the requests its lines carry (a line no request of this
        run claimed answers nothing)."""
        page: list[tuple[str, str, str]] = []
        for custom_id, outcome in outcomes:
            page.append((_answer_text(outcome), custom_id, submission))
            if len(page) >= WRITE_ROWS:
                self._write_answers(page)
                page = []
        self._write_answers(page)

    def _write_answers(self, page: list[tuple[str, str, str]]) -> None:
        with self._conn:
            self._conn.executemany("UPDATE calls SET answer = ? WHERE custom_id = ? AND submission = ?", page)

    def answering(self) -> None:
        """Start the answering pass: answers are looked up by key from now on."""
        self.recording = False
        self._conn.commit()
        self._conn.execute("CREATE INDEX IF NOT EXISTS calls_answers ON calls (key, seq) WHERE answer IS NOT NULL")

    def _take(self, key: str) -> CallOutcome:
        row = self._conn.execute(
            "SELECT seq, answer FROM calls WHERE key = ? AND answer IS NOT NULL ORDER BY seq LIMIT 1", (key,)
        ).fetchone()
        if row is None:  # the day changed between the passes (a cache entry vanished): nothing was asked
            return CallOutcome(error_reason=BATCH_FAILED, error_detail="this request was in no batch of this run")
        self._conn.execute("UPDATE calls SET answer = NULL WHERE seq = ?", (row[0],))
        self._taken += 1
        if self._taken % WRITE_ROWS == 0:
            self._conn.commit()  # the journal stays a page of rows long
        result = _answer(row[1])
        if isinstance(result, Refusal):
            raise BudgetRefused(result)
        return result
