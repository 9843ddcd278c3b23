"""One bad byte costs one row, in every text format; a file with nothing to judge is quarantined;
the new-files sensor and ingest agree on which files belong to a day."""

from __future__ import annotations

import json

import dagster as dg

from eval_platform.ingest import read_trace_day
from eval_platform_tests.ingest.test_traces import DAY, TS, assert_conserved, write


def test_a_latin1_byte_in_one_csv_row_costs_only_that_row(tmp_path):
    lines = ["trace_id,timestamp,input,output"]
    lines += [f"t{i},{TS},question {i},answer {i}" for i in range(1, 51)]
    data = "\n".join(lines).encode()
    data = data.replace(b"answer 25\n", "r\xe9ponse 25\n".encode("latin-1"))  # data row 25 = line 26
    rel = write(tmp_path, "export.csv", data)
    day = read_trace_day(tmp_path, DAY)
    assert day.traces.height == 49
    (bad,) = day.quarantine.to_dicts()
    assert (bad["file"], bad["line"], bad["reason"]) == (rel, 26, "invalid_encoding")
    assert "t25" in bad["raw"] and "\ufffd" in bad["raw"]
    assert_conserved(day)


def test_a_bad_byte_inside_one_json_element_costs_only_that_element(tmp_path):
    rows = [{"trace_id": f"j{i}", "timestamp": TS, "input": "q", "output": f"a{i}"} for i in range(5)]
    data = json.dumps(rows).encode().replace(b'"a2"', b'"a\xff2"')
    write(tmp_path, "export.json", data)
    day = read_trace_day(tmp_path, DAY)
    assert sorted(day.traces["trace_id"]) == ["j0", "j1", "j3", "j4"]
    assert day.quarantine.select("line", "reason").rows() == [(3, "invalid_encoding")]


def test_a_file_without_input_or_output_is_quarantined_not_judged(tmp_path):
    rel = write(tmp_path, "no_text.csv", "\n".join(["trace_id,timestamp,user"] + [f"n{i},{TS},u{i}" for i in range(5)]))
    write(tmp_path, "fine.jsonl", json.dumps({"trace_id": "ok", "timestamp": TS, "output": "hi"}) + "\n")
    day = read_trace_day(tmp_path, DAY)
    assert day.traces["trace_id"].to_list() == ["ok"]
    rejected = day.quarantine.filter(day.quarantine["file"] == rel)
    assert rejected.height == 5 and set(rejected["reason"]) == {"missing_field:input_output"}
    assert rejected["raw"].str.contains("u3").any()  # each row kept with its raw text: nothing lost


def test_the_sensor_sees_every_file_ingest_reads(tmp_path):
    from eval_platform.defs.partitions import trace_days
    from eval_platform.defs.resources import WarehouseResource
    from eval_platform.defs.traces import build_new_trace_files_sensor
    from eval_platform.settings import DEFAULT_START_DATE

    new_trace_files_sensor = build_new_trace_files_sensor(trace_days(DEFAULT_START_DATE))

    day = "2026-11-10"
    warehouse = WarehouseResource(data_dir=str(tmp_path))
    with dg.instance_for_test() as instance:

        def tick(cursor):
            context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"warehouse": warehouse})
            return new_trace_files_sensor(context)

        start = tick(None)  # the first tick, before any file of the (past) day
        write(tmp_path, "top.jsonl", json.dumps({"trace_id": "a", "timestamp": TS, "input": "q"}) + "\n", day=day)
        first = tick(start.cursor)
        assert [r.partition_key for r in first.run_requests] == [day]
        nested = tmp_path / "traces" / day / "region-eu" / "more.jsonl"
        nested.parent.mkdir()
        nested.write_text(json.dumps({"trace_id": "b", "timestamp": TS, "input": "q"}) + "\n")
        second = tick(first.cursor)
        assert [r.partition_key for r in second.run_requests] == [day]  # a file in a subfolder of the day
        assert sorted(read_trace_day(tmp_path, day).traces["trace_id"]) == ["a", "b"]
        assert tick(second.cursor).run_requests == []


