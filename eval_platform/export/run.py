"""Exporting one judge_scores partition (evaluator × day) to every destination of verdict_export.yaml.

Per destination: the verdicts its ledger does not show as sent, in batches of `batch_size`; each batch recorded in
the ledger once the receiver accepted it. A transient error (5xx, 429, a refused or timed-out connection) is tried
again within the run, `retries` times with doubling backoff (`send_with_retries`). The first batch still refused
stops that destination for this run (the receiver is down or refusing: every further batch would wait for its time
limit too) and is recorded as failed; the other
destinations still get theirs. judge_scores is only read: an export, failed or not, never changes a verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from eval_platform.export import ledger
from eval_platform.export.base import Destination, ExportError
from eval_platform.export.config import ExportConfig
from eval_platform.export.verdicts import exportable
from eval_platform.llm.redaction import clip, remember
from eval_platform.storage.location import DataRoot

# Sent verdicts recorded in the ledger at least this often, so a run killed late in a large day resends at most
# this many (at least once, see `ledger`).
CHECKPOINT_ROWS = 20_000


@dataclass
class DestinationReport:
    """What one destination got in one run."""

    destination: str
    sent: int = 0
    already_sent: int = 0
    not_sent: int = 0  # verdicts still to send after this run (a failed batch and those after it)
    error: str | None = None


@dataclass
class ExportReport:
    """What one run exported, and what it did not (by reason)."""

    evaluator: str
    day: str
    verdicts: int = 0
    not_exported: dict[str, int] = field(default_factory=dict)
    destinations: list[DestinationReport] = field(default_factory=list)

    @property
    def failures(self) -> list[DestinationReport]:
        return [d for d in self.destinations if d.error is not None]

    def as_metadata(self) -> dict[str, Any]:
        return {
            "verdicts": self.verdicts,
            "not_exported": self.not_exported,
            "destinations": [asdict(d) for d in self.destinations],
        }

    def summary(self) -> str:
        parts = [
            f"{d.destination}: {d.sent} sent, {d.already_sent} already sent"
            + (f", {d.not_sent} NOT sent ({d.error})" if d.error else "")
            for d in self.destinations
        ]
        return f"{self.evaluator} {self.day}: " + ("; ".join(parts) or "no destination wants this evaluator")


def export_partition(
    root: DataRoot, evaluator: str, day: str, config: ExportConfig, env: Mapping[str, str]
) -> ExportReport:
    """Send the partition's verdicts each destination has not had yet (see the module's docstring)."""
    todo = exportable(root, evaluator, day)
    report = ExportReport(evaluator, day, todo.verdicts.height, todo.not_exported)
    for destination in config.destinations:
        if not destination.wants(evaluator):
            continue
        secrets = destination.secrets(env)
        remember(*secrets)  # and so out of every log line of the process
        done = ledger.read_ledger(root, destination.name, evaluator, day)
        missing = todo.verdicts.filter(~pl.col("verdict_key").is_in(ledger.sent_keys(done).implode()))
        result = DestinationReport(destination.name, already_sent=todo.verdicts.height - missing.height)
        report.destinations.append(result)
        attempts: list[pl.DataFrame] = []
        unrecorded = 0
        for offset in range(0, missing.height, destination.batch_size):
            batch = missing.slice(offset, destination.batch_size)
            now = datetime.now(UTC)
            try:
                _send(destination, batch, env, secrets, attempts, result, now)
            except ExportError as exc:
                result.error = clip(str(exc), 500, secrets)
                result.not_sent += missing.height - offset - _recorded(attempts, batch)
                attempts.append(ledger.attempt_rows(_unrecorded(attempts, batch), destination.name, now, result.error))
                break
            unrecorded += batch.height
            if unrecorded >= CHECKPOINT_ROWS:
                done, attempts, unrecorded = ledger.merge(done, attempts), [], 0
                ledger.write_ledger(root, destination.name, evaluator, day, done)
        if attempts:
            ledger.write_ledger(root, destination.name, evaluator, day, ledger.merge(done, attempts))
    return report


def _send(
    destination: Destination,
    batch: pl.DataFrame,
    env: Mapping[str, str],
    secrets: list[str],
    attempts: list[pl.DataFrame],
    result: DestinationReport,
    now: datetime,
) -> None:
    """Send one batch and record it. A receiver that refused only the verdicts on some spans (`refused_spans`) gets
    the rest once more without them; the refused ones are recorded as failed, and the run ends failed."""
    try:
        send_with_retries(destination, batch, env)
    except ExportError as exc:
        refused = batch.filter(pl.col("otel_span_id").is_in(list(exc.refused_spans)))
        if refused.height == 0 or refused.height == batch.height:
            raise
        error = clip(str(exc), 500, secrets)
        attempts.append(ledger.attempt_rows(refused, destination.name, now, error))
        result.error, result.not_sent = error, result.not_sent + refused.height
        batch = batch.filter(~pl.col("otel_span_id").is_in(list(exc.refused_spans)))
        send_with_retries(destination, batch, env)  # a second refusal is the caller's: the rest is recorded failed
    attempts.append(ledger.attempt_rows(batch, destination.name, now, None))
    result.sent += batch.height


def send_with_retries(
    destination: Destination, batch: pl.DataFrame, env: Mapping[str, str], sleep: Callable[[float], None] = time.sleep
) -> None:
    """`destination.send`, tried again after a transient error (`ExportError.transient`: 5xx, 429, a refused or
    timed-out connection) up to `destination.retries` times, waiting `retry_backoff_s`, doubled each time. The last
    error says how many tries were made. A batch is only ever recorded once the receiver accepted it, so a retry
    never makes a verdict recorded twice."""
    for attempt in range(destination.retries + 1):
        try:
            destination.send(batch, env)
            return
        except ExportError as exc:
            if not exc.transient or attempt == destination.retries:
                if attempt:
                    raise ExportError(f"{exc} (after {attempt + 1} tries)", exc.refused_spans, exc.transient) from None
                raise
            sleep(destination.retry_backoff_s * 2**attempt)


def _recorded(attempts: list[pl.DataFrame], batch: pl.DataFrame) -> int:
    """How many of the batch's verdicts already have an attempt in `attempts` (the refused part of it)."""
    return _in_attempts(attempts, batch).height


def _in_attempts(attempts: list[pl.DataFrame], batch: pl.DataFrame) -> pl.DataFrame:
    if not attempts:
        return batch.clear()
    return batch.filter(pl.col("verdict_key").is_in(attempts[-1]["verdict_key"].implode()))


def _unrecorded(attempts: list[pl.DataFrame], batch: pl.DataFrame) -> pl.DataFrame:
    return batch.filter(~pl.col("verdict_key").is_in(_in_attempts(attempts, batch)["verdict_key"].implode()))
