"""Batch mode on a day larger than one batch, in bounded memory, over real HTTP to the local judge's batch API.

A day with more requests (or bytes) than a batch may hold is cut into several batches, each within the limit, every
request answered once, the rows those of an interactive run; a run killed between two batches' creates is resumed
without submitting anything twice; a budget is never exceeded across batches; the step reads the day anew for each
pass and hands its rows on before the day is read to its end; the state (batch lines in a table) moves to
PostgreSQL with `migrate_state`, and a state written by the previous version (lines inline) is still resumed.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import polars as pl
import pytest

from eval_platform.judging.evaluator_day import judge_partition
from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.options import BatchOptions
from eval_platform.judging.runner import judge_day, judge_stream
from eval_platform.llm.batch.state import REQUESTS_FILE, REQUESTS_TABLE, BatchState
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.migrate_state import migrate
from eval_platform.llm.statedb import postgres_state
from eval_platform.settings import state_dir
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.judging.test_runner import DAY, make_traces
from eval_platform_tests.judging.test_streaming import (
    EARLIER,
    day_traces,
    evaluators,
    fresh_runtime,
    in_memory,
    write_gold,
)
from eval_platform_tests.llm.test_batch import (
    CRASHING_RUN,
    FAST,
    PRICES,
    batch_stats,
    config_for,
    make_runtime,
    one_request_worst_usd,
    saved_batches,
    sorted_rows,
)
from eval_platform_tests.llm.test_lean_path import VARYING
from tools.local_judge_wires import WiredJudgeServer

TRACES = 120
LIMIT = 50  # requests per batch in these tests (OpenAI's is 50,000): 120 traces are 3 batches


def server_batches(server) -> list[dict]:
    """The batches the local judge holds: how many lines each had, and its input file's size."""
    store = server.batches
    return [
        {"requests": b["request_counts"]["total"], "bytes": store.files[b["input_file_id"]]["bytes"]}
        for b in store.batches.values()
    ]


@pytest.mark.parametrize("limit", ["requests", "bytes"])
def test_a_day_over_the_batch_limit_is_several_batches_all_answered(tmp_path, limit):
    with WiredJudgeServer() as server:
        traces = make_traces(TRACES)
        interactive = sorted_rows(
            judge_day(config_for(server, "score"), DAY, traces, make_runtime(tmp_path / "i")).rows
        )
        if limit == "requests":
            options = {**FAST, "max_requests": LIMIT}
        else:  # about LIMIT lines' worth of bytes
            one = server_line_bytes(server, tmp_path)
            options = {**FAST, "max_bytes": LIMIT * one}
        config = config_for(server, "score", batch=options)
        result = judge_day(config, DAY, traces, make_runtime(tmp_path / "b"))
        batched = sorted_rows(result.rows)

        compared = [c for c in interactive.columns if c not in VARYING]
        assert batched.select(compared).to_dicts() == interactive.select(compared).to_dicts()
        assert batched["status"].to_list() == ["COMPLETED"] * TRACES
        held = server_batches(server)
        assert len(held) >= 3 and sum(b["requests"] for b in held) == TRACES == batch_stats(server)["batch_lines"]
        if limit == "requests":
            assert [b["requests"] for b in held] == [50, 50, 20]
        else:
            assert all(b["bytes"] <= options["max_bytes"] for b in held)
        assert [b["status"] for b in result.summary["batches"]] == ["completed"] * len(held)
        assert sum(b["requests"] for b in result.summary["batches"]) == TRACES
        # Every batch collected: no line of it is kept in the state once it is done.
        assert {b["state"] for b in saved_batches(tmp_path / "b", config.name)} == {"collected"}
        assert request_lines(tmp_path / "b") == 0


def server_line_bytes(server, tmp_path: Path) -> int:
    """The size of the largest batch line of this day (one batch of it, submitted to a throwaway server)."""
    with WiredJudgeServer() as probe:
        config = config_for(probe, "score", batch=FAST)
        judge_day(config, DAY, make_traces(TRACES), make_runtime(tmp_path / "probe"))
        (content,) = [f["content"] for f in probe.batches.files.values() if f["purpose"] == "batch"]
    return max(len(line) + 1 for line in content.splitlines())


