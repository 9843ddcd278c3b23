"""Trace ingest from JSONL, JSON, CSV and Parquet: what lands in `traces`, what in quarantine, and why."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval_platform.ingest import read_trace_day
from eval_platform.schemas import QUARANTINE_SCHEMA, TRACE_SCHEMA

DAY = "2026-03-04"
TS = f"{DAY}T10:00:00Z"


def write(root: Path, name: str, content: str | bytes, day: str = DAY) -> str:
    path = root / "traces" / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return f"traces/{day}/{name}"


def jsonl(*rows: object) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


def good(trace_id: str, **fields: object) -> dict:
    return {"trace_id": trace_id, "timestamp": TS, "input": "q", "output": "a", **fields}


def by_id(day) -> dict[str, dict]:
    return {row["trace_id"]: row for row in day.traces.to_dicts()}


def assert_conserved(day) -> None:
    counts = day.counts
    assert counts["read"] == counts["accepted"] + counts["quarantined"]
    assert counts["accepted"] == day.traces.height
    assert counts["quarantined"] == day.quarantine.height
    assert sum(counts["by_reason"].values()) == counts["quarantined"]
    for per_file in counts["files"].values():
        assert per_file["read"] == per_file["accepted"] + per_file["quarantined"]


def test_missing_day_folder_is_an_empty_day(tmp_path):
    day = read_trace_day(tmp_path, DAY)
    assert day.traces.height == 0 and day.quarantine.height == 0
    assert day.traces.schema == TRACE_SCHEMA
    assert day.quarantine.schema == QUARANTINE_SCHEMA
    assert day.files == [] and day.counts["read"] == 0


def test_a_malformed_day_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        read_trace_day(tmp_path, "2026-3-4")


def test_every_bad_jsonl_row_is_quarantined_with_file_line_and_reason(tmp_path):
    rel = write(
        tmp_path,
        "app.jsonl",
        jsonl(
            good("ok-1"),
            '{"trace_id": "broken", "timestamp": ',
            {"timestamp": TS, "input": "no id"},
            {"trace_id": "", "timestamp": TS},
            {"trace_id": "no-ts"},
            {"trace_id": "bad-ts", "timestamp": "last tuesday"},
            good("bad-latency", latency_ms="fast"),
            good("bad-tokens", completion_tokens=2.5),
            good("neg", prompt_tokens=-1),
            good("neg-cost", cost_usd=-0.5),
            good("ok-1", output="again"),
            [1, 2, 3],
            "42",
            good("meta", metadata=["not", "an", "object"]),
            good("ctx", context=7),
            good("model-type", model=["a"]),
            {"trace_id": {"id": 1}, "timestamp": TS},
            good("ok-2"),
        ),
    )
    day = read_trace_day(tmp_path, DAY)

    assert sorted(by_id(day)) == ["ok-1", "ok-2"]
    assert by_id(day)["ok-1"]["output"] == "a"  # the first occurrence wins
    got = [(row["line"], row["reason"]) for row in day.quarantine.to_dicts()]
    assert got == [
        (2, "invalid_json"),
        (3, "missing_field:trace_id"),
        (4, "missing_field:trace_id"),
        (5, "missing_field:timestamp"),
        (6, "invalid_timestamp"),
        (7, "invalid_type:latency_ms"),
        (8, "invalid_type:completion_tokens"),
        (9, "negative_value:prompt_tokens"),
        (10, "negative_value:cost_usd"),
        (11, "duplicate_trace_id"),
        (12, "not_an_object"),
        (13, "not_an_object"),
        (14, "invalid_type:metadata"),
        (15, "invalid_type:context"),
        (16, "invalid_type:model"),
        (17, "invalid_type:trace_id"),
    ]
    quarantine = day.quarantine.to_dicts()
    assert {row["file"] for row in quarantine} == {rel}
    assert {row["source"] for row in quarantine} == {"traces"}
    assert {row["partition"] for row in quarantine} == {DAY}
    for row in quarantine:
        assert row["detail"].startswith(f"{rel} line {row['line']}: ")
        assert row["raw"] and row["quarantined_at"] is not None
    details = {row["reason"]: row["detail"] for row in quarantine}
    assert "'latency_ms'" in details["invalid_type:latency_ms"] and '"fast"' in details["invalid_type:latency_ms"]
    assert "line 1" in details["duplicate_trace_id"]
    assert quarantine[0]["raw"] == '{"trace_id": "broken", "timestamp": '
    assert day.counts["files"][rel] == {
        "read": 18,
        "accepted": 2,
        "quarantined": 16,
        "by_reason": day.counts["by_reason"],
    }
    assert_conserved(day)


def test_blank_lines_are_not_rows_and_line_numbers_stay_physical(tmp_path):
    write(tmp_path, "a.jsonl", "\n" + json.dumps(good("t1")) + "\r\n\n   \n" + json.dumps({"trace_id": "t2"}) + "\n")
    day = read_trace_day(tmp_path, DAY)
    assert by_id(day)["t1"]["source_line"] == 2
    assert day.quarantine["line"].to_list() == [5]
    assert day.counts["read"] == 2


def test_trace_frame_is_exactly_the_canonical_schema(tmp_path):
    rel = write(tmp_path, "a.jsonl", jsonl(good("t1", latency_ms=12, prompt_tokens="7", cost_usd="0.25")))
    day = read_trace_day(tmp_path, DAY)
    assert day.traces.schema == TRACE_SCHEMA
    row = day.traces.row(0, named=True)
    assert (row["date"], row["source_file"], row["source_line"]) == (DAY, rel, 1)
    assert (row["latency_ms"], row["prompt_tokens"], row["cost_usd"]) == (12.0, 7, 0.25)
    assert row["metadata"] == "{}"
    assert row["input_messages"] is None and row["context"] is None and row["spans"] is None
    assert day.files == [rel]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-03-04T10:00:00Z", datetime(2026, 3, 4, 10, tzinfo=UTC)),
        ("2026-03-04T12:30:00+02:30", datetime(2026, 3, 4, 10, tzinfo=UTC)),
        ("2026-03-04 10:00:00.250", datetime(2026, 3, 4, 10, 0, 0, 250_000, tzinfo=UTC)),
        ("2026-03-04T10:00:00.123456789Z", datetime(2026, 3, 4, 10, 0, 0, 123_456, tzinfo=UTC)),
        (1772618400, datetime(2026, 3, 4, 10, tzinfo=UTC)),
        (1772618400.5, datetime(2026, 3, 4, 10, 0, 0, 500_000, tzinfo=UTC)),
        (1772618400123, datetime(2026, 3, 4, 10, 0, 0, 123_000, tzinfo=UTC)),
        ("1772618400", datetime(2026, 3, 4, 10, tzinfo=UTC)),
    ],
)
def test_timestamps_are_iso_8601_or_epoch_and_stored_in_utc(tmp_path, value, expected):
    write(tmp_path, "a.jsonl", jsonl({"trace_id": "t", "timestamp": value, "input": "q"}))
    day = read_trace_day(tmp_path, DAY)
    assert day.traces["timestamp"].to_list() == [expected]


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01T00:00:00Z", True, "nan", [2026]])
def test_unparseable_timestamps_are_quarantined(tmp_path, value):
    write(tmp_path, "a.jsonl", jsonl({"trace_id": "t", "timestamp": value}))
    day = read_trace_day(tmp_path, DAY)
    assert day.quarantine["reason"].to_list() == ["invalid_timestamp"]
    assert "'timestamp'" in day.quarantine["detail"][0]


def test_field_aliases(tmp_path):
    write(
        tmp_path,
        "a.jsonl",
        jsonl(
            {
                "id": "alias-1",
                "start_time": "2026-03-04T10:00:00Z",
                "end_time": "2026-03-04T10:00:01.5Z",
                "prompt": "question?",
                "completion": "answer.",
                "expected": "gold",
                "contexts": ["doc"],
                "project": "proj",
                "model_name": "m-1",
                "experiment": "exp",
                "usage": {"prompt_tokens": 11, "completion_tokens": 22},
                "cost": 0.001,
                "session_id": "s-9",
                "metadata": {"k": "v"},
            },
            {
                "traceId": "alias-2",
                "created_at": TS,
                "duration_ms": 5,
                "input_tokens": 1,
                "output_tokens": 2,
                "response": "r",
            },
            {"trace_id": "canonical-wins", "id": "ignored", "timestamp": TS, "start_time": "garbage"},
        ),
    )
    rows = by_id(read_trace_day(tmp_path, DAY))
    one = rows["alias-1"]
    assert (one["input"], one["output"], one["expected_output"]) == ("question?", "answer.", "gold")
    assert json.loads(one["context"]) == ["doc"]
    assert (one["project_id"], one["model"], one["experiment_id"]) == ("proj", "m-1", "exp")
    assert (one["prompt_tokens"], one["completion_tokens"], one["cost_usd"]) == (11, 22, 0.001)
    assert one["latency_ms"] == 1500.0
    assert json.loads(one["metadata"]) == {"k": "v", "session_id": "s-9"}
    two = rows["alias-2"]
    assert (two["latency_ms"], two["prompt_tokens"], two["completion_tokens"], two["output"]) == (5.0, 1, 2, "r")
    assert "canonical-wins" in rows


def test_chat_messages_are_kept_as_json_and_rendered_as_text(tmp_path):
    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {"url": "x"}}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "lookup", "arguments": '{"q": 1}'}}],
        },
        {"role": "tool", "content": "42"},
    ]
    write(
        tmp_path,
        "a.jsonl",
        jsonl(
            good(
                "single",
                input=[{"role": "user", "content": "Only me"}],
                output=[{"role": "assistant", "content": "Sure"}],
            ),
            good(
                "multi",
                input=conversation,
                output=[{"role": "assistant", "content": [{"type": "text", "content": "Done"}]}],
            ),
            good(
                "parts",
                input={"messages": [{"role": "user", "content": "wrapped"}]},
                output=[
                    {
                        "role": "assistant",
                        "parts": [{"type": "reasoning", "content": "hmm"}, {"type": "text", "content": "Yes"}],
                    }
                ],
            ),
            good("two-choices", output=[{"role": "assistant", "content": "A"}, {"role": "assistant", "content": "B"}]),
            good("plain-object", input={"question": "q1", "k": 2}),
        ),
    )
    rows = by_id(read_trace_day(tmp_path, DAY))
    assert rows["single"]["input"] == "Only me" and rows["single"]["output"] == "Sure"
    assert json.loads(rows["single"]["input_messages"]) == [{"role": "user", "content": "Only me"}]
    assert (
        rows["multi"]["input"]
        == 'system: Be brief.\nuser: Hi\n[image_url]\nassistant: [tool_call lookup({"q": 1})]\ntool: 42'
    )
    assert json.loads(rows["multi"]["input_messages"]) == conversation
    assert rows["multi"]["output"] == "Done"
    assert rows["parts"]["input"] == "wrapped"
    assert rows["parts"]["output"] == "Yes"  # reasoning stays in output_messages only
    assert "hmm" in rows["parts"]["output_messages"]
    assert rows["two-choices"]["output"] == "assistant: A\nassistant: B"
    assert json.loads(rows["plain-object"]["input"]) == {"question": "q1", "k": 2}
    assert rows["plain-object"]["input_messages"] is None


def test_context_and_metadata_shapes(tmp_path):
    write(
        tmp_path,
        "a.jsonl",
        jsonl(
            good("ctx-str", context="one document"),
            good("ctx-docs", context=["a", {"page_content": "b"}, {"id": "d3", "score": 0.5}]),
            good("meta-str", metadata='{"from": "string"}'),
            good("meta-none", metadata=None),
            good("meta-bad", metadata="not json"),
        ),
    )
    day = read_trace_day(tmp_path, DAY)
    rows = by_id(day)
    assert json.loads(rows["ctx-str"]["context"]) == ["one document"]
    assert json.loads(rows["ctx-docs"]["context"]) == ["a", "b", '{"id": "d3", "score": 0.5}']
    assert json.loads(rows["meta-str"]["metadata"]) == {"from": "string"}
    assert rows["meta-none"]["metadata"] == "{}"
    assert day.quarantine["reason"].to_list() == ["invalid_type:metadata"]


def test_csv_rows_count_the_header_as_line_one(tmp_path):
    csv_text = (
        "trace_id,timestamp,input,output,metadata,context,latency_ms,usage.prompt_tokens,metadata.team\n"
        'c1,2026-03-04T10:00:00+00:00,"two\nlines",,"{""a"": 1}","[""d1"", ""d2""]",12.5,7,search\n'
        "c2,,x,y,,,,,\n"
        "c3,2026-03-04T10:00:00Z,x,y,,,slow,,\n"
        "c4,2026-03-04T10:00:00Z,too,few\n"
        "\n"
        'c5,1772618400000," padded ","[{""role"": ""assistant"", ""content"": ""hi""}]",,plain context,,-3,\n'
        "c6,2026-03-04T10:00:00Z, keep spaces ,  ,,,,,\n"
    )
    rel = write(tmp_path, "export.csv", csv_text)
    day = read_trace_day(tmp_path, DAY)
    rows = by_id(day)
    c1 = rows["c1"]
    assert (c1["input"], c1["output"], c1["latency_ms"], c1["prompt_tokens"]) == ("two\nlines", "", 12.5, 7)
    assert json.loads(c1["metadata"]) == {"a": 1, "team": "search"}
    assert json.loads(c1["context"]) == ["d1", "d2"]
    assert c1["source_line"] == 2
    assert (rows["c6"]["input"], rows["c6"]["output"], rows["c6"]["source_line"]) == (" keep spaces ", "  ", 7)
    got = [(row["line"], row["reason"]) for row in day.quarantine.to_dicts()]
    assert got == [
        (3, "missing_field:timestamp"),
        (4, "invalid_type:latency_ms"),
        (5, "malformed_csv_row"),
        (6, "negative_value:prompt_tokens"),
    ]
    malformed = day.quarantine.to_dicts()[2]
    assert malformed["raw"] == "c4,2026-03-04T10:00:00Z,too,few"
    assert malformed["detail"] == f"{rel} line 5: the row has 4 fields but the header has 9"
    assert_conserved(day)


def test_csv_chat_cells_are_decoded(tmp_path):
    write(
        tmp_path,
        "e.csv",
        'trace_id,timestamp,output\nx,2026-03-04T10:00:00Z,"[{""role"": ""assistant"", ""content"": ""hi""}]"\n',
    )
    row = read_trace_day(tmp_path, DAY).traces.row(0, named=True)
    assert row["output"] == "hi" and row["output_messages"] is not None


def test_parquet_rows_with_typed_columns(tmp_path):
    table = pa.table(
        {
            "trace_id": ["p1", "p2", None, "p4"],
            "timestamp": pa.array([datetime(2026, 3, 4, 10, tzinfo=UTC)] * 4, pa.timestamp("ms", tz="UTC")),
            "input": ["i1", "i2", "i3", "i4"],
            "usage": [{"prompt_tokens": 3, "completion_tokens": 4}] * 3
            + [{"prompt_tokens": -1, "completion_tokens": 4}],
            "metadata": ['{"k": 1}', None, None, None],
        }
    )
    path = tmp_path / "traces" / DAY / "export.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(table, path)
    day = read_trace_day(tmp_path, DAY)
    rows = by_id(day)
    assert rows["p1"]["timestamp"] == datetime(2026, 3, 4, 10, tzinfo=UTC)
    assert (rows["p1"]["prompt_tokens"], rows["p1"]["completion_tokens"]) == (3, 4)
    assert json.loads(rows["p1"]["metadata"]) == {"k": 1}
    assert [(row["line"], row["reason"]) for row in day.quarantine.to_dicts()] == [
        (3, "missing_field:trace_id"),
        (4, "negative_value:prompt_tokens"),
    ]
    assert "row 3" in day.quarantine["detail"][0]
    assert_conserved(day)


def test_a_corrupt_parquet_file_is_one_quarantine_row(tmp_path):
    rel = write(tmp_path, "broken.parquet", b"PAR1 this is not really parquet")
    day = read_trace_day(tmp_path, DAY)
    row = day.quarantine.row(0, named=True)
    assert (row["file"], row["line"], row["reason"]) == (rel, None, "unreadable_file")
    assert rel in row["detail"]
    assert day.counts["read"] == 1 and day.counts["quarantined"] == 1


def test_json_array_elements_are_rows(tmp_path):
    rel = write(tmp_path, "export.json", json.dumps([good("j1"), "oops", {"trace_id": "j3"}, good("j4")]))
    day = read_trace_day(tmp_path, DAY)
    assert sorted(by_id(day)) == ["j1", "j4"]
    assert by_id(day)["j4"]["source_line"] == 4
    assert [(row["line"], row["reason"]) for row in day.quarantine.to_dicts()] == [
        (2, "not_an_object"),
        (3, "missing_field:timestamp"),
    ]
    assert day.quarantine["detail"][0].startswith(f"{rel} element 2: ")
    assert day.quarantine["raw"][0] == '"oops"'


def test_json_wrappers_and_single_objects(tmp_path):
    write(tmp_path, "a.json", json.dumps({"data": [good("w1"), good("w2")], "meta": {"page": 1}}))
    write(tmp_path, "b.json", json.dumps(good("single")))
    assert sorted(by_id(read_trace_day(tmp_path, DAY))) == ["single", "w1", "w2"]


def test_an_invalid_json_file_is_one_quarantine_row_naming_the_position(tmp_path):
    rel = write(tmp_path, "broken.json", '[{"trace_id": "x", "timestamp": "2026-03-04T10:00:00Z"},\n {"trace_id": ]')
    write(tmp_path, "empty.json", "")
    day = read_trace_day(tmp_path, DAY)
    rows = day.quarantine.to_dicts()
    assert [(row["file"], row["line"], row["reason"]) for row in rows] == [
        (rel, None, "invalid_json"),
        (f"traces/{DAY}/empty.json", None, "invalid_json"),
    ]
    assert "line 2" in rows[0]["detail"]
    assert rows[0]["raw"].startswith('[{"trace_id": "x"')
    assert_conserved(day)


def test_unsupported_files_are_reported_and_hidden_files_skipped(tmp_path):
    rel = write(tmp_path, "notes.txt", "just some notes")
    write(tmp_path, ".DS_Store", b"\x00\x01")
    write(tmp_path, "good.jsonl", jsonl(good("t1")))
    day = read_trace_day(tmp_path, DAY)
    assert day.files == [f"traces/{DAY}/good.jsonl", rel]
    row = day.quarantine.row(0, named=True)
    assert (row["file"], row["line"], row["reason"], row["raw"]) == (
        rel,
        None,
        "unsupported_file_type",
        "just some notes",
    )
    assert day.traces.height == 1
    assert_conserved(day)


def test_duplicates_across_files_keep_the_first_in_file_order(tmp_path):
    write(tmp_path, "a.jsonl", jsonl(good("dup", output="first")))
    rel_b = write(tmp_path, "b.csv", "trace_id,timestamp,output\ndup,2026-03-04T11:00:00Z,second\n")
    day = read_trace_day(tmp_path, DAY)
    assert by_id(day)["dup"]["output"] == "first"
    row = day.quarantine.row(0, named=True)
    assert (row["file"], row["line"], row["reason"]) == (rel_b, 2, "duplicate_trace_id")
    assert f"traces/{DAY}/a.jsonl line 1" in row["detail"]


def test_gzip_exports_and_bad_encoding(tmp_path):
    write(tmp_path, "a.jsonl.gz", gzip.compress(jsonl(good("gz-1")).encode()))
    write(
        tmp_path,
        "b.jsonl",
        b'{"trace_id": "caf\xe9", "timestamp": "2026-03-04T10:00:00Z"}\n' + jsonl(good("ok")).encode(),
    )
    write(tmp_path, "c.jsonl.gz", b"not gzip at all")
    day = read_trace_day(tmp_path, DAY)
    assert sorted(by_id(day)) == ["gz-1", "ok"]
    assert [(row["line"], row["reason"]) for row in day.quarantine.to_dicts()] == [
        (1, "invalid_encoding"),
        (None, "unreadable_file"),
    ]
    assert_conserved(day)


def test_raw_text_is_truncated_to_10k_characters(tmp_path):
    write(tmp_path, "a.jsonl", jsonl({"trace_id": "big", "input": "x" * 50_000}))
    raw = read_trace_day(tmp_path, DAY).quarantine["raw"][0]
    assert len(raw) == 10_000 and raw.startswith('{"trace_id": "big"')


def test_quarantined_at_can_be_fixed(tmp_path):
    write(tmp_path, "a.jsonl", "nope\n")
    now = datetime(2026, 3, 5, tzinfo=UTC)
    assert read_trace_day(tmp_path, DAY, now=now).quarantine["quarantined_at"].to_list() == [now]


def test_files_in_subfolders_are_read_in_path_order(tmp_path):
    write(tmp_path, "z.jsonl", jsonl(good("top")))
    write(tmp_path, "batch/a.jsonl", jsonl(good("nested")))
    day = read_trace_day(tmp_path, DAY)
    assert day.files == [f"traces/{DAY}/batch/a.jsonl", f"traces/{DAY}/z.jsonl"]
    assert day.traces["trace_id"].to_list() == ["nested", "top"]


def test_session_and_user_fields_fill_their_columns(tmp_path):
    write(tmp_path, "a.jsonl", jsonl(good("t1", session_id="s-1", userId="u-1"), good("t2", sessionId=7)))
    write(tmp_path, "b.csv", "trace_id,timestamp,input,output,session,user_id\nt3,2026-03-04T10:00:00Z,q,a,s-9,\n")
    rows = by_id(read_trace_day(tmp_path, DAY))
    assert [(rows[t]["session_id"], rows[t]["user_id"]) for t in ("t1", "t2", "t3")] == [
        ("s-1", "u-1"),
        ("7", None),
        ("s-9", None),
    ]
    assert json.loads(rows["t1"]["metadata"]) == {"session_id": "s-1", "user_id": "u-1"}  # kept there too, as before
