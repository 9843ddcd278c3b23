"""A day with OTLP files ingested a file at a time: an arrival re-assembles only the traces it touches.

The day's `traces` and quarantine partitions are made of parts, one per file (`storage/parts.py`), as a day of flat
files (`ingest/increments.py`): a trace row is in the part of its `source_file` (its root span's file, or a file
of the day before for a partial trace whose top span is there), a quarantine row in the part of its `file`. Each
traces part of a file of the day records in its footer (besides `source`, `fingerprint`, `final`, `otlp` and
`written`, as the flat parts) `ids`, the trace ids its file names in a span or a log record: that is the day's
on-disk index of which file holds spans of which trace. Each part also records `before`, a digest of the OTLP
files of the two days before (their paths, modification times and sizes) as they were when it was written.

A run, when the day is already in these parts and the days before have not changed since:

1. finds the files of the day that are new, changed, not final or gone, and the trace ids they name (`touched`:
   those a new or changed file names now, read from it, and those its part named before);
2. finds through the footers every file holding a span or log record of a touched trace, in the day and in the two
   days before (whose own parts' footers name their ids), and reads those files alone, keeping only the touched
   traces' spans (`OtelDay`'s `traces`): each touched trace is assembled exactly as a whole-day read would, from
   every span it has;
3. replaces in the parts only the rows of the touched traces (a quarantine row's trace is the one its detail
   names, `trace <id>`) and the rows of the new, changed and gone files; every other row, and every part that
   holds none of these, is left as it is (its `written` token too, so judging keeps its verdicts).

It reads the whole day again (every file, every part rewritten) the first time the day is ingested in these parts,
when an OTLP file of the two days before is new, changed or gone since (its traces may move between days), when a
file of the days before has no part naming its ids (that day was ingested whole), when the day's quarantine has a
`duplicate_trace_id` row, and when a file to read holds flat records (a trace id could repeat across files).

Writes remove before they add: every part losing rows of a touched trace is first written without them, then the
parts gaining rows are written, so a kill at any instant leaves rows missing, never a row in two parts, and the
next run (the new file's part not written yet) completes the day.

The spans a day leaves waiting for a root (`awaiting_root`, which the next day's ingest takes) are summed up per
trace in the quarantine parts' footers (`awaiting`), before the next day's traces take them out, so
`next_day_spans` (the new-files sensor's trigger for the next day) is the same digest as a whole-day read's.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from eval_platform.ingest.day_spill import spilling_duckdb
from eval_platform.ingest.increments import DUPLICATE, PartsIngest, day_totals, fingerprint
from eval_platform.ingest.otel.assembly import AWAITING_ROOT
from eval_platform.ingest.otel.envelope import walk
from eval_platform.ingest.readers import file_kind, iter_candidates
from eval_platform.ingest.traces import SOURCE, list_trace_files, settled, stream_trace_day
from eval_platform.schemas import QUARANTINE_SCHEMA, TRACE_SCHEMA, conform, empty_frame
from eval_platform.storage.location import DataRoot
from eval_platform.storage.parts import Part, part_name, parts, read_part, remove_part, write_part
from eval_platform.storage.warehouse import quarantine_keys, read_partition, remove_parts, write_partition

LAYOUT = "otlp"  # the `layout` footer value of this module's parts
# the trace a quarantine row belongs to: the first one its detail names (file-level rows, such as an envelope
# error or a log record that is not a GenAI event, name none)
TRACE_IN_DETAIL = re.compile(r"\btrace ([0-9a-f]{32})\b")
_MASK = (1 << 64) - 1


def detail_trace(detail: str | None) -> str | None:
    found = TRACE_IN_DETAIL.search(detail or "")
    return found.group(1) if found else None


def _with_trace(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col("detail").str.extract(TRACE_IN_DETAIL.pattern, 1).alias("_trace"))


# -- the spans a day leaves waiting for a root (`next_day_spans`) --------------------------------------------------
def awaiting_sums(quarantine: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Per file, per trace: an order-free sum of the digests of its `awaiting_root` rows (file, line, detail)."""
    sums: dict[str, dict[str, int]] = {}
    waiting = quarantine.filter(pl.col("reason") == AWAITING_ROOT).select("file", "line", "detail")
    for file, line, detail in waiting.rows():
        trace = detail_trace(detail) or ""
        digest = int.from_bytes(hashlib.sha256(f"{file}\t{line}\t{detail}".encode()).digest()[:8], "big")
        mine = sums.setdefault(file, {})
        mine[trace] = (mine.get(trace, 0) + digest) & _MASK
    return sums