def request_lines(state: Path) -> int:
    path = state / "judge_batches" / REQUESTS_FILE
    if not path.exists():
        return 0
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(f"SELECT count(*) FROM {REQUESTS_TABLE}").fetchone()[0]


# Judges the day with batches of 50 requests, and dies (SIGKILL) when it reserves the budget for its second
# batch: after the first batch was created, before the second one was.
DIES_BETWEEN_TWO_CREATES = """
import os
import signal
import sys
from pathlib import Path
from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.statedb import postgres_state
from eval_platform_tests.judging.test_runner import DAY, make_traces
from eval_platform_tests.llm.test_batch import make_runtime


class DiesAtTheSecondBatch(BudgetLedger):
    batches = 0

    def reserve(self, *args, **kwargs):
        if kwargs.get("outlives_process"):  # a batch's reservation
            DiesAtTheSecondBatch.batches += 1
            if DiesAtTheSecondBatch.batches == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().reserve(*args, **kwargs)


state, url = Path(sys.argv[2]), sys.argv[3] or None
runtime = make_runtime(state, url)
runtime.ledger = DiesAtTheSecondBatch(postgres_state(url) if url else state / "budget.sqlite")
judge_day(load_evaluator(Path(sys.argv[1])), DAY, make_traces(int(sys.argv[4])), runtime)
print("finished")
"""


def limited_evaluator(data_root: Path, server, **extra) -> Path:
    return write_evaluator(
        data_root,
        "split",
        name="split",
        mode="score",
        score_scale={"min": 1, "max": 5},
        model="openai/mock",
        api_base=server.base_url,
        prompt="Question: {{input}}\nAnswer: {{output}}",
        batch={**FAST, "max_requests": LIMIT},
        **extra,
    )


def test_a_run_killed_between_two_batch_creates_is_resumed_without_submitting_twice(tmp_path, data_root, state_backend):
    with WiredJudgeServer(batch_delay_s=1.0) as server:
        path = limited_evaluator(data_root, server, max_daily_cost_usd=5.0, **PRICES)
        state, url = tmp_path / "state", state_backend.postgres_url
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        command = [sys.executable, "-c", DIES_BETWEEN_TWO_CREATES, str(path), str(state), state_backend.arg]
        run = subprocess.run([*command, str(TRACES)], env=env, check=False, timeout=300)
        assert run.returncode == -signal.SIGKILL  # killed, not finished
        (first,) = saved_batches(state, "split", url)
        assert first["state"] == "open" and first["request_count"] == LIMIT
        assert batch_stats(server)["batches"] == 1

        result = judge_day(load_evaluator(path), DAY, make_traces(TRACES), make_runtime(state, url))
        assert result.rows["status"].to_list() == ["COMPLETED"] * TRACES
        summary = result.summary["batches"]
        assert [(b["resumed"], b["requests"]) for b in summary] == [(True, 50), (False, 50), (False, 20)]
        assert summary[0]["batch_id"] == first["batch_id"]
        assert [b["requests"] for b in server_batches(server)] == [50, 50, 20]  # nothing submitted twice
        assert batch_stats(server)["batch_lines"] == TRACES
        # Each batch settled once, at what it cost: the killed run's reservation too.
        ledger = state_backend.ledger(state / "budget.sqlite")
        assert ledger.rows() == 1
        spent = ledger.spent("split", day=first["reservation"]["day"])
        assert spent == pytest.approx(result.rows["cost_usd"].sum()) and 0 < spent <= 5.0
        assert {b["state"] for b in saved_batches(state, "split", url)} == {"collected"}


