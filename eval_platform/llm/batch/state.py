"""What batch mode keeps between runs and tracks within one: the state file of a partition's batches
(`<state>/judge_batches/<evaluator>/<date>.json`, replaced atomically), the partition lock, and the calls
and batches a run handles."""

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


@dataclass
class RecordedCall:
    endpoint: Endpoint
    request: JudgeRequest
    key: str  # the cache key: what matches a request to its line in a submitted batch
    worst_usd: float | None  # the request's worst case at the batch price, when the evaluator has a budget


class BatchState:
    """The batches one partition submitted: one JSON file, replaced atomically on every change."""

    def __init__(self, directory: Path, evaluator: str, day: str):
        self.path = directory / evaluator / f"{day}.json"
        self.batches: list[dict[str, Any]] = []
        if self.path.exists():
            self.batches = json.loads(self.path.read_text(encoding="utf-8"))["batches"]

    def open_batches(self, endpoint_id: str) -> list[dict[str, Any]]:
        return [b for b in self.batches if b["state"] == "open" and b["endpoint"] == endpoint_id]

    def submitting(self, endpoint_id: str) -> list[dict[str, Any]]:
        """Batches a run was creating when it stopped: they may or may not exist at the provider."""
        return [b for b in self.batches if b["state"] == "submitting" and b["endpoint"] == endpoint_id]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(f".json.{os.getpid()}.tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            json.dump({"batches": self.batches}, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


@contextmanager
def partition_lock(directory: Path, evaluator: str, day: str):
    """Held while a run submits, waits for and collects one partition's batches (released if it dies)."""
    path = directory / evaluator / f"{day}.lock"
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
