"""Speed and agreement of eval_platform.stats with the peer packages, at production-like sizes.

    python -m tools.perf.stats_peers [--annotations 1000000] [--labels 10000000] [--seed 0]

Needs the test extras (krippendorff, scikit-learn, statsmodels, evalica, savvi). Data is synthetic and seeded:
three coders per unit on a 5-point scale with 30% noise and 10% missing for the annotation statistics,
three-class judge and human labels and continuous scores for the judge statistics, daily scores of two variants
for the sequential test, uniform p-values for the multiple-comparison corrections. Each row prints our
time, the peer's time, and the largest absolute difference between the two results.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import evalica
import krippendorff
import numpy as np
import polars as pl
from savvi.linear_regression import LinearRegression
from scipy import stats
from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support
from statsmodels.stats import inter_rater
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower, TTestIndPower

from eval_platform.stats.experiments import welch_t_test
from eval_platform.stats.judge_agreement import label_agreement, score_agreement
from eval_platform.stats.kappa import category_counts, cohen_kappa, fleiss_kappa
from eval_platform.stats.multiplicity import adjust_p_values
from eval_platform.stats.power import minimum_detectable_effect, required_sample_size
from eval_platform.stats.ranking import bradley_terry
from eval_platform.stats.reliability import krippendorff_alpha, krippendorff_alpha_long
from eval_platform.stats.sequential import mixture_t_test, running


class SavviRegression(LinearRegression):
    """savvi's sequential regression with the model's residual degrees of freedom. savvi's `nu()` is
    `n - p - 1` for `p` covariates, which count the intercept when it is a covariate (savvi fits no implicit
    one); the Bayes factor of Lindon et al.'s model integrates to the closed form at ν = n − p (n − 2 for
    intercept + treatment: `eval_platform_tests/stats/test_sequential.py` integrates it numerically). Everything
    else is savvi's own."""

    def nu(self) -> int:
        return self.n - self.p


