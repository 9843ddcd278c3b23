"""The SQLite home of the shared state (`statedb.SqliteFile`): a ledger keeps its file open across calls, per
thread and per process, and what it commits survives the process being killed at once."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from eval_platform.llm.budget import BudgetLedger, Reservation

# Every sqlite3.connect of this process, by path (an audit hook: Python's own record, nothing patched). A hook
# cannot be removed, so it only records.
_CONNECTS: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if event == "sqlite3.connect":
        _CONNECTS.append(str(args[0]))


sys.addaudithook(_audit)


def _record(ledger: BudgetLedger, calls: int, amount: float = 0.01, actual: float = 0.004) -> None:
    for _ in range(calls):
        reservation = ledger.reserve("e", amount, 1e6, None)
        assert isinstance(reservation, Reservation)
        ledger.settle(reservation, actual)


def _calls(ledger: BudgetLedger) -> tuple[float, int]:
    ((_, _, spend, calls),) = ledger.totals()
    return spend, calls


def test_a_ledger_opens_its_file_once_however_many_calls_it_records(tmp_path):
    path = tmp_path / "budget.sqlite"
    ledger = BudgetLedger(path)
    opened = len([p for p in _CONNECTS if p == str(path)])
    _record(ledger, 200)
    # Before: two connections per call (one per reserve, one per settle), 400 here, each with a WAL checkpoint
    # as it closed; a budgeted judge ran at 150-190 calls/s on that.
    assert len([p for p in _CONNECTS if p == str(path)]) - opened <= 1
    assert _calls(ledger) == (pytest.approx(200 * 0.004), 200)


def test_threads_sharing_a_ledger_record_every_call(tmp_path):
    ledger = BudgetLedger(tmp_path / "budget.sqlite")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            _record(ledger, 40)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert _calls(ledger) == (pytest.approx(240 * 0.004), 240)


def _child_records_then_is_killed(ledger: BudgetLedger) -> None:
    _record(ledger, 25)  # on the connection the parent opened before the fork: must open its own
    os.kill(os.getpid(), signal.SIGKILL)  # at once: no clean-up, no close, no checkpoint


def test_a_forked_child_records_on_its_own_connection_and_a_kill_loses_nothing_it_committed(tmp_path):
    """Settling at or below the reservation commits without waiting for the disk; a kill -9 right after it
    still finds every settled call in the ledger (only a power loss could undo such a commit, and then the
    reservation would count again at its worst case)."""
    ledger = BudgetLedger(tmp_path / "budget.sqlite")
    _record(ledger, 5)
    child = multiprocessing.get_context("fork").Process(target=_child_records_then_is_killed, args=(ledger,))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    _record(ledger, 5)  # the parent's connection still works after the child's
    assert _calls(ledger) == (pytest.approx(35 * 0.004), 35)
    assert _calls(BudgetLedger(Path(ledger.path))) == (pytest.approx(35 * 0.004), 35)
    assert ledger.rows() == 1  # one day's total, no reservation left behind
