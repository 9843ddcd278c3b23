"""A trace whose root span never arrives (the Langfuse SDK exporting only its own spans, an instrumentation that
never ends its run's span) is taken by the next day's ingest as a partial trace (`missing_root`), once, and its
spans leave the quarantine; a root arriving after that is quarantined `late_root`. On the recorded Langfuse
output, through the real `traces` asset."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import polars as pl

from eval_platform.definitions import build_definitions
from eval_platform.ingest import read_trace_day
from eval_platform.ingest.traces import span_rows
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import quarantine_keys, read_partition
from eval_platform_tests.ingest.test_otel_recorded import recorded_lines, recording_day, scenarios

FOLDER = "langfuse"
AGENT = scenarios(FOLDER)["agent"][0]  # agent_turn (the app's root span) > weather-assistant > model and tool calls


def _shift(day: str, days: int) -> str:
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()


def _take(lines: list[bytes], taken) -> tuple[list[bytes], list[bytes]]:
    """The lines without the spans for which `taken(span)` is true, and the lines holding only those."""
    kept, out = [], []
    for line in lines:
        request, alone = json.loads(line), json.loads(line)
        for resource, resource_alone in zip(request["resourceSpans"], alone["resourceSpans"], strict=True):
            for scope, scope_alone in zip(resource["scopeSpans"], resource_alone["scopeSpans"], strict=True):
                chosen = [taken(s) for s in scope["spans"]]
                scope_alone["spans"] = [s for s, c in zip(scope["spans"], chosen, strict=True) if c]
                scope["spans"] = [s for s, c in zip(scope["spans"], chosen, strict=True) if not c]
        kept.append(json.dumps(request).encode())
        if any(scope["spans"] for resource in alone["resourceSpans"] for scope in resource["scopeSpans"]):
            out.append(json.dumps(alone).encode())
    return kept, out


def _split(lines: list[bytes], trace_id: str) -> tuple[list[bytes], list[bytes], str]:
    """The lines without the root span of `trace_id`, the lines holding only that root, and the root's id."""
    kept, roots = _take(lines, lambda s: s["traceId"] == trace_id and not s.get("parentSpanId"))
    root_id = json.loads(roots[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"]
    return kept, roots, root_id


def _write(root: Path, day: str, lines: list[bytes], name: str = "traces.jsonl") -> None:
    (root / "traces" / day).mkdir(parents=True, exist_ok=True)
    (root / "traces" / day / name).write_bytes(b"\n".join(lines) + b"\n" if lines else b"")


def _spans_of(lines: list[bytes], trace_id: str) -> int:
    return sum(
        s["traceId"] == trace_id
        for line in lines
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for s in scope["spans"]
    )


def _materialize(defs, day: str, instance) -> None:
    result = dg.materialize(
        assets=list(defs.assets), selection=["traces"], partition_key=day, instance=instance, resources=defs.resources
    )
    assert result.success


def _state(root: Path, days: list[str]) -> dict[str, list[dict]]:
    state = {}
    for day in days:
        traces = read_partition(DataRoot.from_env(root), "traces", {"date": day})
        quarantine = read_partition(DataRoot.from_env(root), "quarantine", quarantine_keys("traces", day))
        state[f"traces {day}"] = (
            [] if traces is None else traces.drop("ingested_at", strict=False).sort("trace_id").to_dicts()
        )
        rows = [] if quarantine is None else quarantine.drop("quarantined_at").sort("file", "line", "raw").to_dicts()
        state[f"quarantine {day}"] = rows
    return state


def _waiting(root: Path, day: str, trace_id: str) -> list[str]:
    quarantine = read_partition(DataRoot.from_env(root), "quarantine", quarantine_keys("traces", day))
    if quarantine is None:
        return []
    return quarantine.filter(pl.col("detail").str.contains(trace_id))["reason"].to_list()


def test_a_trace_whose_root_never_arrives_is_taken_partial_by_the_next_days_ingest_once(data_root, tmp_path):
    day = recording_day(FOLDER)
    after = _shift(day, 1)
    lines, _, root_id = _split(recorded_lines(FOLDER, "traces.jsonl"), AGENT)
    _write(data_root, day, lines)
    _write(data_root, after, [])  # a quiet next day: the root is not there either
    defs, days = build_definitions(data_root), [day, after]
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        _materialize(defs, day, instance)
        waiting = _waiting(data_root, day, AGENT)
        assert waiting and set(waiting) == {"awaiting_root"}  # within the day's wait
        _materialize(defs, after, instance)
        first = _state(data_root, days)
        # the trace is in the next day's partition, once, partial, with every span that arrived
        found = [(d, t) for d in days for t in first[f"traces {d}"] if t["trace_id"] == AGENT]
        assert [(d, t["partial_reason"]) for d, t in found] == [(after, f"missing_root:{root_id}")]
        assert "missing_root" in json.loads(found[0][1]["flags"])
        spans = span_rows(read_partition(DataRoot.from_env(data_root), "traces", {"date": after}))
        assert spans.filter(pl.col("trace_id") == AGENT).height == _spans_of(lines, AGENT)
        assert _waiting(data_root, day, AGENT) == []  # its spans left the quarantine: they wait no more
        others = {t["trace_id"] for t in first[f"traces {day}"]}
        assert others == {i for ids in scenarios(FOLDER).values() for i in ids} - {AGENT}
        # ingested again, in order and out of order: the same rows
        _materialize(defs, day, instance)
        _materialize(defs, after, instance)
        assert _state(data_root, days) == first
        _materialize(defs, day, instance)
        assert _state(data_root, days) == first


def test_a_rootless_trace_over_midnight_is_taken_whole_once_and_a_root_after_the_wait_is_late(tmp_path):
    """Its spans in two day folders, no root in either: the second day's ingest takes them all as one partial
    trace, the third day's does not take it again; its root delivered on that third day is quarantined
    `late_root`, not a second trace."""
    day = recording_day(FOLDER)
    second, third = _shift(day, 1), _shift(day, 2)
    lines, root_lines, root_id = _split(recorded_lines(FOLDER, "traces.jsonl"), AGENT)
    first_span = [False]  # the agent's first span on the first day, its others on the second

    def later(span: dict) -> bool:
        if span["traceId"] != AGENT:
            return False
        first_span[0], seen = True, first_span[0]
        return seen

    early, late_spans = _take(lines, later)
    _write(tmp_path, day, early)
    _write(tmp_path, second, late_spans)
    _write(tmp_path, third, root_lines)
    read = {d: read_trace_day(tmp_path, d) for d in (day, second, third)}
    found = [(d, t) for d, r in read.items() for t in r.traces.to_dicts() if t["trace_id"] == AGENT]
    assert [(d, t["partial_reason"]) for d, t in found] == [(second, f"missing_root:{root_id}")]
    assert read[second].spans.filter(pl.col("trace_id") == AGENT).height == _spans_of(lines, AGENT)
    assert read[second].spans.filter(pl.col("trace_id") == AGENT)["source_file"].n_unique() == 2
    late = read[third].quarantine
    assert late.height == 1 and late["reason"][0] == "late_root", late.to_dicts()
    assert root_id in late["raw"][0] and f"traces/{day}/" in late["detail"][0]
    assert read[third].counts["read"] == read[third].counts["quarantined"] == 1
    # a root within the wait (the next day's folder) makes it whole, as ever
    _write(tmp_path, second, [*late_spans, *root_lines])
    whole = read_trace_day(tmp_path, second).traces.filter(pl.col("trace_id") == AGENT)
    assert whole.height == 1 and whole["partial_reason"][0] is None
