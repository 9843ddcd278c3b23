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
- A reservation made on another host (or by a submitted batch) has no process here to check: it stays in flight
  until it is settled or its time is up, which for a host that died is its whole `ttl_s` (15 minutes or more). A
  call that fits only once such reservations settle waits for them at most `Budget.max_wait_s`
  (`EVAL_PLATFORM_BUDGET_WAIT_S`), saying so at WARNING, then is refused with a detail that says it waited; the
  caller's later calls that need them are refused at once (`HostWait`).

The ledger is one SQLite file under the data root (SQLite's write lock serialises check-and-reserve), or,
when the Dagster instance runs on PostgreSQL, two tables in its database, where an advisory lock per evaluator
serialises check-and-reserve across hosts (`statedb`). Each change is one transaction: a process killed at
any instant leaves the reservation either wholly written or not at all. Settled spend is compacted into one row
per evaluator and UTC day as it settles, so reading totals and checking a budget cost the same after ten calls
or ten million.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from eval_platform.llm.client import SendRefused
from eval_platform.llm.statedb import PostgresState, SqliteFile, connect_wal
from eval_platform.processes import HOST, process_alive
from eval_platform.settings import BUDGET_WAIT_ENV, budget_wait_s

log = logging.getLogger(__name__)

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
_HOST = HOST  # a module global, so that a test's process can stand for another host
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
    # of `in_flight_usd`, reservations no process check here can see end: made on another host (named in
    # `unseen_hosts`), or by a submitted batch; only their settlement or their expiry frees them
    unseen_usd: float = 0.0
    unseen_hosts: tuple[str, ...] = ()

    @property
    def remaining_usd(self) -> float:
        return self.limit_usd - self.settled_usd - self.in_flight_usd

    @property
    def can_wait(self) -> bool:
        return self.in_flight_usd > 0 and self.settled_usd + self.amount_usd <= self.limit_usd + 1e-12

    @property
    def needs_unseen(self) -> bool:
        """Waiting could help, but only once reservations of another host (or a batch) settle: the calls in flight
        here settling to nothing would still leave no room."""
        return self.can_wait and self.settled_usd + self.unseen_usd + self.amount_usd > self.limit_usd + 1e-12

    def unseen_text(self) -> str:
        return f"{self.unseen_usd:.6g} USD reserved by calls in flight on {', '.join(self.unseen_hosts)}"

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


def _unseen(pid: int | None, host: str | None) -> bool:
    """A reservation whose process cannot be checked from here (another host's, or a batch's: no pid)."""
    return pid is None or host != _HOST


def _host_label(pid: int | None, host: str | None) -> str:
    return f"{host} (a submitted batch)" if host == _HOST else (host or "an unnamed host")


def _alive(pid: int | None, host: str | None) -> bool:
    if pid is None or host != _HOST:
        return True  # another machine's reservation: only its expiry can free it
    return process_alive(pid)


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

    def _reserved(self, conn, where: str, params: tuple, now: float) -> list[tuple[int, float, bool, str | None]]:
        """(id, amount, unsettled, unseen host) of the reservations matching `where`; the host is set for one in
        flight that no process check here can see end (`_unseen`). A reservation still marked in flight
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
            seen = unsettled or not _unseen(pid, host)
            result.append((row_id, amount, unsettled, None if seen else _host_label(pid, host)))
        if gone:
            conn.executemany(f"UPDATE {self._spend} SET state = 'unsettled' WHERE id = ? AND state = 'reserved'", gone)
        return result

    def _outstanding(
        self, conn, evaluator: str, column: str, period: str, now: float
    ) -> tuple[float, float, float, tuple[str, ...]]:
        """(in flight, unsettled, unseen, unseen hosts): reserved spend of calls that may still settle, and of calls
        that will not settle by themselves (their process is gone or their time is up), counted as spent at their
        worst case; of the first, what reservations no process check here can see end hold, and their hosts."""
        rows = self._reserved(conn, f"evaluator = ? AND {column} = ?", (evaluator, period), now)
        in_flight = sum(amount for _, amount, unsettled, _ in rows if not unsettled)
        unseen = sum(amount for _, amount, _, host in rows if host is not None)
        hosts = tuple(sorted({host for *_, host in rows if host is not None}))
        return in_flight, sum(amount for _, amount, unsettled, _ in rows if unsettled), unseen, hosts

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
                in_flight, unsettled, unseen, hosts = self._outstanding(conn, evaluator, column, period, now)
                settled = self._settled(conn, evaluator, column, period) + unsettled
                if settled + in_flight + amount_usd > limit + 1e-12:
                    return Refusal(name, limit, settled, in_flight, amount_usd, unsettled, unseen, hosts)
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
            in_flight, unsettled, _, _ = self._outstanding(conn, evaluator, column, value, time.time())
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

    def __init__(self, refusal: Refusal, waited: str = ""):
        super().__init__(refusal.describe() + waited)
        self.refusal = refusal


def reservation_ttl_s(timeout_s: float, max_retries: int) -> float:
    """Longest an interactive call can hold its reservation: every attempt timing out, plus the backoff between
    them (at least 15 minutes)."""
    return max(900.0, (max_retries + 1) * timeout_s + max_retries * 30.0 + 60.0)


class HostWait:
    """One caller's waits for reservations it cannot see end (another host's, a batch's), bounded by `max_wait_s`.

    The calls of a caller wait together: the first to need such reservations starts the wait and logs it at
    WARNING once (the evaluator, the amount reserved and where, how long it waits); the wait pauses while the
    room is back. Once the waits add up to `max_wait_s`, the call is refused, and so is every later call of this
    caller that needs them, at once (a dead host's reservations stay in flight for their whole TTL). `report()`
    is what the caller's metadata shows."""

    def __init__(self, name: str, max_wait_s: float, logger: logging.Logger | None = None):
        self.name, self.max_wait_s, self.log = name, max_wait_s, logger or log
        self.started: float | None = None  # time.monotonic() of the current wait
        self.gave_up = False
        self.waited_s = 0.0  # of the waits that ended
        self.refusal: Refusal | None = None  # the last one waited on

    def wait_or_refuse(self, refusal: Refusal) -> None:
        """Called with a refusal that needs unseen reservations: starts (or goes on with) the wait, or raises
        `BudgetRefused` when it is over."""
        now = time.monotonic()
        first = self.refusal is None
        self.refusal = refusal
        if self.started is None and not self.gave_up:
            self.started = now
        if first:
            self.log.warning(
                f"evaluator {self.name}: its {refusal.period} budget is nearly used ({refusal.describe()}); "
                f"{refusal.unseen_text()} (their runs may have died: such a reservation stays in flight until "
                f"its time is up); waiting up to {self.max_wait_s:g} s for them to settle ({BUDGET_WAIT_ENV})"
            )
        if self.started is not None and self.waited_s + now - self.started >= self.max_wait_s:
            self.waited_s += now - self.started
            self.started, self.gave_up = None, True
            self.log.warning(
                f"evaluator {self.name}: waited {self.max_wait_s:g} s for {refusal.unseen_text()}; they did not "
                f"settle: its calls that need them are skipped as budget exhausted"
            )
        if self.gave_up:
            raise BudgetRefused(refusal, self.refused_text(refusal))

    def refused_text(self, refusal: Refusal) -> str:
        return f"; waited {self.max_wait_s:g} s ({BUDGET_WAIT_ENV}) for {refusal.unseen_text()}, which did not settle"

    def ended(self) -> None:
        """The call needs those reservations no more (they settled, or expired and count as spent): the current
        wait is over."""
        if self.started is not None:
            self.waited_s += time.monotonic() - self.started
            self.started = None

    def report(self) -> dict | None:
        """The waits, for the materialization's metadata (None when there was none)."""
        if self.refusal is None:
            return None
        return {
            "evaluator": self.name,
            "reserved_elsewhere_usd": round(self.refusal.unseen_usd, 9),
            "hosts": list(self.refusal.unseen_hosts),
            "waited_s": round(self.waited_s + (time.monotonic() - self.started if self.started else 0.0), 1),
            "max_wait_s": self.max_wait_s,
            "outcome": (
                "gave up: the calls that needed them were skipped as budget_exhausted"
                if self.gave_up
                else "they settled or expired within the wait"
            ),
        }


@dataclass(frozen=True)
class Budget:
    """The limits one caller's calls are reserved and settled against (an evaluator's, a model under test's)."""

    ledger: BudgetLedger
    name: str  # whose spend: an evaluator's name, or model:<name> in the benchmark ledger
    max_daily_usd: float | None
    max_monthly_usd: float | None
    ttl_s: float  # see `reservation_ttl_s`
    # the longest its calls wait for reservations of other hosts (`HostWait`); default EVAL_PLATFORM_BUDGET_WAIT_S
    max_wait_s: float = field(default_factory=budget_wait_s)
    log: logging.Logger | None = field(default=None, compare=False)  # where the wait is told (default: this module's)
    host_wait: HostWait = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "host_wait", HostWait(self.name, self.max_wait_s, self.log))

    async def reserve(self, worst_usd: float) -> Reservation:
        """A reservation of a call's worst case (see `reserve_or_wait`)."""
        return await reserve_or_wait(
            self.ledger, self.name, worst_usd, self.max_daily_usd, self.max_monthly_usd, self.ttl_s, self.host_wait
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
    host_wait: HostWait | None = None,
) -> Reservation:
    """A reservation of a call's worst case; waits while calls in flight may settle below theirs, and raises
    `BudgetRefused` once waiting cannot help (nothing in flight, or settled spend alone leaves no room), or once
    it has waited `host_wait.max_wait_s` for reservations of other hosts."""
    host_wait = host_wait or HostWait(name, budget_wait_s())
    while True:
        result = ledger.reserve(name, worst_usd, max_daily_usd, max_monthly_usd, ttl_s=ttl_s)
        if isinstance(result, Reservation) or not result.needs_unseen:
            host_wait.ended()  # they settled, or expired (spent now): whatever the outcome, the wait for them is over
        if isinstance(result, Reservation):
            return result
        if not result.can_wait:
            raise BudgetRefused(result)
        if result.needs_unseen:
            host_wait.wait_or_refuse(result)
        await asyncio.sleep(BUDGET_RECHECK_S)