def test_a_budget_is_never_exceeded_across_the_batches_of_a_day(tmp_path, data_root):
    with WiredJudgeServer() as server:
        probe = load_evaluator(limited_evaluator(data_root, server, **PRICES))
        worst = one_request_worst_usd(probe, make_traces(TRACES))
        # Room for the worst case of about 75 requests: the first batch whole, a prefix of the second, none after.
        config = load_evaluator(limited_evaluator(data_root, server, max_daily_cost_usd=75.5 * worst, **PRICES))
        state = tmp_path / "state"
        result = judge_day(config, DAY, make_traces(TRACES), make_runtime(state))
        rows = result.rows
        completed = rows.filter(pl.col("status") == "COMPLETED").height
        skipped = rows.filter(pl.col("status") == "SKIPPED")
        assert LIMIT < completed < TRACES and completed + skipped.height == TRACES
        assert set(skipped["reason"].to_list()) == {"budget_exhausted"}
        assert [b["requests"] for b in server_batches(server)] == [LIMIT, completed - LIMIT]
        # What was submitted is the day's first requests, in order: the refused ones are all after them.
        order = {f"t{i}": i for i in range(TRACES)}
        done = sorted(order[t] for t in rows.filter(pl.col("status") == "COMPLETED")["trace_id"].to_list())
        assert done == list(range(completed))
        today = time.strftime("%Y-%m-%d", time.gmtime())
        spent = BudgetLedger(state / "budget.sqlite").spent(config.name, day=today)
        assert spent == pytest.approx(rows["cost_usd"].sum()) and 0 < spent <= config.max_daily_cost_usd


STREAMED = ["score", "consensus", "pairwise", "session", "reference"]


def test_the_batched_step_streams_the_day_and_gives_the_in_memory_rows(data_root, tmp_path):
    """judge_partition in batch mode (the day read a batch of 7 traces at a time, twice, in batches of 2 requests)
    writes exactly the rows the whole day judged in memory gives, for every kind of unit."""
    write_partition(DataRoot.from_env(data_root), "traces", {"date": DAY}, day_traces())
    write_partition(DataRoot.from_env(data_root), "traces", {"date": EARLIER}, day_traces(EARLIER, 20))
    write_gold(data_root)
    with WiredJudgeServer() as server:
        for name in STREAMED:
            config = evaluators(server.base_url)[name]
            expected = in_memory(data_root, config, fresh_runtime(tmp_path / f"{name}-memory"))
            # batches of 2: the session evaluator sends 3 requests (its fourth session's last turn has no answer,
            # SKIPPED no_final_answer), still more than one batch
            batched = config.model_copy(update={"batch": BatchOptions(**FAST, max_requests=2)})
            judged = judge_partition(
                DataRoot.from_env(data_root), batched, DAY, fresh_runtime(tmp_path / f"{name}-batch"), set(), 7
            )
            rows = judged.result.rows
            assert rows.height > 10, name
            assert rows.drop(VARYING).equals(expected.rows.drop(VARYING)), name
            assert judged.every_trace_has_one_status, name
            assert len(judged.summary["batches"]) > 1, name  # more requests than one batch of 2
            assert {b["status"] for b in judged.summary["batches"]} == {"completed"}, name


def test_the_answering_pass_hands_rows_on_before_the_day_is_read_to_its_end(tmp_path):
    """Batch mode reads the day anew for each pass (a function giving the day), never holding it, and the
    answering pass's rows reach the sink as they come, not once the day is done."""
    from eval_platform.judging import runner
    from eval_platform.llm import scheduler

    with WiredJudgeServer() as server:
        config = config_for(server, "score", batch={**FAST, "max_requests": 64})
        traces = make_traces(400)
        written: list[int] = []
        passes: list[list[int]] = []

        def read_day():
            passes.append([])
            for start in range(0, traces.height, 10):
                passes[-1].append(sum(written))
                yield traces.slice(start, 10)

        chunk, window = runner.ROWS_PER_CHUNK, scheduler.IN_FLIGHT_UNITS
        runner.ROWS_PER_CHUNK, scheduler.IN_FLIGHT_UNITS = 10, 16
        try:
            runtime = make_runtime(tmp_path)
            outcome = judge_stream(config, DAY, read_day, runtime, set(), lambda frame: written.append(frame.height))
        finally:
            runner.ROWS_PER_CHUNK, scheduler.IN_FLIGHT_UNITS = chunk, window
        assert len(passes) == 2 and len(passes[0]) == len(passes[1]) == 40  # the day read twice, a batch at a time
        assert passes[0][-1] == 0  # the recording pass hands nothing on
        assert sum(written) == outcome.summary["rows"] == outcome.summary["completed"] == 400
        assert max(written) <= 10
        window = max(16, 8 * runtime.client.max_concurrency)
        assert passes[1][-1] >= 400 - window - window // 4 - 10 - 10 > 0
        assert len(outcome.summary["batches"]) == 7  # 400 requests, 64 a batch


