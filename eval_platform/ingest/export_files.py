"""Rows of the files in an export folder (`annotations/`, `judgments/`), and the quarantine of what is rejected.

The folder is read recursively, sorted by relative path; hidden files and folders are skipped. Each file
is split into rows by the trace readers (`readers.py`: JSONL, JSON arrays, CSV, Parquet, optionally gzip),
so every export folder shares one decode path and one set of file-level reasons: `unsupported_file_type`,
`unreadable_file`, `invalid_encoding`, `invalid_json`, `not_an_object`, `malformed_csv_row`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.ingest.common import RowError, preview
from eval_platform.ingest.quarantine import quarantine_frame, quarantine_row
from eval_platform.ingest.readers import file_kind, head_text, read_candidates

# Unpartitioned sources write their quarantine rows under this partition value.
ALL_PARTITION = "all"


@dataclass(frozen=True)
class ExportRow:
    """One parsed row of an export file: a JSON object, CSV row or Parquet row."""

    file: str  # relative to the data root
    line: int | None  # 1-based line / element / row number (CSV: the header is line 1)
    unit: str  # what `line` counts: line, element or row
    raw: str
    record: dict[str, Any]
    from_text: bool  # CSV: every cell is text, so numbers and JSON arrive as strings

    @property
    def where(self) -> str:
        """`file line N`, for messages and for naming the first of two duplicates."""
        return f"{self.file} {self.unit} {self.line}" if self.line is not None else self.file


@dataclass
class Rejects:
    """Quarantine rows of one source, each naming its file, line, reason and raw text."""

    source: str
    at: datetime
    partition: str = ALL_PARTITION
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, file: str, line: int | None, unit: str, error: RowError, raw: str | None) -> None:
        where = f"{file} {unit} {line}" if line is not None else file
        self.rows.append(
            quarantine_row(
                source=self.source,
                partition=self.partition,
                file=file,
                line=line,
                reason=error.reason,
                detail=f"{where}: {error.message}",
                raw=raw,
                at=self.at,
            )
        )

    def reject(self, row: ExportRow, error: RowError) -> None:
        self.add(row.file, row.line, row.unit, error, row.raw)

    def frame(self) -> pl.DataFrame:
        return quarantine_frame(self.rows)

    def by_reason(self) -> dict[str, int]:
        return dict(sorted(Counter(row["reason"] for row in self.rows).items()))


def export_files(root: Path, folder: str, ignore: frozenset[str] = frozenset()) -> list[Path]:
    """Files under `<root>/<folder>/`, sorted by relative path, without hidden ones and names in `ignore`."""
    base = root / folder
    if not base.is_dir():
        return []
    found = []
    for path in base.rglob("*"):
        relative = path.relative_to(base)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts) and path.name not in ignore:
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(base).as_posix())


def export_rows(root: Path, files: list[Path], rejects: Rejects, what: str) -> Iterator[ExportRow]:
    """Every parsed row of `files`; unreadable files and unparseable rows go to `rejects` instead.

    `what` names the expected content in the unsupported-file message ("annotation exports", ...).
    """
    for path in files:
        rel = path.relative_to(root).as_posix()
        kind = file_kind(path)
        if kind is None:
            kind_name = "".join(path.suffixes) or path.name
            message = f"files of type '{kind_name}' are not {what} (expected .jsonl, .json, .csv or .parquet)"
            rejects.add(rel, None, "line", RowError("unsupported_file_type", message), head_text(path))
            continue
        try:
            candidates = read_candidates(path, kind)
        except Exception as exc:  # a reader bug must not crash the asset
            error = RowError("unexpected_error", f"the file could not be read ({type(exc).__name__}: {exc})")
            rejects.add(rel, None, "line", error, head_text(path))
            continue
        for candidate in candidates:
            if candidate.error is not None or candidate.record is None:
                error = candidate.error or RowError("not_an_object", f"the {candidate.unit} holds no object")
                rejects.add(rel, candidate.line, candidate.unit, error, candidate.raw)
                continue
            yield ExportRow(rel, candidate.line, candidate.unit, candidate.raw, candidate.record, kind == "csv")


# --- field helpers shared by the export normalizers ----------------------------------------------------


def first_present(record: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first of `keys` present in `record` with a non-null value, else None."""
    for key in keys:
        if record.get(key) is not None:
            return record[key]
    return None


def text_field(value: Any, name: str) -> str | None:
    """An identifier-like field as text: strings (stripped, empty is absent) and integers."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise RowError(f"invalid_type:{name}", f"field '{name}' value {preview(value)} is not a string")


def number_text(number: float) -> str:
    """A number as text without a spurious `.0`: 2.0 -> "2", 3.5 -> "3.5"."""
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


def file_stem(file: str) -> str:
    """A file's name without folders and extensions: `a/pandalm_human.jsonl.gz` -> `pandalm_human`."""
    name = file.rsplit("/", 1)[-1]
    return name.split(".", 1)[0] or name
