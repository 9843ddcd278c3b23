"""Delivering `alerts` rows: once per alert and destination, recorded so that a restart never repeats one.

The record (`DeliveryLog`) is one row per (alert key, destination) in the shared state: a SQLite file under the
data root's `state/` folder, or a table of the Dagster instance's PostgreSQL database when the instance runs on
PostgreSQL (`llm.shared_state`). Each change is one transaction: a process killed at any instant leaves it either
written or not.

**At least once, with an idempotency key.** An alert is sent, then recorded as delivered. A process killed after
the receiver accepted and before the record committed (a window of milliseconds) sends it again on the next tick,
with the same key: the webhook's `Idempotency-Key` header and `idempotency_key` field, Slack's message footer, the
email's Message-ID. The other order (record, then send) would lose the alert when the process dies in between:
an alert nobody receives is the failure this feature exists to prevent, a repeat is the lesser one.

A failed send (an HTTP error, a refused connection, a timeout, an unset variable) is recorded as an attempt with its
redacted error, never as delivered; the next tick tries again, for as long as the alert's day is within
`deliver_days`. Within one tick a destination that failed is not tried again for the other alerts (its time limit
would be paid once per alert), so a tick stays short even when a receiver is down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.alerting.destinations import AlertingConfig, DeliveryError, remember_secrets, send
from eval_platform.llm.redaction import clip
from eval_platform.llm.shared_state import SharedState
from eval_platform.llm.statedb import PostgresState, SqliteFile, connect_wal
from eval_platform.settings import state_dir

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    alert_key TEXT NOT NULL,
    destination TEXT NOT NULL,
    evaluator TEXT NOT NULL,
    day TEXT NOT NULL,
    kind TEXT NOT NULL,
    rule TEXT,
    status TEXT NOT NULL,          -- delivered | failed (failed: tried again on the next tick)
    attempts INTEGER NOT NULL,
    first_attempt_at {real} NOT NULL,
    last_attempt_at {real} NOT NULL,
    delivered_at {real},
    last_error TEXT,               -- redacted
    PRIMARY KEY (alert_key, destination)
)
"""
DELIVERED, FAILED_ATTEMPT = "delivered", "failed"


class DeliveryLog:
    """What was delivered where: a SQLite file (`where` a path) or a table in the instance's PostgreSQL database."""

    def __init__(self, where: Path | PostgresState):
        if isinstance(where, PostgresState):
            self._db: SqliteFile | PostgresState = where
            self._table = "eval_platform_alert_deliveries"
            where.ensure_schema(self._table, _SCHEMA.format(table=self._table, real="DOUBLE PRECISION"))
            return
        path = Path(where)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db, self._table = SqliteFile(path), "alert_deliveries"
        with closing(connect_wal(path)) as conn:
            conn.executescript(_SCHEMA.format(table=self._table, real="REAL"))

    @classmethod
    def of(cls, state: SharedState) -> DeliveryLog:
        """The record beside the rest of the shared state: `state/alert_deliveries.sqlite`, or the instance's
        PostgreSQL database."""
        return cls(state.postgres or state_dir(state.root) / "alert_deliveries.sqlite")

    def delivered(self) -> set[tuple[str, str]]:
        """(alert key, destination) of every delivery made."""
        with self._db.transaction() as conn:
            rows = conn.execute(f"SELECT alert_key, destination FROM {self._table} WHERE status = ?", (DELIVERED,))
            return {(key, destination) for key, destination in rows.fetchall()}

    def record(self, alert: Mapping[str, Any], destination: str, error: str | None) -> None:
        """One attempt: delivered (`error` None) or failed with its (already redacted) error."""
        now = time.time()
        status = DELIVERED if error is None else FAILED_ATTEMPT
        with self._db.transaction() as conn:
            conn.execute(
                f"INSERT INTO {self._table} (alert_key, destination, evaluator, day, kind, rule, status, attempts, "
                "first_attempt_at, last_attempt_at, delivered_at, last_error) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?) "
                f"ON CONFLICT (alert_key, destination) DO UPDATE SET status = excluded.status, "
                f"attempts = {self._table}.attempts + 1, last_attempt_at = excluded.last_attempt_at, "
                "delivered_at = excluded.delivered_at, last_error = excluded.last_error",
                (
                    alert["alert_key"],
                    destination,
                    alert["evaluator"],
                    alert["day"],
                    alert["kind"],
                    alert.get("rule"),
                    status,
                    now,
                    now,
                    now if error is None else None,
                    error,
                ),
            )

    def rows(self) -> list[dict[str, Any]]:
        """Every record, oldest attempt first (for the README's queries, the tests and the sensor's metadata)."""
        with self._db.transaction() as conn:
            cursor = conn.execute(f"SELECT * FROM {self._table} ORDER BY first_attempt_at, alert_key, destination")
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@dataclass
class DeliveryReport:
    """What one tick did."""

    delivered: list[tuple[str, str]] = field(default_factory=list)  # (alert key, destination)
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (alert key, destination, redacted error)
    postponed: int = 0  # sends not tried because their destination already failed in this tick
    pending: int = 0  # alerts in the window not yet delivered everywhere before the tick

    def summary(self) -> str:
        text = f"{len(self.delivered)} delivered, {len(self.failed)} failed"
        return text + (f", {self.postponed} postponed to the next tick" if self.postponed else "")


def due(alerts: pl.DataFrame, today: date, deliver_days: int) -> pl.DataFrame:
    """The alerts whose day is one of the `deliver_days` UTC days up to `today`, oldest first."""
    first = (today - timedelta(days=deliver_days - 1)).isoformat()
    return alerts.filter((pl.col("day") >= first) & (pl.col("day") <= today.isoformat())).sort(
        "day", "evaluator", "kind", "rule", nulls_last=True
    )


def deliver(
    alerts: pl.DataFrame,
    config: AlertingConfig,
    log: DeliveryLog,
    link: Callable[[Mapping[str, Any]], str],
    today: date,
    env: Mapping[str, str],
) -> DeliveryReport:
    """Send every due alert to every destination that wants it and has not had it; record each attempt.

    `link(alert)` is the URL of the alert's partition in the Dagster UI; `env` holds the destinations' secrets."""
    remember_secrets(config, env)
    done = log.delivered()
    report = DeliveryReport()
    broken: set[str] = set()
    for alert in due(alerts, today, config.deliver_days).iter_rows(named=True):
        for destination in config.destinations:
            if not destination.wants(alert["evaluator"]) or (alert["alert_key"], destination.name) in done:
                continue
            report.pending += 1
            if destination.name in broken:
                report.postponed += 1
                continue
            try:
                send(destination, alert, link(alert), env)
            except DeliveryError as exc:
                error = clip(str(exc), 500)
                log.record(alert, destination.name, error)
                report.failed.append((alert["alert_key"], destination.name, error))
                broken.add(destination.name)
                continue
            log.record(alert, destination.name, None)
            report.delivered.append((alert["alert_key"], destination.name))
    return report
