"""What batch mode keeps between runs and tracks within one: the state file of a partition's batches
(`<state>/judge_batches/<evaluator>/<date>.json`, replaced atomically; a row of the instance's database when
it runs on PostgreSQL), the partition lock, and the calls and batches a run handles."""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_platform.llm.batch.api import BatchAPI
from eval_platform.llm.client import JudgeRequest
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.statedb import PostgresState


@dataclass
class RecordedCall:
    endpoint: Endpoint
    request: JudgeRequest
    key: str  # the cache key: what matches a request to its line in a submitted batch
    worst_usd: float | None  # the request's worst case at the batch price, when the evaluator has a budget


_POSTGRES_TABLE = "eval_platform_judge_batches"
_POSTGRES_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_POSTGRES_TABLE} "
    "(evaluator TEXT NOT NULL, day TEXT NOT NULL, batches TEXT NOT NULL, PRIMARY KEY (evaluator, day))"
)


class BatchState:
    """The batches one partition submitted: one JSON file under `where` (a folder), replaced atomically on every
    change, or one row of the Dagster instance's PostgreSQL database (`where` a `PostgresState`), replaced in one
    transaction."""

    def __init__(self, where: Path | PostgresState, evaluator: str, day: str):
        self.evaluator, self.day = evaluator, day
        self.batches: list[dict[str, Any]] = []
        if isinstance(where, PostgresState):
            self.path = None
            self._postgres: PostgresState | None = where
            where.ensure_schema(_POSTGRES_TABLE, _POSTGRES_SCHEMA)
            with where.transaction() as cursor:
                row = cursor.execute(
                    f"SELECT batches FROM {_POSTGRES_TABLE} WHERE evaluator = ? AND day = ?", (evaluator, day)
                ).fetchone()
            if row is not None:
                self.batches = json.loads(row[0])["batches"]
            return
        self._postgres = None
        self.path = Path(where) / evaluator / f"{day}.json"
        if self.path.exists():
            self.batches = json.loads(self.path.read_text(encoding="utf-8"))["batches"]

    def open_batches(self, endpoint_id: str) -> list[dict[str, Any]]:
        return [b for b in self.batches if b["state"] == "open" and b["endpoint"] == endpoint_id]

    def submitting(self, endpoint_id: str) -> list[dict[str, Any]]:
        """Batches a run was creating when it stopped: they may or may not exist at the provider."""
        return [b for b in self.batches if b["state"] == "submitting" and b["endpoint"] == endpoint_id]

    def save(self) -> None:
        if self._postgres is not None:
            with self._postgres.transaction() as cursor:
                cursor.execute(
                    f"INSERT INTO {_POSTGRES_TABLE} (evaluator, day, batches) VALUES (?, ?, ?) "
                    "ON CONFLICT (evaluator, day) DO UPDATE SET batches = excluded.batches",
                    (self.evaluator, self.day, json.dumps({"batches": self.batches})),
                )
            return
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(f".json.{os.getpid()}.tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            json.dump({"batches": self.batches}, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


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
    """One batch this run waits for: submitted now or found in the state file."""

    record: dict[str, Any]  # its entry in the state file
    api: BatchAPI
    endpoint: Endpoint
    claims: list[tuple[str, RecordedCall]] = field(default_factory=list)  # (custom_id, request) this run needs
    resumed: bool = False
    provider: dict[str, Any] | None = None  # the batch object last retrieved
    collected: bool = False
    spend_usd: float = 0.0

    @property
    def batch_id(self) -> str:
        return self.record["batch_id"]

    def summary(self) -> dict[str, Any]:
        status = (self.provider or {}).get("status") or self.record.get("status")
        return {
            "batch_id": self.batch_id,
            "model": self.record["model"],
            "status": status,
            "resumed": self.resumed,
            "requests": len(self.claims),
            "collected": self.collected,
            "cost_usd": round(self.spend_usd, 8),
        }
