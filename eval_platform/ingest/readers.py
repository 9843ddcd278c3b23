"""Split one trace export file into candidate rows (no validation of the trace fields yet).

Each extension, its rows, and what a row's `line` is:

- `.jsonl`, `.ndjson`: one JSON object per line; blank lines are skipped; a line holding an OTLP/JSON request
  (`resourceSpans` or `resourceLogs`, as the Collector's file exporter writes them) hands its spans and log
  records to the day's assembly (`ingest/otel`); a `resourceMetrics` line is quarantined `not_a_trace:metrics`.
  `line`: the physical line
- `.json`: a JSON array of trace objects; an OTLP/JSON request or an array of them; a `{"data": [...]}` /
  `{"traces": [...]}` wrapper; any other object is one trace. `line`: the array element (a lone OTLP request:
  the span's position in it). A `.json` file that is not one JSON document but whose first line is one (the
  Collector's file exporter names its one-request-per-line output `.json`) is read as `.jsonl`
- `.csv`: header + one row per record (quoted fields may span lines). `line`: the data row, the header being
  line 1
- `.parquet`: one row per record. `line`: the row

Text formats may also be gzip-compressed (`.jsonl.gz`, `.json.gz`, `.csv.gz`). Text is UTF-8 (a BOM is
accepted). Bytes that are not UTF-8 cost only the row (line, element) they are in: that row is quarantined
as `invalid_encoding`, the others are read. A file that cannot be opened or decompressed, a CSV header that
is not UTF-8, or a JSON document that does not parse, becomes a single file-level row with a null line.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from eval_platform.ingest.common import Candidate, RowError, dumps
from eval_platform.ingest.otel.envelope import is_otlp_document

KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
GZIP_KINDS = {"jsonl", "json", "csv"}
_WRAPPER_KEYS = ("data", "traces")
_ID_KEYS = ("trace_id", "traceId", "id")
# The reason of a last row cut in the middle (a JSON line that is not whole, a CSV row short of fields or inside a
# quote) with no newline after it, in a file that is final.
TRUNCATED_ROW = "truncated_row"


def file_kind(path: Path) -> str | None:
    """jsonl / json / csv / parquet, or None for an unsupported file type."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if len(suffixes) >= 2 and suffixes[-1] == ".gz" and KINDS.get(suffixes[-2]) in GZIP_KINDS:
        return KINDS[suffixes[-2]]
    return KINDS.get(suffixes[-1]) if suffixes else None


def _file_error(reason: str, message: str, raw: str = "") -> list[Candidate]:
    return [Candidate(line=None, raw=raw, error=RowError(reason, message))]


def _read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix.lower() == ".gz":
        data = gzip.decompress(data)
    return data


def _open_lines(path: Path) -> io.BufferedIOBase:
    """The file opened for reading its byte lines; a gzip file is first decompressed once to its end (discarding
    the bytes), so a corrupt or truncated one is refused whole, before any of its lines is read."""
    if path.suffix.lower() != ".gz":
        return path.open("rb")
    with gzip.open(path, "rb") as check:
        while check.read(1 << 20):
            pass
    return gzip.open(path, "rb")


def head_text(path: Path, limit: int = 10_000) -> str:
    """The first characters of a file as text (undecodable bytes replaced), for a quarantine row's raw."""
    try:
        with path.open("rb") as handle:
            return handle.read(limit * 4).decode("utf-8", errors="replace")[:limit]
    except OSError:
        return ""


def _object_candidate(value: Any, line: int, raw: str, unit: str) -> list[Candidate]:
    if is_otlp_document(value):
        return [Candidate(line=line, raw="", otel=value, unit=unit)]
    if isinstance(value, dict) and "resourceMetrics" in value and "trace_id" not in value:
        error = RowError("not_a_trace:metrics", f"the {unit} holds OTLP metrics (resourceMetrics), not spans")
        return [Candidate(line=line, raw=raw, error=error, unit=unit)]
    if isinstance(value, dict):
        return [Candidate(line=line, raw=raw, record=value, unit=unit)]
    kind = "array" if isinstance(value, list) else "null" if value is None else type(value).__name__
    return [
        Candidate(
            line=line,
            raw=raw,
            error=RowError("not_an_object", f"the {unit} is a JSON {kind}, not an object"),
            unit=unit,
        )
    ]


def read_jsonl(data: bytes) -> list[Candidate]:
    return list(iter_jsonl(io.BytesIO(data)))


