"""Spend ledger reads before and after per-day compaction, at a million settled calls.

    python -m tools.perf.ledger_totals [--calls 1000000] [--evaluators 10] [--days 30] [--repeat 3]

Writes a ledger in the per-call layout (one settled row per judge call, as the ledger was before
compaction) into a temporary directory and times what reads it there: `totals()` (what the cost rollups
call) and the budget check a reservation makes (the month's spend of one evaluator). Then opens it as a
`BudgetLedger`, which folds the settled rows into one row per evaluator and day (timed once: a one-off on
the first open of an old ledger), and times `totals()` and a reservation with its settle on the compacted
ledger. Both layouts must give the same totals (checked to 1e-9). Times are medians of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from eval_platform.llm.budget import BudgetLedger, Reservation
from eval_platform.markdown_table import markdown_table

# The queries the ledger ran before compaction (one row per call).
_PER_CALL_TOTALS = (
    "SELECT evaluator, day, SUM(amount_usd), COUNT(*) FROM judge_spend WHERE state = 'settled' "
    "GROUP BY evaluator, day ORDER BY evaluator, day"
)
_PER_CALL_MONTH = "SELECT COALESCE(SUM(amount_usd), 0) FROM judge_spend WHERE evaluator = ? AND month = ?"


def _median_s(run: Callable[[], object], repeat: int) -> tuple[object, float]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


def _write_per_call(path: Path, calls: int, evaluators: int, days: int, seed: int) -> None:
    BudgetLedger(path)  # the current schema; settled rows written straight in are the per-call layout
    rng = random.Random(seed)
    now = time.time()
    with closing(sqlite3.connect(path)) as conn:
        conn.executemany(
            "INSERT INTO judge_spend (evaluator, day, month, amount_usd, state, created_at) "
            "VALUES (?, ?, '2026-11', ?, 'settled', ?)",
            (
                (
                    f"evaluator_{i % evaluators}",
                    f"2026-11-{1 + (i // evaluators) % days:02d}",
                    rng.uniform(1e-4, 5e-4),
                    now,
                )
                for i in range(calls)
            ),
        )
        conn.commit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--evaluators", type=int, default=10)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "budget.sqlite"
        _write_per_call(path, args.calls, args.evaluators, args.days, args.seed)
        with closing(sqlite3.connect(path)) as conn:
            before, before_totals_s = _median_s(lambda: conn.execute(_PER_CALL_TOTALS).fetchall(), args.repeat)
            _, before_check_s = _median_s(
                lambda: conn.execute(_PER_CALL_MONTH, ("evaluator_0", "2026-11")).fetchone(), args.repeat
            )
        start = time.perf_counter()
        ledger = BudgetLedger(path)  # compacts the per-call rows on open
        compaction_s = time.perf_counter() - start
        after, after_totals_s = _median_s(ledger.totals, args.repeat)

        def reserve_and_settle() -> None:
            reservation = ledger.reserve("evaluator_0", 1e-4, None, 1e9)
            assert isinstance(reservation, Reservation)
            ledger.settle(reservation, 0.0)

        _, after_check_s = _median_s(reserve_and_settle, args.repeat)
        rows = ledger.rows()
    assert [(e, d, c) for e, d, _, c in before] == [(e, d, c) for e, d, _, c in after]
    worst = max(abs(b[2] - a[2]) for b, a in zip(before, after, strict=True))
    assert worst < 1e-9, worst
    print(f"{args.calls:,} settled calls, {args.evaluators} evaluators x {args.days} days; median of {args.repeat}")
    columns = ["read", "per call (before)", "per day (after)"]
    table = [
        ["`totals()`", f"{before_totals_s * 1000:.1f} ms", f"{after_totals_s * 1000:.2f} ms"],
        [
            "budget check: month's spend (after: whole reserve + settle)",
            f"{before_check_s * 1000:.1f} ms",
            f"{after_check_s * 1000:.2f} ms",
        ],
    ]
    print(markdown_table([dict(zip(columns, row, strict=True)) for row in table], columns))
    print(
        f"ledger rows after: {rows:,}; one-off compaction on first open: {compaction_s:.2f} s; max |diff| {worst:.1e}"
    )


if __name__ == "__main__":
    main()