def next_day_digest(sums: Iterable[dict[str, int]]) -> str:
    """`next_day_spans`: the digest of the day's `awaiting_root` rows ("" when none), whatever their order or
    parts (`sums`: `awaiting_sums`' per-trace sums, of each file)."""
    total: dict[str, int] = {}
    for one in sums:
        for trace, value in one.items():
            total[trace] = (total.get(trace, 0) + value) & _MASK
    if not total:
        return ""
    text = "".join(f"{trace}:{value:016x}\n" for trace, value in sorted(total.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


# -- the files of the days before --------------------------------------------------------------------------------
def _days_before(day: str) -> list[str]:
    return [(date.fromisoformat(day) - timedelta(days=n)).isoformat() for n in (2, 1)]


@dataclass
class _Before:
    digest: str  # the OTLP files of the two days before (path, modification time, size)
    ids: dict[str, list[str]] | None  # their trace ids, from their days' parts; None when one is not known


def _before(root: DataRoot, day: str) -> _Before:
    lines: list[str] = []
    ids: dict[str, list[str]] | None = {}
    for earlier in _days_before(day):
        known = parts(root, "traces", {"date": earlier}) or {}
        for path in list_trace_files(root.path, earlier):
            if file_kind(path) not in ("json", "jsonl"):
                continue
            rel, print_ = path.relative_to(root.path).as_posix(), fingerprint(path)
            lines.append(f"{rel} {print_}")
            part = known.get(part_name(rel))
            if ids is None:
                continue
            if part is None or part.metadata.get("fingerprint") != print_:
                ids = None
            elif part.metadata.get("otlp") == "0":
                ids[rel] = []
            elif "ids" in part.metadata:
                ids[rel] = json.loads(part.metadata["ids"])
            else:
                ids = None
    digest = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:20]
    return _Before(digest, ids)


def file_trace_ids(path: Path) -> set[str]:
    """The trace ids a file's OTLP requests name in a span or a log record (its ids only are read)."""
    kind = file_kind(path)
    found: set[str] = set()
    if kind not in ("json", "jsonl"):
        return found
    for candidate in iter_candidates(path, kind):
        if candidate.otel is None:
            continue
        spans, events, _ = walk(candidate.otel, "", None, ids_only=True)
        found.update(s.trace_id for s in spans)
        found.update(e.trace_id for e in events if e.trace_id is not None)
    return found


# -- a run -------------------------------------------------------------------------------------------------------
def ingest_otlp_in_parts(root: DataRoot, day: str) -> PartsIngest:
    """Ingest `day` (module docstring): the touched traces alone when it can, else the whole day, into parts."""
    paths = list_trace_files(root.path, day)
    files = {path.relative_to(root.path).as_posix(): path for path in paths}
    prints = {rel: fingerprint(path) for rel, path in files.items()}
    before = _before(root, day)
    existing = parts(root, "traces", {"date": day})
    result = PartsIngest(0, 0, {}, list(files))
    if not files:  # an empty day: its partitions written whole and empty, as before parts
        write_partition(root, "traces", {"date": day}, empty_frame(TRACE_SCHEMA))
        write_partition(root, "quarantine", quarantine_keys(SOURCE, day), empty_frame(QUARANTINE_SCHEMA))
        return day_totals(root, day, result)
    if existing is not None and _incremental(root, day, files, prints, before, existing, result):
        return day_totals(root, day, result)
    _whole_day(root, day, files, prints, before)
    result.read, result.whole_day = list(files), True
    return day_totals(root, day, result)


def _incremental(
    root: DataRoot,
    day: str,
    files: dict[str, Path],
    prints: dict[str, str],
    before: _Before,
    existing: dict[str, Part],
    result: PartsIngest,
) -> bool:
    """The run of a day already in parts (module docstring); False, with nothing written, when the whole day must
    be read."""
    if any(p.metadata.get("layout") != LAYOUT or p.metadata.get("before") != before.digest for p in existing.values()):
        return False
    if before.ids is None or _has_duplicates(root, day):
        return False
    own = {p.metadata.get("source", ""): p for p in existing.values() if p.metadata.get("kind") == "file"}
    gone = sorted(set(own) - set(files))
    changed = [rel for rel in files if _changed(own.get(rel), prints[rel])]
    if not changed and not gone:
        return True
    touched: set[str] = set()
    for rel in [*changed, *gone]:
        if rel in own:
            touched.update(json.loads(own[rel].metadata.get("ids", "[]")))
    for rel in changed:
        touched.update(file_trace_ids(files[rel]))
    holding = {rel for rel, part in own.items() if rel in files and touched.intersection(_ids(part))}
    if any(own[rel].metadata.get("flat") == "1" for rel in holding if rel not in changed):
        return False
    earlier = {rel for rel, ids in before.ids.items() if touched.intersection(ids)}
    read = set(changed) | holding
    with stream_trace_day(root.path, day, only=read, traces=touched, before=earlier) as rows:
        if rows.flat.intersection(changed):
            return False  # flat records: a trace id may repeat across files (the day's rule needs the whole day)
        traces = _collect(rows.traces(), TRACE_SCHEMA)
        quarantine = _collect(rows.quarantine(), QUARANTINE_SCHEMA)
        ids = {rel: rows.ids.get(rel, []) for rel in changed}
        waiting, flat = set(rows.waiting), set(rows.flat)
    fresh = set(changed) | set(gone)
    traces = traces.filter(pl.col("trace_id").is_in(list(touched)) | pl.col("source_file").is_in(list(changed)))
    quarantine = _with_trace(quarantine)
    quarantine = quarantine.filter(
        pl.col("_trace").is_in(list(touched)).fill_null(False)
        | (pl.col("_trace").is_null() & pl.col("file").is_in(list(changed)))
    )
    sums = awaiting_sums(quarantine)  # before the next day's traces take them
    quarantine = settled(quarantine, _trace_ids(root, _next_day(day)) if sums else None).drop("_trace")

    # the parts of every file whose rows may change: read, new or changed, gone, the days before's read, and those
    # the touched traces' new rows go to
    sources = read | set(gone) | earlier | set(traces["source_file"].to_list()) | set(quarantine["file"].to_list())
    tkeys, qkeys = {"date": day}, quarantine_keys(SOURCE, day)
    tparts = parts(root, "traces", tkeys) or {}
    qparts = parts(root, "quarantine", qkeys) or {}
    kept_traces: dict[str, pl.DataFrame] = {}
    kept_quarantine: dict[str, pl.DataFrame] = {}
    qmeta: dict[str, dict[str, str]] = {}
    dropped = list(touched)
    # 1. remove: every part losing rows is written without them first; a gone file's parts go
    for rel in sorted(sources):
        name = part_name(rel)
        if rel in gone:
            remove_part(root, "traces", tkeys, name)
            remove_part(root, "quarantine", qkeys, name)
            continue
        if name in tparts:
            old = read_part(root, "traces", tkeys, name)
            old = old if old is not None else empty_frame(TRACE_SCHEMA)
            keep = old.filter(~pl.col("trace_id").is_in(dropped) & ~pl.col("source_file").is_in(list(fresh)))
            kept_traces[rel] = keep
            if keep.height != old.height:
                write_part(root, "traces", tkeys, name, keep, TRACE_SCHEMA, _renewed(tparts[name].metadata))
        if name in qparts:
            old = read_part(root, "quarantine", qkeys, name)
            old = _with_trace(old if old is not None else empty_frame(QUARANTINE_SCHEMA))
            keep = old.filter(
                ~pl.col("_trace").is_in(dropped).fill_null(False) & ~pl.col("file").is_in(list(fresh))
            ).drop("_trace")
            meta = dict(qparts[name].metadata)
            earlier_sums = json.loads(meta.get("awaiting", "{}"))
            kept_sums = {t: v for t, v in earlier_sums.items() if t not in touched}
            meta["awaiting"] = json.dumps(kept_sums, sort_keys=True)
            kept_quarantine[rel], qmeta[rel] = keep, meta
            if not keep.height and not kept_sums:
                remove_part(root, "quarantine", qkeys, name)
            elif keep.height != old.height or kept_sums != earlier_sums:
                write_part(root, "quarantine", qkeys, name, keep, QUARANTINE_SCHEMA, meta)
    # 2. add: the parts gaining rows, and the new or changed files' parts (their fingerprints)
    new_traces = {str(key[0]): frame for key, frame in traces.partition_by("source_file", as_dict=True).items()}
    for rel in sorted(set(new_traces) | set(changed)):
        frame = _joined(kept_traces.get(rel), new_traces.get(rel), TRACE_SCHEMA)
        if rel in changed:
            meta = _file_meta(rel, prints[rel], rel in waiting, ids[rel], rel in flat, before.digest, frame)
        elif rel in own:
            meta = _renewed(own[rel].metadata) | {"spans": _span_count(frame)}
        else:
            meta = _carried_meta(rel, before.digest, frame)
        write_part(root, "traces", tkeys, part_name(rel), frame, TRACE_SCHEMA, meta)
    new_quarantine = {str(key[0]): f for key, f in quarantine.partition_by("file", as_dict=True).items()}
    for rel in sorted(set(new_quarantine) | set(sums)):
        frame = _joined(kept_quarantine.get(rel), new_quarantine.get(rel), QUARANTINE_SCHEMA)
        meta = qmeta.get(rel) or {"layout": LAYOUT, "source": rel, "awaiting": "{}"}
        meta["awaiting"] = json.dumps(json.loads(meta["awaiting"]) | sums.get(rel, {}), sort_keys=True)
        write_part(root, "quarantine", qkeys, part_name(rel), frame, QUARANTINE_SCHEMA, meta)
    settle_previous_parts(root, _previous(day), traces["trace_id"], earlier)
    result.read, result.removed, result.waiting = sorted(changed), gone, sorted(waiting & set(changed))
    return True


def _joined(kept: pl.DataFrame | None, new: pl.DataFrame | None, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    frames = [conform(f, schema) for f in (kept, new) if f is not None]
    return pl.concat(frames) if frames else empty_frame(schema)


def _changed(part: Part | None, print_: str) -> bool:
    return part is None or part.metadata.get("fingerprint") != print_ or part.metadata.get("final") != "1"


def _ids(part: Part) -> list[str]:
    return json.loads(part.metadata.get("ids", "[]"))


def _has_duplicates(root: DataRoot, day: str) -> bool:
    reasons = read_partition(root, "quarantine", quarantine_keys(SOURCE, day), columns=["reason"])
    return reasons is not None and bool((reasons["reason"] == DUPLICATE).any())


def _collect(frames: Iterator[pl.DataFrame], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    found = list(frames)
    return conform(pl.concat(found), schema) if found else empty_frame(schema)


def _next_day(day: str) -> str:
    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


def _previous(day: str) -> str:
    return (date.fromisoformat(day) - timedelta(days=1)).isoformat()


def _trace_ids(root: DataRoot, day: str) -> pl.Series | None:
    found = read_partition(root, "traces", {"date": day}, columns=["trace_id"])
    return None if found is None else found["trace_id"]


def _span_count(frame: pl.DataFrame) -> str:
    return str(int(frame["span_count"].sum() or 0)) if frame.height else "0"


def _renewed(metadata: dict[str, str]) -> dict[str, str]:
    """A part's footer for a new write of it (`written`: the token the judge parts name)."""
    return dict(metadata) | {"written": uuid.uuid4().hex}


def _file_meta(
    rel: str, print_: str, waiting: bool, ids: list[str], flat: bool, before: str, frame: pl.DataFrame
) -> dict[str, str]:
    return {
        "layout": LAYOUT,
        "kind": "file",
        "source": rel,
        "fingerprint": print_,
        "final": "0" if waiting else "1",
        "otlp": "1" if ids or not flat else "0",
        "flat": "1" if flat else "0",
        "ids": json.dumps(sorted(ids)),
        "before": before,
        "spans": _span_count(frame),
        "written": uuid.uuid4().hex,
    }


def _carried_meta(rel: str, before: str, frame: pl.DataFrame) -> dict[str, str]:
    """A part of the day's traces whose top span is in a file of the day before (a partial trace)."""
    return {
        "layout": LAYOUT,
        "kind": "carried",
        "source": rel,
        "before": before,
        "spans": _span_count(frame),
        "written": uuid.uuid4().hex,
    }


def settle_previous_parts(root: DataRoot, previous: str, taken: pl.Series | None, sources: set[str] | None) -> int:
    """Take out of the previous day's quarantine its `awaiting_root` rows whose trace the day's ingest took (`taken`:
    the day's trace ids), the rows `settled` leaves out when the previous day is ingested again. A quarantine in
    parts: in the parts of `sources` (None: all), each part rewritten only if it changes, its footer kept (its
    `awaiting` still counts them); one written whole: rewritten whole. Returns how many left."""
    keys = quarantine_keys(SOURCE, previous)
    if taken is None or not taken.len():
        return 0
    found = parts(root, "quarantine", keys)
    if found is None:
        whole = read_partition(root, "quarantine", keys)
        if whole is None:
            return 0
        after = settled(whole, taken)
        if after.height != whole.height:
            write_partition(root, "quarantine", keys, after)
        return whole.height - after.height
    left = 0
    for name, part in sorted(found.items()):
        if sources is not None and part.metadata.get("source") not in sources:
            continue
        before = read_part(root, "quarantine", keys, name)
        if before is None:
            continue
        after = settled(before, taken)
        if after.height != before.height:
            write_part(root, "quarantine", keys, name, after, QUARANTINE_SCHEMA, part.metadata)
            left += before.height - after.height
    return left


# -- the whole day -----------------------------------------------------------------------------------------------
def _whole_day(root: DataRoot, day: str, files: dict[str, Path], prints: dict[str, str], before: _Before) -> None:
    """Every file of the day read (and the days before, as a whole-day ingest does), every part written: its old
    parts (or whole file) go first, then a part per file, its rows in the day's order."""
    tkeys, qkeys = {"date": day}, quarantine_keys(SOURCE, day)
    taken = _trace_ids(root, _next_day(day))
    with tempfile.TemporaryDirectory(prefix="eval_platform-otlp-parts-") as folder:
        with stream_trace_day(root.path, day, file_ids=True) as rows:
            tpath = _spill(rows.traces(), Path(folder) / "traces.parquet")
            qframes = list(rows.quarantine())
            ids, waiting, flat = rows.ids, set(rows.waiting), set(rows.flat)
        quarantine = _collect(iter(qframes), QUARANTINE_SCHEMA)
        sums = awaiting_sums(quarantine)
        quarantine = settled(quarantine, taken)
        store = root.store
        remove_parts(store, "traces", tkeys, keep_whole=False)
        remove_parts(store, "quarantine", qkeys, keep_whole=False)
        written: set[str] = set()
        for rel, frame in _by_file(tpath, Path(folder)):
            if rel in files:
                meta = _file_meta(rel, prints[rel], rel in waiting, ids.get(rel, []), rel in flat, before.digest, frame)
            else:
                meta = _carried_meta(rel, before.digest, frame)
            write_part(root, "traces", tkeys, part_name(rel), frame, TRACE_SCHEMA, meta)
            written.add(rel)
        for rel in sorted(set(files) - written):
            empty = empty_frame(TRACE_SCHEMA)
            meta = _file_meta(rel, prints[rel], rel in waiting, ids.get(rel, []), rel in flat, before.digest, empty)
            write_part(root, "traces", tkeys, part_name(rel), empty, TRACE_SCHEMA, meta)
        new_quarantine = {str(key[0]): f for key, f in quarantine.partition_by("file", as_dict=True).items()}
        for rel in sorted(set(new_quarantine) | set(sums)):
            frame = new_quarantine.get(rel, empty_frame(QUARANTINE_SCHEMA))
            meta = {"layout": LAYOUT, "source": rel, "awaiting": json.dumps(sums.get(rel, {}), sort_keys=True)}
            write_part(root, "quarantine", qkeys, part_name(rel), frame, QUARANTINE_SCHEMA, meta)
    settle_previous_parts(root, _previous(day), _trace_ids(root, day), None)


def _spill(frames: Iterator[pl.DataFrame], path: Path) -> Path:
    """The day's trace rows, in order, to one Parquet file (with their place, `_n`)."""
    writer = None
    at = 0
    try:
        for frame in frames:
            table = conform(frame, TRACE_SCHEMA).with_row_index("_n", offset=at).to_arrow()
            at += frame.height
            if writer is None:
                writer = pq.ParquetWriter(str(path), table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    return path


def _by_file(path: Path, folder: Path) -> Iterator[tuple[str, pl.DataFrame]]:
    """The rows spilled to `path`, a file's rows at a time (in the day's order within it), out of core."""
    if not path.exists():
        return
    conn = spilling_duckdb(folder / "duckdb")
    try:
        reader = conn.sql(f"SELECT * FROM read_parquet('{path}') ORDER BY source_file, _n").to_arrow_reader(10_000)
        current: str | None = None
        held: list[pl.DataFrame] = []
        for batch in reader:
            frame = conform(pl.from_arrow(batch).drop("_n"), TRACE_SCHEMA)  # type: ignore[union-attr]
            for group in frame.partition_by("source_file", maintain_order=True):
                rel = group["source_file"][0]
                if rel != current and held:
                    yield str(current), pl.concat(held)
                    held = []
                current = rel
                held.append(group)
        if held:
            yield str(current), pl.concat(held)
    finally:
        conn.close()


def day_spans(root: DataRoot, day: str) -> int:
    """The spans of a day in these parts (their footers)."""
    return sum(int(part.metadata.get("spans", "0")) for part in (parts(root, "traces", {"date": day}) or {}).values())


def day_next_day_spans(root: DataRoot, day: str) -> str:
    """`next_day_spans` of a day in these parts (its quarantine parts' footers)."""
    found = parts(root, "quarantine", quarantine_keys(SOURCE, day)) or {}
    return next_day_digest(json.loads(part.metadata.get("awaiting", "{}")) for part in found.values())
