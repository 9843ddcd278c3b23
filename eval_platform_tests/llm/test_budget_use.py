"""Budgets are used fully and never passed: reservations at send time, waiting for calls in flight,
reservations a dead process left or that outlived their time counted as spent, and an overspend that stops
further calls at once."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import polars as pl
import pytest

from eval_platform.judging.prompts import build_messages, trace_values
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import Refusal, Reservation
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.pricing import worst_case_prompt_tokens
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.conftest import REPO_DATA
from eval_platform_tests.judging.test_runner import make_traces
from eval_platform_tests.llm.test_budget import PRICED, budgeted
from eval_platform_tests.shared_state_backends import cache_at, ledger_at

TODAY = lambda: datetime.now(UTC).strftime("%Y-%m-%d")  # noqa: E731  (budgets count the UTC day of the call)


@pytest.fixture(scope="module")
def slow_judge():
    """The local judge answering after 40 ms, so that calls of concurrent runs overlap."""
    from tools.local_judge_wires import WiredJudgeServer

    server = WiredJudgeServer(data_root=REPO_DATA, latency_ms=40)
    server.start()
    yield server
    server.stop()


def worst_case(config, traces: pl.DataFrame) -> float:
    """The largest reservation any of these traces makes (the runner's own formula)."""
    prices = config.judge_models()[0].prices()
    return max(
        prices.cost(worst_case_prompt_tokens(build_messages(config, trace_values(t, None))), config.max_tokens)
        for t in traces.to_dicts()
    )


def runtime_at(state: Path, concurrency: int = 8, postgres_url: str | None = None) -> ModelRuntime:
    """A run's runtime: its ledger at state/budget.sqlite, or in the database at `postgres_url` (its cache too:
    a table every run shares, so the runs' trace ids differ and each call is paid once)."""
    return ModelRuntime(
        client=LiteLLMModelClient(max_concurrency=concurrency),
        cache=cache_at(state / f"cache-{os.getpid()}-{time.monotonic_ns()}", postgres_url),
        ledger=ledger_at(state / "budget.sqlite", postgres_url),
        env={},
    )


def test_one_partition_spends_the_budget_down_to_less_than_one_call(slow_judge, tmp_path, state_backend):
    traces = make_traces(40)
    probe = budgeted(slow_judge.base_url)
    worst = worst_case(probe, traces)
    budget = 6.5 * worst  # room for six worst cases; real calls cost about a third of theirs, so more fit
    rows = judge_day(
        budgeted(slow_judge.base_url, max_daily_cost_usd=budget),
        "2026-11-10",
        traces,
        runtime_at(tmp_path, postgres_url=state_backend.postgres_url),
    ).rows
    spent = rows["cost_usd"].sum()
    assert spent <= budget
    assert spent >= budget - worst  # before today's fix, concurrent reservations stopped it at about a third
    skipped = rows.filter(pl.col("status") == "SKIPPED")
    assert skipped.height > 0 and set(skipped["reason"]) == {"budget_exhausted"}
    assert skipped["reason_detail"].str.contains("daily limit").all()
    assert skipped["reason_detail"].str.contains("remaining").all()


def _run(args: tuple[str, str, str, float, int, str]) -> list[dict]:
    base_url, state, day, budget, n, postgres_url = args
    traces = make_traces(n).with_columns(pl.col("trace_id") + f"-{day}", pl.lit(day).alias("date"))
    config = budgeted(base_url, max_daily_cost_usd=budget)
    rows = judge_day(config, day, traces, runtime_at(Path(state), postgres_url=postgres_url or None)).rows
    return rows.select("status", "reason", "cost_usd").to_dicts()


def test_four_concurrent_runs_use_the_budget_and_never_pass_it(slow_judge, tmp_path, state_backend):
    """Four runs in four processes. On PostgreSQL they stand for four hosts: each has a folder of its own for its
    files and shares nothing with the others but the database."""
    traces = make_traces(30)
    worst = worst_case(budgeted(slow_judge.base_url), traces.with_columns(pl.col("trace_id") + "-2026-11-09-x"))
    budget = 15.5 * worst
    days = ["2026-11-09", "2026-11-10", "2026-11-11", "2026-11-12"]
    shared_files = state_backend.postgres_url is None
    states = [tmp_path if shared_files else tmp_path / f"host-{i}" for i in range(len(days))]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(
            _run,
            [
                (slow_judge.base_url, str(s), d, budget, 30, state_backend.arg)
                for s, d in zip(states, days, strict=True)
            ],
        )
    rows = [row for result in results for row in result]
    spent = sum(r["cost_usd"] or 0 for r in rows)
    assert len(rows) == 120
    assert all(r["status"] == "COMPLETED" or r["reason"] == "budget_exhausted" for r in rows)
    assert any(r["reason"] == "budget_exhausted" for r in rows)
    assert spent <= budget
    assert spent >= budget - 1.05 * worst  # trace ids differ per day by a few bytes: 5 % slack on the worst case
    assert abs(state_backend.ledger(tmp_path / "budget.sqlite").spent("budgeted", day=TODAY()) - spent) < 1e-9
    assert shared_files or not list(tmp_path.rglob("*.sqlite"))  # the hosts' state is in the database only


def _reserve_and_hang(path: str, postgres_url: str, amount: float, ready) -> None:
    ledger = ledger_at(Path(path), postgres_url or None)
    result = ledger.reserve("budgeted", amount, 1.0, None)
    assert isinstance(result, Reservation)
    ready.set()
    time.sleep(600)


def test_reservations_of_a_killed_process_count_as_spent_never_freed(tmp_path, state_backend):
    ledger_path = tmp_path / "budget.sqlite"
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    child = ctx.Process(target=_reserve_and_hang, args=(str(ledger_path), state_backend.arg, 0.9, ready))
    child.start()
    try:
        assert ready.wait(60)
        ledger = state_backend.ledger(ledger_path)
        refused = ledger.reserve("budgeted", 0.5, 1.0, None)
        assert isinstance(refused, Refusal) and refused.in_flight_usd == pytest.approx(0.9) and refused.can_wait
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        # Its call may have been billed: the 0.9 now counts as spent (not in flight: nothing will settle it,
        # so nobody waits for it), and it is never released as free.
        refused = ledger.reserve("budgeted", 0.5, 1.0, None)
        assert isinstance(refused, Refusal) and not refused.can_wait
        assert (refused.settled_usd, refused.unsettled_usd, refused.in_flight_usd) == pytest.approx((0.9, 0.9, 0.0))
        assert "calls of killed runs" in refused.describe()
        assert state_backend.ledger(ledger_path).spent("budgeted", day=TODAY()) == pytest.approx(0.9)
        assert [row[2:] for row in ledger.totals()] == [pytest.approx((0.9, 1))]  # what the cost rollups read
    finally:
        if child.is_alive():
            child.kill()


def test_an_expired_reservation_counts_as_spent_until_settled(tmp_path, state_backend):
    ledger = state_backend.ledger(tmp_path / "budget.sqlite")
    held = ledger.reserve("e", 0.9, 1.0, None, ttl_s=0.2)
    assert isinstance(held, Reservation)
    waiting = ledger.reserve("e", 0.5, 1.0, None)
    assert isinstance(waiting, Refusal) and waiting.can_wait  # in flight: it may settle below its worst case
    time.sleep(0.3)
    expired = ledger.reserve("e", 0.5, 1.0, None)
    assert isinstance(expired, Refusal) and not expired.can_wait and expired.unsettled_usd == pytest.approx(0.9)
    ledger.settle(held, 0.3)  # the provider's record arrives after all: the actual cost replaces the worst case
    assert isinstance(ledger.reserve("e", 0.5, 1.0, None), Reservation)
    assert ledger.spent("e", day=held.day) == pytest.approx(0.8)


KILLED_RUN = """
import sys
from pathlib import Path
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.judging.runner import judge_day
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.llm.test_budget import budgeted
from eval_platform_tests.judging.test_runner import make_traces
from eval_platform_tests.shared_state_backends import cache_at, ledger_at

base_url, state, budget, n = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
url = sys.argv[5] or None
runtime = ModelRuntime(LiteLLMModelClient(max_concurrency=8), cache_at(state / "cache", url),
                       ledger_at(state / "budget.sqlite", url), env={})
judge_day(budgeted(base_url, max_daily_cost_usd=budget), "2026-11-10", make_traces(n), runtime)
print("finished")
"""


def billed_usd(server) -> float:
    """What the provider billed: every reply it produced, read by the client or not (PRICED: 1000 USD/M)."""
    billed = httpx.get(f"{server.base_url}/stats/billed", trust_env=False).json()
    return (billed["prompt_tokens"] + billed["completion_tokens"]) * 1000.0 / 1e6


def test_calls_in_flight_when_a_run_is_killed_stay_in_the_ledger_and_the_budget_holds_as_billed(
    tmp_path, state_backend
):
    from tools.local_judge_wires import WiredJudgeServer

    def counts(server) -> tuple[int, int]:
        sent = httpx.get(f"{server.base_url}/stats", trust_env=False).json()["requests"]
        return sent, httpx.get(f"{server.base_url}/stats/billed", trust_env=False).json()["replies"]

    with WiredJudgeServer(data_root=REPO_DATA, latency_ms=1000) as server:
        traces = make_traces(60)
        budget = 12 * worst_case(budgeted(server.base_url), traces)
        state = tmp_path / "state"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        command = [sys.executable, "-c", KILLED_RUN, server.base_url, str(state), str(budget), "60", state_backend.arg]
        run = subprocess.Popen(command, env=env)
        try:
            # Killed once some calls are settled and others are at the provider, not answered yet.
            sent, answered = counts(server)
            while run.poll() is None and not (answered >= 8 and sent - answered >= 4):
                time.sleep(0.02)
                sent, answered = counts(server)
        finally:
            run.send_signal(signal.SIGKILL)
            run.wait()
        assert run.returncode == -signal.SIGKILL
        sent, answered = counts(server)
        assert sent - answered >= 4  # calls in flight at the kill
        while counts(server)[1] < sent:  # the provider finishes (and bills) what it received
            time.sleep(0.02)
        ledger = state_backend.ledger(state / "budget.sqlite")
        # The calls in flight are counted at their worst case: the ledger never holds less than was billed.
        assert ledger.spent("budgeted", day=TODAY()) >= billed_usd(server) > 0
        assert sum(spend for _, _, spend, _ in ledger.totals(in_flight=True)) >= billed_usd(server)  # the rollups

        # The re-run pays for the killed calls again; in billed terms the day's budget still holds.
        config = budgeted(server.base_url, max_daily_cost_usd=budget)
        rows = judge_day(config, "2026-11-10", traces, runtime_at(state, postgres_url=state_backend.postgres_url)).rows
        assert "budget_exhausted" in rows["reason"].to_list()
        assert billed_usd(server) <= budget
        assert state_backend.ledger(state / "budget.sqlite").spent("budgeted", day=TODAY()) >= billed_usd(server)


OTHER_HOST = """
import sys
from pathlib import Path
import eval_platform.llm.budget as budget
from eval_platform_tests.shared_state_backends import ledger_at

path, url, evaluator, amount, host, ttl_s = sys.argv[1:]
budget._HOST = host  # this process stands for a run on another machine, which dies with its call in flight
held = ledger_at(Path(path), url or None).reserve(evaluator, float(amount), None, None, ttl_s=float(ttl_s))
assert isinstance(held, budget.Reservation)
print(held.id, held.day, held.month)
"""


def reserve_on_another_host(path: Path, postgres_url: str, evaluator: str, amount: float, ttl_s: float) -> Reservation:
    """A reservation of `amount` by a run on `host-b` whose process has ended with its call in flight: no process
    check here can see it end, so it stays in flight until it is settled or its `ttl_s` is up."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-c", OTHER_HOST, str(path), postgres_url, evaluator, str(amount), "host-b", str(ttl_s)]
    row_id, day, month = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout.split()
    return Reservation(int(row_id), evaluator, day, month, amount)


def test_a_run_waiting_on_another_hosts_reservations_says_so_and_waits_only_as_long_as_set(
    local_judge, tmp_path, state_backend, caplog
):
    traces = make_traces(6)
    worst = worst_case(budgeted(local_judge.base_url), traces)
    # host-b reserved most of the day's budget and died; what is left is less than one call's worst case. Its
    # reservation is in flight for 30 s here (at least 15 minutes in a real run).
    reserve_on_another_host(tmp_path / "budget.sqlite", state_backend.arg, "budgeted", 1.0 * worst, ttl_s=30)
    runtime = runtime_at(tmp_path, postgres_url=state_backend.postgres_url)
    runtime.budget_wait_s = 1.0  # EVAL_PLATFORM_BUDGET_WAIT_S
    config = budgeted(local_judge.base_url, max_daily_cost_usd=1.5 * worst)
    with caplog.at_level("WARNING", logger="eval_platform.llm.budget"):
        result = judge_day(config, "2026-11-10", traces, runtime)
    rows = result.rows
    assert set(rows["status"]) == {"SKIPPED"} and set(rows["reason"]) == {"budget_exhausted"}
    for detail in rows["reason_detail"]:
        assert "daily limit" in detail
        assert "waited 1 s (EVAL_PLATFORM_BUDGET_WAIT_S)" in detail and "on host-b" in detail, detail
    (told, *_) = [r for r in caplog.records if r.levelname == "WARNING"]
    message = told.getMessage()
    assert "evaluator budgeted" in message and "host-b" in message
    assert f"{worst:.6g} USD reserved" in message and "waiting up to 1 s" in message
    wait = result.summary["budget_wait"]  # what the materialization's metadata shows
    assert wait["evaluator"] == "budgeted" and wait["hosts"] == ["host-b"] and wait["max_wait_s"] == 1.0
    assert wait["reserved_elsewhere_usd"] == pytest.approx(worst) and 1.0 <= wait["waited_s"] < 30
    assert wait["outcome"].startswith("gave up")


def test_a_wait_for_another_hosts_reservations_ends_when_they_settle(local_judge, tmp_path, state_backend):
    """A live host's call settles within the wait: the run then spends the room it leaves, as before."""
    traces = make_traces(2)
    worst = worst_case(budgeted(local_judge.base_url), traces)
    path = tmp_path / "budget.sqlite"
    held = reserve_on_another_host(path, state_backend.arg, "budgeted", 1.0 * worst, ttl_s=900)
    settled = threading.Event()

    class HostBAnswers(logging.Handler):
        """host-b's call comes back once the run has said it waits for it, at a tenth of its worst case."""

        def emit(self, record: logging.LogRecord) -> None:
            if "waiting up to" in record.getMessage() and not settled.is_set():
                threading.Thread(
                    target=lambda: (state_backend.ledger(path).settle(held, 0.1 * worst), settled.set())
                ).start()

    runtime = runtime_at(tmp_path, concurrency=1, postgres_url=state_backend.postgres_url)
    runtime.budget_wait_s = 120.0
    runtime.log = logging.getLogger("eval_platform_tests.host_wait")
    runtime.log.addHandler(handler := HostBAnswers())
    try:
        result = judge_day(
            budgeted(local_judge.base_url, max_daily_cost_usd=1.5 * worst), "2026-11-10", traces, runtime
        )
    finally:
        runtime.log.removeHandler(handler)
    assert settled.is_set()
    assert result.rows["status"].to_list() == ["COMPLETED", "COMPLETED"]  # in the room host-b left
    wait = result.summary["budget_wait"]
    assert wait["hosts"] == ["host-b"] and wait["outcome"] == "they settled or expired within the wait"
    assert 0 < wait["waited_s"] < 120


def test_a_reply_longer_than_reserved_is_recorded_and_stops_further_calls(local_judge, tmp_path, state_backend):
    long_reply = '{"score": 3, "reasoning": "' + "words " * 2000 + '"}'
    config = budgeted(local_judge.base_url, max_tokens=1)
    config = config.model_copy(update={"model": f"openai/fixed/{long_reply}"})
    traces = make_traces(5)
    worst = worst_case(config, traces)
    limit = 1.5 * worst
    limited = budgeted(local_judge.base_url, max_tokens=1, max_daily_cost_usd=limit)
    limited = limited.model_copy(update={"model": f"openai/fixed/{long_reply}"})
    runtime = runtime_at(tmp_path, concurrency=1, postgres_url=state_backend.postgres_url)
    rows = judge_day(limited, "2026-11-10", traces, runtime).rows
    completed = rows.filter(pl.col("status") == "COMPLETED")
    assert completed.height == 1  # the first reply overspent: nothing else was sent
    assert completed["cost_usd"][0] > limit  # recorded as billed, above its reservation
    skipped = rows.filter(pl.col("status") == "SKIPPED")
    assert skipped.height == 4 and set(skipped["reason"]) == {"budget_exhausted"}
    ledger = state_backend.ledger(tmp_path / "budget.sqlite")
    assert ledger.spent("budgeted", day=TODAY()) == pytest.approx(completed["cost_usd"][0])


def test_settled_spend_is_one_row_per_day_however_many_calls(local_judge, tmp_path, state_backend):
    runtime = runtime_at(tmp_path, postgres_url=state_backend.postgres_url)
    judge_day(budgeted(local_judge.base_url, max_daily_cost_usd=1000.0), "2026-11-10", make_traces(30), runtime)
    ledger = state_backend.ledger(tmp_path / "budget.sqlite")
    ((evaluator, day, spend, calls),) = ledger.totals()
    assert (evaluator, day, calls) == ("budgeted", TODAY(), 30)
    assert ledger.rows() == 1  # 30 settled calls are one row, not thirty


def test_a_ledger_written_per_call_is_compacted_on_open(tmp_path):
    """SQLite only: ledgers in PostgreSQL were never written per call."""
    import sqlite3
    from contextlib import closing

    from eval_platform.llm.budget import BudgetLedger

    path = tmp_path / "budget.sqlite"
    with closing(sqlite3.connect(path)) as conn:  # the layout of ledgers written before compaction
        conn.executescript(
            "CREATE TABLE judge_spend (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "evaluator TEXT NOT NULL, day TEXT NOT NULL, month TEXT NOT NULL, amount_usd REAL NOT NULL, "
            "state TEXT NOT NULL, created_at REAL NOT NULL);"
        )
        conn.executemany(
            "INSERT INTO judge_spend (evaluator, day, month, amount_usd, state, created_at) "
            "VALUES (?, ?, ?, ?, 'settled', 0)",
            [("e", "2026-11-10", "2026-11", 0.25)] * 8 + [("e", "2026-11-11", "2026-11", 0.5)] * 2,
        )
        conn.commit()
    ledger = BudgetLedger(path)
    assert ledger.totals() == [("e", "2026-11-10", 2.0, 8), ("e", "2026-11-11", 1.0, 2)]
    assert ledger.spent("e", month="2026-11") == pytest.approx(3.0)
    assert ledger.rows() == 2


assert PRICED  # the prices these tests rely on: 1000 USD per million tokens each way