def killed_after_submitting(server, path: Path, state: Path, url: str | None = None) -> dict:
    """Run the day in a process of its own, killed once its first batch is open; that batch's record."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.Popen([sys.executable, "-c", CRASHING_RUN, str(path), str(state), url or ""], env=env)
    try:
        while run.poll() is None and not [b for b in saved_batches(state, "split", url) if b["state"] == "open"]:
            time.sleep(0.05)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert run.returncode == -signal.SIGKILL
    (submitted,) = saved_batches(state, "split", url)
    return submitted


def test_an_open_batch_moves_to_postgres_with_its_lines_and_is_resumed_there(tmp_path, data_root, postgres_db):
    with WiredJudgeServer(batch_delay_s=3.0) as server:
        path = limited_evaluator(data_root, server)
        root = tmp_path / "data"
        state = state_dir(root)
        submitted = killed_after_submitting(server, path, state)
        assert request_lines(state) == 4  # CRASHING_RUN judges 4 traces

        url = postgres_db.url()
        report = migrate(root, postgres_state(url))
        assert report.batch_partitions == 1
        (moved,) = BatchState(postgres_state(url), "split", DAY).batches
        assert moved["batch_id"] == submitted["batch_id"] and moved["state"] == "open"
        assert len(list(BatchState(postgres_state(url), "split", DAY).requests(moved["submission"]))) == 4

        result = judge_day(load_evaluator(path), DAY, make_traces(4), make_runtime(tmp_path / "host-2", url))
        assert result.rows["status"].to_list() == ["COMPLETED"] * 4
        assert [(b["batch_id"], b["resumed"]) for b in result.summary["batches"]] == [(submitted["batch_id"], True)]
        assert batch_stats(server)["batches"] == 1


def test_a_state_written_by_the_previous_version_with_its_lines_inline_is_resumed(tmp_path, data_root):
    with WiredJudgeServer(batch_delay_s=3.0) as server:
        path = limited_evaluator(data_root, server)
        state = tmp_path / "state"
        submitted = killed_after_submitting(server, path, state)
        # The state as the previous version wrote it: the batch's custom_id -> cache key map in its record.
        lines = dict(BatchState(state / "judge_batches", "split", DAY).requests(submitted["submission"]))
        assert len(lines) == 4
        record = {k: v for k, v in submitted.items() if k != "request_count"} | {"requests": lines}
        (state / "judge_batches" / "split" / f"{DAY}.json").write_text(json.dumps({"batches": [record]}))
        (state / "judge_batches" / REQUESTS_FILE).unlink()

        result = judge_day(load_evaluator(path), DAY, make_traces(4), make_runtime(state))
        assert result.rows["status"].to_list() == ["COMPLETED"] * 4
        assert [(b["batch_id"], b["resumed"]) for b in result.summary["batches"]] == [(submitted["batch_id"], True)]
        assert batch_stats(server)["batches"] == 1


def test_a_request_larger_than_a_batch_may_be_is_failed_not_sent(tmp_path):
    with WiredJudgeServer() as server:
        config = config_for(server, "score", batch={**FAST, "max_bytes": 200})
        rows = judge_day(config, DAY, make_traces(3), make_runtime(tmp_path)).rows
        assert rows["status"].to_list() == ["FAILED"] * 3 and rows["reason"].to_list() == ["batch_failed"] * 3
        assert all("per batch" in detail for detail in rows["reason_detail"].to_list())
        assert rows["score"].to_list() == [None] * 3
        assert batch_stats(server) == {"batches": 0, "files": 0, "batch_lines": 0}
