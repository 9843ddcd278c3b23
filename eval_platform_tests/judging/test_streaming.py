"""A `judge_scores` partition judged in bounded memory: the day's traces read in small batches, judged as they
come, the rows written as they are ready. It gives exactly the rows (and summary) of judging the whole day in
memory, for every mode and target; rows are handed on before the day is read to its end; a kill -9 mid-write
leaves the previous partition; the judge cache does not hold a day's written replies in memory."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import preview_rows
from eval_platform.judging.evaluator_day import judge_partition
from eval_platform.judging.references import attach_dataset_references
from eval_platform.judging.runner import judge_day, judge_stream
from eval_platform.judging.targets import session_window
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient, RetryPolicy
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_writer, read_partition, table_glob, write_partition

DAY = "2026-11-10"
EARLIER = (date.fromisoformat(DAY) - timedelta(days=1)).isoformat()
N = 61  # traces of the day; batches of 7 -> 9 batches


def fresh_runtime(folder: Path) -> ModelRuntime:
    return ModelRuntime(
        client=LiteLLMModelClient(max_concurrency=8, retry=RetryPolicy(base_delay_s=0.05, max_delay_s=0.2)),
        cache=ModelCache(folder / "cache"),
        ledger=BudgetLedger(folder / "budget.sqlite"),
        env={},
    )


def day_traces(day: str = DAY, n: int = N) -> pl.DataFrame:
    """A day with every kind of trace: projects, sessions, pairs and groups, spans, partial, failed, empty."""
    rows = []
    for i in range(n):
        row = {
            "trace_id": f"{day}-t{i}",
            "timestamp": f"{day}T{i % 24:02d}:{i % 60:02d}:00Z",
            "date": day,
            "project_id": "shop" if i % 5 else "other",
            "session_id": f"s{i % 9}" if i % 4 else None,
            "input": f"What is {i} + {i}?",
            "output": f"It is {2 * i}." if i % 13 else ("x" * (i % 7)),
            "metadata": json.dumps({"item_id": f"item{i // 3}", "case": f"c{i % 6}"}),
            "variant": f"model-{'abc'[i % 3]}",
            "spans": json.dumps(
                [
                    {"span_id": "c1", "name": "chat", "operation": "chat", "input": "q", "output": f"a{i}"},
                    {"span_id": "c2", "name": "chat", "operation": "chat", "input": "q2", "output": f"b{i % 4}"},
                ][: i % 3]
            ),
        }
        if i % 11 == 3:
            row["partial_reason"] = "still running"
        if i % 17 == 5:
            row["error_type"] = "Timeout"
        if i % 19 == 7:
            row["input"] = row["output"] = None
        rows.append(row)
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return conform(frame.with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC")), TRACE_SCHEMA)


def evaluators(base_url: str) -> dict[str, EvaluatorConfig]:
    common = {"api_base": base_url, "max_retries": 0, "timeout_s": 5}
    qa = "Question: {{input}}\nAnswer: {{output}}"
    specs = {
        "score": {"mode": "score", "model": "openai/mock", "prompt": qa, "projects": ["shop"]},
        "sampled": {"mode": "binary", "model": "openai/mock", "prompt": qa, "trigger": "sampled", "sample_rate": 0.5},
        "consensus": {
            "mode": "score",
            "models": [{"model": "openai/mock"}, {"model": 'openai/fixed/{"score": 2}'}],
            "samples": 2,
            "prompt": qa,
        },
        "categorical": {
            "mode": "categorical",
            "model": "openai/mock",
            "prompt": qa,
            "labels": {"good": 1.0, "bad": 0.0},
        },
        "span": {
            "mode": "score",
            "model": "openai/mock",
            "prompt": qa,
            "target": "span",
            "span": {"operation": "chat"},
        },
        "session": {"mode": "score", "model": "openai/mock", "prompt": qa, "target": "session"},
        "pairwise": {
            "mode": "pairwise",
            "model": "openai/mock",
            "prompt": "Question: {{input}}\nFirst: {{output_a}}\nSecond: {{output_b}}",
        },
        "n_wise": {"mode": "n_wise", "model": "openai/longest", "prompt": "Question: {{input}}\n{{candidates}}"},
        "reference": {
            "mode": "reference",
            "model": "openai/mock",
            "prompt": "Question: {{input}}\nAnswer: {{output}}\nGold: {{expected}}",
            "reference": {"source": "dataset", "dataset": "gold", "match_on": "metadata.case"},
        },
    }
    configs = {name: EvaluatorConfig.model_validate({"name": name, **common, **spec}) for name, spec in specs.items()}
    configs["check"] = EvaluatorConfig.model_validate({"name": "check", "check": {"scorer": "valid_json"}})
    return configs


def session_traces(root: Path, day: str, lookback_days: int, day_traces: pl.DataFrame) -> tuple[pl.DataFrame, list]:
    """The session window's traces in memory: the earlier days' materialized ones, then the day's."""
    frames, missing = [], []
    for earlier in session_window(day, lookback_days)[:-1]:
        frame = read_partition(DataRoot.from_env(root), "traces", {"date": earlier})
        if frame is None:
            missing.append(earlier)
        else:
            frames.append(conform(frame, TRACE_SCHEMA))
    return pl.concat([*frames, conform(day_traces, TRACE_SCHEMA)]), missing


