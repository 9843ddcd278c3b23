"""Repeated samples of one case: pass@k and pass^k, per case, from n samples of which c are right.

- pass@k, the chance that at least one of k samples is right, by the unbiased estimator of Chen et al. 2021
  ("Evaluating Large Language Models Trained on Code", HumanEval): 1 − C(n − c, k) / C(n, k).
- pass^k, the chance that all k samples are right (Yao et al. 2024, τ-bench: reliability over repeated trials),
  unbiased from the same n samples: C(c, k) / C(n, k).

Both need n ≥ k; a case with fewer scored samples has no value (NaN). pass@1 = pass^1 = c / n. The gap between
pass@k and pass^k is the flakiness: a model that is right on a case only some of the time.
"""

from __future__ import annotations

import math

import numpy as np


def _per_pair(n: np.ndarray, c: np.ndarray, k: int, formula) -> np.ndarray:
    """`formula(n, c, k)` for every case, computed once per distinct (n, c) (samples are capped at 10 per
    benchmark task, so there are few) with exact integer binomials, and looked up for the cases."""
    n, c = np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64)
    if n.shape != c.shape:
        raise ValueError(f"n and c must have the same shape, got {n.shape} and {c.shape}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if ((c < 0) | (c > n)).any():
        raise ValueError("each case's right samples c must be between 0 and its samples n")
    if n.size == 0:
        return np.zeros(n.shape)
    width = int(n.max()) + 1
    codes = n * width + c  # one small integer per (n, c): a lookup table instead of a sort
    table = np.full(width * width, np.nan)
    for code in np.flatnonzero(np.bincount(codes.ravel(), minlength=width * width)):
        a, b = divmod(int(code), width)
        if a >= k:
            table[code] = formula(a, b, k)
    return table[codes]


def pass_at_k(n, c, k: int) -> np.ndarray:
    """Per case, the unbiased pass@k: 1 − C(n − c, k) / C(n, k) (NaN where n < k)."""
    return _per_pair(n, c, k, lambda n, c, k: 1.0 - math.comb(n - c, k) / math.comb(n, k))


def pass_hat_k(n, c, k: int) -> np.ndarray:
    """Per case, the unbiased pass^k: C(c, k) / C(n, k) (NaN where n < k)."""
    return _per_pair(n, c, k, lambda n, c, k: math.comb(c, k) / math.comb(n, k))
