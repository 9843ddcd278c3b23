"""Cohen's kappa for two raters (unweighted, linear, quadratic or custom weights) and Fleiss' and
Randolph's kappa for many raters per subject."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from eval_platform.stats._labels import encode
from eval_platform.stats.distributions import norm_ppf, norm_sf
from eval_platform.stats.results import Agreement, interpret_kappa, undefined

Weights = Literal["linear", "quadratic"] | np.ndarray | None


@dataclass(frozen=True)
class CohenKappa(Agreement):
    """Cohen's kappa with its asymptotic standard error (ASE), confidence interval and z-test of kappa = 0."""

    weights: str = "unweighted"
    ase: float | None = None
    ase_h0: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    z: float | None = None
    p_value: float | None = None


def cohen_kappa(rater_a, rater_b, weights: Weights = None, labels=None, confidence: float = 0.95) -> CohenKappa:
    """Kappa between two aligned label arrays; pairs with a missing label are left out.

    Categories are `labels` in that order (items with other labels are left out, as in scikit-learn), or else
    the sorted labels seen in either array. Linear and quadratic weights use the category's position in that
    order, as scikit-learn and R's irr do.
    """
    return cohen_kappa_table(contingency_table(rater_a, rater_b, labels)[0], weights, confidence)


def contingency_table(rater_a, rater_b, labels=None) -> tuple[np.ndarray, tuple]:
    """Counts of (rater_a label, rater_b label), rows rater_a's, and the categories in table order."""
    (codes_a, codes_b), seen = encode(rater_a, rater_b)
    categories = tuple(seen.tolist())
    if labels is not None:
        position = {value: i for i, value in enumerate(labels)}
        remap = np.array([position.get(value, -1) for value in categories] + [-1])
        codes_a, codes_b, categories = remap[codes_a], remap[codes_b], tuple(labels)
    k = len(categories)
    both = (codes_a >= 0) & (codes_b >= 0)
    return np.bincount(codes_a[both] * k + codes_b[both], minlength=k * k).reshape(k, k), categories


def cohen_kappa_table(table, weights: Weights = None, confidence: float = 0.95) -> CohenKappa:
    """Kappa from a k × k contingency table.

    `weights` are disagreement weights (0 on the diagonal): "linear" |i−j|, "quadratic" (i−j)², or a k × k
    matrix. The ASE, its confidence interval and the z-test (ASE under kappa = 0) follow Fleiss, Cohen &
    Everitt (1969) with agreement weights 1 − W / max(W), as SAS PROC FREQ and statsmodels do.
    """
    table = np.asarray(table, dtype=float)
    name = weights if isinstance(weights, str) else "unweighted" if weights is None else "custom"
    statistic = "cohen_kappa" if name == "unweighted" else f"cohen_kappa_{name}"
    n = int(round(table.sum()))
    if n == 0:
        return CohenKappa(statistic=statistic, value=None, n=0, note="no items rated by both raters", weights=name)

    disagreement = _disagreement_weights(table.shape[0], weights)
    observed = table / table.sum()
    rows, cols = observed.sum(axis=1), observed.sum(axis=0)
    chance = np.outer(rows, cols)
    chance_disagreement = float((disagreement * chance).sum())
    if chance_disagreement == 0:
        note = "kappa is undefined: both raters used one and the same category, so chance agreement is 1"
        return CohenKappa(statistic=statistic, value=None, n=n, note=note, weights=name)
    kappa = 1.0 - float((disagreement * observed).sum()) / chance_disagreement

    agreement = 1.0 - disagreement / disagreement.max()
    p_observed, p_chance = float((agreement * observed).sum()), float((agreement * chance).sum())
    row_mean = agreement @ cols
    col_mean = rows @ agreement
    spread = np.add.outer(row_mean, col_mean)
    scale = n * (1.0 - p_chance) ** 2
    variance = (
        (observed * (agreement - spread * (1.0 - kappa)) ** 2).sum() - (kappa - p_chance * (1.0 - kappa)) ** 2
    ) / scale
    variance_h0 = ((chance * (agreement - spread) ** 2).sum() - p_chance**2) / scale
    ase = float(np.sqrt(max(variance, 0.0)))
    half_width = norm_ppf(0.5 + confidence / 2) * ase
    ase_h0 = float(np.sqrt(variance_h0)) if variance_h0 > 0 else None
    z = kappa / ase_h0 if ase_h0 else None
    return CohenKappa(
        statistic=statistic,
        value=kappa,
        n=n,
        interpretation=interpret_kappa(kappa),
        observed_agreement=p_observed,
        chance_agreement=p_chance,
        weights=name,
        ase=ase,
        ase_h0=ase_h0,
        ci_low=float(kappa - half_width),
        ci_high=float(kappa + half_width),
        z=z,
        p_value=None if z is None else float(2 * norm_sf(abs(z))),
    )


