"""A day of flat trace files (JSONL, JSON, CSV, Parquet records: one row per trace) ingested a file at a time.

The day's `traces` partition is made of parts, one per source file (`storage/parts.py`), and so is its quarantine
partition (the rows each file had rejected). Each traces part records in its footer the file it was read from
(`source`), its fingerprint (`fingerprint`: modification time in ns and size, as the new-files sensor's digest has
them), whether it was read settled (`final`; a file read while still being written is read again) and that it
held no OTLP, and a token of that write (`written`, which the judge parts name: `judging/increments.py`). A run
reads only the files that are new, changed or not final, rewrites their parts and removes the parts of files that
are gone; every other part is kept as it is.

What stays the day's rule: a trace id repeated across files is kept in the first file (file order, then line) and
quarantined in the others (`duplicate_trace_id`). A file read alone cannot know that, so the day is read whole
again (every file, every part rewritten) when a file read brings a trace id that another part holds, and while the
day's quarantine has a `duplicate_trace_id` row (a change of one file can move which occurrence wins); so is a
day read the first time in parts (its partition written whole before, or never).

Writes remove before they add: a gone file's parts go first; a day read whole loses its old parts (or its whole
file) before the new ones are written; and a file read alone writes only trace ids no other part holds. A kill at
any instant leaves rows missing, never a row in two parts, and the next run completes the day.

Not for OTLP: spans of one trace cross files, and the previous day's (`ingest/otel`). `ingest_in_parts` returns
None, and the day is ingested by `otlp_increments.py` (a trace at a time), when a file of the day holds OTLP
requests, the previous day may (a JSON or JSONL file there that no part of that day knows as flat and whose first
65,536 characters name an OTLP request's field, or a compressed one), or the day's parts are already that
module's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

import polars as pl

from eval_platform.ingest.readers import file_kind, head_text
from eval_platform.ingest.traces import SOURCE, list_trace_files, stream_trace_day
from eval_platform.schemas import QUARANTINE_SCHEMA, TRACE_SCHEMA
from eval_platform.storage.location import DataRoot
from eval_platform.storage.parts import Part, part_name, part_writer, parts, remove_part
from eval_platform.storage.warehouse import (
    partition_path,
    quarantine_keys,
    read_parquet,
    read_partition,
    remove_parts,
)

DUPLICATE = "duplicate_trace_id"


@dataclass
class PartsIngest:
    """What a day ingested in parts holds (all its parts) and what this run read."""

    traces: int
    quarantined: int
    reasons: dict[str, int]
    files: list[str]  # every file of the day, relative to the data root
    read: list[str] = field(default_factory=list)  # the files read by this run
    removed: list[str] = field(default_factory=list)  # the files gone since, whose parts were removed
    waiting: list[str] = field(default_factory=list)  # files still being written (read again once settled)
    whole_day: bool = False  # every file read (first time in parts, or a repeated trace id)


def fingerprint(path: Path) -> str:
    """What says a file changed: its modification time (ns) and size, as the new-files sensor's digest."""
    stat = path.stat()
    return f"{stat.st_mtime_ns}:{stat.st_size}"


def _may_hold_otlp(path: Path) -> bool:
    return file_kind(path) in ("json", "jsonl")


def _flat_day(root: DataRoot, day: str) -> bool:
    """Whether `day`'s folder holds no OTLP, as far as can be told without reading it: no JSON or JSONL file, or each
    one known flat by the day's part of it (same fingerprint)."""
    maybe = [path for path in list_trace_files(root.path, day) if _may_hold_otlp(path)]
    if not maybe:
        return True
    known = parts(root, "traces", {"date": day}) or {}
    for path in maybe:
        part = known.get(part_name(path.relative_to(root.path).as_posix()))
        if part is not None and part.metadata.get("fingerprint") == fingerprint(path):
            if part.metadata.get("otlp") != "0":
                return False
        elif not _looks_flat(path):
            return False
    return True


# The top-level fields of an OTLP/JSON request (a Collector's file exporter writes one request a line).
OTLP_FIELDS = ("resourceSpans", "resourceLogs", "resourceMetrics")
HEAD_CHARS = 65_536


def _looks_flat(path: Path) -> bool:
    """Whether a file no part knows (a day ingested whole before, or not yet) shows no OTLP in its first
    HEAD_CHARS characters; a compressed one is not looked into (taken as OTLP)."""
    if path.suffix.lower() == ".gz":
        return False
    head = head_text(path, HEAD_CHARS)
    return not any(f'"{name}"' in head for name in OTLP_FIELDS)


