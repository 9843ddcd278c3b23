"""Markdown tables for what the UI shows (materialization and check metadata): one way to write a cell.

A missing value is a dash, never Python's `None`; a list is its items joined by commas; a float is rounded for
reading (the warehouse keeps full precision); an id is never cut. Only the columns a caller names in `shorten`
(free text such as a judge's reasoning) are cut, and a cut cell ends with an explicit ellipsis mark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

MISSING = "–"  # what a cell with no value shows (the report's tables show the same)
ELLIPSIS = "…"


def cell(value: Any, limit: int | None = None, digits: int = 4) -> str:
    """One value as Markdown cell text: `MISSING` for None, rounded floats, lists joined, `|` and line breaks
    escaped; text longer than `limit` characters cut with `ELLIPSIS` at its end."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = MISSING if value != value else f"{value:.{digits}g}"  # NaN is no value either
    elif isinstance(value, list | tuple):
        text = ", ".join(cell(v, digits=digits) for v in value)
    else:
        text = str(value)
    text = " ".join(text.split())  # a line break would end the table row
    if limit is not None and len(text) > limit:
        text = text[: limit - 1].rstrip() + ELLIPSIS
    return text.replace("|", "\\|")


def markdown_table(
    rows: pl.DataFrame | Iterable[Mapping[str, Any]],
    columns: list[str] | None = None,
    shorten: Mapping[str, int] | None = None,
    digits: int = 4,
) -> str:
    """`rows` (a frame or dicts) as a Markdown table of `columns` (default: the frame's columns, or the first
    row's keys). `shorten`: column -> the most characters its cells show (cut cells end with `ELLIPSIS`)."""
    records = rows.to_dicts() if isinstance(rows, pl.DataFrame) else [dict(r) for r in rows]
    if columns is None:
        columns = rows.columns if isinstance(rows, pl.DataFrame) else list(records[0]) if records else []
    limits = shorten or {}
    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c), limits.get(c), digits) for c in columns) + " |" for row in records]
    return "\n".join(lines)
