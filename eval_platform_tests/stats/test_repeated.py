"""pass@k and pass^k per case: equal to HumanEval's reference estimator and to exact binomials, unbiased."""

import math

import numpy as np
import pytest

from eval_platform.stats.repeated import pass_at_k, pass_hat_k


def humaneval_estimator(n: int, c: int, k: int) -> float:
    """`estimate_pass_at_k`'s inner estimator as published with HumanEval (github.com/openai/human-eval,
    human_eval/evaluation.py), verbatim but for names."""
    if n - c < k:
        return 1.0
    return 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))


def test_pass_at_k_equals_humaneval_and_pass_hat_k_exact_binomials():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 11, 5000)
    c = rng.integers(0, n + 1)
    for k in (1, 2, 3, 5, 10):
        ours, hat = pass_at_k(n, c, k), pass_hat_k(n, c, k)
        for ni, ci, value, value_hat in zip(n, c, ours, hat, strict=True):
            if ni < k:
                assert math.isnan(value) and math.isnan(value_hat)
                continue
            assert value == pytest.approx(humaneval_estimator(int(ni), int(ci), k), abs=1e-12)
            assert value_hat == pytest.approx(math.comb(int(ci), k) / math.comb(int(ni), k), abs=1e-12)
    assert np.allclose(pass_at_k(n, c, 1), c / n, atol=1e-12) and np.allclose(pass_hat_k(n, c, 1), c / n, atol=1e-12)


def test_both_estimators_are_unbiased_for_a_flaky_case():
    """A case right with probability p: over every outcome of n samples, E[pass@k] = 1 − (1 − p)^k and
    E[pass^k] = p^k (what makes them the unbiased estimators)."""
    n, k, p = 10, 3, 0.3
    c = np.arange(n + 1)
    weights = np.array([math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in c])
    assert weights @ pass_at_k(np.full(n + 1, n), c, k) == pytest.approx(1 - (1 - p) ** k, abs=1e-12)
    assert weights @ pass_hat_k(np.full(n + 1, n), c, k) == pytest.approx(p**k, abs=1e-12)


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="between 0"):
        pass_at_k([3], [4], 2)
    with pytest.raises(ValueError, match="at least 1"):
        pass_hat_k([3], [1], 0)