def write_gold(root: Path) -> None:
    """The reference evaluator's dataset `gold` v1: its file (what the step reads) and its materialized
    `test_cases` partition (which a reference evaluator requires, and the in-memory day joins)."""
    cases = [{"case_id": f"c{i}", "input": f"q{i}", "expected_output": f"gold {i}"} for i in range(5)]
    folder = root / "datasets" / "gold"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "v1.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    write_partition(DataRoot.from_env(root), "test_cases", {"dataset": "gold", "version": "1"}, pl.DataFrame(cases))


def in_memory(root: Path, config: EvaluatorConfig, runtime: ModelRuntime) -> pl.DataFrame:
    """What the step did before it streamed: the whole day in memory, then judged at once."""
    traces = read_partition(DataRoot.from_env(root), "traces", {"date": DAY})
    if config.reference is not None:
        cases = read_partition(DataRoot.from_env(root), "test_cases", {"dataset": "gold", "version": "1"})
        traces = attach_dataset_references(traces, cases, config.reference.match_on)
    if config.judged_target == "session":
        traces, missing = session_traces(root, DAY, config.session_lookback_days, traces)
        result = judge_day(config, DAY, traces, runtime)
        result.summary["session_days_missing"] = missing
        return result
    return judge_day(config, DAY, traces, runtime)


# judged_at is the run's clock, latency_ms the call's: neither can be equal in two runs
VARYING = ["judged_at", "latency_ms"]


def test_the_streamed_step_gives_exactly_the_rows_of_the_in_memory_day(data_root, local_judge, tmp_path):
    where = DataRoot.from_env(data_root)
    write_partition(where, "traces", {"date": DAY}, day_traces())
    write_partition(where, "traces", {"date": EARLIER}, day_traces(EARLIER, 20))
    write_gold(data_root)
    for name, config in evaluators(local_judge.base_url).items():
        expected = in_memory(data_root, config, fresh_runtime(tmp_path / f"{name}-memory"))
        judged = judge_partition(where, config, DAY, fresh_runtime(tmp_path / f"{name}-stream"), set(), batch_rows=7)
        rows = judged.result.rows
        assert rows.height > 10, name
        assert rows.drop(VARYING).equals(expected.rows.drop(VARYING)), name
        # the partition also says which traces wait for completion (judging/completion.py): none of these do
        waiting = {key: judged.summary.pop(key) for key in ("traces_waiting_for_completion", "complete_at")}
        assert waiting == {"traces_waiting_for_completion": 0, "complete_at": None}, name
        assert judged.summary == expected.summary, name
        assert judged.every_trace_has_one_status and judged.traces_without_a_row == 0, name
        # what the materialization shows is picked as the rows go by: the day's pick, whatever the chunks
        assert judged.tally.preview.drop(VARYING).equals(preview_rows(rows).drop(VARYING)), name


def test_rows_are_written_before_the_day_is_read_to_its_end(local_judge, runtime):
    """The bound: a batch's rows are handed on while later batches are still unread, so what is held is a few
    batches and the calls in flight, whatever the day's size (the in-memory day handed everything on at its end)."""
    from eval_platform.judging import runner
    from eval_platform.llm import scheduler

    config = evaluators(local_judge.base_url)["score"]
    traces = day_traces(n=400)
    written: list[int] = []
    seen_when_read: list[int] = []

    def batches():
        for start in range(0, traces.height, 10):
            seen_when_read.append(sum(written))
            yield traces.slice(start, 10)

    chunk, window = runner.ROWS_PER_CHUNK, scheduler.IN_FLIGHT_UNITS
    runner.ROWS_PER_CHUNK, scheduler.IN_FLIGHT_UNITS = 10, 16
    try:
        outcome = judge_stream(config, DAY, batches(), runtime, set(), lambda frame: written.append(frame.height))
    finally:
        runner.ROWS_PER_CHUNK, scheduler.IN_FLIGHT_UNITS = chunk, window
    assert sum(written) == outcome.summary["rows"] == traces.filter(pl.col("project_id") == "shop").height
    assert max(written) <= 10
    # when the last batch was read, every row but those of the units in flight (the window: 8 x the client's
    # concurrency, and the quarter of it the loop lets finish before it wakes), of one batch and one chunk had been
    # handed on already
    window = max(16, 8 * runtime.client.max_concurrency)
    assert seen_when_read[-1] >= sum(written) - window - window // 4 - 10 - 10 > 0


