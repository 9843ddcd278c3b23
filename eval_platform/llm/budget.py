"""Per-evaluator spend budgets by UTC day and month, safe across concurrent runs and processes.

A call reserves its worst-case cost (every prompt byte a token, the full `max_tokens` of completion) at
the moment it is about to be sent (it holds a concurrency slot), and settles to the actual cost when the
reply is in. The rules, chosen so that money is never spent blindly and budgets are still used fully:

- A reservation that would take the day's or month's spend (settled + reserved) over its limit is refused.
- A refused call whose worst case would still fit once the calls in flight settle (they usually cost less
  than they reserved) waits for them and tries again (`Refusal.can_wait`); it gives up only when nothing
  is in flight, or when the settled spend alone leaves no room. So a partition spends at least the budget
  minus one call's worst case before anything is skipped for budget, and never more than the budget.
- Settled spend is recorded as billed, even above its reservation (a reply longer than `max_tokens`);
  when that takes a period over its limit, every further reservation is refused at once.
- Money is never freed on a guess. A reservation whose process is gone (kill -9), or which outlived `ttl_s`
  (the longest its call can be in flight: timeout × attempts plus backoff; for a batch, its completion
  window), becomes *unsettled*: the call may well have been billed, so its worst case counts as spent until it
  is settled from the provider's record (a batch found again by a later run), or released when that record
  shows nothing was billed. An interactive call has no record to settle from: killed in flight, it stays
  counted at its worst case for good. So the ledger never holds less than the provider billed. Unsettled
  spend counts as spent, not as in flight: nobody waits for it to settle.

The ledger is one SQLite file under the data root (SQLite's write lock serialises check-and-reserve), or,
when the Dagster instance runs on PostgreSQL, two tables in its database, where an advisory lock per evaluator
serialises check-and-reserve across hosts (`statedb`). Each change is one transaction: a process killed at
any instant leaves the reservation either wholly written or not at all. Settled spend is compacted into one row
per evaluator and UTC day as it settles, so reading totals and checking a budget cost the same after ten calls
or ten million.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from eval_platform.llm.client import SendRefused
from eval_platform.llm.statedb import PostgresState, SqliteFile
from eval_platform.storage.sqlite import connect_wal

# {id} and {real} are the backend's types; {spend} and {daily} the tables' names (see `BudgetLedger`).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS {spend} (
    id {id},
    evaluator TEXT NOT NULL,
    day TEXT NOT NULL,
    month TEXT NOT NULL,
    amount_usd {real} NOT NULL,
    state TEXT NOT NULL,          -- reserved | unsettled (settled rows are folded into {daily})
    created_at {real} NOT NULL,
    expires_at {real},
    pid INTEGER,
    host TEXT
);
CREATE INDEX IF NOT EXISTS {spend}_eval_day ON {spend} (evaluator, day);
CREATE INDEX IF NOT EXISTS {spend}_eval_month ON {spend} (evaluator, month);
CREATE TABLE IF NOT EXISTS {daily} (
    evaluator TEXT NOT NULL,
    day TEXT NOT NULL,
    month TEXT NOT NULL,
    spend_usd {real} NOT NULL,
    calls INTEGER NOT NULL,
    PRIMARY KEY (evaluator, day)
);
CREATE INDEX IF NOT EXISTS {daily}_month ON {daily} (evaluator, month);
"""
_SQLITE_TYPES = {"id": "INTEGER PRIMARY KEY AUTOINCREMENT", "real": "REAL"}
_POSTGRES_TYPES = {"id": "BIGSERIAL PRIMARY KEY", "real": "DOUBLE PRECISION"}  # REAL is 4 bytes there: no money in it

# Columns added after the first release; an older ledger file gets them on open.
_ADDED_COLUMNS = {"expires_at": "REAL", "pid": "INTEGER", "host": "TEXT"}
_HOST = socket.gethostname()
_LEGACY_TTL_S = 3600.0  # reservations written before expiry existed count for an hour


@dataclass(frozen=True)
class Reservation:
    id: int
    evaluator: str
    day: str
    month: str
    amount_usd: float