def _timed(run: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def _annotation_cases(n: int, rng: np.random.Generator):
    coders = 3
    units = n // coders
    truth = rng.integers(1, 6, units)
    unit = np.repeat(np.arange(units), coders)
    coder = np.tile(np.arange(coders), units)
    value = np.where(rng.random(unit.size) < 0.7, truth[unit], rng.integers(1, 6, unit.size)).astype(float)
    matrix = value.reshape(units, coders).T.copy()
    missing = rng.random(value.size) < 0.1
    matrix.T.flat[np.flatnonzero(missing)] = np.nan
    kept = ~missing
    for level in ("nominal", "ordinal", "interval", "ratio"):
        # The same input on both sides: the peer's coders × units matrix (NaN = not coded).
        yield (
            f"Krippendorff alpha, {level}, from a matrix ({n:,} values)",
            lambda level=level: krippendorff_alpha(matrix, level).value,
            lambda level=level: krippendorff.alpha(reliability_data=matrix, level_of_measurement=level),
        )
    # Ours from the long table (the asset's input), against the peer given its ready matrix: ours does more.
    yield (
        f"Krippendorff alpha, interval, ours from the long table ({n:,} values)",
        lambda: krippendorff_alpha_long(unit[kept], coder[kept], value[kept], "interval").value,
        lambda: krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval"),
    )
    full = value.reshape(units, coders).astype(int)
    yield (
        f"Fleiss kappa ({n:,} ratings)",
        lambda: fleiss_kappa(category_counts(unit, value)).value,
        lambda: inter_rater.fleiss_kappa(inter_rater.aggregate_raters(full)[0]),
    )


def _judge_cases(n: int, rng: np.random.Generator):
    human = rng.integers(0, 3, n)
    judge = np.where(rng.random(n) < 0.7, human, rng.integers(0, 3, n))
    yield (
        f"Cohen kappa, quadratic ({n:,} items)",
        lambda: cohen_kappa(human, judge, weights="quadratic").value,
        lambda: cohen_kappa_score(human, judge, weights="quadratic"),
    )
    yield (
        f"macro precision/recall/F1 ({n:,} items)",
        lambda: (lambda r: (r.precision, r.recall, r.f1))(label_agreement(human, judge)),
        lambda: precision_recall_fscore_support(human, judge, average="macro", zero_division=0)[:3],
    )
    score_h, score_j = rng.random(n), rng.random(n)
    score_j = 0.5 * score_h + 0.5 * score_j
    yield (
        f"Spearman ({n:,} scores)",
        lambda: score_agreement(score_h, score_j).spearman,
        lambda: stats.spearmanr(score_h, score_j).statistic,
    )
    yield (
        f"Welch t-test ({n:,} + {n:,} scores)",
        lambda: (lambda r: (r.t, r.df, r.p_value))(welch_t_test(score_h, score_j)),
        lambda: (lambda r: (r.statistic, r.df, r.pvalue))(stats.ttest_ind(score_j, score_h, equal_var=False)),
    )


def _ranking_case(n: int, rng: np.random.Generator):
    models = 60
    strength = rng.normal(0, 1, models)
    left, right = rng.integers(0, models, n), rng.integers(0, models, n)
    right = np.where(left == right, (right + 1) % models, right)
    gap = strength[left] - strength[right] + rng.logistic(size=n)
    winner = np.where(gap > 0.4, "left", np.where(gap < -0.4, "right", "tie"))
    names = np.array([f"model-{i:02d}" for i in range(models)])
    draws = {"left": evalica.Winner.X, "right": evalica.Winner.Y, "tie": evalica.Winner.Draw}

    def ours():
        return bradley_terry(names[left], names[right], winner).table.sort("model")["score"].to_numpy()

    def peer():
        result = evalica.bradley_terry(
            names[left], names[right], [draws[w] for w in winner], tolerance=1e-12, limit=100_000
        )
        return (result.scores / result.scores.sum()).sort_index().to_numpy()

    yield f"Bradley-Terry, {models} models ({n:,} comparisons)", ours, peer


def _sequential_case(n: int, rng: np.random.Generator, days: int = 30):
    """The always-valid p-value and confidence sequence read at the end of each of `days` days: ours (the pooled
    mode, savvi's model) from each day's cumulative sums, savvi's by its recursive update one observation at a
    time (its only interface), with the model's degrees of freedom (`SavviRegression`)."""
    day = np.sort(rng.integers(0, days, n))
    treated = rng.random(n) < 0.5
    value = rng.beta(2, 3, n) + 0.02 * treated
    phi, alpha = 100.0, 0.05

    def ours():
        sums = []
        for group in (~treated, treated):
            counts = [np.bincount(day, weights=group * w, minlength=days) for w in (np.ones(n), value, value**2)]
            sums += [np.cumsum(c) for c in counts]
        p_value, low, high = running(mixture_t_test(*sums, alpha=alpha, phi=phi, variance="pooled"))
        return np.c_[p_value, low, high]

    def peer():
        model, reads, ends = SavviRegression(alpha, 2, phi=phi), [], set(np.flatnonzero(np.diff(day)).tolist())
        with np.errstate(divide="ignore"):  # savvi's still unbounded intervals
            for i in range(n):
                model.update(np.array([value[i], 1.0, float(treated[i])]))
                if i in ends or i == n - 1:
                    model.infer()
                    reads.append((model.p_value[1], *model.conf_int[1]))
        return np.array(reads)

    yield f"always-valid t-test, {days} daily reads ({n:,} scores)", ours, peer


def _planning_cases(rng: np.random.Generator, tests: int = 1000):
    p = rng.random(tests)
    yield (
        f"Holm adjusted p ({tests:,} tests)",
        lambda: adjust_p_values(p, "holm"),
        lambda: multipletests(p, method="holm")[1],
    )
    yield (
        f"Benjamini-Hochberg adjusted p ({tests:,} tests)",
        lambda: adjust_p_values(p, "benjamini_hochberg"),
        lambda: multipletests(p, method="fdr_bh")[1],
    )
    sizes = [(1000, 1.0), (250, 1.3), (20_000, 0.9)]
    yield (
        "t-test MDE and sample for 80% power (3 designs)",
        lambda: [
            (minimum_detectable_effect(n, 0.05, 0.8, r), required_sample_size(0.1, 0.05, 0.8, r)) for n, r in sizes
        ],
        lambda: [
            (
                TTestIndPower().solve_power(None, nobs1=n, alpha=0.05, power=0.8, ratio=r),
                TTestIndPower().solve_power(0.1, nobs1=None, alpha=0.05, power=0.8, ratio=r),
            )
            for n, r in sizes
        ],
    )
    yield (
        "normal (proportions) MDE and sample for 80% power (3 designs)",
        lambda: [
            (
                minimum_detectable_effect(n, 0.05, 0.8, r, test="normal"),
                required_sample_size(0.1, 0.05, 0.8, r, test="normal"),
            )
            for n, r in sizes
        ],
        lambda: [
            (
                NormalIndPower().solve_power(None, nobs1=n, alpha=0.05, power=0.8, ratio=r),
                NormalIndPower().solve_power(0.1, nobs1=None, alpha=0.05, power=0.8, ratio=r),
            )
            for n, r in sizes
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotations", type=int, default=1_000_000)
    parser.add_argument("--labels", type=int, default=10_000_000)
    parser.add_argument("--comparisons", type=int, default=100_000)
    parser.add_argument("--sequential", type=int, default=20_000, help="scores for the sequential test (savvi is slow)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    cases = [
        *_annotation_cases(args.annotations, rng),
        *_judge_cases(args.labels, rng),
        *_ranking_case(args.comparisons, rng),
        *_sequential_case(args.sequential, rng),
        *_planning_cases(rng),
        *_calibration_drift_repeat_cases(args.labels // 10, args.comparisons, rng),
    ]
    rows = []
    for name, ours, peer in cases:
        our_value, our_seconds = _timed(ours)
        peer_value, peer_seconds = _timed(peer)
        difference = float(np.max(np.abs(np.asarray(our_value, float) - np.asarray(peer_value, float))))
        rows.append({"statistic": name, "ours_s": our_seconds, "peer_s": peer_seconds, "max_abs_diff": difference})
    with pl.Config(tbl_rows=-1, fmt_str_lengths=60, tbl_hide_dataframe_shape=True):
        print(pl.DataFrame(rows).with_columns(pl.col("ours_s", "peer_s").round(2)))


def _calibration_drift_repeat_cases(n: int, cases: int, rng: np.random.Generator):
    """Issue 21's statistics beside their peers: the prediction-powered mean (ppi-python), the paired shift of
    anchor verdicts (scipy's ttest_rel) and pass@k (HumanEval's reference estimator, a loop over cases)."""
    import ppi_py

    from eval_platform.stats.paired import paired_shift
    from eval_platform.stats.ppi import ppi_mean
    from eval_platform.stats.repeated import pass_at_k, pass_hat_k

    truth = rng.beta(4, 3, n)
    judge = np.clip(truth + 0.08 + rng.normal(0, 0.1, n), 0, 1)
    labelled = n // 100
    human, judged, unlabelled = truth[:labelled], judge[:labelled], judge[labelled:]

    def ppi_peer():
        low, high = ppi_py.ppi_mean_ci(human, judged, unlabelled, alpha=0.05)
        point = ppi_py.ppi_mean_pointestimate(human, judged, unlabelled)
        return [float(np.squeeze(v)) for v in (point, low, high)]

    yield (
        f"PPI++ mean and 95% interval ({labelled:,} human + {n - labelled:,} judge labels)",
        lambda: (lambda r: (r.mean, r.ci_low, r.ci_high))(ppi_mean(human, judged, unlabelled, alpha=0.05)),
        ppi_peer,
    )
    previous = truth
    current = np.clip(truth + 0.01 + rng.normal(0, 0.05, n), 0, 1)
    yield (
        f"paired mean shift: t, p, interval ({n:,} anchor pairs)",
        lambda: (lambda r: (r.t, r.p_value, r.ci_low, r.ci_high))(paired_shift(current, previous)),
        lambda: (lambda r: (r.statistic, r.pvalue, *r.confidence_interval(0.95)))(stats.ttest_rel(current, previous)),
    )
    samples = rng.integers(5, 11, cases)
    right = rng.binomial(samples, rng.random(cases))

    def humaneval(k: int) -> np.ndarray:  # human_eval/evaluation.py's estimator, one case at a time
        return np.array(
            [
                1.0 if s - c < k else 1.0 - np.prod(1.0 - k / np.arange(s - c + 1, s + 1))
                for s, c in zip(samples, right, strict=True)
            ]
        )

    yield f"pass@5 per case ({cases:,} cases)", lambda: pass_at_k(samples, right, 5), lambda: humaneval(5)
    yield (
        f"pass^5 per case ({cases:,} cases)",
        lambda: pass_hat_k(samples, right, 5),
        lambda: np.array([math.comb(c, 5) / math.comb(s, 5) for s, c in zip(samples, right, strict=True)]),
    )


if __name__ == "__main__":
    main()
