"""Files as they arrive, through the real `new_trace_files_sensor` (evaluated with `build_sensor_context` on a real
instance in a temp DAGSTER_HOME) and the real `traces` asset: today's folder is a day like the others, a file
still being written is read only whole, the cursor does not grow with the files, and a late file into a day
re-ingests the next day only when that day holds spans of its traces (issue 34)."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.ingest.traces import span_rows
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import quarantine_keys, read_partition
from eval_platform_tests.ingest.test_missing_root import AGENT, _shift, _split, _take, _write
from eval_platform_tests.ingest.test_otel_recorded import recorded_lines, recording_day

SETTLE_S = 30


def _line(trace_id: str, day: str, output: str = "fine") -> str:
    return json.dumps({"trace_id": trace_id, "timestamp": f"{day}T10:00:00Z", "input": "q", "output": output}) + "\n"


def _settled(path: Path) -> None:
    """As if the file's last write was a minute ago (longer than the settle interval)."""
    then = time.time() - 2 * SETTLE_S
    os.utime(path, (then, then))


@pytest.fixture
def project(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_FILE_SETTLE_S", str(SETTLE_S))
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, build_definitions(data_root), instance


class Ticks:
    def __init__(self, defs, instance) -> None:
        self.defs, self.instance, self.cursor = defs, instance, None

    def __call__(self) -> list[str]:
        """One evaluation of the sensor after the previous one: the days it requests."""
        context = dg.build_sensor_context(
            instance=self.instance, cursor=self.cursor, resources={"warehouse": self.defs.resources["warehouse"]}
        )
        result = self.defs.resolve_sensor_def("new_trace_files_sensor")(context)
        self.cursor = result.cursor
        self.last = result.run_requests
        return sorted(r.partition_key for r in result.run_requests)


def _ingest(defs, instance, day: str) -> dg.ExecuteInProcessResult:
    result = dg.materialize(
        assets=list(defs.assets), selection=["traces"], partition_key=day, instance=instance, resources=defs.resources
    )
    assert result.success
    return result


def _trace_ids(root: Path, day: str) -> list[str]:
    found = read_partition(DataRoot.from_env(root), "traces", {"date": day}, columns=["trace_id"])
    return [] if found is None else sorted(found["trace_id"])


def _quarantine(root: Path, day: str) -> list[tuple]:
    found = read_partition(DataRoot.from_env(root), "quarantine", quarantine_keys("traces", day))
    return [] if found is None else sorted(zip(found["file"], found["reason"], strict=True))


def test_todays_files_are_ingested_today_and_yesterdays_late_files_land_in_yesterday(project, capsys):
    root, defs, instance = project
    now = datetime.now(UTC)
    today, yesterday = now.date().isoformat(), (now - timedelta(days=1)).date().isoformat()
    tick = Ticks(defs, instance)
    assert tick() == []  # the first tick, nothing written yet
    (root / "traces" / today).mkdir(parents=True)
    (root / "traces" / today / "a.jsonl").write_text(_line("today-1", today))
    _settled(root / "traces" / today / "a.jsonl")
    assert tick() == [today]  # was: no request, "not a valid day partition ... not in the future"
    said = capsys.readouterr().err
    assert "not a day partition" not in said and "not in the future" not in said
    _ingest(defs, instance, today)
    assert _trace_ids(root, today) == ["today-1"]
    (root / "traces" / yesterday).mkdir(parents=True)
    (root / "traces" / yesterday / "late.jsonl").write_text(_line("late-1", yesterday))
    _settled(root / "traces" / yesterday / "late.jsonl")
    assert tick() == [yesterday]
    _ingest(defs, instance, yesterday)
    assert _trace_ids(root, yesterday) == ["late-1"] and _trace_ids(root, today) == ["today-1"]
    tomorrow = (now + timedelta(days=1)).date().isoformat()  # a writer ahead of the UTC clock: not yet
    (root / "traces" / tomorrow).mkdir(parents=True)
    (root / "traces" / tomorrow / "early.jsonl").write_text(_line("early", tomorrow))
    _settled(root / "traces" / tomorrow / "early.jsonl")
    assert tick() == []
    assert f"traces/{tomorrow}/ is not ingested yet" in capsys.readouterr().err
    assert tomorrow not in json.loads(tick.cursor)["days"]  # so it is requested once it is a partition


def test_a_file_written_in_two_halves_is_requested_once_whole_and_a_cut_row_is_never_read(project):
    root, defs, instance = project
    day = datetime.now(UTC).date().isoformat()
    folder = root / "traces" / day
    folder.mkdir(parents=True)
    tick = Ticks(defs, instance)
    assert tick() == []
    rows = [f"c{i},{day}T10:00:0{i}Z,question {i},the whole answer number {i}\n" for i in range(3)]
    text = "trace_id,timestamp,input,output\n" + "".join(rows)
    cut = text.index("whole answer number 2")
    export = folder / "export.csv"
    export.write_text(text[:cut])  # the first half, its last row cut mid-sentence
    assert tick() == []  # still being written: not requested
    other = folder / "other.jsonl"  # another file of the day arrives and settles: the day is ingested
    other.write_text(_line("j1", day))
    _settled(other)
    assert tick() == [day]
    _ingest(defs, instance, day)
    assert _trace_ids(root, day) == ["c0", "c1", "j1"]  # the cut row neither ingested ...
    assert _quarantine(root, day) == []  # ... nor quarantined: it is not finished
    with export.open("a") as handle:  # the second half
        handle.write(text[cut:])
    assert tick() == []  # just written: not yet
    _settled(export)
    assert tick() == [day]
    _ingest(defs, instance, day)
    assert _trace_ids(root, day) == ["c0", "c1", "c2", "j1"]
    outputs = read_partition(DataRoot.from_env(root), "traces", {"date": day}, columns=["trace_id", "output"])
    assert dict(outputs.rows())["c2"] == "the whole answer number 2"
    # a writer that stopped for good: its file is final, the cut row is quarantined with its reason, never a trace
    stopped = folder / "stopped.jsonl"
    stopped.write_text(_line("s1", day) + _line("s2", day)[:25])
    _settled(stopped)
    assert tick() == [day]
    _ingest(defs, instance, day)
    assert "s2" not in _trace_ids(root, day) and "s1" in _trace_ids(root, day)
    assert _quarantine(root, day) == [(f"traces/{day}/stopped.jsonl", "truncated_row")]


def test_a_file_named_tmp_or_partial_is_read_once_renamed(project):
    root, defs, instance = project
    day = datetime.now(UTC).date().isoformat()
    folder = root / "traces" / day
    folder.mkdir(parents=True)
    tick = Ticks(defs, instance)
    assert tick() == []
    for name in ("a.jsonl.tmp", "b.jsonl.partial"):
        (folder / name).write_text(_line(name[0], day)[:20])
        _settled(folder / name)  # however long the writer takes
    assert tick() == []
    _ingest(defs, instance, day)
    assert _trace_ids(root, day) == [] and _quarantine(root, day) == []  # not read, not "unsupported_file_type"
    for name in ("a.jsonl.tmp", "b.jsonl.partial"):
        (folder / name).write_text(_line(name[0], day))
        _settled(folder / name)
        (folder / name).rename(folder / name.rsplit(".", 1)[0])
    assert tick() == [day]
    _ingest(defs, instance, day)
    assert _trace_ids(root, day) == ["a", "b"]


def test_the_cursor_does_not_grow_with_the_files(project):
    root, defs, instance = project
    day = datetime.now(UTC).date().isoformat()
    folder = root / "traces" / day
    folder.mkdir(parents=True)
    tick = Ticks(defs, instance)
    tick()
    sizes = []
    for batch in range(3):
        for i in range(200):
            path = folder / f"minute-{batch:02d}-{i:04d}.jsonl"
            path.write_text(_line(f"t{batch}-{i}", day))
            _settled(path)
        assert tick() == [day]
        sizes.append(len(tick.cursor))
    assert sizes[0] == sizes[1] == sizes[2] < 500  # was: every file's name and state, 600 of them at the end
    assert tick() == []


def test_a_late_file_into_a_day_reingests_the_next_day_only_when_it_holds_spans_of_its_traces(project):
    root, defs, instance = project
    day = recording_day("langfuse")
    after = _shift(day, 1)
    lines, root_lines, _ = _split(recorded_lines("langfuse", "traces.jsonl"), AGENT)
    others, agent_spans = _take(lines, lambda span: span["traceId"] == AGENT)
    _write(root, day, others)  # the day without the agent trace
    _write(root, after, root_lines)  # its root is exported the next day
    (root / "traces" / after / "own.jsonl").write_text(_line("next-day-own", after))
    for path in (root / "traces").rglob("*.jsonl"):
        _settled(path)
    tick = Ticks(defs, instance)
    assert tick() == []  # past days are the starting point (first tick)
    _ingest(defs, instance, day)
    _ingest(defs, instance, after)
    assert tick() == []
    # a late file of plain traces into the day: the day, not the next one (it was re-ingested and re-judged too)
    (root / "traces" / day / "late.jsonl").write_text(_line("late-plain", day))
    _settled(root / "traces" / day / "late.jsonl")
    assert tick() == [day]
    _ingest(defs, instance, day)
    assert tick() == []
    ingests_after = len(instance.fetch_materializations(dg.AssetKey("traces"), limit=100).records)
    # a late file holding the agent trace's other spans: the next day, where its root is, takes them
    _write(root, day, agent_spans, name="late-spans.jsonl")
    _settled(root / "traces" / day / "late-spans.jsonl")
    assert tick() == [day]
    _ingest(defs, instance, day)
    assert tick() == [after]
    assert tick.last[0].tags["eval_platform/spans_from"] == day
    _ingest(defs, instance, after)
    traces = read_partition(DataRoot.from_env(root), "traces", {"date": after})
    assert traces is not None
    spans = span_rows(traces)  # the `spans` view's rows: spans are stored in their trace's row
    assert (spans["trace_id"] == AGENT).sum() == 1 + sum(
        span["traceId"] == AGENT
        for line in agent_spans
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    )
    assert tick() == []  # the next day took them: nothing more
    assert len(instance.fetch_materializations(dg.AssetKey("traces"), limit=100).records) == ingests_after + 2


def test_the_new_files_sensor_and_the_automation_ship_on_and_the_documented_command_turns_the_sensor_off(
    data_root, monkeypatch
):
    """Out of the box nothing was scored: the sensor shipped stopped. Now a root made by `eval-platform init` has
    it on (and the automation), the nightly schedule off, and the command the docs give turns the sensor off."""
    import re
    import subprocess
    import sys

    from eval_platform.doctor import _automation_states
    from eval_platform.init_root import init_root
    from eval_platform_tests.conftest import docs_text

    init_root(data_root, ["helpfulness"], "openai/gpt-4o-mini", "OPENAI_API_KEY")
    monkeypatch.setenv("DAGSTER_HOME", str(data_root / "dagster_home"))
    states = {name: on for _, name, on in _automation_states(data_root)}
    assert (states["new_trace_files_sensor"], states["judge_scores_automation"]) == ("on", "on")
    assert states["daily_ingest_schedule"] == "off"
    stop = re.search(r"`DAGSTER_HOME=\$PWD/data/dagster_home \.venv/bin/(dagster sensor stop [^`]+)`", docs_text())
    assert stop is not None and "new_trace_files_sensor" in stop.group(1)
    env = {
        "PATH": str(Path(sys.executable).parent),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DAGSTER_HOME": str(data_root / "dagster_home"),
        "EVAL_PLATFORM_DATA_DIR": str(data_root),
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), *stop.group(1).split()[1:]],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    states = {name: on for _, name, on in _automation_states(data_root)}
    assert (states["new_trace_files_sensor"], states["judge_scores_automation"]) == ("off", "on")
