"""The shared state on more than one host: writers in separate processes, each with a folder of its own (on
PostgreSQL they share nothing but the database), never pass a budget, fill it, survive a kill -9 at the worst
moment, and find what another host paid for in the cache."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from eval_platform.judging.runner import judge_day
from eval_platform.llm.batch.state import BatchState, partition_lock
from eval_platform.llm.budget import Refusal, Reservation
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.llm.statedb import lock_id, postgres_state
from eval_platform_tests.judging.test_runner import make_traces
from eval_platform_tests.llm.test_budget import budgeted
from eval_platform_tests.shared_state_backends import cache_at, ledger_at

HOSTS = 4
CALLS = 200
LIMIT = float(CALLS)  # two hundred calls of 1.0: the hosts race for every one of them


def _reserve_until_refused(folder: str, postgres_url: str, ready, go, reserved) -> None:
    """One host: reserve 1.0 (settling each at 0.999) as fast as it can until the budget refuses."""
    ledger = ledger_at(Path(folder) / "budget.sqlite", postgres_url or None)
    ready.put(os.getpid())
    go.wait()
    count = 0
    while isinstance(held := ledger.reserve("e", 1.0, LIMIT, None), Reservation):
        count += 1
        ledger.settle(held, 0.999)
    reserved.put(count)


def test_hosts_reserving_at_once_fill_the_budget_to_within_one_call_and_never_pass_it(tmp_path, state_backend):
    context = multiprocessing.get_context("spawn")
    ready, go, reserved = context.Queue(), context.Event(), context.Queue()
    # On SQLite the hosts must share the ledger's file; on PostgreSQL each has a folder of its own.
    shared = state_backend.postgres_url is None
    folders = [tmp_path if shared else tmp_path / f"host-{i}" for i in range(HOSTS)]
    hosts = [
        context.Process(target=_reserve_until_refused, args=(str(folder), state_backend.arg, ready, go, reserved))
        for folder in folders
    ]
    for host in hosts:
        host.start()
    for _ in hosts:
        ready.get(timeout=120)
    go.set()  # all at once
    counts = [reserved.get(timeout=300) for _ in hosts]
    for host in hosts:
        host.join()
    ledger = state_backend.ledger(tmp_path / "budget.sqlite")
    spent = ledger.spent("e", month=time.strftime("%Y-%m", time.gmtime()))
    # Each call settles at 0.999, so the calls leave room for none more: exactly CALLS fit, never more.
    assert sum(counts) == CALLS and spent == pytest.approx(CALLS * 0.999)
    assert min(counts) > 0  # every host got some: they did race
    assert LIMIT - 1.0 <= spent <= LIMIT
    assert shared or not list(tmp_path.rglob("*.sqlite"))


# A host killed (kill -9) at the worst instant: inside the reservation's transaction, its lock held, the totals
# read and nothing written yet.
KILLED_INSIDE_RESERVE = """
import sys, time
from pathlib import Path
from eval_platform_tests.shared_state_backends import ledger_at

ledger = ledger_at(Path(sys.argv[1]) / "budget.sqlite", sys.argv[2] or None)
settled = ledger._settled

def hang_after_reading(*args):
    total = settled(*args)
    Path(sys.argv[3]).touch()  # inside the transaction, holding the lock
    time.sleep(600)
    return total

ledger._settled = hang_after_reading
ledger.reserve("e", 0.5, 1.0, None)
"""


def test_a_host_killed_inside_a_reservation_leaves_the_ledger_consistent_and_unlocked(tmp_path, state_backend):
    ledger = state_backend.ledger(tmp_path / "budget.sqlite")
    first = ledger.reserve("e", 0.25, 1.0, None)
    assert isinstance(first, Reservation)
    inside = tmp_path / "inside"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-c", KILLED_INSIDE_RESERVE, str(tmp_path), state_backend.arg, str(inside)]
    host = subprocess.Popen(command, env=env)
    try:
        while not inside.exists():
            assert host.poll() is None, "the host exited before reserving"
            time.sleep(0.02)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    # Its lock went with it (the next reservation does not wait for it), and nothing of its reservation was
    # written: the ledger holds exactly what it held before.
    second = ledger.reserve("e", 0.75, 1.0, None)
    assert isinstance(second, Reservation)
    assert ledger.rows() == 2 and ledger.spent("e", day=first.day) == pytest.approx(1.0)
    refused = ledger.reserve("e", 0.01, 1.0, None)
    assert isinstance(refused, Refusal) and refused.in_flight_usd == pytest.approx(1.0)


OPEN_EVERYTHING = """
import sys
from pathlib import Path
from eval_platform.llm.batch.state import BatchState
from eval_platform.llm.statedb import postgres_state
from eval_platform.llm.shared_state import SharedState

