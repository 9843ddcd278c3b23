"""Per-evaluator spend budgets by UTC day and month, safe across concurrent runs and processes.

Before a call, the runner reserves the call's worst-case cost (every prompt byte a token, the full
`max_tokens` of completion); after it, the reservation is settled to the actual cost. A reservation
that would take the day's or month's total over the budget is refused, so spend can never pass the
budget, even with several partitions of one evaluator running at once in different processes. The
ledger is one SQLite file; SQLite's write lock serialises the check-and-reserve step.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_spend (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    evaluator TEXT NOT NULL,
    day TEXT NOT NULL,
    month TEXT NOT NULL,
    amount_usd REAL NOT NULL,
    state TEXT NOT NULL,          -- reserved | settled
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS judge_spend_eval_day ON judge_spend (evaluator, day);
CREATE INDEX IF NOT EXISTS judge_spend_eval_month ON judge_spend (evaluator, month);
"""


class BudgetLedger:
    def __init__(self, path: Path, clock: Callable[[], datetime] | None = None):
        self.path = path
        self.clock = clock or (lambda: datetime.now(UTC))
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as conn:
            conn.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    def reserve(
        self, evaluator: str, amount_usd: float, max_daily_usd: float | None, max_monthly_usd: float | None
    ) -> int | None:
        """Reserve `amount_usd` of today's and this month's budget; None when it does not fit."""
        now = self.clock()
        day, month = now.strftime("%Y-%m-%d"), now.strftime("%Y-%m")
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")  # take the write lock before reading the totals
            try:
                for column, period, limit in (("day", day, max_daily_usd), ("month", month, max_monthly_usd)):
                    if limit is None:
                        continue
                    (spent,) = conn.execute(
                        f"SELECT COALESCE(SUM(amount_usd), 0) FROM judge_spend WHERE evaluator = ? AND {column} = ?",
                        (evaluator, period),
                    ).fetchone()
                    if spent + amount_usd > limit + 1e-12:
                        conn.execute("ROLLBACK")
                        return None
                cursor = conn.execute(
                    "INSERT INTO judge_spend (evaluator, day, month, amount_usd, state, created_at) "
                    "VALUES (?, ?, ?, ?, 'reserved', ?)",
                    (evaluator, day, month, amount_usd, time.time()),
                )
                conn.execute("COMMIT")
                return int(cursor.lastrowid)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def settle(self, reservation_id: int, actual_usd: float) -> None:
        """Replace a reservation by the actual cost of the call, as billed."""
        with closing(self._connect()) as conn:
            conn.execute(
                "UPDATE judge_spend SET amount_usd = ?, state = 'settled' WHERE id = ?",
                (actual_usd, reservation_id),
            )

    def spent(self, evaluator: str, day: str | None = None, month: str | None = None) -> float:
        """Settled plus outstanding spend of an evaluator on a UTC day (YYYY-MM-DD) or month (YYYY-MM)."""
        column, value = ("day", day) if day else ("month", month)
        with closing(self._connect()) as conn:
            (total,) = conn.execute(
                f"SELECT COALESCE(SUM(amount_usd), 0) FROM judge_spend WHERE evaluator = ? AND {column} = ?",
                (evaluator, value),
            ).fetchone()
        return float(total)

    def totals(self) -> list[tuple[str, str, float, int]]:
        """(evaluator, day, spend_usd, calls) for every day with spend."""
        with closing(self._connect()) as conn:
            return conn.execute(
                "SELECT evaluator, day, SUM(amount_usd), COUNT(*) FROM judge_spend GROUP BY evaluator, day"
            ).fetchall()