def iter_jsonl(lines: Iterable[bytes]) -> Iterator[Candidate]:
    """The candidates of JSON lines, one line at a time (`lines`: byte lines, with or without their `\\n`)."""
    for number, raw_bytes in enumerate(lines, start=1):
        unterminated = not raw_bytes.endswith(b"\n")  # only the last line can end without one
        raw_bytes = raw_bytes.removesuffix(b"\n").removesuffix(b"\r")
        if number == 1:
            raw_bytes = raw_bytes.removeprefix(b"\xef\xbb\xbf")
        try:
            text = raw_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            raw = raw_bytes.decode("utf-8", errors="replace")
            yield Candidate(
                line=number,
                raw=raw,
                error=RowError("invalid_encoding", f"the line is not valid UTF-8 ({exc.reason})"),
            )
            continue
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            if unterminated:
                yield Candidate(line=number, raw=text, error=_cut_row("line"), unterminated=True)
                continue
            message = f"the line is not valid JSON: {getattr(exc, 'msg', exc)} (column {getattr(exc, 'colno', '?')})"
            yield Candidate(line=number, raw=text, error=RowError("invalid_json", message))
            continue
        yield from _object_candidate(value, number, text, "line")


def _cut_row(unit: str) -> RowError:
    return RowError(
        TRUNCATED_ROW,
        f"the file ends inside this {unit} (no newline after it, and it is not whole): a {unit} cut in the middle, "
        "as a writer that stopped or is still writing leaves it",
    )


def read_json(data: bytes) -> list[Candidate]:
    return list(iter_json(data))


def iter_json(data: bytes) -> Iterator[Candidate]:
    """Candidates of a JSON document; a trace holding bytes that are not UTF-8 is quarantined on its own."""
    for candidate in _read_json(data):
        if candidate.record is not None:
            raw = json.dumps(candidate.record, ensure_ascii=False, default=str)
            if _undecodable(raw):
                candidate.record = None
                candidate.raw = _shown(raw)
                candidate.error = RowError("invalid_encoding", f"the {candidate.unit or 'element'} is not valid UTF-8")
        yield candidate


def _read_json(data: bytes) -> Iterable[Candidate]:
    # A bad byte inside one element's strings costs that element; bytes that break the JSON itself
    # make the document unreadable, and the whole file is one quarantine row (its raw text kept).
    text = data.decode("utf-8-sig", errors="surrogateescape")
    if not text.strip():
        return _file_error("invalid_json", "the file is empty, not a JSON document")
    try:
        document = json.loads(text)
    except ValueError as exc:
        if _first_line_is_json(text):
            return iter_jsonl(io.BytesIO(data))  # JSON lines named .json: read a line at a time
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        return _file_error(
            "invalid_json", f"the file is not valid JSON: {getattr(exc, 'msg', exc)}{where}", _shown(text)
        )
    if is_otlp_document(document):
        return [Candidate(line=None, raw="", otel=document, unit="span")]
    if isinstance(document, dict) and not any(key in document for key in _ID_KEYS):
        wrapped = next((document[key] for key in _WRAPPER_KEYS if isinstance(document.get(key), list)), None)
        if wrapped is not None:
            document = wrapped
    if isinstance(document, dict):
        return [Candidate(line=1, raw=text, record=document, unit="element")]
    if not isinstance(document, list):
        return _file_error(
            "not_an_object", f"the file holds a JSON {type(document).__name__}, not an array or object", text
        )
    candidates: list[Candidate] = []
    for number, element in enumerate(document, start=1):
        raw = json.dumps(element, ensure_ascii=False)
        if _undecodable(raw):
            error = RowError("invalid_encoding", "the element is not valid UTF-8 (bytes shown as U+FFFD in raw)")
            candidates.append(Candidate(line=number, raw=_shown(raw), error=error, unit="element"))
            continue
        candidates.extend(_object_candidate(element, number, dumps(element), "element"))
    return candidates


def _first_line_is_json(text: str) -> bool:
    """Whether a text that is not one JSON document starts with a line that is a whole JSON object (JSON lines)."""
    first, size = None, 1 << 16
    while first is None:  # the first non-blank line, splitting a growing head of the text, not the whole file
        head = text[:size]
        lines = head.splitlines() if size >= len(text) else head.splitlines()[:-1]  # the last may be cut
        first = next((line for line in lines if line.strip()), None if size < len(text) else "")
        size *= 4
    if first.strip() == text.strip():
        return False
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