def ingest_in_parts(root: DataRoot, day: str) -> PartsIngest | None:
    """Ingest `day` a file at a time (module docstring); None, with nothing written, when the day is not one of flat
    files (the caller ingests it whole)."""
    paths = list_trace_files(root.path, day)
    previous = (date.fromisoformat(day) - timedelta(days=1)).isoformat()
    if not paths or not _flat_day(root, previous):
        return None
    tkeys, qkeys = {"date": day}, quarantine_keys(SOURCE, day)
    files = {path.relative_to(root.path).as_posix(): path for path in paths}
    prints = {rel: fingerprint(path) for rel, path in files.items()}
    existing = parts(root, "traces", tkeys)
    if existing and any(part.metadata.get("layout") == "otlp" for part in existing.values()):
        return None  # a day of OTLP parts (`otlp_increments.py`), which says when it is read whole
    whole = existing is None or _has_duplicates(root, qkeys)
    by_source: dict[str, Part] = {p.metadata.get("source", ""): p for p in (existing or {}).values()}
    gone = sorted(set(by_source) - set(files))
    changed = [rel for rel in files if whole or _changed(by_source.get(rel), prints[rel])]
    result = PartsIngest(0, 0, {}, list(files), whole_day=whole)
    if not whole:
        for rel in gone:  # removed before anything is added
            remove_part(root, "traces", tkeys, part_name(rel))
            remove_part(root, "quarantine", qkeys, part_name(rel))
        result.removed = gone
        if changed:
            read = _read_alone(root, day, changed, by_source, prints)
            if read is None:
                return None
            if read is not _COLLIDES:
                result.read, result.waiting = changed, read
                return day_totals(root, day, result)
        else:
            return day_totals(root, day, result)
        result.whole_day = True
    if existing is None and not _flat_day(root, day):
        return None  # a file's head names an OTLP field: the day is not read whole to find out what its head says
    # the whole day: its old parts (or whole file) go first, then every file's part is written as it is read
    with stream_trace_day(root.path, day, only=set(files)) as rows:
        if rows.otlp:
            return None
        store = root.store
        remove_parts(store, "traces", tkeys, keep_whole=False)
        remove_parts(store, "quarantine", qkeys, keep_whole=False)
        _write_parts(root, day, rows.traces(), rows.quarantine(), list(files), prints, set(rows.waiting))
        result.read, result.waiting = list(files), list(rows.waiting)
    return day_totals(root, day, result)


def _changed(part: Part | None, print_: str) -> bool:
    return part is None or part.metadata.get("fingerprint") != print_ or part.metadata.get("final") != "1"


def _has_duplicates(root: DataRoot, qkeys: dict[str, str]) -> bool:
    reasons = read_partition(root, "quarantine", qkeys, columns=["reason"])
    return reasons is not None and bool((reasons["reason"] == DUPLICATE).any())


_COLLIDES: list[str] = ["collides"]  # `_read_alone`: a trace id read is another part's (the day is read whole)


def _read_alone(
    root: DataRoot, day: str, changed: list[str], by_source: dict[str, Part], prints: dict[str, str]
) -> list[str] | None:
    """Read the `changed` files alone and write their parts; returns the files still being written, `_COLLIDES`
    (nothing written) when a trace id read is held by another file's part, None when one holds OTLP."""
    with stream_trace_day(root.path, day, only=set(changed)) as rows:
        traces, quarantine = list(rows.traces()), list(rows.quarantine())
        waiting = list(rows.waiting)
        if rows.otlp:
            return None
    if by_source and traces:
        held = read_parquet(
            root, str(partition_path(root, "traces", {"date": day})), columns=["trace_id", "source_file"]
        )
        read = pl.concat(traces).select("trace_id", "source_file")
        clash = read.join(held, on="trace_id", how="inner").filter(pl.col("source_file") != pl.col("source_file_right"))
        if clash.height:
            return _COLLIDES
    _write_parts(root, day, traces, quarantine, changed, prints, set(waiting))
    return waiting


def _write_parts(
    root: DataRoot,
    day: str,
    traces: Iterable[pl.DataFrame],
    quarantine: Iterable[pl.DataFrame],
    files: list[str],
    prints: dict[str, str],
    waiting: set[str],
) -> None:
    """Each file's traces part (an empty one for a file without a valid trace: its fingerprint is kept) and its
    quarantine part (removed when it has no rejected row), from rows in file order."""
    tkeys, qkeys = {"date": day}, quarantine_keys(SOURCE, day)

    def meta(rel: str) -> dict[str, str]:
        final = "0" if rel in waiting else "1"
        # `written`: this write of the part, whatever its file's fingerprint (the judge parts name the one they judged)
        return {"source": rel, "fingerprint": prints[rel], "final": final, "otlp": "0", "written": uuid.uuid4().hex}

    written = _grouped(root, "traces", tkeys, traces, "source_file", TRACE_SCHEMA, meta)
    for rel in files:
        if rel not in written:
            with part_writer(root, "traces", tkeys, part_name(rel), TRACE_SCHEMA, meta(rel)):
                pass
    rejected = _grouped(root, "quarantine", qkeys, quarantine, "file", QUARANTINE_SCHEMA, meta)
    for rel in files:
        if rel not in rejected:
            remove_part(root, "quarantine", qkeys, part_name(rel))


def _grouped(
    root: DataRoot,
    table: str,
    keys: dict[str, str],
    frames: Iterable[pl.DataFrame],
    column: str,
    schema: dict[str, pl.DataType],
    meta: Callable[[str], dict[str, str]],
) -> set[str]:
    """Write rows that come grouped by file (`column`), a part per file, each written as its rows come; returns the
    files written."""
    written: set[str] = set()
    current: str | None = None
    block = None
    out = None
    try:
        for frame in frames:
            for group in frame.partition_by(column, maintain_order=True):
                rel = group[column][0]
                if rel != current:
                    if block is not None:
                        block.__exit__(None, None, None)
                    assert rel not in written, f"the rows of {rel} come together"
                    block = part_writer(root, table, keys, part_name(rel), schema, meta(rel))
                    out, current = block.__enter__(), rel
                    written.add(rel)
                assert out is not None
                out.write(group)
    except BaseException as exc:
        if block is not None:
            block.__exit__(type(exc), exc, exc.__traceback__)
        raise
    if block is not None:
        block.__exit__(None, None, None)
    return written


def day_totals(root: DataRoot, day: str, result: PartsIngest) -> PartsIngest:
    """The whole day's counts, from the parts' footers and the quarantine's reasons (no trace row is read)."""
    found = parts(root, "traces", {"date": day}) or {}
    result.traces = sum(part.rows for part in found.values())
    reasons = read_partition(root, "quarantine", quarantine_keys(SOURCE, day), columns=["reason"])
    if reasons is not None:
        result.quarantined = reasons.height
        result.reasons = dict(sorted(reasons.group_by("reason").len().rows()))
    return result