@dataclass(frozen=True)
class Refusal:
    """Why a reservation did not fit, and whether waiting for calls in flight could make it fit."""

    period: str  # daily | monthly
    limit_usd: float
    settled_usd: float  # spent: settled, plus unsettled reservations at their worst case
    in_flight_usd: float
    amount_usd: float
    unsettled_usd: float = 0.0  # of `settled_usd`, reservations of killed runs counted at their worst case

    @property
    def remaining_usd(self) -> float:
        return self.limit_usd - self.settled_usd - self.in_flight_usd

    @property
    def can_wait(self) -> bool:
        return self.in_flight_usd > 0 and self.settled_usd + self.amount_usd <= self.limit_usd + 1e-12

    def describe(self) -> str:
        unsettled = (
            f" (of which {self.unsettled_usd:.6g} is calls of killed runs, counted at their worst case)"
            if self.unsettled_usd > 0
            else ""
        )
        return (
            f"{self.period} limit {self.limit_usd:.6g} USD: {self.settled_usd:.6g} spent{unsettled}, "
            f"{max(0.0, self.limit_usd - self.settled_usd):.6g} remaining, "
            f"this call needs up to {self.amount_usd:.6g}"
        )


def _alive(pid: int | None, host: str | None) -> bool:
    if pid is None or host != _HOST:
        return True  # another machine's reservation: only its expiry can free it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class BudgetLedger:
    """The spend ledger: a SQLite file (`where` a path), or tables in the Dagster instance's PostgreSQL database
    (`where` a `PostgresState`; `name` tells the judges' ledger from the benchmark's, each a file of its own on
    SQLite). The rules above hold on both: on SQLite its write lock serialises check-and-reserve, on PostgreSQL
    an advisory lock per evaluator does (see `statedb`), and every change is one transaction."""

    def __init__(
        self, where: Path | PostgresState, clock: Callable[[], datetime] | None = None, *, name: str = "judge"
    ):
        self.clock = clock or (lambda: datetime.now(UTC))
        if isinstance(where, PostgresState):
            self.path = None
            self._db: SqliteFile | PostgresState = where
            self._spend, self._daily = f"eval_platform_{name}_spend", f"eval_platform_{name}_spend_daily"
            where.ensure_schema(self._spend, _SCHEMA.format(spend=self._spend, daily=self._daily, **_POSTGRES_TYPES))
            return
        self.path = Path(where)
        self._db = SqliteFile(self.path)
        self._spend, self._daily = "judge_spend", "judge_spend_daily"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(connect_wal(self.path)) as conn:  # waits for other processes opening the ledger too
            conn.executescript(_SCHEMA.format(spend=self._spend, daily=self._daily, **_SQLITE_TYPES))
        with self._db.transaction() as conn:  # several processes may open an older ledger at once
            columns = {row[1] for row in conn.execute("PRAGMA table_info(judge_spend)")}
            for column, sql_type in _ADDED_COLUMNS.items():
                if column not in columns:
                    conn.execute(f"ALTER TABLE judge_spend ADD COLUMN {column} {sql_type}")
        self._compact()

    def describe(self) -> str:
        """Where the ledger is (never a password)."""
        return self._db.describe() + (f" ({self._spend})" if self.path is None else "")

    @property
    def database(self) -> SqliteFile | PostgresState:
        return self._db

    @property
    def tables(self) -> tuple[str, str]:
        """(reservations, per-day totals): the ledger's two tables (see `_SCHEMA`)."""
        return self._spend, self._daily

    def lock_name(self, evaluator: str) -> str:
        """What serialises check-and-reserve of one evaluator (an advisory lock on PostgreSQL)."""
        return f"{self._spend}:{evaluator}"

    def _compact(self) -> None:
        """Fold settled per-call rows (a SQLite ledger written before compaction existed) into per-day totals."""
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO judge_spend_daily (evaluator, day, month, spend_usd, calls) "
                "SELECT evaluator, day, month, SUM(amount_usd), COUNT(*) FROM judge_spend WHERE state = 'settled' "
                "GROUP BY evaluator, day, month "
                "ON CONFLICT (evaluator, day) DO UPDATE SET spend_usd = spend_usd + excluded.spend_usd, "
                "calls = calls + excluded.calls"
            )
            conn.execute("DELETE FROM judge_spend WHERE state = 'settled'")
            # Earlier versions released a dead process's reservation as 'abandoned' (counted for nothing); those
            # rows are dropped a day later, as they were. Reserved and unsettled rows stay until settled.
            conn.execute(
                "DELETE FROM judge_spend WHERE state = 'abandoned' AND COALESCE(expires_at, created_at + ?) < ?",
                (_LEGACY_TTL_S, time.time() - 86400),
            )

    def _reserved(self, conn, where: str, params: tuple, now: float) -> list[tuple[int, float, bool]]:
        """(id, amount, unsettled) of the reservations matching `where`. A reservation still marked in flight
        whose process is gone or whose time is up is marked unsettled here, once and for good (a later process
        with the same pid does not bring it back in flight)."""
        rows = conn.execute(
            f"SELECT id, amount_usd, state, pid, host, COALESCE(expires_at, created_at + ?) FROM {self._spend} "
            f"WHERE state IN ('reserved', 'unsettled') AND {where}",
            (_LEGACY_TTL_S, *params),
        ).fetchall()
        result, gone = [], []
        for row_id, amount, state, pid, host, expires_at in rows:
            unsettled = state == "unsettled" or expires_at <= now or not _alive(pid, host)
            if unsettled and state == "reserved":
                gone.append((row_id,))
            result.append((row_id, amount, unsettled))
        if gone:
            conn.executemany(f"UPDATE {self._spend} SET state = 'unsettled' WHERE id = ? AND state = 'reserved'", gone)
        return result

    def _outstanding(self, conn, evaluator: str, column: str, period: str, now: float) -> tuple[float, float]:
        """(in flight, unsettled): reserved spend of calls that may still settle, and of calls that will not
        settle by themselves (their process is gone or their time is up), counted as spent at their worst case."""
        rows = self._reserved(conn, f"evaluator = ? AND {column} = ?", (evaluator, period), now)
        in_flight = sum(amount for _, amount, unsettled in rows if not unsettled)
        return in_flight, sum(amount for _, amount, unsettled in rows if unsettled)

    def _settled(self, conn, evaluator: str, column: str, period: str) -> float:
        (total,) = conn.execute(
            f"SELECT COALESCE(SUM(spend_usd), 0) FROM {self._daily} WHERE evaluator = ? AND {column} = ?",
            (evaluator, period),
        ).fetchone()
        return float(total)

    def reserve(
        self,
        evaluator: str,
        amount_usd: float,
        max_daily_usd: float | None,
        max_monthly_usd: float | None,
        ttl_s: float = 3600.0,
        outlives_process: bool = False,
    ) -> Reservation | Refusal:
        """Reserve `amount_usd` of today's and this month's budget, or say which limit it does not fit.

        `outlives_process`: the money is committed beyond this process (a batch submitted to a provider keeps
        running after a crash), so the reservation stays in flight after a crash, until it is settled or `ttl_s`
        passes (then it counts as unsettled spend until a run settles it from the provider's record).
        """
        now_dt = self.clock()
        day, month = now_dt.strftime("%Y-%m-%d"), now_dt.strftime("%Y-%m")
        now = time.time()
        pid = None if outlives_process else os.getpid()  # a batch's reservation outlives this process
        # The lock is taken before the totals are read; a refusal commits too (it keeps the unsettled marks).
        with self._db.transaction(self.lock_name(evaluator)) as conn:
            for column, period, name, limit in (
                ("day", day, "daily", max_daily_usd),
                ("month", month, "monthly", max_monthly_usd),
            ):
                if limit is None:
                    continue
                in_flight, unsettled = self._outstanding(conn, evaluator, column, period, now)
                settled = self._settled(conn, evaluator, column, period) + unsettled
                if settled + in_flight + amount_usd > limit + 1e-12:
                    return Refusal(name, limit, settled, in_flight, amount_usd, unsettled)
            (row_id,) = conn.execute(
                f"INSERT INTO {self._spend}"
                " (evaluator, day, month, amount_usd, state, created_at, expires_at, pid, host) "
                "VALUES (?, ?, ?, ?, 'reserved', ?, ?, ?, ?) RETURNING id",
                (evaluator, day, month, amount_usd, now, now + ttl_s, pid, _HOST),
            ).fetchone()
            return Reservation(int(row_id), evaluator, day, month, amount_usd)

    def settle(self, reservation: Reservation, actual_usd: float) -> None:
        """Replace a reservation (in flight or unsettled) by the actual cost of the call, as billed (even above
        what was reserved).

        A settle at or below the reservation does not wait for the disk (on SQLite): if a power loss undid it,
        the reservation would be back, counted at its worst case, never less than was billed. One above it
        (what was billed exceeds the worst case) waits, as every reservation does."""
        durable = actual_usd > reservation.amount_usd
        with self._db.transaction(self.lock_name(reservation.evaluator), durable=durable) as conn:
            conn.execute(f"DELETE FROM {self._spend} WHERE id = ?", (reservation.id,))
            conn.execute(
                f"INSERT INTO {self._daily} (evaluator, day, month, spend_usd, calls) VALUES (?, ?, ?, ?, 1) "
                f"ON CONFLICT (evaluator, day) DO UPDATE SET spend_usd = {self._daily}.spend_usd + excluded.spend_usd, "
                f"calls = {self._daily}.calls + 1",
                (reservation.evaluator, reservation.day, reservation.month, actual_usd),
            )

    def release(self, reservation: Reservation) -> None:
        """Drop a reservation whose money the provider's record shows was never committed (a batch it refused,
        or one it never created). Only that record frees money: a killed call's reservation is never released."""
        with self._db.transaction(self.lock_name(reservation.evaluator)) as conn:
            conn.execute(f"DELETE FROM {self._spend} WHERE id = ?", (reservation.id,))

    def spent(self, evaluator: str, day: str | None = None, month: str | None = None) -> float:
        """Settled, unsettled and in-flight spend of an evaluator on a UTC day (YYYY-MM-DD) or month (YYYY-MM)."""
        column, value = ("day", day) if day else ("month", month)
        if value is None:
            raise ValueError("spent() needs a day or a month")
        with self._db.transaction(self.lock_name(evaluator)) as conn:
            in_flight, unsettled = self._outstanding(conn, evaluator, column, value, time.time())
            return self._settled(conn, evaluator, column, value) + in_flight + unsettled

    def totals(self, in_flight: bool = False) -> list[tuple[str, str, float, int]]:
        """(evaluator, day, spend_usd, calls) for every day with spend: one row per day, not per call. Spend is
        what the budgets count as spent: settled calls, plus unsettled ones (killed in flight, or a batch no run
        has collected after its time was up) at their worst case. `in_flight`: also the reservations still in
        flight at their worst case, as a budget check counts them (`spent`); among them, those of a run on another
        host that died, which no liveness check here can see until their time is up."""
        states = "('reserved', 'unsettled')" if in_flight else "('unsettled')"
        with self._db.transaction() as conn:
            self._reserved(conn, "1 = 1", (), time.time())  # marks reservations of gone processes unsettled
            rows = conn.execute(
                "SELECT evaluator, day, SUM(spend_usd), SUM(calls) FROM ("
                f"  SELECT evaluator, day, spend_usd, calls FROM {self._daily}"
                f"  UNION ALL SELECT evaluator, day, amount_usd, 1 FROM {self._spend} WHERE state IN {states}"
                ") AS spend GROUP BY evaluator, day ORDER BY evaluator, day"
            ).fetchall()
        return [(evaluator, day, float(spend), int(calls)) for evaluator, day, spend, calls in rows]

    def rows(self) -> int:
        """How many rows the ledger holds (per-day totals plus reservations in flight)."""
        with self._db.transaction() as conn:
            (daily,) = conn.execute(f"SELECT COUNT(*) FROM {self._daily}").fetchone()
            (open_,) = conn.execute(f"SELECT COUNT(*) FROM {self._spend}").fetchone()
        return int(daily) + int(open_)