def _undecodable(text: str) -> bool:
    """Whether text decoded with surrogateescape holds bytes that were not UTF-8."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def _shown(text: str) -> str:
    """Text decoded with surrogateescape, with each bad byte shown as U+FFFD (for a quarantine row's raw)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", errors="replace")


def read_csv(data: bytes) -> list[Candidate]:
    # Decode leniently and judge each row on its own: one bad byte costs its row, not the file.
    text = data.decode("utf-8-sig", errors="surrogateescape")
    lines = list(io.StringIO(text, newline=""))
    reader = csv.reader(iter(lines))
    candidates: list[Candidate] = []
    header: list[str] | None = None
    consumed = 0
    record_number = 0  # the header is record 1
    while True:
        try:
            row = next(reader)
            error = None
        except StopIteration:
            break
        except csv.Error as exc:
            row, error = None, exc
        raw = "".join(lines[consumed : reader.line_num]).rstrip("\r\n")
        consumed = reader.line_num
        # the last record, not ended by a newline or left inside a quote by the end of the file
        unterminated = consumed == len(lines) and (row is None or not lines[-1].endswith(("\n", "\r")))
        if row == [] or (row is not None and not raw.strip()):
            continue  # a blank line is not a row
        record_number += 1
        if header is None:
            if row is None:
                return _file_error("malformed_csv_row", f"the header line is not valid CSV ({error})", _shown(text))
            if _undecodable(raw):
                return _file_error("invalid_encoding", "the header line is not valid UTF-8", _shown(text))
            header = [name.strip() for name in row]
            continue
        if _undecodable(raw):
            message = "the row is not valid UTF-8 (bytes shown as U+FFFD in raw)"
            candidates.append(
                Candidate(line=record_number, raw=_shown(raw), error=RowError("invalid_encoding", message))
            )
        elif unterminated and (row is None or len(row) < len(header)):
            candidates.append(Candidate(line=record_number, raw=raw, error=_cut_row("row"), unterminated=True))
        elif row is None:
            candidates.append(
                Candidate(
                    line=record_number,
                    raw=raw,
                    error=RowError("malformed_csv_row", f"the row is not valid CSV ({error})"),
                )
            )
        elif len(row) != len(header):
            message = f"the row has {len(row)} fields but the header has {len(header)}"
            candidates.append(Candidate(line=record_number, raw=raw, error=RowError("malformed_csv_row", message)))
        else:
            record = dict(zip(header, row, strict=True))
            candidates.append(Candidate(line=record_number, raw=raw, record=record, unterminated=unterminated))
    return candidates


def read_parquet(path: Path) -> list[Candidate]:
    try:
        return list(iter_parquet(path))
    except Exception as exc:  # a batch past the first that does not decode: the file is one row, as a whole read
        return _file_error(
            "unreadable_file", f"the file is not a readable Parquet file ({type(exc).__name__}: {exc})", head_text(path)
        )


PARQUET_BATCH_ROWS = 10_000


def iter_parquet(path: Path) -> Iterator[Candidate]:
    """The rows of a Parquet file, a batch of rows at a time (a file larger than memory is read in bounded memory)."""
    import pyarrow.parquet as pq

    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH_ROWS)
        first = next(batches, None)
    except Exception as exc:  # pyarrow raises several types for corrupt or non-Parquet files
        yield from _file_error(
            "unreadable_file", f"the file is not a readable Parquet file ({type(exc).__name__}: {exc})", head_text(path)
        )
        return
    number = 0
    while first is not None:
        for row in first.to_pylist():
            number += 1
            yield Candidate(line=number, raw=dumps(row), record=row, unit="row")
        first = next(batches, None)  # a batch that fails to decode fails the file (see traces.py)


def read_candidates(path: Path, kind: str) -> list[Candidate]:
    """All candidate rows of one file of a supported kind; OSError/gzip errors become a file-level row."""
    return read_parquet(path) if kind == "parquet" else list(iter_candidates(path, kind))


def iter_candidates(path: Path, kind: str) -> Iterator[Candidate]:
    """`read_candidates`, one candidate at a time: a JSON lines file (also one named `.json`) is parsed a line at a
    time, so a caller that does not keep the candidates holds one parsed line, not the file's."""
    if kind == "parquet":
        yield from iter_parquet(path)
        return
    if kind == "jsonl":  # a line at a time from the file, never the whole file in memory
        try:
            opened = _open_lines(path)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            yield from _file_error(
                "unreadable_file", f"the file cannot be read ({type(exc).__name__}: {exc})", head_text(path)
            )
            return
        with opened as lines:
            yield from iter_jsonl(lines)
        return
    try:
        data = _read_bytes(path)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        yield from _file_error(
            "unreadable_file", f"the file cannot be read ({type(exc).__name__}: {exc})", head_text(path)
        )
        return
    if kind == "json":
        yield from iter_json(data)
    else:
        yield from read_csv(data)