def _disagreement_weights(k: int, weights: Weights) -> np.ndarray:
    if weights is None:
        return 1.0 - np.eye(k)
    if isinstance(weights, str):
        distance = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)
        if weights == "linear":
            return distance
        if weights == "quadratic":
            return distance**2
        raise ValueError(f"weights must be None, 'linear', 'quadratic' or a k × k matrix, got {weights!r}")
    matrix = np.asarray(weights, dtype=float)
    if matrix.shape != (k, k):
        raise ValueError(f"a weight matrix must be {k} × {k} like the table, got {matrix.shape}")
    return matrix


def category_counts(subjects, labels, categories=None) -> np.ndarray:
    """Subjects × categories table of how many ratings each subject got in each category, from long form.

    Columns are `categories` in that order (ratings outside them are left out) or the sorted labels seen;
    rows follow the sorted subject ids. Pass `categories` for Randolph's kappa when some were never used.
    """
    [subject_codes], _ = encode(subjects)
    [label_codes], seen = encode(labels)
    return category_counts_coded(subject_codes, label_codes, seen, categories)


def category_counts_coded(
    subject_codes: np.ndarray, label_codes: np.ndarray, seen: np.ndarray, categories=None
) -> np.ndarray:
    """`category_counts` from integer codes (-1 = missing): subjects 0..max (one row each), labels indexing
    `seen`, the sorted distinct labels (as `stats._labels.encode` gives them)."""
    if categories is not None:
        position = {value: i for i, value in enumerate(categories)}
        label_codes = np.array([position.get(value, -1) for value in seen.tolist()] + [-1])[label_codes]
        seen = np.asarray(categories)
    rated = (subject_codes >= 0) & (label_codes >= 0)
    n_subjects = int(subject_codes.max()) + 1 if subject_codes.size else 0
    flat = subject_codes[rated] * seen.size + label_codes[rated]
    return np.bincount(flat, minlength=n_subjects * seen.size).reshape(n_subjects, seen.size)


def fleiss_kappa(counts) -> Agreement:
    """Fleiss' (1971) kappa from a subjects × categories table of rating counts (chance from the marginals).

    Every subject must have the same number of ratings; otherwise the result is undefined (use
    Krippendorff's alpha, which allows missing ratings).
    """
    return _multi_rater_kappa(counts, "fleiss_kappa")


def randolph_kappa(counts) -> Agreement:
    """Randolph's (2005) free-marginal kappa: like Fleiss' but chance agreement is 1 / number of categories."""
    return _multi_rater_kappa(counts, "randolph_kappa")


def _multi_rater_kappa(counts, statistic: str) -> Agreement:
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2 or table.shape[0] == 0:
        return undefined(statistic, 0, "no subjects")
    ratings = table.sum(axis=1)
    if not np.allclose(ratings, ratings[0]):
        return undefined(statistic, table.shape[0], "subjects have different numbers of ratings")
    raters = ratings[0]
    if raters < 2 or table.shape[1] < 2:
        return undefined(statistic, table.shape[0], "needs at least two ratings per subject and two categories")
    observed = float((((table**2).sum(axis=1) - raters) / (raters * (raters - 1))).mean())
    if statistic == "fleiss_kappa":
        chance = float(((table.sum(axis=0) / table.sum()) ** 2).sum())
    else:
        chance = 1.0 / table.shape[1]
    if chance == 1:
        return undefined(statistic, table.shape[0], "every rating is in one category, so chance agreement is 1")
    kappa = (observed - chance) / (1.0 - chance)
    return Agreement(
        statistic=statistic,
        value=kappa,
        n=table.shape[0],
        interpretation=interpret_kappa(kappa),
        observed_agreement=observed,
        chance_agreement=chance,
    )
