"""Krippendorff's alpha from the coincidence matrix (Krippendorff 2011), with missing values.

Cost is linear in the number of values plus O(V²) in the number V of distinct values (the coincidence and
distance matrices), so bin continuous scores to a rubric scale before calling these on millions of rows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np

from eval_platform.lazy_modules import lazy
from eval_platform.stats._labels import encode, first_occurrences, group_codes
from eval_platform.stats.results import Agreement, interpret_alpha, undefined

sparse = lazy("scipy.sparse")

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")


# Units × values cells up to which the coincidences come from a dense count table (8 bytes a cell) rather
# than a sparse one: the dense product is several times faster, the sparse one's memory grows with the values.
DENSE_CELLS = 4_000_000


def krippendorff_alpha(reliability_data, level: Level = "nominal") -> Agreement:
    """Alpha for a coders × units matrix (NaN or None = not coded).

    `n` is the number of pairable values (values in units coded at least twice), Krippendorff's n.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    matrix = np.asarray(reliability_data)
    if matrix.dtype.kind not in "biuf":  # texts or mixed: nominal only, coded through polars
        matrix = np.asarray(reliability_data, dtype=object if level == "nominal" else float)
    if matrix.ndim != 2:
        raise ValueError(f"reliability_data must be a coders × units matrix, got shape {matrix.shape}")
    units = np.tile(np.arange(matrix.shape[1]), matrix.shape[0])
    values = matrix.ravel()
    if matrix.dtype.kind == "f":
        coded = ~np.isnan(values)
        units, values = units[coded], values[coded]
    [value_codes], categories = encode(values)
    return _alphas(units, value_codes, categories, [level])[0]


def krippendorff_alpha_long(units, coders, values, level: Level = "nominal") -> Agreement:
    """Alpha from long form: one row per (unit, coder, value); null values are missing.

    A coder counts once per unit: repeated (unit, coder) rows keep the first value, and the note says so.
    """
    return krippendorff_alphas_long(units, coders, values, [level])[0]


def krippendorff_alphas_long(units, coders, values, levels: list[Level]) -> list[Agreement]:
    """`krippendorff_alpha_long` at several levels of measurement: the values are read and their coincidence
    matrix built once, since only the distance function differs between levels."""
    (unit_codes, _), (coder_codes, _) = group_codes(units), group_codes(coders)
    [value_codes], categories = encode(values)
    return krippendorff_alphas_coded(unit_codes, coder_codes, value_codes, categories, levels)


def krippendorff_alphas_coded(
    unit_codes: np.ndarray,
    coder_codes: np.ndarray,
    value_codes: np.ndarray,
    categories: np.ndarray,
    levels: list[Level],
) -> list[Agreement]:
    """`krippendorff_alphas_long` from integer codes (-1 = missing) of the units, coders and values, the value
    codes indexing `categories`, the sorted distinct values (as `stats._labels.encode` gives them): for a caller
    that computes several statistics from one coding of its columns."""
    for level in levels:
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    coded = (unit_codes >= 0) & (coder_codes >= 0) & (value_codes >= 0)
    units, coders, values = unit_codes[coded], coder_codes[coded], value_codes[coded]
    n_coders = int(coders.max(initial=0)) + 1
    first = first_occurrences(units * n_coders + coders, bound=(int(units.max(initial=0)) + 1) * n_coders)
    results = _alphas(units[first], values[first], categories, levels)
    dropped = units.size - int(first.sum())
    if dropped:
        note = f"{dropped} repeated (unit, coder) values ignored"
        results = [replace(r, note=f"{r.note}; {note}" if r.note else note) for r in results]
    return results


def _alphas(
    unit_codes: np.ndarray, value_codes: np.ndarray, categories: np.ndarray, levels: list[Level]
) -> list[Agreement]:
    """Alphas from one coded value per (unit, coder): unit codes and value codes (-1 = missing) of equal length."""
    statistics = [f"krippendorff_alpha_{level}" for level in levels]
    coded = value_codes >= 0
    unit_codes, value_codes = unit_codes[coded], value_codes[coded]
    if any(level != "nominal" for level in levels) and categories.dtype.kind not in "iuf":
        numeric = next(level for level in levels if level != "nominal")
        raise ValueError(f"{numeric} alpha needs numeric values, got {categories.dtype}")
    if unit_codes.size == 0:
        return [undefined(statistic, 0, "no coded values") for statistic in statistics]

    coincidences, n = _coincidences(unit_codes, value_codes, categories.size)
    if n == 0:
        return [undefined(statistic, 0, "no unit was coded by two or more coders") for statistic in statistics]
    marginals = coincidences.sum(axis=1)
    results = []
    for level, statistic in zip(levels, statistics, strict=True):
        distance = _distance(categories, marginals, level)
        expected = float((np.outer(marginals, marginals) * distance).sum())
        if expected == 0:
            results.append(
                undefined(statistic, n, "every pairable value is the same: no variation, so alpha is undefined")
            )
            continue
        alpha = 1.0 - (n - 1) * float((coincidences * distance).sum()) / expected
        results.append(Agreement(statistic=statistic, value=alpha, n=n, interpretation=interpret_alpha(alpha)))
    return results


def _coincidences(unit_codes: np.ndarray, value_codes: np.ndarray, n_values: int) -> tuple[np.ndarray, int]:
    """The values × values coincidence matrix and n, the number of pairable values: each unit coded m >= 2 times
    adds n_uc · n_uk / (m − 1) for every pair of its values, less its own values on the diagonal."""
    n_units = int(unit_codes.max()) + 1
    if n_units * n_values <= DENSE_CELLS:
        counts = np.bincount(unit_codes * n_values + value_codes, minlength=n_units * n_values)
        counts = counts.reshape(n_units, n_values)
        per_unit = counts.sum(axis=1)
        pairable = per_unit >= 2
        counts, per_unit = counts[pairable].astype(float), per_unit[pairable]
        scaled = counts / (per_unit - 1)[:, None]
        return counts.T @ scaled - np.diag(scaled.sum(axis=0)), int(per_unit.sum())
    counts = sparse.csr_matrix((np.ones(unit_codes.size), (unit_codes, value_codes)), shape=(n_units, n_values))
    per_unit = np.asarray(counts.sum(axis=1)).ravel()
    pairable = per_unit >= 2
    counts, per_unit = counts[pairable], per_unit[pairable]
    scaled = sparse.diags(1.0 / (per_unit - 1)) @ counts
    coincidences = (counts.T @ scaled).toarray() - np.diag(np.asarray(scaled.sum(axis=0)).ravel())
    return coincidences, int(per_unit.sum())


def _distance(categories: np.ndarray, marginals: np.ndarray, level: Level) -> np.ndarray:
    """Squared difference function δ²(c, k) between the sorted category values."""
    if level == "nominal":
        return 1.0 - np.eye(categories.size)
    if level == "ordinal":
        # Krippendorff's ordinal metric: the coincidence mass between c and k, less half of each end.
        cumulative = np.cumsum(marginals)
        low = np.minimum.outer(np.arange(categories.size), np.arange(categories.size))
        high = np.maximum.outer(np.arange(categories.size), np.arange(categories.size))
        between = cumulative[high] - cumulative[low] + marginals[low]
        return (between - np.add.outer(marginals, marginals) / 2) ** 2
    values = categories.astype(float)
    difference = np.subtract.outer(values, values)
    if level == "interval":
        return difference**2
    total = np.add.outer(values, values)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total == 0, 0.0, (difference / total) ** 2)