class BudgetRefused(SendRefused):
    """Raised by a call's `before_send` hook when its worst case does not fit a budget: nothing is sent."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal.describe())
        self.refusal = refusal


def reservation_ttl_s(timeout_s: float, max_retries: int) -> float:
    """Longest an interactive call can hold its reservation: every attempt timing out, plus the backoff between
    them (at least 15 minutes)."""
    return max(900.0, (max_retries + 1) * timeout_s + max_retries * 30.0 + 60.0)


@dataclass(frozen=True)
class Budget:
    """The limits one caller's calls are reserved and settled against (an evaluator's, a model under test's)."""

    ledger: BudgetLedger
    name: str  # whose spend: an evaluator's name, or model:<name> in the benchmark ledger
    max_daily_usd: float | None
    max_monthly_usd: float | None
    ttl_s: float  # see `reservation_ttl_s`

    async def reserve(self, worst_usd: float) -> Reservation:
        """A reservation of a call's worst case (see `reserve_or_wait`)."""
        return await reserve_or_wait(
            self.ledger, self.name, worst_usd, self.max_daily_usd, self.max_monthly_usd, self.ttl_s
        )


# How often a call refused for budget looks again while other calls' reservations are in flight.
BUDGET_RECHECK_S = 0.05


async def reserve_or_wait(
    ledger: BudgetLedger,
    name: str,
    worst_usd: float,
    max_daily_usd: float | None,
    max_monthly_usd: float | None,
    ttl_s: float,
) -> Reservation:
    """A reservation of a call's worst case; waits while calls in flight may settle below theirs, and raises
    `BudgetRefused` once waiting cannot help (nothing in flight, or settled spend alone leaves no room)."""
    while True:
        result = ledger.reserve(name, worst_usd, max_daily_usd, max_monthly_usd, ttl_s=ttl_s)
        if isinstance(result, Reservation):
            return result
        if not result.can_wait:
            raise BudgetRefused(result)
        await asyncio.sleep(BUDGET_RECHECK_S)