def test_the_sensor_says_why_a_folder_is_not_ingested(tmp_path, capsys):
    """It used to say "not a valid day partition (YYYY-MM-DD, not in the future)" for a day before the start date
    and for a folder that is not a day alike."""
    from eval_platform.defs.partitions import trace_days
    from eval_platform.defs.resources import WarehouseResource
    from eval_platform.defs.traces import build_new_trace_files_sensor
    from eval_platform.settings import DEFAULT_START_DATE

    new_trace_files_sensor = build_new_trace_files_sensor(trace_days(DEFAULT_START_DATE))

    for folder in ("2026-10-20", "11-12-2026"):
        write(tmp_path, "export.jsonl", json.dumps({"trace_id": "a", "timestamp": TS, "input": "q"}) + "\n", day=folder)
    warehouse = WarehouseResource(data_dir=str(tmp_path))
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, cursor=None, resources={"warehouse": warehouse})
        result = new_trace_files_sensor(context)
    assert result.run_requests == []
    said = capsys.readouterr().err
    assert "traces/2026-10-20/ is not ingested: 2026-10-20 is before EVAL_PLATFORM_START_DATE (2026-11-01)" in said
    assert "traces/11-12-2026/ is not ingested: '11-12-2026' is not a day (YYYY-MM-DD" in said
    assert "quarantine" in said and "not in the future" not in said


def test_a_folder_under_traces_that_is_not_a_day_is_named_in_a_warning_and_once_in_quarantine(data_root):
    """`11-13-2026` and `"2026-11-13 "` used to be ignored: the only sign was an empty 2026-11-13. Every day's
    ingest names them (WARNING) and rewrites their one quarantine partition: a re-run adds no row."""
    import logging

    import duckdb

    from eval_platform.definitions import build_definitions

    row = json.dumps({"trace_id": "a", "timestamp": TS, "input": "q", "output": "a"}) + "\n"
    write(data_root, "export.jsonl", row, day="2026-11-10")
    for folder in ("11-13-2026", "2026-11-13 "):
        write(data_root, "export.jsonl", row, day=folder)
    (data_root / "traces" / "loose.jsonl").write_text(row)
    defs = build_definitions(data_root)

    def stray_rows() -> list[tuple]:
        with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
            return conn.sql(
                "SELECT file, partition, reason FROM quarantine WHERE partition = 'not_a_day' ORDER BY file"
            ).fetchall()

    with dg.instance_for_test() as instance:

        def ingest(day: str) -> list[str]:
            result = dg.materialize(
                list(defs.assets), selection=["traces"], partition_key=day, instance=instance, resources=defs.resources
            )
            assert result.success
            return [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]

        for day in ("2026-11-10", "2026-11-10", "2026-11-13"):  # a re-run, then the day they read as
            warned = "\n".join(ingest(day))
            assert "the folder '11-13-2026' under traces/ is not a day" in warned
            assert "the folder '2026-11-13 ' under traces/ is not a day" in warned  # the space shown
            assert "rename it to '2026-11-13'" in warned
            assert "the file 'loose.jsonl' under traces/ is in no day folder" in warned
            assert stray_rows() == [
                ("traces/11-13-2026/", "not_a_day", "not_a_day_folder"),
                ("traces/2026-11-13 /", "not_a_day", "not_a_day_folder"),
                ("traces/loose.jsonl", "not_a_day", "not_a_day_folder"),
            ]
        assert "not read: traces/11-13-2026/, which reads as this day" in warned  # the empty day names them

        (data_root / "traces" / "11-13-2026").rename(data_root / "traces" / "2026-11-13")
        (data_root / "traces" / "2026-11-13 ").rename(data_root / "traces" / "2026-11-13" / "more")
        (data_root / "traces" / "loose.jsonl").unlink()
        assert "not a day" not in "\n".join(ingest("2026-11-13"))
        assert stray_rows() == []  # fixed: gone from quarantine at the next ingest