go, url, name = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
while not go.exists():
    pass
state = SharedState.at(Path(sys.argv[4]), url)
ledger = state.judge_ledger()
ledger.settle(ledger.reserve("e", 0.01, None, None), 0.01)
cache = state.model_cache()
cache.put(name, {"content": "x"})
cache.flush()
state.benchmark_ledger().totals()
batches = BatchState(state.batches(), "e", name)
batches.batches.append({"state": "open"})
batches.save()
"""


def test_hosts_opening_an_empty_database_at_once_all_succeed(tmp_path, postgres_db):
    url, go = postgres_db.url(), tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    hosts = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_EVERYTHING, str(go), url, f"host-{i}", str(tmp_path / f"host-{i}")],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(HOSTS)
    ]
    time.sleep(2.0)  # let them all start; they then create the tables at the same moment
    go.touch()
    errors = [host.communicate(timeout=300)[1] for host in hosts]
    assert [host.returncode for host in hosts] == [0] * HOSTS, errors
    ((_, _, spend, calls),) = ledger_at(tmp_path, url).totals()
    assert calls == HOSTS and spend == pytest.approx(0.01 * HOSTS)
    cache = cache_at(tmp_path, url)
    assert all(cache.get(f"host-{i}") == {"content": "x"} for i in range(HOSTS))
    assert all(BatchState(postgres_state(url), "e", f"host-{i}").batches for i in range(HOSTS))


def test_a_partition_lock_on_postgres_is_held_across_hosts_and_freed_when_its_holder_dies(tmp_path, postgres_db):
    url = postgres_db.url()
    held = tmp_path / "held"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from eval_platform.llm.batch.state import partition_lock;"
            "from eval_platform.llm.statedb import postgres_state\n"
            "with partition_lock(postgres_state(sys.argv[1]), 'e', 'd'):\n"
            "    Path(sys.argv[2]).touch(); time.sleep(600)",
            url,
            str(held),
        ],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        while not held.exists():
            assert holder.poll() is None
            time.sleep(0.02)
        probe = postgres_state(url).connect(autocommit=True)
        try:
            with probe.cursor() as cursor:  # another host finds it held
                cursor.execute("SELECT pg_try_advisory_lock(%s)", (lock_id("judge_batches:e:d"),))
                assert cursor.fetchone() == (False,)
        finally:
            probe.close()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with partition_lock(postgres_state(url), "e", "d"):  # freed with its holder's connection
        pass


HOST_RUN = """
import sys
from pathlib import Path
from eval_platform.judging.runner import judge_day
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.judging.test_runner import make_traces
from eval_platform_tests.llm.test_budget import budgeted
from eval_platform_tests.shared_state_backends import cache_at, ledger_at

base_url, folder, url = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
cache, ledger = cache_at(folder / "cache", url), ledger_at(folder / "b.sqlite", url)
runtime = ModelRuntime(LiteLLMModelClient(), cache, ledger, env={})
rows = judge_day(budgeted(base_url, max_daily_cost_usd=100.0), "2026-11-10", make_traces(5), runtime).rows
assert rows["status"].to_list() == ["COMPLETED"] * 5, rows
"""


def test_a_reply_one_host_paid_for_is_a_cache_hit_on_another(local_judge, tmp_path, postgres_db):
    url = postgres_db.url()

    def requests() -> int:
        return httpx.get(f"{local_judge.base_url}/stats", trust_env=False).json()["requests"]

    before = requests()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run(
        [sys.executable, "-c", HOST_RUN, local_judge.base_url, str(tmp_path / "host-a"), url], env=env, check=True
    )
    assert requests() - before == 5
    runtime = ModelRuntime(
        LiteLLMModelClient(),
        cache_at(tmp_path / "host-b" / "cache", url),
        ledger_at(tmp_path / "host-b" / "b.sqlite", url),
        env={},
    )
    rows = judge_day(budgeted(local_judge.base_url, max_daily_cost_usd=100.0), "2026-11-10", make_traces(5), runtime)
    assert rows.rows["cache_hit"].to_list() == [True] * 5 and requests() - before == 5
    assert not (tmp_path / "host-b").exists()  # host B wrote no file: everything came from the database
