"""Turning label or value arrays of any type (ints, floats, strings; None/NaN missing) into dense codes."""

from __future__ import annotations

import numpy as np
import polars as pl

BOUNDED_KEYS = 4_000_000  # keys up to which `first_occurrences` counts them in an array (8 bytes each)


def as_series(values) -> pl.Series:
    """A polars Series with NaN turned into null, so missing has one spelling."""
    if not isinstance(values, pl.Series):
        numeric_array = isinstance(values, np.ndarray) and values.dtype != object
        values = pl.Series(values=values if numeric_array else list(values), strict=False)
    # fill_nan runs polars' query engine even when there is nothing to fill (a millisecond, more on a busy
    # machine); a numpy look at the (zero-copy) values is a twentieth of that
    if values.dtype.is_float() and np.isnan(values.to_numpy()).any():
        return values.fill_nan(None)
    return values


def encode(*arrays) -> tuple[list[np.ndarray], np.ndarray]:
    """Codes 0..k-1 (in sorted order of the distinct values across all arrays, -1 = missing), and those values."""
    series = [as_series(a) for a in arrays]
    joined = pl.concat([s.to_frame("v") for s in series], how="vertical_relaxed").to_series()
    codes, categories = encode_series(joined)
    bounds = np.cumsum([len(s) for s in series])[:-1]
    return np.split(codes, bounds), categories.to_numpy()


def encode_series(values: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """`encode` for one polars Series (NaN already null), the categories kept as a Series of its type."""
    categories = values.drop_nulls().unique().sort()
    if not categories.len():
        return np.full(values.len(), -1, dtype=np.int64), categories
    if values.dtype != pl.String:
        positions = categories.search_sorted(values).to_numpy().astype(np.int64)
        return np.where(values.is_null().to_numpy(), -1, positions), categories
    # texts: a hash join on the distinct values is two to three times as fast as a binary search for each one
    numbered = categories.to_frame("v").with_row_index("code")
    codes = values.to_frame("v").join(numbered, on="v", how="left", maintain_order="left")["code"]
    return codes.cast(pl.Int64).fill_null(-1).to_numpy(), categories


def group_codes(values) -> tuple[np.ndarray, pl.Series]:
    """Codes 0..k-1 for the distinct values in order of first appearance (-1 = missing), and those values: for
    grouping (units, subjects, items) where the order of the codes does not matter.

    Texts are grouped by their 64-bit hash, about twice as fast as by the texts themselves, then every row is
    checked against the first text of its hash; should two texts share a hash, they are coded exactly instead."""
    values = as_series(values)
    if values.dtype != pl.String:
        return encode_series(values)
    hashes = values.hash()
    firsts = np.flatnonzero(hashes.is_first_distinct().to_numpy())
    numbered = hashes.gather(firsts).to_frame("h").with_row_index("code")
    codes = hashes.to_frame("h").join(numbered, on="h", how="left", maintain_order="left")["code"].to_numpy()
    distinct = values.gather(firsts)
    if not values.eq_missing(distinct.gather(codes)).all():
        return encode_series(values)
    codes = codes.astype(np.int64)
    if distinct.null_count():  # the missing value's code goes, and the codes after it move down one
        missing = int(np.flatnonzero(distinct.is_null().to_numpy())[0])
        codes = np.where(codes == missing, -1, codes - (codes > missing))
        distinct = distinct.drop_nulls()
    return codes, distinct


def first_occurrences(keys: np.ndarray, bound: int | None = None) -> np.ndarray:
    """True at the first row of each distinct key. With `bound` (every key is in 0..bound-1, a few million at
    most), a bincount first tells whether any key repeats, the common case being none; else a hash pass
    (`np.unique` would sort)."""
    if (
        bound is not None
        and bound <= BOUNDED_KEYS
        and (keys.size == 0 or np.bincount(keys, minlength=bound).max() <= 1)
    ):
        return np.ones(keys.size, dtype=bool)
    return pl.Series(keys).is_first_distinct().to_numpy()


def paired(first, second) -> tuple[pl.Series, pl.Series]:
    """The two arrays restricted to positions where both have a value (an all-missing side takes the other's type)."""
    a, b = as_series(first), as_series(second)
    if a.dtype == pl.Null:
        a = a.cast(b.dtype if b.dtype != pl.Null else pl.String)
    if b.dtype == pl.Null:
        b = b.cast(a.dtype)
    both = a.is_not_null() & b.is_not_null()
    return a.filter(both), b.filter(both)
