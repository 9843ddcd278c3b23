"""Turning label or value arrays of any type (ints, floats, strings; None/NaN missing) into dense codes."""

from __future__ import annotations

import numpy as np
import polars as pl


def as_series(values) -> pl.Series:
    """A polars Series with NaN turned into null, so missing has one spelling."""
    if not isinstance(values, pl.Series):
        numeric_array = isinstance(values, np.ndarray) and values.dtype != object
        values = pl.Series(values=values if numeric_array else list(values), strict=False)
    return values.fill_nan(None) if values.dtype.is_float() else values


def encode(*arrays) -> tuple[list[np.ndarray], np.ndarray]:
    """Codes 0..k-1 (in sorted order of the distinct values across all arrays, -1 = missing), and those values."""
    series = [as_series(a) for a in arrays]
    joined = pl.concat([s.to_frame("v") for s in series], how="vertical_relaxed").to_series()
    categories = joined.drop_nulls().unique().sort()
    # unique + binary search is several times faster than a dense rank on millions of rows
    if categories.len():
        positions = categories.search_sorted(joined).cast(pl.Int64).to_numpy()
        codes = np.where(joined.is_null().to_numpy(), -1, positions)
    else:
        codes = np.full(joined.len(), -1)
    codes = codes.astype(np.int64)
    categories = categories.to_numpy()
    bounds = np.cumsum([len(s) for s in series])[:-1]
    return np.split(codes, bounds), categories


def paired(first, second) -> tuple[pl.Series, pl.Series]:
    """The two arrays restricted to positions where both have a value (an all-missing side takes the other's type)."""
    a, b = as_series(first), as_series(second)
    if a.dtype == pl.Null:
        a = a.cast(b.dtype if b.dtype != pl.Null else pl.String)
    if b.dtype == pl.Null:
        b = b.cast(a.dtype)
    both = a.is_not_null() & b.is_not_null()
    return a.filter(both), b.filter(both)