def _judge_and_die(root: str, base_url: str) -> None:
    """The judge step in a process that kills itself (SIGKILL) after its second chunk of rows is written."""
    from eval_platform.judging import runner
    from eval_platform.storage import warehouse

    os.environ["EVAL_PLATFORM_DATA_DIR"] = root
    runner.ROWS_PER_CHUNK = 5
    write = warehouse.PartitionWriter.write
    calls = []

    def write_then_die(self, frame):
        write(self, frame)
        self._flush()  # a row group on disk per chunk: the file is half-written for sure when the kill comes
        calls.append(frame.height)
        if len(calls) == 2:
            print("mid-write", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    warehouse.PartitionWriter.write = write_then_die
    config = evaluators(base_url)["score"]
    judge_partition(
        DataRoot.from_env(Path(root)), config, DAY, fresh_runtime(Path(root) / "killed"), set(), batch_rows=7
    )


def test_a_kill_9_mid_write_leaves_the_previous_partition(data_root, local_judge, tmp_path):
    where = DataRoot.from_env(data_root)
    write_partition(where, "traces", {"date": DAY}, day_traces())
    config = evaluators(local_judge.base_url)["score"]
    previous = judge_partition(where, config, DAY, fresh_runtime(tmp_path / "first"), set()).result.rows
    path = data_root / "warehouse" / "judge_scores" / "evaluator=score" / f"date={DAY}"
    assert (path / "part.parquet").exists()

    worker = multiprocessing.get_context("spawn").Process(
        target=_judge_and_die, args=(str(data_root), local_judge.base_url)
    )
    worker.start()
    worker.join(120)
    assert worker.exitcode == -signal.SIGKILL
    left = [p.name for p in path.iterdir()]
    assert len(left) == 2 and any(name.startswith(".part-") for name in left)  # the half-written file, apart
    assert read_partition(where, "judge_scores", {"evaluator": "score", "date": DAY}).equals(previous)
    assert pl.read_parquet(table_glob(where, "judge_scores")).equals(previous)  # no reader sees the half file

    # The next run replaces it as usual (and the half file is cleaned up once it is old).
    again = judge_partition(where, config, DAY, fresh_runtime(tmp_path / "again"), set(), batch_rows=7)
    assert again.result.rows.drop(VARYING).equals(previous.drop(VARYING))


def test_a_partition_writer_that_fails_replaces_nothing(data_root):
    where = DataRoot.from_env(data_root)
    keys = {"date": DAY}
    write_partition(where, "traces", keys, day_traces(n=3))
    with pytest.raises(RuntimeError, match="judge died"):
        with partition_writer(where, "traces", keys, TRACE_SCHEMA) as out:
            out.write(day_traces(n=40))
            raise RuntimeError("judge died")
    assert read_partition(where, "traces", keys).equals(day_traces(n=3))
    assert [p.name for p in (data_root / "warehouse" / "traces" / f"date={DAY}").iterdir()] == ["part.parquet"]
    with partition_writer(where, "traces", keys, TRACE_SCHEMA) as out:
        pass
    assert read_partition(where, "traces", keys).height == 0  # no chunk: a 0-row file with the columns
    assert read_partition(where, "traces", keys).schema == conform(day_traces(n=1), TRACE_SCHEMA).schema


def test_the_cache_does_not_hold_written_replies_for_the_rest_of_the_day(tmp_path):
    """A day of a million calls held every reply it cached in memory until the day's end (~1 KB each)."""
    cache = ModelCache(tmp_path / "cache")
    keys = [f"{i:064x}" for i in range(50)]
    for key in keys:
        cache.put(key, {"content": "reply " + key})
    deadline = time.monotonic() + 30
    while cache._unwritten and time.monotonic() < deadline:  # the writer thread commits them in the background
        time.sleep(0.01)
    assert not cache._unwritten
    assert all(cache.get(key)["content"] == "reply " + key for key in keys)  # read from the file


def test_key_ordered_batches_never_split_a_group():
    from eval_platform.judging.key_batches import key_ordered_batches

    traces = day_traces(n=200)
    frames = [traces.slice(start, 13) for start in range(0, traces.height, 13)]
    key = lambda trace: trace["session_id"]  # noqa: E731  (None for a quarter of the traces)
    batches = list(key_ordered_batches(frames, key, rows=20))
    assert sum(b.height for b in batches) == traces.height
    seen: set[str] = set()
    for batch in batches:
        sessions = set(batch["session_id"].drop_nulls())
        assert not sessions & seen  # a session is whole in one batch
        seen |= sessions
    assert all(b.height >= 20 for b in batches[:-1])
    assert max(b.height for b in batches) < 20 + traces.height // 9 + 1  # a batch goes on by one group at most
    # no session first (in day order), then sessions in key order, each in day order
    ordered = pl.concat(batches)
    lone = ordered.filter(pl.col("session_id").is_null())["trace_id"].to_list()
    assert (
        lone
        == traces.filter(pl.col("session_id").is_null())["trace_id"].to_list()
        == ordered["trace_id"][: len(lone)].to_list()
    )
    assert ordered.drop_nulls("session_id")["session_id"].to_list() == sorted(traces["session_id"].drop_nulls())
